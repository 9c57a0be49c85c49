#pragma once
// bcl::stream_mean_cost: the level options::mean_cost stands for, computed from a stream's
// estimated costs when all of them are known before the stream starts (a sampler that draws its
// epoch's indices up front).

#include <bcl/detail/config.hpp>

#include <bcl/cost_check.hpp>
#include <bcl/cost_estimator.hpp>
#include <bcl/detail/caps/cap_kinds.hpp>
#include <bcl/error.hpp>
#include <bcl/options.hpp>
#include <bcl/validate.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <functional>
#include <ranges>
#include <span>
#include <string>
#include <variant>
#include <vector>

namespace bcl {

/// The mean of `costs` as a balancer with cap `cap` estimates them: each cost clipped at the cap
/// in force once the cap has settled, that is a fixed cap's value, or for a quantile cap the
/// quantile of `costs` itself by nearest rank (the ceil(q*n)-th smallest). A truncating cap counts
/// as clipping: a truncated record costs about the cap. 0 for no costs.
///
/// Why: a sliding round aims its records at the long-run mean cost of the stream. By default each
/// balancer estimates that mean from the records it has seen, and early in a stream, or in every
/// epoch of a sampler that starts a balancer per epoch, ranks that see different records aim at
/// levels far apart (docs/alignment.md). A stream whose costs are known up front has its exact
/// mean: pass it as options::mean_cost and every round aims at what the stream really averages,
/// from the first round on (the samplers for PyTorch and libtorch do this every epoch).
///
/// Throws bcl::error, changing nothing, for a cost that is NaN, negative or above
/// bcl::max_estimate (naming its position and value) and for invalid cap options (see
/// bcl::validate). O(n); a quantile cap also copies the costs to select the quantile.
[[nodiscard]] inline double stream_mean_cost(std::span<const double> costs,
                                             const cap_options& cap) {
    validate(options{.batch_size = 1, .cap = cap});
    for (std::size_t i = 0; i < costs.size(); ++i)
        check_cost(costs[i],
                   [i] { return "bcl::stream_mean_cost: cost " + std::to_string(i) + " is "; });
    if (costs.empty()) return 0.0;
    const double level = std::visit([&](const auto& kind) { return kind.stream_level(costs); },
                                    detail::make_cap_kind(cap));
    // An incremental mean: a sum of up to 2^64 costs of up to max_estimate each could overflow.
    double mean = 0.0;
    for (std::size_t i = 0; i < costs.size(); ++i)
        mean += (std::min(costs[i], level) - mean) / static_cast<double>(i + 1);
    return std::clamp(mean, 0.0, max_estimate);
}

/// The same level for records at hand: the mean of `estimator` over `records` as cap `cap`
/// clips it. For a loader that holds its epoch before it balances it, as bcl::balance's callers
/// usually do:
///
///     opt.mean_cost = bcl::stream_mean_cost(samples, cost, opt.cap);
///     for (auto&& batch : bcl::balance(std::move(samples), cost, opt)) ...
///
/// The records are only read, so the range must be a forward range (an input range would be used
/// up). The estimator runs once per record here, and again when the balancer pushes it, so it
/// should depend on the record alone (contract point 5). Throws what the estimator throws,
/// unchanged, and bcl::error as the overload above does, naming the record's position; either
/// way nothing is changed. Holds the n estimates while it runs (8 bytes per record).
template <std::ranges::forward_range Records, class Estimator>
requires cost_estimator<Estimator, std::ranges::range_value_t<Records>>
[[nodiscard]] double stream_mean_cost(Records&& records, Estimator&& estimator,
                                      const cap_options& cap) {
    std::vector<double> costs;
    if constexpr (std::ranges::sized_range<Records>)
        costs.reserve(static_cast<std::size_t>(std::ranges::size(records)));
    for (auto&& record : records) {
        const std::ranges::range_value_t<Records>& read = record;
        costs.push_back(static_cast<double>(std::invoke(estimator, read)));
    }
    return stream_mean_cost(costs, cap);
}

} // namespace bcl
