#pragma once
// The sliding lookahead policy: a buffer of several windows, each round chosen toward the
// stream's long-run mean batch cost, under a deadline for every record.

#include <bcl/detail/config.hpp>

#include <bcl/detail/rounds/round_settings.hpp>
#include <bcl/error.hpp>
#include <bcl/partition/detail/target_selection.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace bcl::detail {

/// Sliding rounds. The buffer holds buffer_windows * K * B records. Each round takes the records
/// whose deadline has come, then picks the rest so the K batches' total is as close as possible
/// to K times the long-run mean batch cost of the arrivals, and the partitioner splits them. A
/// record first in the buffer at round r0 leaves by round r0 + max_age, so it waits at most
/// (max_age + 1) * K - 1 batches.
class sliding_rounds {
public:
    /// Its name in options::policy's spelling (bcl::policy_names), and what it does, in a line.
    static constexpr std::string_view name = "sliding";
    static constexpr std::string_view summary =
        "a buffer of several windows; each round balances toward the stream's long-run mean, "
        "records past max_age first";

    /// The share of the buffer's surplus over the long-run mean that a round gives back (see
    /// round_target). 0.03 measured best over the bundled workloads (docs/policies.md).
    static constexpr double surplus_feedback = 0.03;

    explicit sliding_rounds(round_settings s) : settings(s) {}

    round_settings settings;

    [[nodiscard]] std::size_t capacity() const noexcept {
        return settings.buffer_windows * settings.window();
    }
    [[nodiscard]] std::size_t max_delay() const noexcept {
        return (settings.max_age + 1) * settings.lookahead - 1;
    }

    /// Throws bcl::error naming the first sliding option of `s` that is out of range: a buffer
    /// above `max_buffer` records, a delay bound above `max_delay` batches. The window (B * K) is
    /// already known to be valid.
    static void validate(const round_settings& s, std::size_t max_buffer, std::size_t max_delay) {
        if (s.buffer_windows == 0)
            throw error("bcl::options::buffer_windows must be at least 1 (got 0)");
        if (s.buffer_windows > max_buffer / s.window())
            throw error("bcl::options: buffer_windows * batch_size * lookahead = " +
                        std::to_string(s.buffer_windows) + " * " + std::to_string(s.batch_size) +
                        " * " + std::to_string(s.lookahead) + " exceeds the largest buffer of " +
                        std::to_string(max_buffer) + " records");
        // buffer_windows >= 1 here, so `buffer_windows - 1` cannot wrap (`max_age + 1` could).
        if (s.max_age < s.buffer_windows - 1)
            throw error("bcl::options::max_age must be at least buffer_windows - 1 = " +
                        std::to_string(s.buffer_windows - 1) + " (got " +
                        std::to_string(s.max_age) +
                        "): a full buffer needs that many rounds to empty");
        if (s.max_age >= max_delay / s.lookahead)
            throw error("bcl::options::max_age is too large (" + std::to_string(s.max_age) +
                        "): (max_age + 1) * lookahead must be at most " +
                        std::to_string(max_delay) + " batches");
    }

    void reserve(std::size_t buffer) { m_selector.reserve(buffer); }

    /// Whether a saved buffer could hold a record of arrival `arrival` after `round` rounds: not
    /// past its deadline (a record at its deadline is forced out in that round).
    [[nodiscard]] bool may_hold(std::uint64_t arrival, std::size_t /*slot*/,
                                std::uint64_t round) const noexcept {
        return first_round(arrival) + settings.max_age >= round;
    }

    /// Marks the `in.take` records of the round in `chosen`: the due ones, and the rest toward
    /// round_target.
    void choose(const round_inputs& in, std::span<std::uint8_t> chosen) {
        m_selector(in.costs, records_due(in), in.take, round_target(in), chosen);
    }

    /// A record's first round: 0 for the first `capacity` arrivals, then one more per K*B.
    [[nodiscard]] std::uint64_t first_round(std::uint64_t arrival) const noexcept {
        const std::uint64_t held = capacity();
        return arrival < held ? 0 : (arrival - held) / settings.window() + 1;
    }

    /// How many of the oldest buffered records this round must take (bcl::stage_balancer's
    /// rounds keep the same deadlines).
    ///
    /// Earliest deadline first: a record first in the buffer at round r0 must leave by round
    /// r0 + max_age. The buffer is in arrival order, so deadlines never decrease along it, and
    /// this round must take enough of the oldest records that every later deadline can still be
    /// met at K*B records per round: max over positions p of (p + 1) - (deadline_p - now) * K*B.
    /// The options guarantee this never exceeds K*B.
    [[nodiscard]] std::size_t records_due(const round_inputs& in) const noexcept {
        const std::uint64_t per_round = settings.window();
        // Arrivals only grow along the buffer, so the records of one first round are contiguous,
        // and within them (p + 1) - (deadline - now) * K*B is largest at the last: one binary
        // search per first round present (a handful) instead of a step per record. Unsigned
        // throughout: a term below zero asks for nothing and is skipped, never computed.
        std::uint64_t due = 0;
        const auto begin = in.arrivals.begin();
        const auto end = in.arrivals.end();
        for (auto group = begin; group != end;) {
            const std::uint64_t first = first_round(*group);
            group = std::lower_bound(group, end, capacity() + first * per_round);
            const auto last = static_cast<std::uint64_t>(group - begin); // p + 1 of its last
            const std::uint64_t deadline = first + settings.max_age;
            const std::uint64_t rounds_left = deadline > in.round ? deadline - in.round : 0;
            if (rounds_left <= last / per_round)
                due = std::max(due, last - rounds_left * per_round);
        }
        return static_cast<std::size_t>(std::min<std::uint64_t>(due, in.take));
    }

private:
    // The total cost the round's records should have: `take` times the long-run mean cost of
    // arrivals, plus a fraction of what the buffer holds above (or below) that mean. Without that
    // feedback the buffer's surplus is a random walk (each round removes exactly the mean,
    // arrivals add the mean plus noise) until it can no longer meet the target, and the final
    // drain pays for all of it at once. Once the input has ended the buffer is all that is left,
    // so its surplus is spread evenly over the remaining rounds (each takes its share of what is
    // held) rather than left to the last.
    [[nodiscard]] static double round_target(const round_inputs& in) noexcept {
        // Four running sums, so the adds do not each wait for the previous one: the buffer holds
        // two windows or more, and a single chain of adds was a visible part of a round.
        double lane[4] = {0.0, 0.0, 0.0, 0.0};
        std::size_t i = 0;
        for (; i + 4 <= in.costs.size(); i += 4)
            for (std::size_t l = 0; l < 4; ++l) lane[l] += in.costs[i + l];
        for (; i < in.costs.size(); ++i) lane[0] += in.costs[i];
        const double held = (lane[0] + lane[1]) + (lane[2] + lane[3]);
        const auto held_records = static_cast<double>(in.costs.size());
        if (in.finished) return held * static_cast<double>(in.take) / held_records;
        const double surplus = held - in.arrival_mean * held_records;
        return in.arrival_mean * static_cast<double>(in.take) + surplus_feedback * surplus;
    }

    target_selector m_selector;
};

} // namespace bcl::detail
