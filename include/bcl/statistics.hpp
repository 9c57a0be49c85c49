#pragma once
// Counters and running statistics a balancer keeps: cheap enough to leave on.

#include <bcl/detail/config.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace bcl {

namespace detail {
struct stats_access;
} // namespace detail

/// Running count, mean, variance, minimum and maximum of a stream of values (Welford's update:
/// numerically stable, O(1) per value, no storage).
class running_stats {
public:
    void add(double x) noexcept {
        ++m_count;
        const double delta = x - m_mean;
        m_mean += delta / static_cast<double>(m_count);
        m_m2 += delta * (x - m_mean);
        m_min = m_count == 1 ? x : std::min(m_min, x);
        m_max = m_count == 1 ? x : std::max(m_max, x);
    }
    /// Adds every value `other` has seen (Chan, Golub and LeVeque's pairwise update): the result
    /// is what adding them one by one would give, up to rounding.
    void merge(const running_stats& other) noexcept {
        if (other.m_count == 0) return;
        if (m_count == 0) {
            *this = other;
            return;
        }
        const auto n = static_cast<double>(m_count + other.m_count);
        const double delta = other.m_mean - m_mean;
        const double weight = static_cast<double>(other.m_count) / n;
        m_mean += delta * weight;
        m_m2 += other.m_m2 + delta * delta * static_cast<double>(m_count) * weight;
        m_count += other.m_count;
        m_min = std::min(m_min, other.m_min);
        m_max = std::max(m_max, other.m_max);
    }

    [[nodiscard]] std::uint64_t count() const noexcept { return m_count; }
    [[nodiscard]] double mean() const noexcept { return m_mean; }
    [[nodiscard]] double min() const noexcept { return m_min; }
    [[nodiscard]] double max() const noexcept { return m_max; }
    /// Population variance (divides by n); 0 for fewer than two values.
    [[nodiscard]] double variance() const noexcept {
        return m_count < 2 ? 0.0 : m_m2 / static_cast<double>(m_count);
    }
    [[nodiscard]] double stddev() const noexcept { return std::sqrt(variance()); }
    /// Coefficient of variation, stddev / mean; 0 when the mean is 0.
    [[nodiscard]] double cv() const noexcept { return m_mean > 0.0 ? stddev() / m_mean : 0.0; }

private:
    friend struct detail::stats_access; // saved and restored exactly, with a balancer's state
    std::uint64_t m_count = 0;
    double m_mean = 0.0;
    double m_m2 = 0.0;
    double m_min = 0.0;
    double m_max = 0.0;
};

/// What a balancer has done so far.
struct statistics {
    std::uint64_t records_in = 0;      ///< records accepted by push()
    std::uint64_t records_out = 0;     ///< records handed out in batches
    std::uint64_t records_dropped = 0; ///< records dropped by drop_last (at most B-1)
    std::uint64_t records_capped =
        0;                     ///< records whose estimate was above the cap (clipped or truncated)
    std::uint64_t batches = 0; ///< batches handed out, the short final one included
    std::uint64_t windows = 0; ///< windows partitioned, the short final one included
    /// Estimated cost of each full batch handed out (the short final batch is left out: it is
    /// short by design and would only inflate the variability).
    running_stats batch_cost;
    /// Per full window of packed batches: (heaviest pack - lower bound) / lower bound, an upper
    /// bound on how far that window's partition is from optimal. Windows with a zero lower bound
    /// count as 0; in a window whose heavy batches were shaped (costliest-first emission), the
    /// gap of the partition of the rest. Padded batches claim no bound, nor does a shaped window
    /// whose records the memory budget moved (the rest's bound no longer covers its packs).
    running_stats gap_to_lower_bound;
    /// Largest number of batches any record waited beyond the batch it would have been in without
    /// balancing (its arrival position / B); never above max_delay_bound(options).
    std::uint64_t max_delay_batches = 0;
    /// That delay over all records handed out (records that left early count as 0).
    running_stats delay_batches;
    /// Largest total memory estimate of a batch handed out (0 without a memory estimator).
    double peak_batch_memory = 0.0;
    /// delay_histogram[d]: records handed out with a delay of d batches, d = 0..max_delay_batches
    /// (empty before the first round): it grows with the largest delay seen, never beyond
    /// max_delay_bound(options).
    std::vector<std::uint64_t> delay_histogram;
};

namespace detail {

/// Calls `visit(name, field)` for each field of `s` (a statistics, const or not) but the delay
/// histogram, whose length the options bound: the list a saved state writes, in its order, kept
/// beside the fields so that a new one is not left out.
template <class Stats, class Visit>
void statistics_fields(Stats& s, Visit&& visit) {
    visit("records_in", s.records_in);
    visit("records_out", s.records_out);
    visit("records_dropped", s.records_dropped);
    visit("records_capped", s.records_capped);
    visit("peak_batch_memory", s.peak_batch_memory);
    visit("batches", s.batches);
    visit("windows", s.windows);
    visit("batch_cost", s.batch_cost);
    visit("gap_to_lower_bound", s.gap_to_lower_bound);
    visit("max_delay_batches", s.max_delay_batches);
    visit("delay_batches", s.delay_batches);
}

} // namespace detail

} // namespace bcl
