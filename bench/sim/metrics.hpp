#pragma once
// The metrics of a run: efficiency, goodput, cv, p99 step ratio, cv reduction and speedup against
// none.

#include <bcl/statistics.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <span>
#include <vector>

namespace bcl_sim {

// ---------------------------------------------------------------------------------------------
// Metrics.
// ---------------------------------------------------------------------------------------------

/// Arithmetic mean of `values` (0 for none).
[[nodiscard]] inline double mean_of(const std::vector<double>& values) noexcept {
    double sum = 0.0;
    for (const double x : values) sum += x;
    return values.empty() ? 0.0 : sum / static_cast<double>(values.size());
}

/// Nearest-rank quantile q in (0, 1] of `values` (copied; values need not be sorted).
[[nodiscard]] inline double nearest_rank(std::vector<double> values, double q) {
    if (values.empty()) return 0.0;
    auto rank = static_cast<std::size_t>(std::ceil(q * static_cast<double>(values.size())));
    rank = std::clamp<std::size_t>(rank, 1, values.size());
    std::nth_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(rank - 1),
                     values.end());
    return values[rank - 1];
}

/// The metrics of one policy that depend on its per-(step, rank) costs alone.
struct step_metrics {
    /// mean over (step, rank) of the rank's step cost / mean over steps of the max over ranks.
    double efficiency = 1.0;
    /// The useful (packed) cost over what the ranks are held for: the sum over (step, rank) of the
    /// sum of the rank's record costs / (R times the sum over steps of the max over ranks of what
    /// the ranks spend). Equal to efficiency when a rank spends its records' costs (packed).
    double goodput = 1.0;
    /// stddev / mean of the per-(step, rank) costs (population stddev).
    double cv = 0.0;
    /// nearest-rank p99 over steps of the max over ranks / mean over (step, rank) of the cost.
    double p99_step_ratio = 1.0;
    /// The most efficiency any rearrangement of each rank's spend within its rounds (blocks of
    /// `round_steps` steps from step 0) could reach: the sum over (step, rank) of the cost / R
    /// over the sum over rounds of the costliest rank's round total (a step waits for its slowest
    /// rank, so a round's steps take at least as long as the costliest rank's round). For
    /// tumbling, whose rounds are fixed windows of each rank's stream, this bounds every
    /// partition and emission order of the same records. 1 without rounds.
    double round_bound = 1.0;
    /// The same bound over epochs (blocks of `epoch_steps` steps from step 0) instead of rounds.
    /// A policy that hands out each rank's epoch within the epoch's steps (the bcl policies under
    /// --epoch-steps, and none) spends in them exactly the epoch's cost, whatever it does with
    /// it: for such policies it is a property of the stream, the same for all of them, and none
    /// of them can exceed it (packed, when a record costs the same in every step). 1 without
    /// epochs.
    double epoch_bound = 1.0;
    double mean_rank_cost = 0.0; ///< mean over (step, rank): the ideal step time
    double mean_step_time = 0.0; ///< mean over steps of the max over ranks
    std::size_t steps = 0;
};

/// Each rank's spend summed over blocks of a fixed number of steps (rounds, epochs): the least
/// time the steps of the run could take if every rank's spend within each block could be
/// rearranged at will, the sum over blocks of the costliest rank's block total.
class block_totals {
public:
    /// `steps`: steps per block (0: no blocks).
    explicit block_totals(std::size_t steps) noexcept : m_steps(steps) {}

    [[nodiscard]] bool enabled() const noexcept { return m_steps > 0; }

    void add(std::span<const double> rank_costs) {
        if (m_steps == 0) return;
        m_total.resize(rank_costs.size(), 0.0);
        for (std::size_t r = 0; r < rank_costs.size(); ++r) m_total[r] += rank_costs[r];
        if (++m_filled < m_steps) return;
        m_max_sum += *std::max_element(m_total.begin(), m_total.end());
        m_total.assign(m_total.size(), 0.0);
        m_filled = 0;
    }

    /// The sum over blocks of the costliest rank's total. A block cut short by the end of the run
    /// counts with what it has: its steps too take at least as long as its costliest rank's part.
    /// Never above `max_sum` (the sum of step maxima, which it bounds from below): summed in
    /// another order, a run whose steps are already even could otherwise land a rounding error
    /// above it.
    [[nodiscard]] double time(double max_sum) const {
        const double open =
            m_total.empty() ? 0.0 : *std::max_element(m_total.begin(), m_total.end());
        return std::min(m_max_sum + open, max_sum);
    }

private:
    std::size_t m_steps;         // steps per block (0: none)
    std::size_t m_filled = 0;    // steps of the open block so far
    std::vector<double> m_total; // each rank's cost in the open block
    double m_max_sum = 0.0;      // over closed blocks, the costliest rank's total
};

/// Streams per-step rank costs into the metrics; keeps O(steps) memory (for the trace).
class metrics_accumulator {
public:
    /// `round_steps`: the steps of a round for round_bound; `epoch_steps`: of an epoch for
    /// epoch_bound (0: none).
    explicit metrics_accumulator(std::size_t steps_hint = 0, std::size_t round_steps = 0,
                                 std::size_t epoch_steps = 0)
        : m_rounds(round_steps), m_epochs(epoch_steps) {
        m_step_max.reserve(steps_hint);
        m_step_mean.reserve(steps_hint);
    }

    /// One step: the cost of every rank. Every rank must have had a full batch.
    void add_step(std::span<const double> rank_costs) { add_step(rank_costs, rank_costs); }

    /// One step: what every rank spends, and its useful cost (the sum of its records' costs; the
    /// same under packed batching). Every rank must have had a full batch.
    void add_step(std::span<const double> rank_costs, std::span<const double> rank_useful) {
        double max = 0.0;
        double sum = 0.0;
        for (const double c : rank_costs) {
            m_all.add(c);
            max = std::max(max, c);
            sum += c;
        }
        // The same accumulator over the same values when they are the same values (packed), so
        // goodput is then exactly efficiency.
        for (const double u : rank_useful) m_useful.add(u);
        m_step_max.push_back(max);
        m_step_mean.push_back(rank_costs.empty() ? 0.0
                                                 : sum / static_cast<double>(rank_costs.size()));
        m_rounds.add(rank_costs);
        m_epochs.add(rank_costs);
    }

    [[nodiscard]] step_metrics result() const {
        step_metrics m;
        m.steps = m_step_max.size();
        if (m.steps == 0) return m;
        double max_sum = 0.0;
        for (const double x : m_step_max) max_sum += x;
        m.mean_step_time = max_sum / static_cast<double>(m.steps);
        m.mean_rank_cost = m_all.mean();
        m.cv = m_all.cv();
        if (m.mean_step_time > 0.0) {
            m.efficiency = m.mean_rank_cost / m.mean_step_time;
            m.goodput = m_useful.mean() / m.mean_step_time;
            m.p99_step_ratio = nearest_rank(m_step_max, 0.99) / m.mean_rank_cost;
        }
        const auto bound = [&](const block_totals& blocks) {
            const double time = blocks.time(max_sum);
            return blocks.enabled() && time > 0.0
                       ? m.mean_rank_cost / (time / static_cast<double>(m.steps))
                       : 1.0;
        };
        m.round_bound = bound(m_rounds);
        m.epoch_bound = bound(m_epochs);
        return m;
    }

    /// Max over ranks of each step so far.
    [[nodiscard]] const std::vector<double>& step_max() const noexcept { return m_step_max; }
    /// Mean over ranks of each step so far.
    [[nodiscard]] const std::vector<double>& step_mean() const noexcept { return m_step_mean; }

private:
    block_totals m_rounds;       // for round_bound
    block_totals m_epochs;       // for epoch_bound
    bcl::running_stats m_all;    // every (step, rank) cost
    bcl::running_stats m_useful; // every (step, rank) useful cost
    std::vector<double> m_step_max;
    std::vector<double> m_step_mean;
};

/// Metrics of a cost matrix given step-major: costs[s * ranks + r], what rank r spends in step s,
/// and useful[s * ranks + r], the sum of its records' costs (the same size as costs); rounds of
/// `round_steps` steps for round_bound and epochs of `epoch_steps` for epoch_bound (0: none).
[[nodiscard]] inline step_metrics compute_metrics(std::span<const double> costs,
                                                  std::span<const double> useful, std::size_t ranks,
                                                  std::size_t round_steps = 0,
                                                  std::size_t epoch_steps = 0) {
    metrics_accumulator acc(ranks == 0 ? 0 : costs.size() / ranks, round_steps, epoch_steps);
    for (std::size_t s = 0; ranks != 0 && (s + 1) * ranks <= costs.size(); ++s)
        acc.add_step(costs.subspan(s * ranks, ranks), useful.subspan(s * ranks, ranks));
    return acc.result();
}

/// Metrics of a cost matrix given step-major: costs[s * ranks + r], packed (every rank spends the
/// sum of its records' costs, so goodput is efficiency).
[[nodiscard]] inline step_metrics compute_metrics(std::span<const double> costs, std::size_t ranks,
                                                  std::size_t round_steps = 0,
                                                  std::size_t epoch_steps = 0) {
    return compute_metrics(costs, costs, ranks, round_steps, epoch_steps);
}

/// 1 - cv/cv_none: the share of the per-rank batch-cost variability a policy removes (0 when the
/// reference has none).
[[nodiscard]] inline double cv_reduction(double cv, double cv_none) noexcept {
    return cv_none > 0.0 ? 1.0 - cv / cv_none : 0.0;
}

/// goodput / goodput_none (packed, efficiency / efficiency_none: the same numbers). Every policy
/// does the same useful work, so this is the ratio of mean step times: how much faster training
/// runs than without balancing.
[[nodiscard]] inline double speedup(double goodput, double goodput_none) noexcept {
    return goodput_none > 0.0 ? goodput / goodput_none : 0.0;
}

} // namespace bcl_sim
