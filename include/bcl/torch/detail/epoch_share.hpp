#pragma once
// One epoch of bcl::torch::distributed_balanced_sampler: the global order every rank derives
// from (seed, epoch), the cost table's checks and digest, and the plan of the epoch's windows
// that gives this rank its share. Standard library and bcl only: the sampler wraps it for
// libtorch.

#include <bcl/detail/config.hpp>

#include <bcl/detail/number_text.hpp>
#include <bcl/detail/plan/geometry.hpp>
#include <bcl/detail/plan/quantize.hpp>
#include <bcl/detail/random.hpp>
#include <bcl/error.hpp>
#include <bcl/global_plan.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace bcl::torch {

/// What the plans of an epoch promise, summed over its windows (docs/global.md, "The summary").
struct epoch_plan_summary {
    std::size_t windows = 0;  ///< windows planned
    std::size_t batches = 0;  ///< batches each rank gets (the sampler's size())
    std::uint64_t digest = 0; ///< the chain of the windows' plan digests
    double total = 0.0;       ///< the sum of the records' (capped) costs, in cost units
    double objective = 0.0;   ///< the sum over steps of the step's costliest batch
    double lower_bound = 0.0; ///< the sum of the windows' lower bounds on it
    std::size_t ranks = 1;    ///< R

    /// total / (R * objective): the mean rank's step time over the slowest rank's, as planned.
    [[nodiscard]] double efficiency() const noexcept {
        return objective > 0.0 ? total / (static_cast<double>(ranks) * objective) : 1.0;
    }
    /// objective / lower_bound - 1: how far the plans can be from the best.
    [[nodiscard]] double gap() const noexcept {
        return lower_bound > 0.0 ? objective / lower_bound - 1.0 : 0.0;
    }
};

namespace detail {

/// Throws bcl::error (prefixed with `who`) naming the dataset index and value of the first cost
/// that is NaN, negative, infinite or above bcl::max_estimate. Compares bit patterns, so that no
/// compiler flag (-ffinite-math-only) can drop the NaN check. O(N).
inline void check_cost_table(const std::vector<double>& costs, const std::string& who) {
    for (std::size_t i = 0; i < costs.size(); ++i)
        if (bcl::detail::plan::cost_bits(costs[i]) > bcl::detail::plan::largest_cost_bits)
            throw bcl::error(who + ": the cost of dataset index " + std::to_string(i) + " is " +
                             bcl::detail::number_text(costs[i]) +
                             "; a cost must be >= 0 and at most bcl::max_estimate (" +
                             bcl::detail::number_text(bcl::max_estimate) + ")");
}

/// Throws bcl::error (prefixed with `who`) for R, K or B of 0, a rank not below R, R*K*B above
/// bcl::max_plan_records, plan options the planner refuses (the batching neither packed nor
/// padded, a negative or NaN cap) and a bad cost (check_cost_table). O(N).
inline void check_global_settings(std::size_t replicas, std::size_t rank, std::size_t lookahead,
                                  std::size_t batch, const bcl::plan_options& plan,
                                  const std::vector<double>& costs, const std::string& who) {
    // The shape's counts and R*K*B, as the planner checks them.
    (void)bcl::detail::plan::geometry_of(0, replicas, lookahead, batch, bcl::max_plan_records, who);
    if (rank >= replicas)
        throw bcl::error(who + ": rank " + std::to_string(rank) + " of num_replicas " +
                         std::to_string(replicas) + ": the rank must be below num_replicas");
    if (plan.batching != batch_cost::packed && plan.batching != batch_cost::padded)
        throw bcl::error(who + ": plan_options::batching is neither packed nor padded");
    (void)bcl::detail::plan::cap_bits(plan.cap, who);
    check_cost_table(costs, who);
}

/// A digest of the table's costs as the planner reads them (-0.0 as 0.0), bit for bit.
[[nodiscard]] inline std::uint64_t cost_table_digest(const std::vector<double>& costs) noexcept {
    std::uint64_t h = bcl::detail::splitmix64(costs.size()).next();
    for (const double c : costs)
        h = bcl::detail::splitmix64(h ^ bcl::detail::plan::cost_bits(c)).next();
    return h;
}

/// The global order of `epoch` into `order` (size n): a Fisher-Yates shuffle of 0..n-1 driven
/// by SplitMix64 from (seed, epoch), with integer operations only, or 0..n-1 without `shuffle`.
/// The same on every platform and standard library. O(n).
inline void global_order(std::size_t n, bool shuffle, std::uint64_t seed, std::size_t epoch,
                         std::vector<std::size_t>& order) {
    order.resize(n);
    for (std::size_t i = 0; i < n; ++i) order[i] = i;
    if (!shuffle) return;
    // A stream of its own for each (seed, epoch): the seed and the epoch pass through
    // SplitMix64's output function in turn.
    const std::uint64_t seeded = bcl::detail::splitmix64(seed).next();
    bcl::detail::splitmix64 rng(bcl::detail::splitmix64(seeded ^ epoch).next());
    bcl::detail::shuffle(order.data(), n, rng);
}

/// The layout of an epoch, fixed by the sampler's settings and the dataset size.
struct epoch_layout {
    std::size_t replicas = 1;  ///< R
    std::size_t rank = 0;      ///< this rank
    std::size_t lookahead = 1; ///< K
    std::size_t batch = 1;     ///< B
    std::size_t padded = 0;    ///< the order's length once padded or cut to a multiple of R
    std::size_t per_rank = 0;  ///< m: records per rank and epoch
    std::size_t batches = 0;   ///< batches per rank and epoch

    /// As torch's DistributedSampler: with drop_last the tail that does not fill every rank is
    /// dropped, otherwise every rank gets ceil(N / R), the order padded to that; with drop_last
    /// m is also cut to a multiple of B.
    static epoch_layout of(std::size_t n, std::size_t replicas, std::size_t rank,
                           std::size_t lookahead, std::size_t batch, bool drop_last) noexcept {
        epoch_layout l{replicas, rank, lookahead, batch};
        l.padded = drop_last && n % replicas != 0 ? n / replicas * replicas
                                                  : (n + replicas - 1) / replicas * replicas;
        const std::size_t per_rank = l.padded / replicas;
        l.per_rank = drop_last ? per_rank - per_rank % batch : per_rank;
        l.batches = (l.per_rank + batch - 1) / batch;
        return l;
    }
};

/// One epoch's plan as one rank sees it: its records, batch after batch, and what the plans
/// promise.
struct epoch_share {
    std::vector<std::size_t> mine;
    epoch_plan_summary summary;
};

/// Plans epochs into shares. Keeps its scratch, so that planning an epoch allocates nothing once
/// one was planned (but the share's own vector, the first time).
class epoch_share_planner {
public:
    /// Plans the epoch whose global order is `order` (the dataset's N indices; padded or cut
    /// here, in place, to `layout.padded`) into `out`: windows of R*K*B records of the kept
    /// order, each planned by bcl::global_planner, this rank's records of each window's steps in
    /// the order's order. On an exception `out` may be partly written (keep it only on success).
    void plan(const std::vector<double>& table, std::vector<std::size_t>& order,
              const epoch_layout& layout, const bcl::plan_options& options, epoch_share& out) {
        const std::size_t n = order.size();
        order.resize(layout.padded);
        for (std::size_t i = n; i < layout.padded; ++i) order[i] = order[(i - n) % n];
        const std::size_t kept = layout.per_rank * layout.replicas;
        const bcl::plan_shape shape{layout.replicas, layout.lookahead, layout.batch};
        const std::size_t window = layout.replicas * layout.lookahead * layout.batch;
        out.mine.resize(layout.per_rank);
        out.summary = epoch_plan_summary{};
        out.summary.ranks = layout.replicas;
        out.summary.batches = layout.batches;
        m_step_fill.resize(layout.lookahead);
        for (std::size_t first = 0; first < kept; first += window) {
            const std::size_t count = std::min(window, kept - first);
            m_costs.resize(count);
            m_slots.resize(count);
            for (std::size_t i = 0; i < count; ++i) m_costs[i] = table[order[first + i]];
            const bcl::plan_summary s = m_planner.plan(m_costs, shape, options, m_slots);
            out.summary.digest = bcl::plan_digest(m_slots, out.summary.digest);
            ++out.summary.windows;
            out.summary.total += s.cost_of(s.total);
            out.summary.objective += s.cost_of(s.objective);
            out.summary.lower_bound += s.cost_of(s.lower_bound);
            // This rank's records: B per step (the window's last step may hold fewer), each
            // step's in the window's order. Step j starts B*j after the window's first.
            const std::size_t base = first / layout.replicas;
            for (std::size_t step = 0; step < layout.lookahead; ++step)
                m_step_fill[step] = step * layout.batch;
            for (std::size_t i = 0; i < count; ++i)
                if (m_slots[i].rank == layout.rank)
                    out.mine[base + m_step_fill[m_slots[i].step]++] = order[first + i];
        }
    }

private:
    bcl::global_planner m_planner;
    std::vector<double> m_costs;
    std::vector<bcl::plan_slot> m_slots;
    std::vector<std::size_t> m_step_fill;
};

} // namespace detail
} // namespace bcl::torch
