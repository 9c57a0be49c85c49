#pragma once
// bcl::torch::make_data_loader: a libtorch data loader over a bcl sampler, whose batch size is
// the sampler's, so a trainer gives the batch size once (to the sampler). Needs libtorch's C++ API
// on the include path; without it this header declares nothing.

#include <bcl/detail/config.hpp>

#include <bcl/error.hpp>

#if __has_include(<torch/data/dataloader.h>)

#include <torch/data/dataloader.h>
#include <torch/data/dataloader_options.h>

#include <concepts>
#include <cstddef>
#include <string>
#include <utility>

namespace bcl::torch {

/// A type S satisfies `sized_batch_sampler` if:
///   1. it is a libtorch sampler (reset(), next(n), save(), load());
///   2. `s.batch_size()` on a const S says how many indices its next() hands out per batch.
/// bcl::torch::balanced_sampler and bcl::torch::distributed_balanced_sampler satisfy it.
template <class S>
concept sized_batch_sampler =
    std::derived_from<S, ::torch::data::samplers::Sampler<typename S::BatchRequestType>> &&
    requires(const S& s) {
    { s.batch_size() } -> std::convertible_to<std::size_t>;
};

/// torch::data::make_data_loader(dataset, sampler, options) with the loader's batch size set to
/// the sampler's, so the batch size is given once, to the sampler. `options` sets the rest
/// (workers, timeout, ...); its batch size must be left at DataLoaderOptions' default (1, read as
/// "not given") or be the sampler's: any other is a bcl::error naming both sizes, before a
/// loader exists (the loader would ask the sampler for batches of another size, which a bcl
/// sampler refuses at its first next()). Returns what libtorch's make_data_loader returns.
template <class Dataset, sized_batch_sampler Sampler>
[[nodiscard]] auto make_data_loader(Dataset dataset, Sampler sampler,
                                    ::torch::data::DataLoaderOptions options = {}) {
    const auto batch = static_cast<std::size_t>(sampler.batch_size());
    if (options.batch_size() != 1 && options.batch_size() != batch)
        throw bcl::error("bcl::torch::make_data_loader: the options ask for batches of " +
                         std::to_string(options.batch_size()) + " indices, but the sampler's " +
                         "batch size is " + std::to_string(batch) +
                         "; leave DataLoaderOptions' batch_size out: the loader takes the "
                         "sampler's");
    options.batch_size(batch);
    return ::torch::data::make_data_loader(std::move(dataset), std::move(sampler),
                                           std::move(options));
}

} // namespace bcl::torch

#endif
