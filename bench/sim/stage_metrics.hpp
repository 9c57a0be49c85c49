#pragma once
// Stage mode's metrics: each micro-step's rank loads in each stage, and what they cost when the
// ranks meet in every stage (the sum over stages of the slowest rank) or once (the slowest rank's
// summed cost), beside the bound that no sharing of the micro-step's records among the ranks
// beats.

#include "stage_workload.hpp"

#include <bcl/global_plan.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

namespace bcl_sim {

/// Sums over a run's micro-steps, in cost units. Every ratio is total work over R times time,
/// so 1 is every rank busy all the time.
struct stage_metrics {
    std::size_t ranks = 0;
    std::uint64_t micro_steps = 0;
    std::uint64_t records = 0;
    std::array<double, stage_count> total{};   ///< every record's cost of the stage
    std::array<double, stage_count> slowest{}; ///< sum over micro-steps of the stage's slowest rank
    /// Sum over micro-steps of max(the stage's mean rank load, its dearest record).
    std::array<double, stage_count> bound{};
    double step_slowest = 0.0; ///< sum over micro-steps of the slowest rank's summed cost
    double step_bound = 0.0;   ///< sum over micro-steps of max(mean summed load, dearest record)

    [[nodiscard]] double work() const noexcept { return total[0] + total[1]; }

    /// A stage's own efficiency: its mean rank load over its slowest, summed over micro-steps.
    [[nodiscard]] double of_stage(std::size_t s) const noexcept {
        return ratio(total[s], slowest[s]);
    }
    [[nodiscard]] double stage_bound_of(std::size_t s) const noexcept {
        return ratio(total[s], bound[s]);
    }
    /// Meeting in every stage: the work over R times the sum over micro-steps and stages of the
    /// slowest rank.
    [[nodiscard]] double stage_sync() const noexcept {
        return ratio(work(), slowest[0] + slowest[1]);
    }
    [[nodiscard]] double stage_sync_bound() const noexcept {
        return ratio(work(), bound[0] + bound[1]);
    }
    /// Meeting once: the work over R times the sum over micro-steps of the slowest rank's sum.
    [[nodiscard]] double step_sync() const noexcept { return ratio(work(), step_slowest); }
    [[nodiscard]] double step_sync_bound() const noexcept { return ratio(work(), step_bound); }

private:
    [[nodiscard]] double ratio(double work_done, double time) const noexcept {
        return time > 0.0 ? work_done / (static_cast<double>(ranks) * time) : 1.0;
    }
};

/// Adds planned units (a held batch or a stream's window) to a stage_metrics, checking that the
/// plan gives every rank exactly B records in every micro-step.
class stage_metrics_accumulator {
public:
    stage_metrics_accumulator(std::size_t ranks, std::size_t batch) : m_batch(batch) {
        m_out.ranks = ranks;
    }

    /// Adds `records` placed by `slots` (slots[i]: the micro-step of the unit, from 0, and rank of
    /// records[i]) in `steps` micro-steps. Throws std::logic_error, naming `policy`, if a slot is
    /// out of the unit or a (micro-step, rank) holds other than B records: every trainer needs
    /// B records a rank, so such a plan is a bug of the policy, not a figure.
    void add_unit(std::span<const stage_record> records, std::span<const bcl::plan_slot> slots,
                  std::size_t steps, const std::string& policy) {
        const std::size_t r = m_out.ranks;
        constexpr std::size_t d = stage_count;
        m_load.assign(steps * r * d, 0.0);
        m_count.assign(steps * r, 0);
        m_dearest.assign(steps * d, 0.0);
        m_dearest_sum.assign(steps, 0.0);
        for (std::size_t i = 0; i < records.size(); ++i) {
            const bcl::plan_slot s = slots[i];
            if (s.step >= steps || s.rank >= r)
                throw std::logic_error(fmt::format("policy {} put record {} in micro-step {} of "
                                                   "rank {}, outside {} micro-steps of {} ranks",
                                                   policy, i, s.step, s.rank, steps, r));
            ++m_count[s.step * r + s.rank];
            for (std::size_t k = 0; k < d; ++k) {
                m_load[(s.step * r + s.rank) * d + k] += records[i].cost[k];
                m_dearest[s.step * d + k] = std::max(m_dearest[s.step * d + k], records[i].cost[k]);
            }
            m_dearest_sum[s.step] = std::max(m_dearest_sum[s.step], records[i].summed());
        }
        for (std::size_t t = 0; t < steps; ++t) add_step(t, policy);
        m_out.records += records.size();
    }

    [[nodiscard]] const stage_metrics& result() const noexcept { return m_out; }

private:
    void add_step(std::size_t t, const std::string& policy) {
        const std::size_t r = m_out.ranks;
        constexpr std::size_t d = stage_count;
        double step_total = 0.0;
        double slowest_sum = 0.0;
        for (std::size_t rank = 0; rank < r; ++rank) {
            if (m_count[t * r + rank] != m_batch)
                throw std::logic_error(fmt::format("policy {} gave rank {} {} records in a "
                                                   "micro-step, not B = {}",
                                                   policy, rank, m_count[t * r + rank], m_batch));
            double sum = 0.0;
            for (std::size_t k = 0; k < d; ++k) sum += m_load[(t * r + rank) * d + k];
            slowest_sum = std::max(slowest_sum, sum);
            step_total += sum;
        }
        for (std::size_t k = 0; k < d; ++k) {
            double total = 0.0;
            double slowest = 0.0;
            for (std::size_t rank = 0; rank < r; ++rank) {
                total += m_load[(t * r + rank) * d + k];
                slowest = std::max(slowest, m_load[(t * r + rank) * d + k]);
            }
            m_out.total[k] += total;
            m_out.slowest[k] += slowest;
            m_out.bound[k] += std::max(total / static_cast<double>(r), m_dearest[t * d + k]);
        }
        m_out.step_slowest += slowest_sum;
        m_out.step_bound += std::max(step_total / static_cast<double>(r), m_dearest_sum[t]);
        ++m_out.micro_steps;
    }

    std::size_t m_batch;
    stage_metrics m_out;
    std::vector<double> m_load; // [micro-step][rank][stage]
    std::vector<std::size_t> m_count;
    std::vector<double> m_dearest;     // [micro-step][stage]
    std::vector<double> m_dearest_sum; // [micro-step]
};

} // namespace bcl_sim
