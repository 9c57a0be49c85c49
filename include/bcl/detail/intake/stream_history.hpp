#pragma once
// What the stream has shown a balancer, across its epochs: the mean cost of its records, and
// what the epochs before the current one counted.

#include <bcl/detail/config.hpp>

#include <bcl/detail/saved_part.hpp>
#include <bcl/statistics.hpp>

#include <cmath>
#include <cstdint>
#include <utility>
#include <vector>

namespace bcl::detail {

/// What the epochs before the current one counted (balancer::next_epoch): the records behind
/// the quantile sketch and the running mean, the rounds the heavy slots saw, the batches a
/// calibration was told of. All 0 for a balancer's first epoch.
struct earlier_epochs {
    std::uint64_t records = 0;
    std::uint64_t rounds = 0;
    std::uint64_t batches = 0;
};

/// A statistics object as a new epoch starts it: every count 0, the delay histogram emptied
/// (its room kept, so that the next epoch allocates nothing).
inline void start_epoch(statistics& stats) noexcept {
    std::vector<std::uint64_t> histogram = std::move(stats.delay_histogram);
    histogram.clear();
    stats = statistics{};
    stats.delay_histogram = std::move(histogram);
}

/// The long-run side of a balancer's counts. An epoch's statistics start afresh
/// (balancer::next_epoch) but the mean cost of the stream's records, which sliding rounds aim
/// at when options::mean_cost is 0, counts every record of every epoch.
class stream_history {
public:
    /// A record of estimated cost `cost` was accepted.
    void accept(double cost) noexcept { m_cost_total += cost; }

    /// The long-run mean cost of a record: `option` (options::mean_cost) if set, else the mean
    /// of every record accepted, `records_in` of them in this epoch.
    [[nodiscard]] double mean_cost(double option, std::uint64_t records_in) const noexcept {
        if (option > 0.0) return option;
        const std::uint64_t records = m_earlier.records + records_in;
        return records == 0 ? 0.0 : m_cost_total / static_cast<double>(records);
    }

    /// The epoch counted in `stats` ends: its counts join the earlier epochs', and `stats` starts
    /// afresh.
    void next_epoch(statistics& stats) noexcept {
        m_earlier.records += stats.records_in;
        m_earlier.rounds += stats.windows;
        m_earlier.batches += stats.batches;
        start_epoch(stats);
    }

    [[nodiscard]] const earlier_epochs& earlier() const noexcept { return m_earlier; }

    /// Its part of a saved state: the arrivals' total cost and the earlier epochs' counts.
    struct saved {
        double arrival_cost_total = 0.0;
        earlier_epochs learned;

        template <class Io, class Part>
        static void fields(Io& io, Part& s) {
            io.field("the total arrival cost", s.arrival_cost_total);
            io.field("the earlier epochs' records", s.learned.records);
            io.field("the earlier epochs' rounds", s.learned.rounds);
            io.field("the earlier epochs' batches", s.learned.batches);
        }
        /// (How the earlier epochs' counts relate to this epoch's is the snapshot's to check.)
        void check() const {
            check_saved(arrival_cost_total >= 0.0 && arrival_cost_total < HUGE_VAL,
                        "an invalid total arrival cost");
        }
    };
    void save_into(saved& s) const noexcept {
        s.arrival_cost_total = m_cost_total;
        s.learned = m_earlier;
    }
    void restore_from(const saved& s) noexcept {
        m_cost_total = s.arrival_cost_total;
        m_earlier = s.learned;
    }

private:
    double m_cost_total = 0.0; // every accepted cost, in every epoch
    earlier_epochs m_earlier;
};

} // namespace bcl::detail
