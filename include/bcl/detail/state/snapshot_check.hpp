#pragma once
// Whether a saved state describes a balancer that could exist.

#include <bcl/detail/config.hpp>

#include <bcl/cost_estimator.hpp>
#include <bcl/detail/caps/cap_kinds.hpp>
#include <bcl/detail/number_text.hpp>
#include <bcl/detail/state/snapshot.hpp>
#include <bcl/detail/stats_access.hpp>
#include <bcl/error.hpp>
#include <bcl/options.hpp>
#include <bcl/statistics.hpp>
#include <bcl/validate.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>
#include <variant>
#include <vector>

namespace bcl::detail {

/// A calibration's part against its balancer's counts (calibration_saved::check has checked it
/// alone): `batches` of this epoch (its ledger, within `horizon`), the batches and records of
/// every epoch (what the fit counted), and the `waiting_batches` formed and not yet popped.
inline void check_calibration_counts(const calibration_snapshot& s, std::size_t horizon,
                                     std::uint64_t batches, std::uint64_t all_batches,
                                     std::uint64_t records, std::size_t waiting_batches) {
    const std::size_t n = s.features;
    if (n == 0) return;
    check_saved(s.waiting_sums.size() == waiting_batches * n,
                "calibration fields of the wrong size");
    check_saved(s.counts.feature_records <= records && s.counts.observed <= all_batches,
                "calibration counts that do not fit the balancer's");
    check_saved(s.ledger_state.size() == std::min<std::uint64_t>(batches, horizon),
                "a calibration ledger of the wrong size");
}

inline bool valid_stats(const running_stats& s) noexcept {
    const stats_access::raw r = stats_access::read(s);
    const auto fine = [](double x) { return x >= 0.0 && x < HUGE_VAL; };
    return fine(r.mean) && fine(r.m2) && fine(r.min) && fine(r.max);
}

/// Checks that a snapshot describes a balancer that could exist: valid options; each component's
/// part valid alone (its check()); counts within the buffer's bounds; every record accounted for
/// exactly once; the counters, rounds, batches and arrival positions related as the balancer
/// relates them (each round before finish() forms exactly K batches of B records; only the very
/// last batch may be short; tumbling buffers hold the records since the last round, sliding
/// buffers none past its deadline); statistics that count what the counters say; finite
/// non-negative costs and sums. Anything else is a bcl::error.
inline void check_consistent(const balancer_snapshot& s) {
    validate(s.opt);
    // Each component's part alone, in the format's order; then the parts against each other.
    check_part(part_of<stream_history::saved>(s));
    check_part(part_of<batch_order::saved>(s));
    check_part(part_of<outlier_cap::saved>(s));
    check_part(part_of<heavy_slots::saved>(s));
    check_part(part_of<ready_batches_saved>(s));
    check_part(part_of<record_buffer_saved>(s));
    check_part(part_of<calibration_saved>(s));
    const options& o = s.opt;
    const std::uint64_t b = o.batch_size;
    const std::uint64_t window = b * o.lookahead; // a round's records, before the drain
    const statistics& st = s.stats;
    const std::size_t waiting = s.waiting_batch_costs.size();
    const std::size_t buffered = s.buffer_costs.size();
    const auto text = [](std::uint64_t x) { return std::to_string(x); };

    check_saved(st.records_in <= max_saved_records,
                text(st.records_in) + " records pushed is more than any balancer can reach");
    // The earlier epochs' counts, bounded so that their sums with this epoch's cannot wrap.
    const earlier_epochs& learned = s.learned;
    check_saved(learned.records <= max_saved_records - st.records_in &&
                    learned.rounds <= max_saved_records && learned.batches <= max_saved_records,
                "earlier epochs that counted more than any balancer can reach");
    check_saved(waiting <= o.lookahead,
                text(waiting) + " waiting batches, more than lookahead = " + text(o.lookahead));
    check_saved(s.waiting_records() <= waiting * b &&
                    (waiting == 0 || s.waiting_records() > (waiting - 1) * b),
                text(s.waiting_records()) + " waiting records for " + text(waiting) +
                    " batches of " + text(b));
    check_saved(buffered <= buffer_capacity(o), text(buffered) +
                                                    " buffered records, more than the buffer's " +
                                                    text(buffer_capacity(o)));
    check_saved(st.records_out <= st.records_in && st.records_dropped <= st.records_in &&
                    st.records_in == st.records_out + st.records_dropped + s.pending_records(),
                "it does not account for every record: " + text(st.records_in) + " in, " +
                    text(st.records_out) + " out, " + text(st.records_dropped) + " dropped, " +
                    text(s.pending_records()) + " pending");

    // Rounds and batches. Before finish() every round took exactly K*B records; the drain's
    // rounds take K*B or, the last one, all that is left.
    const std::uint64_t formed = st.records_out + s.waiting_records();
    const std::uint64_t rounds_run = st.windows;
    // (Divisions, not products: the counts are bounded, their products need not be.)
    if (!s.finished) {
        check_saved(formed % window == 0 && rounds_run == formed / window,
                    text(formed) + " records formed into batches in " + text(rounds_run) +
                        " rounds of " + text(window) + " before the input ended");
    } else {
        check_saved(rounds_run == (formed + window - 1) / window,
                    text(formed) + " records formed into batches in " + text(rounds_run) +
                        " rounds of at most " + text(window));
        check_saved(formed % window == 0 || buffered == 0,
                    "a round short of " + text(window) + " records left records in the buffer");
    }
    const bool dropping = s.finished && o.drop_last;
    check_saved(st.records_dropped == (dropping ? st.records_in % b : 0),
                text(st.records_dropped) + " records dropped; drop_last drops the last " +
                    "records_in mod B at finish(), and nothing before");
    const bool short_out = st.records_out % b != 0;
    check_saved(st.batches == st.records_out / b + (short_out ? 1 : 0),
                text(st.batches) + " batches handed out for " + text(st.records_out) + " records");
    check_saved(!short_out || (s.finished && s.pending_records() == 0),
                "the short batch was handed out before the last");
    check_saved(s.waiting_records() % b == 0 || (s.finished && buffered == 0),
                "a short batch is waiting before the last round");

    // Buffered records: arrival positions in order and where the policy keeps them.
    const round_policy policy = make_round_policy(o);
    std::uint64_t previous = 0;
    for (std::size_t i = 0; i < buffered; ++i) {
        const std::uint64_t a = s.buffer_arrivals[i];
        const bool in_order = a < st.records_in && (i == 0 || a > previous);
        const bool in_place = std::visit(
            [&](const auto& rounds) { return rounds.may_hold(a, i, st.windows); }, policy);
        check_saved(in_order && in_place,
                    "an invalid arrival position for buffered record " + text(i));
        previous = a;
    }
    // Every record held is named by its arrival position, and no position twice.
    std::vector<std::uint64_t> held(s.waiting_arrivals);
    held.insert(held.end(), s.buffer_arrivals.begin(), s.buffer_arrivals.end());
    std::sort(held.begin(), held.end());
    check_saved(held.empty() || held.back() < st.records_in,
                "a record held that arrived after the last record pushed");
    check_saved(std::adjacent_find(held.begin(), held.end()) == held.end(),
                "two records held with the same arrival position");
    check_saved(!s.tracks_memory || (s.waiting_batch_memory.size() == waiting &&
                                     s.buffer_memory.size() == buffered),
                "memory estimates for the wrong number of records");
    for (const double m : s.buffer_memory)
        check_saved(m >= 0.0 && m <= max_estimate &&
                        (o.memory_budget <= 0.0 || m <= o.memory_budget),
                    "an invalid memory estimate");
    check_saved(s.last_batch_cost >= 0.0 && s.last_batch_cost < HUGE_VAL,
                "an invalid last batch cost");

    // Statistics: they count what the counters say.
    check_saved(st.records_capped <= st.records_in, "more records capped than pushed");
    check_saved(st.batch_cost.count() == st.records_out / b,
                "batch-cost statistics of " + text(st.batch_cost.count()) + " batches for " +
                    text(st.records_out / b) + " full batches handed out");
    check_saved(st.gap_to_lower_bound.count() <= st.windows, "more gaps than windows");
    check_saved(st.delay_batches.count() == formed, "delay statistics of " +
                                                        text(st.delay_batches.count()) +
                                                        " records for " + text(formed));
    check_saved(st.max_delay_batches <= max_delay_bound(o), "a delay above the delay bound");
    std::uint64_t counted = 0;
    bool each_within = true; // (so the sum cannot wrap around)
    for (const std::uint64_t h : st.delay_histogram) {
        each_within = each_within && h <= formed;
        counted += each_within ? h : 0;
    }
    check_saved(each_within && counted == formed &&
                    (formed == 0 ? st.delay_histogram.empty()
                                 : st.delay_histogram.size() == st.max_delay_batches + 1 &&
                                       st.delay_histogram.back() != 0),
                "a delay histogram that does not match the delays");
    check_saved(valid_stats(st.batch_cost) && valid_stats(st.gap_to_lower_bound) &&
                    valid_stats(st.delay_batches),
                "invalid running statistics");
    check_saved(st.peak_batch_memory >= 0.0 && st.peak_batch_memory < HUGE_VAL,
                "an invalid peak batch memory");
    check_saved(s.heavy_seen <= learned.rounds + st.windows,
                "heavy slots that saw more rounds than ran");
    const std::uint64_t sketched =
        std::visit([&](const auto& kind) { return kind.sketched(learned.records + st.records_in); },
                   make_cap_kind(o.cap));
    check_saved(s.sketch.count() == sketched, "a quantile sketch of " + text(s.sketch.count()) +
                                                  " costs for " + text(sketched) + " records");
    check_calibration_counts(s.calibration, o.calibration.horizon, st.batches,
                             learned.batches + st.batches, learned.records + st.records_in,
                             waiting);
}

/// Throws bcl::error unless the state was saved by a balancer whose estimator gives what this
/// one's does: a memory estimate or none, and as many calibrated features (0: no calibration).
inline void require_same_estimates(const balancer_snapshot& s, bool tracks_memory,
                                   std::size_t features) {
    if (s.tracks_memory != tracks_memory)
        throw error("bcl::balancer: the state was saved by a balancer whose estimator " +
                    std::string(s.tracks_memory ? "had" : "had no") +
                    " memory estimate, unlike this one");
    if (s.calibration.features != features)
        throw error(
            "bcl::balancer: the state was saved by a balancer whose estimator " +
            (s.calibration.features == 0
                 ? std::string("did not calibrate")
                 : "calibrated " + std::to_string(s.calibration.features) + " features") +
            ", unlike this one" +
            (features == 0 ? std::string() : " (" + std::to_string(features) + " features)"));
}

/// A saved state, read back (see read_snapshot) and checked (check_consistent).
[[nodiscard]] inline balancer_snapshot snapshot_from_bytes(std::string_view bytes) {
    balancer_snapshot s = read_snapshot(bytes);
    check_consistent(s);
    return s;
}

// An option's value in a message.
template <class T>
std::string option_text(const T& value) {
    if constexpr (std::is_same_v<T, double>)
        return number_text(value);
    else if constexpr (std::is_same_v<T, bool>)
        return value ? "true" : "false";
    else if constexpr (std::is_enum_v<T>)
        return std::to_string(static_cast<int>(value));
    else
        return std::to_string(value);
}

/// Throws bcl::error naming the first option that matters under `saved` and differs in `given`.
inline void require_same_options(const options& saved, const options& given,
                                 std::string_view who = "bcl::balancer") {
    visit_option_fields([&](const char* name, auto field, auto matters) {
        if (matters(saved) && field(saved) != field(given))
            throw error(std::string(who) + ": the state was saved with options::" + name + " = " +
                        option_text(field(saved)) + ", not " + option_text(field(given)));
    });
}

} // namespace bcl::detail
