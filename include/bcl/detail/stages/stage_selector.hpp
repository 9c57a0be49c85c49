#pragma once
// Choosing which buffered records of D stage costs form the next round of a sliding stage
// balancer: every stage's total toward that stage's own target.

#include <bcl/detail/config.hpp>

#include <bcl/detail/stages/step_stages.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace bcl::detail::stages {

/// Chooses `count` of n buffered records (record i's D costs at costs[i*D .. i*D+D)) whose total
/// in each stage d is close to targets[d], the first `forced` records always among them. Starts
/// from the oldest records (the lowest indices), then swaps one chosen record (not a forced one)
/// for one left out where that lowers the distance, the sum over stages of |total - target| (in
/// cost units, since a step's time is the sum over stages): for each chosen record in turn, the
/// left-out one that lowers the distance most. It stops once the distance is within tolerance(),
/// after a pass over the chosen records that finds no better swap, or after max_passes passes.
///
/// Why first improvement rather than the best swap of all pairs: one scan for the best of all
/// pairs costs what a whole pass costs, and from the oldest records a round is typically a few
/// mean costs off, which the first swaps of a pass remove. The tolerance is a thousandth of a
/// record's mean summed cost (the targets' sum over `count`): the round's K batches then sit
/// within about 1e-3 / B of a batch of their share, below what the split itself reaches.
///
/// O(max_passes * count * (n - count) * D) at most per call; typically a pass or less. Allocates
/// nothing once it has seen its largest buffer.
class stage_selector {
public:
    static constexpr std::size_t max_passes = 4;
    static constexpr double relative_tolerance = 1e-3;

    void reserve(std::size_t records) {
        m_chosen.reserve(records);
        m_left.reserve(records);
        m_total.reserve(max_stages);
    }

    /// Marks the chosen records in `chosen` (n flags, 1 for chosen); returns the distance left.
    /// Requires forced <= count <= n and count >= 1.
    double operator()(std::span<const double> costs, std::size_t stages, std::size_t forced,
                      std::size_t count, std::span<const double> targets,
                      std::span<std::uint8_t> chosen) {
        const std::size_t n = chosen.size();
        std::fill(chosen.begin(), chosen.end(), std::uint8_t{0});
        std::fill(chosen.begin(), chosen.begin() + static_cast<std::ptrdiff_t>(count),
                  std::uint8_t{1});
        m_total.assign(stages, 0.0);
        double target_sum = 0.0;
        for (std::size_t s = 0; s < stages; ++s) target_sum += targets[s];
        for (std::size_t i = 0; i < count; ++i)
            for (std::size_t s = 0; s < stages; ++s) m_total[s] += costs[i * stages + s];
        double distance = distance_of(targets, stages);
        const double tolerance = relative_tolerance * target_sum / static_cast<double>(count);
        if (count == n || distance <= tolerance) return distance;

        // Swappable: the chosen records after the forced ones, and every left-out record.
        m_chosen.clear();
        m_left.clear();
        for (std::size_t i = forced; i < count; ++i) m_chosen.push_back(i);
        for (std::size_t j = count; j < n; ++j) m_left.push_back(j);
        for (std::size_t pass = 0; pass < max_passes && distance > tolerance; ++pass) {
            bool swapped = false;
            for (std::size_t& in : m_chosen) {
                std::size_t best = m_left.size();
                double best_distance = distance;
                for (std::size_t k = 0; k < m_left.size(); ++k) {
                    double d = 0.0;
                    for (std::size_t s = 0; s < stages; ++s)
                        d += std::abs(m_total[s] - costs[in * stages + s] +
                                      costs[m_left[k] * stages + s] - targets[s]);
                    if (d < best_distance) {
                        best_distance = d;
                        best = k;
                    }
                }
                if (best == m_left.size()) continue;
                const std::size_t out = m_left[best];
                for (std::size_t s = 0; s < stages; ++s)
                    m_total[s] += costs[out * stages + s] - costs[in * stages + s];
                chosen[in] = 0;
                chosen[out] = 1;
                m_left[best] = in;
                in = out;
                distance = distance_of(targets, stages);
                swapped = true;
                if (distance <= tolerance) break;
            }
            if (!swapped) break;
        }
        return distance;
    }

private:
    [[nodiscard]] double distance_of(std::span<const double> targets,
                                     std::size_t stages) const noexcept {
        double d = 0.0;
        for (std::size_t s = 0; s < stages; ++s) d += std::abs(m_total[s] - targets[s]);
        return d;
    }

    std::vector<std::size_t> m_chosen; // the swappable chosen records
    std::vector<std::size_t> m_left;   // the records left out
    std::vector<double> m_total;       // the chosen records' total in each stage
};

} // namespace bcl::detail::stages
