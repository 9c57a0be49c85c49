#pragma once
// Everything a balancer needs to continue exactly, except the records themselves, and its
// byte encoding (little-endian, checksummed; the options in the order bcl::options lists them).

#include <bcl/detail/config.hpp>

#include <bcl/detail/calibration/batch_calibration.hpp>
#include <bcl/detail/caps/quantile_sketch.hpp>
#include <bcl/detail/intake/stream_history.hpp>
#include <bcl/detail/split/heavy_slots.hpp>
#include <bcl/detail/state/bytes.hpp>
#include <bcl/detail/stats_access.hpp>
#include <bcl/error.hpp>
#include <bcl/options.hpp>
#include <bcl/statistics.hpp>
#include <bcl/validate.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>
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
    earlier_epochs learned;
    quantile_sketch sketch;
    double quantile_cap = HUGE_VAL; // the quantile cap in force (infinite before warm-up)
    bool tracks_memory = false;     // whether the memory vectors below are meaningful
    std::uint64_t heavy_seen = 0;   // heavy slots: full rounds observed
    std::array<std::vector<double>, heavy_slots::slots> heavy_recent; // their last top records
    std::vector<double> waiting_batch_memory;
    std::vector<double> buffer_memory;
    std::vector<double> waiting_batch_costs;     // batches partitioned and not yet popped
    std::size_t waiting_records = 0;             // their records, which come first in `pending`
    std::vector<std::uint64_t> waiting_arrivals; // and those records' arrival positions
    std::vector<double> buffer_costs;            // then the buffer, in arrival order
    std::vector<std::uint64_t> buffer_arrivals;
    calibration_snapshot calibration; // a calibrating balancer's fit and its waiting batches

    [[nodiscard]] std::size_t pending_records() const noexcept {
        return waiting_records + buffer_costs.size();
    }
};

inline constexpr std::uint64_t snapshot_magic = 0x3174617473'6c6362ULL; // "bclstat1", little-endian
inline constexpr std::uint64_t snapshot_version = 8;

/// The largest records_in a saved state may claim: a balancer pushing a record a nanosecond
/// would need 146 years to reach it, and below it no position or batch index the balancer
/// computes can overflow.
inline constexpr std::uint64_t max_saved_records = std::uint64_t{1} << 62;

inline void check_saved(bool ok, const std::string& what) {
    if (!ok) throw error("bcl: saved state is inconsistent: " + what);
}

// One option field, by its type: counts as u64, flags, numbers as the bits of the double, an
// enumeration as its value (which validate() then checks).
template <class T>
void write_field(byte_writer& w, const T& value) {
    if constexpr (std::is_same_v<T, bool>)
        w.flag(value);
    else if constexpr (std::is_same_v<T, double>)
        w.f64(value);
    else if constexpr (std::is_enum_v<T>)
        w.u64(static_cast<std::uint64_t>(value));
    else
        w.u64(value);
}

template <class T>
void read_field(byte_reader& r, const char* name, T& value) {
    if constexpr (std::is_same_v<T, bool>) {
        value = r.flag(name);
    } else if constexpr (std::is_same_v<T, double>) {
        value = r.f64(name);
    } else if constexpr (std::is_enum_v<T>) {
        const std::uint64_t v = r.u64(name);
        if (v > 255)
            throw error(std::string("bcl: saved state has an unknown ") + name + " " +
                        std::to_string(v));
        value = static_cast<T>(v);
    } else {
        value = static_cast<T>(r.u64(name));
    }
}

inline void write_stats(byte_writer& w, const running_stats& s) {
    const stats_access::raw r = stats_access::read(s);
    w.u64(r.count);
    w.f64(r.mean);
    w.f64(r.m2);
    w.f64(r.min);
    w.f64(r.max);
}

inline running_stats read_stats(byte_reader& r, const char* what) {
    stats_access::raw s;
    s.count = r.u64(what);
    s.mean = r.f64(what);
    s.m2 = r.f64(what);
    s.min = r.f64(what);
    s.max = r.f64(what);
    return stats_access::make(s);
}

inline void write_calibration(byte_writer& w, const calibration_snapshot& c) {
    w.u64(c.features);
    if (c.features == 0) return;
    for (const double x : c.numbers) w.f64(x);
    calibration_counts::visit(c.counts, [&](const char* /*name*/, std::uint64_t x) { w.u64(x); });
    for (const double x : c.applied) w.f64(x);
    for (const double x : c.waiting_sums) w.f64(x);
    w.u64(c.ledger_state.size());
    for (std::size_t i = 0; i < c.ledger_state.size(); ++i) {
        w.u64(c.ledger_state[i]);
        for (std::size_t j = 0; j < c.features; ++j) w.f64(c.ledger_sums[i * c.features + j]);
    }
}

inline calibration_snapshot read_calibration(byte_reader& r, const options& opt,
                                             std::size_t waiting_batches) {
    calibration_snapshot c;
    c.features = r.count("the calibration feature count", max_calibration_features, 0);
    if (c.features == 0) return c;
    const std::size_t n = c.features;
    c.numbers.resize(calibration_snapshot::number_fields(n));
    for (double& x : c.numbers) x = r.f64("the calibration fit");
    calibration_counts::visit(c.counts, [&](const char* name, std::uint64_t& x) {
        x = r.u64((std::string("the calibration count ") + name).c_str());
    });
    c.applied.resize(n);
    for (double& x : c.applied) x = r.f64("the calibrated coefficients");
    c.waiting_sums.resize(waiting_batches * n);
    for (double& x : c.waiting_sums) x = r.f64("the waiting batches' features");
    c.ledger_state.resize(
        r.count("the calibration ledger size", opt.calibration.horizon, 8 * (n + 1)));
    c.ledger_sums.resize(c.ledger_state.size() * n);
    for (std::size_t i = 0; i < c.ledger_state.size(); ++i) {
        c.ledger_state[i] = static_cast<std::uint8_t>(
            std::min<std::uint64_t>(r.u64("the calibration ledger"), 255));
        for (std::size_t j = 0; j < n; ++j) c.ledger_sums[i * n + j] = r.f64("the ledger sums");
    }
    return c;
}

[[nodiscard]] inline std::string to_bytes(const balancer_snapshot& s) {
    byte_writer w;
    w.u64(snapshot_magic);
    w.u64(snapshot_version);
    visit_option_fields([&](const char*, auto field, auto) { write_field(w, field(s.opt)); });
    w.u64(s.rng_state);
    w.flag(s.finished);
    w.u64(s.round);
    w.f64(s.arrival_cost_total);
    w.f64(s.last_batch_cost);
    w.u64(s.learned.records);
    w.u64(s.learned.rounds);
    w.u64(s.learned.batches);
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
    w.u64(s.heavy_seen);
    for (const std::vector<double>& recent : s.heavy_recent)
        for (const double x : recent) w.f64(x);
    w.flag(s.tracks_memory);
    w.u64(s.waiting_batch_costs.size());
    for (std::size_t i = 0; i < s.waiting_batch_costs.size(); ++i) {
        w.f64(s.waiting_batch_costs[i]);
        if (s.tracks_memory) w.f64(s.waiting_batch_memory[i]);
    }
    w.u64(s.waiting_records);
    for (const std::uint64_t a : s.waiting_arrivals) w.u64(a);
    w.u64(s.buffer_costs.size());
    for (std::size_t i = 0; i < s.buffer_costs.size(); ++i) {
        w.f64(s.buffer_costs[i]);
        w.u64(s.buffer_arrivals[i]);
        if (s.tracks_memory) w.f64(s.buffer_memory[i]);
    }
    write_calibration(w, s.calibration);
    return w.finish();
}

/// Reads what to_bytes wrote. Throws bcl::error for bytes that are truncated, corrupted (the
/// checksum), of another format version, or that hold options that are not valid; whether the
/// rest is consistent is snapshot_from_bytes's to check.
[[nodiscard]] inline balancer_snapshot read_snapshot(std::string_view bytes) {
    byte_reader r(bytes);
    if (r.u64("the header") != snapshot_magic)
        throw error("bcl: these bytes are not a saved balancer state");
    const std::uint64_t version = r.u64("the version");
    if (version != snapshot_version)
        throw error("bcl: saved state has format version " + std::to_string(version) +
                    "; this build reads version " + std::to_string(snapshot_version));
    balancer_snapshot s;
    visit_option_fields(
        [&](const char* name, auto field, auto) { read_field(r, name, field(s.opt)); });
    validate(s.opt); // bounds every count read below
    s.rng_state = r.u64("the random state");
    s.finished = r.flag("the finished flag");
    s.round = r.u64("the round counter");
    s.arrival_cost_total = r.f64("the total arrival cost");
    s.last_batch_cost = r.f64("the last batch cost");
    s.learned.records = r.u64("the earlier epochs' records");
    s.learned.rounds = r.u64("the earlier epochs' rounds");
    s.learned.batches = r.u64("the earlier epochs' batches");
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
    s.stats.delay_histogram.resize(
        r.count("the delay histogram size", max_delay_bound(s.opt) + 1, 8));
    for (std::uint64_t& h : s.stats.delay_histogram) h = r.u64("the delay histogram");
    s.quantile_cap = r.f64("the quantile cap");
    const std::uint64_t zeros = r.u64("the sketch's zero count");
    const std::size_t used =
        r.count("the sketch's bucket count", quantile_sketch::bucket_count, 16);
    std::array<std::uint64_t, quantile_sketch::bucket_count> buckets{};
    std::uint64_t sketched = zeros;
    for (std::size_t k = 0; k < used; ++k) {
        const std::size_t index =
            r.count("a sketch bucket index", quantile_sketch::bucket_count - 1, 0);
        buckets[index] = r.u64("a sketch bucket");
        // Bounded one by one, so that their sum (the sketch's count) cannot wrap around.
        check_saved(zeros <= max_saved_records && buckets[index] <= max_saved_records - sketched,
                    "a quantile sketch counting more costs than records");
        sketched += buckets[index];
    }
    s.sketch = quantile_sketch::from_counts(buckets, zeros);
    s.heavy_seen = r.u64("the heavy slots' round count");
    const std::uint64_t remembered =
        std::min<std::uint64_t>(s.heavy_seen, heavy_slots::rounds_remembered);
    for (std::vector<double>& recent : s.heavy_recent) {
        recent.resize(static_cast<std::size_t>(remembered));
        for (double& x : recent) x = r.f64("the heavy slots' records");
    }
    s.tracks_memory = r.flag("the memory flag");
    s.waiting_batch_costs.resize(r.count("the waiting batch count", s.opt.lookahead, 8));
    if (s.tracks_memory) s.waiting_batch_memory.resize(s.waiting_batch_costs.size());
    for (std::size_t i = 0; i < s.waiting_batch_costs.size(); ++i) {
        s.waiting_batch_costs[i] = r.f64("the waiting batch costs");
        if (s.tracks_memory) s.waiting_batch_memory[i] = r.f64("the waiting batch memory");
    }
    s.waiting_records = r.count("the waiting record count", s.opt.lookahead * s.opt.batch_size, 8);
    s.waiting_arrivals.resize(s.waiting_records);
    for (std::uint64_t& a : s.waiting_arrivals) a = r.u64("the waiting records' arrival positions");
    const std::size_t buffered = r.count("the buffered record count", buffer_capacity(s.opt), 16);
    s.buffer_costs.resize(buffered);
    s.buffer_arrivals.resize(buffered);
    if (s.tracks_memory) s.buffer_memory.resize(buffered);
    for (std::size_t i = 0; i < buffered; ++i) {
        s.buffer_costs[i] = r.f64("the buffered costs");
        s.buffer_arrivals[i] = r.u64("the buffered arrival positions");
        if (s.tracks_memory) s.buffer_memory[i] = r.f64("the buffered memory");
    }
    s.calibration = read_calibration(r, s.opt, s.waiting_batch_costs.size());
    r.expect_end();
    return s;
}

} // namespace bcl::detail
