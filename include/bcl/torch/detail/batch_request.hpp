#pragma once
// What bcl's libtorch samplers require of the batch size a data loader asks their next() for:
// their own, which bcl::torch::make_data_loader gives the loader.

#include <bcl/detail/config.hpp>

#include <bcl/error.hpp>

#include <cstddef>
#include <string>

namespace bcl::torch::detail {

/// Throws bcl::error unless `asked`, the batch size next() of sampler `who` was asked for, is
/// the sampler's `batch_size` (its setting named `setting`): a sampler hands out only the batches
/// it balanced or planned. The message names both sizes and how a loader gets the sampler's
/// ("<who>::next: asked for a batch of 32 indices, but the sampler's <setting> is 16; ...
/// (bcl::torch::make_data_loader does)"). O(1).
inline void check_batch_request(std::size_t asked, std::size_t batch_size, const char* who,
                                const char* setting) {
    if (asked == batch_size) return;
    throw bcl::error(std::string(who) + "::next: asked for a batch of " + std::to_string(asked) +
                     " indices, but the sampler's " + setting + " is " +
                     std::to_string(batch_size) +
                     "; give the data loader the sampler's batch size "
                     "(bcl::torch::make_data_loader does)");
}

} // namespace bcl::torch::detail
