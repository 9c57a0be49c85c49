#pragma once
// Everything a balancer needs to continue exactly, except the records themselves, and its
// byte encoding.

#include <bcl/detail/config.hpp>

#include <bcl/cost_estimator.hpp>
#include <bcl/detail/bytes.hpp>
#include <bcl/error.hpp>
#include <bcl/options.hpp>
#include <bcl/quantile_sketch.hpp>
#include <bcl/statistics.hpp>

#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace bcl::detail {

struct balancer_snapshot {
    options opt;
    std::uint64_t rng_state = 0;
    bool finished = false;
    std::uint64_t round = 0;
    double arrival_cost_total = 0.0;
    double last_batch_cost = 0.0;
    statistics stats;
    quantile_sketch sketch;
    double quantile_cap = HUGE_VAL;          // the quantile cap in force (infinite before warm-up)
    bool tracks_memory = false;              // whether the memory vectors below are meaningful
    std::vector<double> waiting_batch_memory;
    std::vector<double> buffer_memory;
    std::vector<double> waiting_batch_costs; // batches partitioned and not yet popped
    std::size_t waiting_records = 0;         // their records, which come first in `pending`
    std::vector<double> buffer_costs;        // then the buffer, in arrival order
    std::vector<std::uint64_t> buffer_arrivals;

    [[nodiscard]] std::size_t pending_records() const noexcept {
        return waiting_records + buffer_costs.size();
    }
};

inline constexpr std::uint64_t snapshot_magic = 0x3174617473'6c6362ULL; // "bclstat1", little-endian
inline constexpr std::uint64_t snapshot_version = 3;

inline void write_stats(byte_writer& w, const running_stats& s) {
    const running_stats::raw_state r = s.raw();
    w.u64(r.count);
    w.f64(r.mean);
    w.f64(r.m2);
    w.f64(r.min);
    w.f64(r.max);
}

inline running_stats read_stats(byte_reader& r, const char* what) {
    running_stats::raw_state s;
    s.count = r.u64(what);
    s.mean = r.f64(what);
    s.m2 = r.f64(what);
    s.min = r.f64(what);
    s.max = r.f64(what);
    return running_stats::from_raw(s);
}

[[nodiscard]] inline std::string to_bytes(const balancer_snapshot& s) {
    byte_writer w;
    w.u64(snapshot_magic);
    w.u64(snapshot_version);
    w.u64(s.opt.batch_size);
    w.u64(s.opt.lookahead);
    w.flag(s.opt.drop_last);
    w.u64(s.opt.seed);
    w.flag(s.opt.shuffle_packs);
    w.u64(static_cast<std::uint64_t>(s.opt.policy));
    w.u64(s.opt.buffer_windows);
    w.u64(s.opt.max_age);
    w.u64(static_cast<std::uint64_t>(s.opt.cap.kind));
    w.f64(s.opt.cap.value);
    w.f64(s.opt.cap.quantile);
    w.u64(s.opt.cap.warmup);
    w.u64(static_cast<std::uint64_t>(s.opt.cap.action));
    w.f64(s.opt.memory_budget);
    w.flag(s.opt.largest_first);
    w.u64(s.rng_state);
    w.flag(s.finished);
    w.u64(s.round);
    w.f64(s.arrival_cost_total);
    w.f64(s.last_batch_cost);
    w.u64(s.stats.records_in);
    w.u64(s.stats.records_out);
    w.u64(s.stats.records_dropped);
    w.u64(s.stats.records_capped);
    w.f64(s.stats.peak_batch_memory);
    w.u64(s.stats.batches);
    w.u64(s.stats.windows);
    write_stats(w, s.stats.batch_cost);
    write_stats(w, s.stats.gap_to_lower_bound);
    w.u64(s.stats.max_delay_batches);
    write_stats(w, s.stats.delay_batches);
    w.u64(s.stats.delay_histogram.size());
    for (const std::uint64_t h : s.stats.delay_histogram) w.u64(h);
    w.f64(s.quantile_cap);
    w.u64(s.sketch.zeros());
    std::uint64_t used = 0;
    for (const std::uint64_t b : s.sketch.buckets()) used += b != 0 ? 1 : 0;
    w.u64(used);
    for (std::size_t i = 0; i < quantile_sketch::bucket_count; ++i)
        if (s.sketch.buckets()[i] != 0) {
            w.u64(i);
            w.u64(s.sketch.buckets()[i]);
        }
    w.flag(s.tracks_memory);
    w.u64(s.waiting_batch_costs.size());
    for (std::size_t i = 0; i < s.waiting_batch_costs.size(); ++i) {
        w.f64(s.waiting_batch_costs[i]);
        if (s.tracks_memory) w.f64(s.waiting_batch_memory[i]);
    }
    w.u64(s.waiting_records);
    w.u64(s.buffer_costs.size());
    for (std::size_t i = 0; i < s.buffer_costs.size(); ++i) {
        w.f64(s.buffer_costs[i]);
        w.u64(s.buffer_arrivals[i]);
        if (s.tracks_memory) w.f64(s.buffer_memory[i]);
    }
    return w.finish();
}

/// The largest records_in a saved state may claim: a balancer pushing a record a nanosecond
/// would need 146 years to reach it, and below it no position or batch index the balancer
/// computes can overflow.
inline constexpr std::uint64_t max_saved_records = std::uint64_t{1} << 62;

inline void check_saved(bool ok, const std::string& what) {
    if (!ok) throw error("bcl: saved state is inconsistent: " + what);
}

inline bool valid_stats(const running_stats& s) noexcept {
    const running_stats::raw_state r = s.raw();
    const auto fine = [](double x) { return x >= 0.0 && x < HUGE_VAL; };
    return fine(r.mean) && fine(r.m2) && fine(r.min) && fine(r.max);
}

/// Checks that a snapshot describes a balancer that could exist: valid options; counts within the
/// buffer's bounds; every record accounted for exactly once; the counters, rounds, batches and
/// arrival positions related as the balancer relates them (each round before finish() forms
/// exactly K batches of B records; only the very last batch may be short; tumbling buffers hold
/// the records since the last round, sliding buffers none past its deadline); statistics that
/// count what the counters say; finite non-negative costs and sums. Anything else is a bcl::error.
inline void check_consistent(const balancer_snapshot& s) {
    validate(s.opt);
    const options& o = s.opt;
    const std::uint64_t b = o.batch_size;
    const std::uint64_t window = b * o.lookahead;
    const statistics& st = s.stats;
    const std::size_t waiting = s.waiting_batch_costs.size();
    const std::size_t buffered = s.buffer_costs.size();
    const auto text = [](std::uint64_t x) { return std::to_string(x); };

    check_saved(st.records_in <= max_saved_records,
                text(st.records_in) + " records pushed is more than any balancer can reach");
    check_saved(waiting <= o.lookahead, text(waiting) + " waiting batches, more than lookahead = " +
                                            text(o.lookahead));
    check_saved(s.waiting_records <= waiting * b &&
                    (waiting == 0 || s.waiting_records > (waiting - 1) * b),
                text(s.waiting_records) + " waiting records for " + text(waiting) +
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
    const std::uint64_t formed = st.records_out + s.waiting_records;
    check_saved(st.windows == s.round, text(st.windows) + " windows in " + text(s.round) + " rounds");
    // (Divisions, not products: the counts are bounded, their products need not be.)
    if (!s.finished) {
        check_saved(formed % window == 0 && s.round == formed / window,
                    text(formed) + " records formed into batches in " + text(s.round) +
                        " rounds of " + text(window) + " before the input ended");
    } else {
        check_saved(s.round == (formed + window - 1) / window,
                    text(formed) + " records formed into batches in " + text(s.round) +
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
    check_saved(s.waiting_records % b == 0 || (s.finished && buffered == 0),
                "a short batch is waiting before the last round");

    // Buffered records: valid costs, arrival positions in order and where the policy keeps them.
    const std::uint64_t per_round = window;
    const std::uint64_t capacity = buffer_capacity(o);
    std::uint64_t previous = 0;
    for (std::size_t i = 0; i < buffered; ++i) {
        const double c = s.buffer_costs[i];
        check_saved(c >= 0.0 && c <= max_estimate, "an invalid cost for buffered record " + text(i));
        const std::uint64_t a = s.buffer_arrivals[i];
        const bool in_order = a < st.records_in && (i == 0 || a > previous);
        bool in_place = true;
        if (o.policy == lookahead_policy::tumbling) {
            in_place = a == s.round * window + i; // the records pushed since the last round
        } else {
            const std::uint64_t first_round = a < capacity ? 0 : (a - capacity) / per_round + 1;
            in_place = first_round + o.max_age >= s.round; // not past its deadline
        }
        check_saved(in_order && in_place, "an invalid arrival position for buffered record " + text(i));
        previous = a;
    }
    for (const double c : s.waiting_batch_costs)
        check_saved(c >= 0.0 && c < HUGE_VAL, "an invalid batch cost");
    check_saved(!s.tracks_memory || (s.waiting_batch_memory.size() == waiting &&
                                     s.buffer_memory.size() == buffered),
                "memory estimates for the wrong number of records");
    for (const double m : s.buffer_memory)
        check_saved(m >= 0.0 && m <= max_estimate && (o.memory_budget <= 0.0 || m <= o.memory_budget),
                    "an invalid memory estimate");
    for (const double m : s.waiting_batch_memory)
        check_saved(m >= 0.0 && m < HUGE_VAL, "an invalid batch memory");
    check_saved(s.arrival_cost_total >= 0.0 && s.arrival_cost_total < HUGE_VAL,
                "an invalid total arrival cost");
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
    check_saved(each_within && counted == formed && (formed == 0 ? st.delay_histogram.empty()
                                                  : st.delay_histogram.size() ==
                                                            st.max_delay_batches + 1 &&
                                                        st.delay_histogram.back() != 0),
                "a delay histogram that does not match the delays");
    check_saved(valid_stats(st.batch_cost) && valid_stats(st.gap_to_lower_bound) &&
                    valid_stats(st.delay_batches),
                "invalid running statistics");
    check_saved(st.peak_batch_memory >= 0.0 && st.peak_batch_memory < HUGE_VAL,
                "an invalid peak batch memory");
    check_saved(s.quantile_cap >= 0.0, "an invalid quantile cap");
    check_saved(s.sketch.count() == (o.cap.kind == cap_kind::quantile ? st.records_in : 0),
                "a quantile sketch of " + text(s.sketch.count()) + " costs for " +
                    text(st.records_in) + " records");
}

[[nodiscard]] inline balancer_snapshot snapshot_from_bytes(std::string_view bytes) {
    byte_reader r(bytes);
    if (r.u64("the header") != snapshot_magic)
        throw error("bcl: these bytes are not a saved balancer state");
    const std::uint64_t version = r.u64("the version");
    if (version != snapshot_version)
        throw error("bcl: saved state has format version " + std::to_string(version) +
                    "; this build reads version " + std::to_string(snapshot_version));
    balancer_snapshot s;
    s.opt.batch_size = static_cast<std::size_t>(r.u64("batch_size"));
    s.opt.lookahead = static_cast<std::size_t>(r.u64("lookahead"));
    s.opt.drop_last = r.flag("drop_last");
    s.opt.seed = r.u64("seed");
    s.opt.shuffle_packs = r.flag("shuffle_packs");
    const std::uint64_t policy = r.u64("policy");
    if (policy > static_cast<std::uint64_t>(lookahead_policy::sliding))
        throw error("bcl: saved state has an unknown policy " + std::to_string(policy));
    s.opt.policy = static_cast<lookahead_policy>(policy);
    s.opt.buffer_windows = static_cast<std::size_t>(r.u64("buffer_windows"));
    s.opt.max_age = static_cast<std::size_t>(r.u64("max_age"));
    const std::uint64_t cap_kind_value = r.u64("cap.kind");
    if (cap_kind_value > static_cast<std::uint64_t>(cap_kind::quantile))
        throw error("bcl: saved state has an unknown cap kind " + std::to_string(cap_kind_value));
    s.opt.cap.kind = static_cast<cap_kind>(cap_kind_value);
    s.opt.cap.value = r.f64("cap.value");
    s.opt.cap.quantile = r.f64("cap.quantile");
    s.opt.cap.warmup = static_cast<std::size_t>(r.u64("cap.warmup"));
    const std::uint64_t cap_action_value = r.u64("cap.action");
    if (cap_action_value > static_cast<std::uint64_t>(cap_action::truncate))
        throw error("bcl: saved state has an unknown cap action " + std::to_string(cap_action_value));
    s.opt.cap.action = static_cast<cap_action>(cap_action_value);
    s.opt.memory_budget = r.f64("memory_budget");
    s.opt.largest_first = r.flag("largest_first");
    validate(s.opt); // bounds every count read below
    s.rng_state = r.u64("the random state");
    s.finished = r.flag("the finished flag");
    s.round = r.u64("the round counter");
    s.arrival_cost_total = r.f64("the total arrival cost");
    s.last_batch_cost = r.f64("the last batch cost");
    s.stats.records_in = r.u64("records_in");
    s.stats.records_out = r.u64("records_out");
    s.stats.records_dropped = r.u64("records_dropped");
    s.stats.records_capped = r.u64("records_capped");
    s.stats.peak_batch_memory = r.f64("peak_batch_memory");
    s.stats.batches = r.u64("batches");
    s.stats.windows = r.u64("windows");
    s.stats.batch_cost = read_stats(r, "batch_cost");
    s.stats.gap_to_lower_bound = read_stats(r, "gap_to_lower_bound");
    s.stats.max_delay_batches = r.u64("max_delay_batches");
    s.stats.delay_batches = read_stats(r, "delay_batches");
    s.stats.delay_histogram.resize(r.count("the delay histogram size", max_delay_bound(s.opt) + 1, 8));
    for (std::uint64_t& h : s.stats.delay_histogram) h = r.u64("the delay histogram");
    s.quantile_cap = r.f64("the quantile cap");
    const std::uint64_t zeros = r.u64("the sketch's zero count");
    const std::size_t used = r.count("the sketch's bucket count", quantile_sketch::bucket_count, 16);
    std::array<std::uint64_t, quantile_sketch::bucket_count> buckets{};
    std::uint64_t sketched = zeros;
    for (std::size_t k = 0; k < used; ++k) {
        const std::size_t index = r.count("a sketch bucket index", quantile_sketch::bucket_count - 1, 0);
        buckets[index] = r.u64("a sketch bucket");
        // Bounded one by one, so that their sum (the sketch's count) cannot wrap around.
        check_saved(zeros <= max_saved_records && buckets[index] <= max_saved_records - sketched,
                    "a quantile sketch counting more costs than records");
        sketched += buckets[index];
    }
    s.sketch = quantile_sketch::from_counts(buckets, zeros);
    s.tracks_memory = r.flag("the memory flag");
    s.waiting_batch_costs.resize(r.count("the waiting batch count", s.opt.lookahead, 8));
    if (s.tracks_memory) s.waiting_batch_memory.resize(s.waiting_batch_costs.size());
    for (std::size_t i = 0; i < s.waiting_batch_costs.size(); ++i) {
        s.waiting_batch_costs[i] = r.f64("the waiting batch costs");
        if (s.tracks_memory) s.waiting_batch_memory[i] = r.f64("the waiting batch memory");
    }
    s.waiting_records = r.count("the waiting record count", s.opt.lookahead * s.opt.batch_size, 0);
    const std::size_t buffered = r.count("the buffered record count", buffer_capacity(s.opt), 16);
    s.buffer_costs.resize(buffered);
    s.buffer_arrivals.resize(buffered);
    if (s.tracks_memory) s.buffer_memory.resize(buffered);
    for (std::size_t i = 0; i < buffered; ++i) {
        s.buffer_costs[i] = r.f64("the buffered costs");
        s.buffer_arrivals[i] = r.u64("the buffered arrival positions");
        if (s.tracks_memory) s.buffer_memory[i] = r.f64("the buffered memory");
    }
    r.expect_end();
    check_consistent(s);
    return s;
}

} // namespace bcl::detail
