#pragma once
// Checks of a global plan's slots, written from the contract in docs/global.md rather than from
// the planner: how n records fall into steps, every (step, rank) holding its share, the batches'
// costs, the objective, and the order of steps and ranks; and a window in cost order, as the
// layouts take it. Shared by the global plan's spec and the specs of its layouts (tests/plan/).

#include "support/distributions.hpp"

#include <bcl/global_plan.hpp>

#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <random>
#include <span>
#include <string>
#include <vector>

namespace bcl_test {

/// How n records of R ranks fall into steps, spelled out here from the contract: m = n / R per
/// rank, ceil(m / B) steps of B but the last, which holds m - (steps - 1) * B.
struct expected_steps {
    std::size_t steps = 0;
    std::size_t last = 0;
};

inline expected_steps steps_of(std::size_t n, std::size_t ranks, std::size_t batch) {
    const std::size_t m = n / ranks;
    expected_steps e;
    e.steps = (m + batch - 1) / batch;
    e.last = m - (e.steps == 0 ? 0 : (e.steps - 1) * batch);
    return e;
}

/// "" if `p` has one slot per record, every slot in range, and every (step, rank) holds exactly
/// B records but in the last step, which holds the rest; otherwise the first violation.
inline std::string check_layout(std::span<const bcl::plan_slot> p, std::size_t n,
                                bcl::plan_shape shape) {
    if (p.size() != n) return fmt::format("{} slots for {} records", p.size(), n);
    const expected_steps e = steps_of(n, shape.ranks, shape.batch);
    std::vector<std::size_t> count(e.steps * shape.ranks, 0);
    for (std::size_t i = 0; i < n; ++i) {
        if (p[i].step >= e.steps || p[i].rank >= shape.ranks)
            return fmt::format("record {} goes to step {} rank {} of {} steps, {} ranks", i,
                               p[i].step, p[i].rank, e.steps, shape.ranks);
        ++count[p[i].step * shape.ranks + p[i].rank];
    }
    for (std::size_t t = 0; t < e.steps; ++t)
        for (std::size_t r = 0; r < shape.ranks; ++r) {
            const std::size_t want = t + 1 == e.steps ? e.last : shape.batch;
            if (count[t * shape.ranks + r] != want)
                return fmt::format("step {} rank {} holds {} records, expected {}", t, r,
                                   count[t * shape.ranks + r], want);
        }
    return {};
}

/// Each (step, rank)'s batch cost as the plan has it: the sum of its records' costs, or (padded)
/// its size times its dearest record's.
inline std::vector<double> batch_costs(std::span<const double> costs,
                                       std::span<const bcl::plan_slot> p, bcl::plan_shape shape,
                                       bool padded) {
    const expected_steps e = steps_of(costs.size(), shape.ranks, shape.batch);
    std::vector<double> sum(e.steps * shape.ranks, 0.0);
    std::vector<double> dearest(sum.size(), 0.0);
    std::vector<double> count(sum.size(), 0.0);
    for (std::size_t i = 0; i < costs.size(); ++i) {
        const std::size_t at = p[i].step * shape.ranks + p[i].rank;
        sum[at] += costs[i];
        dearest[at] = std::max(dearest[at], costs[i]);
        count[at] += 1.0;
    }
    if (padded)
        for (std::size_t k = 0; k < sum.size(); ++k) sum[k] = count[k] * dearest[k];
    return sum;
}

/// The sum over steps of the step's costliest batch, from the batches by (step, rank).
template <class Cost>
Cost objective_of(const std::vector<Cost>& batch, std::size_t ranks) {
    Cost total{};
    for (std::size_t t = 0; t * ranks < batch.size(); ++t)
        total += *std::max_element(batch.begin() + static_cast<std::ptrdiff_t>(t * ranks),
                                   batch.begin() + static_cast<std::ptrdiff_t>((t + 1) * ranks));
    return total;
}

/// The sum over steps of the step's costliest batch: what the ranks wait for.
inline double objective(std::span<const double> costs, std::span<const bcl::plan_slot> p,
                        bcl::plan_shape shape, bool padded = false) {
    return objective_of(batch_costs(costs, p, shape, padded), shape.ranks);
}

/// "" if the plan's batches (by step and rank) come in steps heaviest first, the short last step
/// aside, and within step s the batches of ranks s, s+1, ..., s+R-1 (mod R) are heaviest first
/// (the j-th heaviest on rank (j + s) mod R, so step s's costliest on rank s mod R); otherwise
/// the first violation.
template <class Cost>
std::string check_order(const std::vector<Cost>& batch, std::size_t n, bcl::plan_shape shape) {
    const expected_steps e = steps_of(n, shape.ranks, shape.batch);
    const bool short_last = e.last < shape.batch;
    for (std::size_t s = 0; s < e.steps; ++s) {
        const auto first = batch.begin() + static_cast<std::ptrdiff_t>(s * shape.ranks);
        const auto on = [&](std::size_t j) {
            return first[static_cast<std::ptrdiff_t>((j + s) % shape.ranks)];
        };
        for (std::size_t j = 1; j < shape.ranks; ++j)
            if (on(j) > on(j - 1))
                return fmt::format("step {}: rank {}'s batch is costlier than rank {}'s", s,
                                   (j + s) % shape.ranks, (j - 1 + s) % shape.ranks);
        if (s > 0 && !(short_last && s + 1 == e.steps)) {
            const auto before = first - static_cast<std::ptrdiff_t>(shape.ranks);
            if (on(0) > *std::max_element(before, first))
                return fmt::format("step {} is costlier than step {}", s, s - 1);
        }
    }
    return {};
}

/// A window shape and a record count for case i: R, K, B each from 1 to the largest given,
/// drawn from case i's seed; even cases fill the window (n = R*K*B), odd ones hold a random
/// m <= K*B records per rank (mostly short windows; n is still a multiple of R).
struct window_case {
    bcl::plan_shape shape;
    std::size_t n = 0;
};

inline window_case window_case_of(std::uint64_t i, bcl::plan_shape largest) {
    std::mt19937_64 gen(case_seed(i));
    window_case c;
    c.shape.ranks = 1 + gen() % largest.ranks;
    c.shape.steps = 1 + gen() % largest.steps;
    c.shape.batch = 1 + gen() % largest.batch;
    const std::size_t per_rank = c.shape.steps * c.shape.batch;
    const std::size_t m = i % 2 == 0 ? per_rank : 1 + gen() % per_rank;
    c.n = c.shape.ranks * m;
    return c;
}

/// A window as a layout takes it, in cost order: whole-number costs by place (descending, below
/// 1e9), the input index of each place (a shuffle of `seed`), and the same costs by input index,
/// as doubles, for the checks above.
struct ordered_window {
    std::vector<std::uint64_t> cost;
    std::vector<std::uint32_t> index;
    std::vector<double> by_input;
};

inline ordered_window in_cost_order(std::span<const double> raw, std::uint64_t seed) {
    ordered_window w;
    const std::size_t n = raw.size();
    w.cost.resize(n);
    for (std::size_t i = 0; i < n; ++i)
        w.cost[i] = static_cast<std::uint64_t>(std::min(std::round(raw[i]), 1e9));
    std::sort(w.cost.begin(), w.cost.end(), std::greater<>{});
    w.index.resize(n);
    for (std::size_t i = 0; i < n; ++i) w.index[i] = static_cast<std::uint32_t>(i);
    std::mt19937_64 gen(seed);
    std::shuffle(w.index.begin(), w.index.end(), gen);
    w.by_input.resize(n);
    for (std::size_t at = 0; at < n; ++at)
        w.by_input[w.index[at]] = static_cast<double>(w.cost[at]);
    return w;
}

} // namespace bcl_test
