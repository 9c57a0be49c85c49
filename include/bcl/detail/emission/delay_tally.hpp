#pragma once
// Counting how long records wait: each record's delay, the batch it leaves in minus the batch it
// would have been in without balancing (its arrival position / B), into the statistics.

#include <bcl/detail/config.hpp>

#include <bcl/detail/stats_access.hpp>
#include <bcl/statistics.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace bcl::detail {

/// A round's delays, counted per record as the records are placed, then merged into the
/// statistics. Per record only a count is kept, in one of `tables` interleaved tables (a record
/// rarely waits for the previous one's increment of the same counter that way); the round's
/// moments, extremes and histogram are read off the counts at the end.
///
/// Records come in buffer order, so arrivals only grow and the arrival batch is stepped forward
/// instead of divided for; a gap of several batches (a sliding buffer's old record) is divided
/// for. start() makes all the room the round needs, so count() and finish() cannot throw.
class delay_tally {
    static constexpr std::size_t tables = 4;
    static constexpr std::uint64_t max_batch_steps = 8;

public:
    /// Makes room, now, for delays up to `delays` - 1, so the steady state allocates nothing.
    void reserve(std::size_t delays, statistics& stats) {
        stats.delay_histogram.reserve(delays);
        m_counts.reserve(tables * delays);
    }

    /// Counts one round's records; a value the caller keeps in a local, so its state stays in
    /// registers through the loop that places the records.
    class round_counter {
    public:
        /// The round's i-th record (in buffer order), of arrival position `arrival`, leaves in
        /// the round's batch number `rank`.
        void count(std::size_t i, std::uint64_t arrival, std::uint32_t rank) noexcept {
            if (arrival >= m_next_batch_start + max_batch_steps * m_b) [[unlikely]] {
                m_arrival_batch = arrival / m_b;
                m_next_batch_start = (m_arrival_batch + 1) * m_b;
            }
            while (arrival >= m_next_batch_start) {
                ++m_arrival_batch;
                m_next_batch_start += m_b;
            }
            const std::uint64_t emitted_batch = m_first_batch + rank;
            // A record of a later arrival batch can go out in an earlier batch: delay 0. Masked,
            // not selected: which records do is a coin flip, and GCC makes a selection a branch.
            const std::uint64_t late =
                std::uint64_t{0} - std::uint64_t{emitted_batch > m_arrival_batch};
            const std::uint64_t delay = (emitted_batch - m_arrival_batch) & late;
            ++m_counts[(i % tables) * m_widest + delay];
        }

    private:
        friend delay_tally;
        std::uint32_t* m_counts = nullptr;
        std::size_t m_widest = 1;
        std::uint64_t m_b = 1;
        std::uint64_t m_first_batch = 0;
        std::uint64_t m_arrival_batch = 0;
        std::uint64_t m_next_batch_start = 0;
    };

    /// A round whose batches leave as batches first_batch .. first_batch + packs - 1 and whose
    /// oldest record arrived at `oldest_arrival`. The only step that may throw (allocation).
    round_counter start(std::uint64_t first_batch, std::size_t packs, std::uint64_t oldest_arrival,
                        std::size_t batch_size, statistics& stats) {
        round_counter c;
        c.m_b = batch_size;
        c.m_first_batch = first_batch;
        c.m_arrival_batch = oldest_arrival / batch_size;
        c.m_next_batch_start = (c.m_arrival_batch + 1) * batch_size;
        // The oldest record arrived first and the last batch goes out last: no delay is larger.
        const std::uint64_t last_batch = first_batch + packs - 1;
        m_widest = static_cast<std::size_t>(
                       last_batch > c.m_arrival_batch ? last_batch - c.m_arrival_batch : 0) +
                   1;
        m_counts.assign(tables * m_widest, 0);
        stats.delay_histogram.reserve(m_widest);
        c.m_counts = m_counts.data();
        c.m_widest = m_widest;
        return c;
    }

    /// Adds the round's delays to the statistics: their moments, extremes and histogram, which
    /// grows to the largest delay seen.
    void finish(statistics& stats) noexcept {
        std::uint64_t count = 0;
        std::uint64_t sum = 0;
        std::uint64_t square_sum = 0;
        std::uint64_t lowest = m_widest;
        std::uint64_t highest = 0;
        std::vector<std::uint64_t>& histogram = stats.delay_histogram;
        for (std::uint64_t d = 0; d < m_widest; ++d) {
            std::uint64_t c = 0;
            for (std::size_t t = 0; t < tables; ++t) c += m_counts[t * m_widest + d];
            if (c == 0) continue;
            count += c;
            sum += c * d;
            square_sum += c * d * d;
            lowest = std::min(lowest, d);
            highest = d;
            if (histogram.size() <= d) histogram.resize(static_cast<std::size_t>(d) + 1, 0);
            histogram[static_cast<std::size_t>(d)] += c;
        }
        if (count == 0) return;
        const auto records = static_cast<double>(count);
        const double mean = static_cast<double>(sum) / records;
        const double m2 = static_cast<double>(square_sum) - static_cast<double>(sum) * mean;
        stats.delay_batches.merge(
            stats_access::make({count, mean, std::max(0.0, m2), static_cast<double>(lowest),
                                static_cast<double>(highest)}));
        stats.max_delay_batches = std::max(stats.max_delay_batches, highest);
    }

private:
    std::size_t m_widest = 1;
    std::vector<std::uint32_t> m_counts;
};

} // namespace bcl::detail
