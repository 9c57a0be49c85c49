#pragma once
// The errors of balancer calls made at the wrong time, off the per-record path.

#include <bcl/detail/config.hpp>

#include <bcl/error.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace bcl::detail {

/// push() of record `position` when it cannot take one: after finish(), or with a full buffer
/// of `capacity` records while `waiting` batches are still to be popped.
[[noreturn]] inline void throw_cannot_push(bool finished, std::uint64_t position,
                                           std::size_t capacity, std::size_t waiting,
                                           std::string_view who = "bcl::balancer") {
    if (finished)
        throw error(std::string(who) + "::push: called after finish() (record " +
                    std::to_string(position) + ")");
    throw error(std::string(who) + "::push: the buffer is full (" + std::to_string(capacity) +
                " records) and " + std::to_string(waiting) +
                " batches are still waiting; pop() them before pushing record " +
                std::to_string(position));
}

/// next_epoch() while `held` records of the epoch are still held.
[[noreturn]] inline void throw_epoch_under_way(std::size_t held, bool finished,
                                               std::string_view who = "bcl::balancer") {
    throw error(std::string(who) + "::next_epoch: the epoch is under way (" + std::to_string(held) +
                " records still held" + (finished ? std::string() : ", finish() not called") +
                "); drain it first");
}

} // namespace bcl::detail
