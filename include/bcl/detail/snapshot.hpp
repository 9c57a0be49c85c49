#pragma once
// Everything a balancer needs to continue exactly, except the records themselves, and its
// byte encoding.

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
inline constexpr std::uint64_t snapshot_version = 2;

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

/// Checks that a snapshot is one a balancer could have produced: valid options, counts within
/// the buffer's bounds, every record accounted for exactly once, finite non-negative costs.
inline void check_consistent(const balancer_snapshot& s) {
    validate(s.opt);
    const std::size_t b = s.opt.batch_size;
    const std::size_t waiting = s.waiting_batch_costs.size();
    if (waiting > s.opt.lookahead)
        throw error("bcl: saved state has " + std::to_string(waiting) +
                    " waiting batches, more than lookahead = " + std::to_string(s.opt.lookahead));
    if (s.waiting_records > waiting * b || (waiting > 0 && s.waiting_records <= (waiting - 1) * b))
        throw error("bcl: saved state has " + std::to_string(s.waiting_records) +
                    " waiting records for " + std::to_string(waiting) + " batches of " +
                    std::to_string(b));
    if (s.buffer_costs.size() > buffer_capacity(s.opt))
        throw error("bcl: saved state holds " + std::to_string(s.buffer_costs.size()) +
                    " buffered records, more than the buffer's " +
                    std::to_string(buffer_capacity(s.opt)));
    const statistics& st = s.stats;
    if (st.records_in != st.records_out + st.records_dropped + s.pending_records())
        throw error("bcl: saved state does not account for every record: " +
                    std::to_string(st.records_in) + " in, " + std::to_string(st.records_out) +
                    " out, " + std::to_string(st.records_dropped) + " dropped, " +
                    std::to_string(s.pending_records()) + " pending");
    if (st.delay_histogram.size() != max_delay_bound(s.opt) + 1)
        throw error("bcl: saved state has a delay histogram of the wrong size");
    std::uint64_t previous = 0;
    for (std::size_t i = 0; i < s.buffer_costs.size(); ++i) {
        const double c = s.buffer_costs[i];
        if (!std::isfinite(c) || c < 0.0)
            throw error("bcl: saved state has an invalid cost for buffered record " + std::to_string(i));
        const std::uint64_t a = s.buffer_arrivals[i];
        if (a >= st.records_in || (i > 0 && a <= previous))
            throw error("bcl: saved state has an invalid arrival position for buffered record " +
                        std::to_string(i));
        previous = a;
    }
    for (const double c : s.waiting_batch_costs)
        if (!std::isfinite(c) || c < 0.0) throw error("bcl: saved state has an invalid batch cost");
    if (s.tracks_memory && (s.waiting_batch_memory.size() != waiting ||
                            s.buffer_memory.size() != s.buffer_costs.size()))
        throw error("bcl: saved state has memory estimates for the wrong number of records");
    for (const double m : s.buffer_memory)
        if (!std::isfinite(m) || m < 0.0 || (s.opt.memory_budget > 0.0 && m > s.opt.memory_budget))
            throw error("bcl: saved state has an invalid memory estimate");
    if (!std::isfinite(s.arrival_cost_total) || s.arrival_cost_total < 0.0)
        throw error("bcl: saved state has an invalid total arrival cost");
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
    if (!(s.quantile_cap >= 0.0)) throw error("bcl: saved state has an invalid quantile cap");
    const std::uint64_t zeros = r.u64("the sketch's zero count");
    const std::size_t used = r.count("the sketch's bucket count", quantile_sketch::bucket_count, 16);
    std::array<std::uint64_t, quantile_sketch::bucket_count> buckets{};
    for (std::size_t k = 0; k < used; ++k) {
        const std::size_t index = r.count("a sketch bucket index", quantile_sketch::bucket_count - 1, 0);
        buckets[index] = r.u64("a sketch bucket");
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
