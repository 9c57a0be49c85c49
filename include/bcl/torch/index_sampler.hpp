#pragma once
// The libtorch index samplers bcl's samplers wrap: the concepts they satisfy. Needs libtorch's
// C++ API on the include path; without it this header is empty.

#include <bcl/detail/config.hpp>

#if __has_include(<torch/data/samplers/base.h>)

#include <torch/data/samplers/base.h>

#include <concepts>
#include <cstddef>
#include <vector>

namespace bcl::torch {

/// The libtorch sampler type balanced_sampler is: it hands out batches of dataset indices.
using index_sampler_base = ::torch::data::samplers::Sampler<std::vector<std::size_t>>;

/// A type S satisfies `index_sampler` if:
///   1. it derives from torch::data::samplers::Sampler<std::vector<std::size_t>> (so it has
///      reset(), next(n), save() and load(), as every libtorch index sampler does: RandomSampler,
///      SequentialSampler, DistributedRandomSampler, DistributedSequentialSampler);
///   2. it is move-constructible (balanced_sampler keeps it by value).
/// It need not be copyable, and need not hand out exactly n indices per next(n).
template <class S>
concept index_sampler = std::derived_from<S, index_sampler_base> && std::move_constructible<S>;

/// An index_sampler with epochs, like libtorch's distributed samplers: `set_epoch(e)` chooses
/// what the next reset() draws, and `epoch()` reads it back. balanced_sampler forwards its own
/// epoch to such a sampler at every reset().
template <class S>
concept epoch_sampler = index_sampler<S> && requires(S& s, const S& cs, std::size_t e) {
    s.set_epoch(e);
    { cs.epoch() } -> std::convertible_to<std::size_t>;
};

} // namespace bcl::torch

#endif
