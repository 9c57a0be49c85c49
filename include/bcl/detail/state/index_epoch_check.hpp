#pragma once
// Whether a saved balancer over dataset indices continues the epoch it claims to: the check a
// sampler (Python, libtorch) runs on a state it is handed, before it keeps any of it.

#include <bcl/detail/config.hpp>

#include <bcl/detail/state/snapshot.hpp>
#include <bcl/error.hpp>

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>

namespace bcl::detail {

/// Throws bcl::error, naming the field, unless a balancer state over dataset indices continues an
/// epoch whose first `pushed.size()` indices (in the order they were pushed) are `pushed`:
///   1. position: the state's balancer says exactly `pushed.size()` records were pushed;
///   2. pending: as many indices as the balancer holds, each in [0, dataset_size) when the size is
///      known, and each the epoch's index at the arrival position the balancer records for that
///      record (the waiting batches' records and the buffered ones alike).
/// The balancer's own consistency check (check_consistent, which `snapshot` must have passed, as
/// saved_state::from_bytes does) makes those positions distinct and earlier than the position,
/// so the pending indices are exactly records of the epoch's first `pushed.size()`, none twice,
/// and with the balancer's count of records handed out and dropped, none already emitted. An
/// authentic state meets all of this; an altered one only if the alteration describes another
/// consistent epoch. O(p) for p pending indices; allocates nothing.
template <std::integral Index>
void check_index_epoch(std::string_view who, const balancer_snapshot& snapshot,
                       std::span<const Index> pending, std::span<const Index> pushed,
                       std::optional<std::uint64_t> dataset_size) {
    const auto text = [](auto x) { return std::to_string(x); };
    const std::string prefix = std::string(who) + ": ";
    if (snapshot.stats.records_in != pushed.size())
        throw error(prefix + "the state's position is " + text(pushed.size()) +
                    " indices into the epoch, but its balancer says " +
                    text(snapshot.stats.records_in) + " were pushed");
    if (pending.size() != snapshot.pending_records())
        throw error(prefix + "the state has " + text(pending.size()) +
                    " pending indices, but its balancer holds " + text(snapshot.pending_records()));
    for (std::size_t i = 0; i < pending.size(); ++i) {
        const Index index = pending[i];
        const bool negative = std::cmp_less(index, 0);
        if (negative || (dataset_size && !std::cmp_less(index, *dataset_size)))
            throw error(prefix + "pending index " + text(i) + " is " + text(index) +
                        ", outside the dataset's " +
                        (dataset_size ? "[0, " + text(*dataset_size) + ")" : "[0, 2^63)"));
    }
    const auto check_held = [&](std::size_t i, std::uint64_t at) { // at < records_in
        if (pending[i] != pushed[static_cast<std::size_t>(at)])
            throw error(prefix + "pending index " + text(i) + " is " + text(pending[i]) +
                        ", but the epoch's index at position " + text(at) +
                        ", where the balancer says that record arrived, is " +
                        text(pushed[static_cast<std::size_t>(at)]));
    };
    const std::size_t waiting = snapshot.waiting_records();
    for (std::size_t i = 0; i < waiting; ++i) check_held(i, snapshot.waiting_arrivals[i]);
    for (std::size_t j = 0; j < snapshot.buffer_arrivals.size(); ++j)
        check_held(waiting + j, snapshot.buffer_arrivals[j]);
}

} // namespace bcl::detail
