#pragma once
// Everything a balancer needs to continue exactly, except the records themselves, and its
// byte format: one named list of fields per component, which the writer and the reader both
// walk (field_codec.hpp), so each fact is written once and read back in the same place.

#include <bcl/detail/config.hpp>

#include <bcl/detail/calibration/batch_calibration.hpp>
#include <bcl/detail/caps/quantile_sketch.hpp>
#include <bcl/detail/intake/stream_history.hpp>
#include <bcl/detail/split/heavy_slots.hpp>
#include <bcl/detail/state/field_codec.hpp>
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
#include <vector>

namespace bcl::detail {

struct balancer_snapshot {
    options opt;
    std::uint64_t rng_state = 0;
    bool finished = false;
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
    std::vector<double> waiting_batch_costs; // batches partitioned and not yet popped
    /// The arrival positions of their records, which come first in `pending`.
    std::vector<std::uint64_t> waiting_arrivals;
    std::vector<double> buffer_costs; // then the buffer, in arrival order
    std::vector<std::uint64_t> buffer_arrivals;
    calibration_snapshot calibration; // a calibrating balancer's fit and its waiting batches

    [[nodiscard]] std::size_t waiting_records() const noexcept { return waiting_arrivals.size(); }
    [[nodiscard]] std::size_t pending_records() const noexcept {
        return waiting_records() + buffer_costs.size();
    }
};

inline constexpr std::uint64_t snapshot_magic = 0x3174617473'6c6362ULL; // "bclstat1", little-endian
/// 9: one field list per component, the round count once (statistics::windows), the waiting
/// records counted by their arrival positions, parallel sequences one after the other.
inline constexpr std::uint64_t snapshot_version = 9;

// The byte format, after the magic number and the version: the option fields (in the order
// bcl::options lists them), then each component's list below, in this order. Each list is
// walked by a field_writer (for a const snapshot) and by a field_reader; `Io` is either. A count
// the reader takes from the bytes is bounded (length, count); a sequence whose length the fields
// before it fix is its items alone (items with a count).

template <class Io, class Snapshot>
void option_fields(Io& io, Snapshot& s) {
    visit_option_fields([&](const char* name, auto field, auto) { io.field(name, field(s.opt)); });
}

/// The balancer's own: whether the input ended, the last batch's cost, the statistics.
template <class Io, class Snapshot>
void balancer_fields(Io& io, Snapshot& s) {
    io.field("the finished flag", s.finished);
    io.field("the last batch cost", s.last_batch_cost);
    auto& st = s.stats;
    io.field("records_in", st.records_in);
    io.field("records_out", st.records_out);
    io.field("records_dropped", st.records_dropped);
    io.field("records_capped", st.records_capped);
    io.field("peak_batch_memory", st.peak_batch_memory);
    io.field("batches", st.batches);
    io.field("windows", st.windows);
    io.field("batch_cost", st.batch_cost);
    io.field("gap_to_lower_bound", st.gap_to_lower_bound);
    io.field("max_delay_batches", st.max_delay_batches);
    io.field("delay_batches", st.delay_batches);
    io.length("the delay histogram size", st.delay_histogram, max_delay_bound(s.opt) + 1, 8);
    io.items("the delay histogram", st.delay_histogram);
    io.field("the memory flag", s.tracks_memory);
}

/// stream_history: the arrivals' total cost and the earlier epochs' counts.
template <class Io, class Snapshot>
void history_fields(Io& io, Snapshot& s) {
    io.field("the total arrival cost", s.arrival_cost_total);
    io.field("the earlier epochs' records", s.learned.records);
    io.field("the earlier epochs' rounds", s.learned.rounds);
    io.field("the earlier epochs' batches", s.learned.batches);
}

/// batch_order: the random state of a shuffled emission.
template <class Io, class Snapshot>
void order_fields(Io& io, Snapshot& s) {
    io.field("the random state", s.rng_state);
}

/// outlier_cap: a quantile cap's level and its sketch.
template <class Io, class Snapshot>
void cap_fields(Io& io, Snapshot& s) {
    io.field("the quantile cap", s.quantile_cap);
    io.field("the quantile sketch", s.sketch);
}

/// heavy_slots: the full rounds seen and the top records of the last of them.
template <class Io, class Snapshot>
void heavy_slot_fields(Io& io, Snapshot& s) {
    io.field("the heavy slots' round count", s.heavy_seen);
    const auto remembered = static_cast<std::size_t>(
        std::min<std::uint64_t>(s.heavy_seen, heavy_slots::rounds_remembered));
    for (auto& recent : s.heavy_recent) io.items("the heavy slots' records", recent, remembered);
}

/// ready_batches: the batches formed and not yet popped, and their records' arrival positions.
template <class Io, class Snapshot>
void ready_fields(Io& io, Snapshot& s) {
    const std::size_t with_memory = s.tracks_memory ? 2 : 1;
    io.length("the waiting batch count", s.waiting_batch_costs, s.opt.lookahead, 8 * with_memory);
    io.items("the waiting batch costs", s.waiting_batch_costs);
    io.items("the waiting batch memory", s.waiting_batch_memory,
             s.tracks_memory ? s.waiting_batch_costs.size() : 0);
    io.length("the waiting record count", s.waiting_arrivals, s.opt.lookahead * s.opt.batch_size,
              8);
    io.items("the waiting records' arrival positions", s.waiting_arrivals);
}

/// record_buffer: each buffered record's cost, arrival position and memory, in arrival order.
template <class Io, class Snapshot>
void buffer_fields(Io& io, Snapshot& s) {
    const std::size_t with_memory = s.tracks_memory ? 3 : 2;
    io.length("the buffered record count", s.buffer_costs, buffer_capacity(s.opt), 8 * with_memory);
    io.items("the buffered costs", s.buffer_costs);
    io.items("the buffered arrival positions", s.buffer_arrivals, s.buffer_costs.size());
    io.items("the buffered memory", s.buffer_memory, s.tracks_memory ? s.buffer_costs.size() : 0);
}

/// batch_calibration: nothing but a zero feature count for a balancer that does not calibrate.
template <class Io, class Snapshot>
void calibration_fields(Io& io, Snapshot& s) {
    auto& c = s.calibration;
    io.count("the calibration feature count", c.features, max_calibration_features, 0);
    if (c.features == 0) return;
    const std::size_t n = c.features;
    io.items("the calibration fit", c.numbers, calibration_snapshot::number_fields(n));
    calibration_counts::visit(c.counts, [&](const char* name, auto& x) { io.field(name, x); });
    io.items("the calibrated coefficients", c.applied, n);
    io.items("the waiting batches' features", c.waiting_sums, s.waiting_batch_costs.size() * n);
    io.length("the calibration ledger size", c.ledger_state, s.opt.calibration.horizon,
              8 * (n + 1));
    io.items("the calibration ledger", c.ledger_state);
    io.items("the ledger sums", c.ledger_sums, c.ledger_state.size() * n);
}

template <class Io, class Snapshot>
void component_fields(Io& io, Snapshot& s) {
    balancer_fields(io, s);
    history_fields(io, s);
    order_fields(io, s);
    cap_fields(io, s);
    heavy_slot_fields(io, s);
    ready_fields(io, s);
    buffer_fields(io, s);
    calibration_fields(io, s);
}

[[nodiscard]] inline std::string to_bytes(const balancer_snapshot& s) {
    field_writer w;
    w.field("the header", snapshot_magic);
    w.field("the version", snapshot_version);
    option_fields(w, s);
    component_fields(w, s);
    return w.finish();
}

/// Reads what to_bytes wrote. Throws bcl::error for bytes that are truncated, corrupted (the
/// checksum), of another format version, or that hold options that are not valid; whether the
/// rest is consistent is snapshot_from_bytes's to check.
[[nodiscard]] inline balancer_snapshot read_snapshot(std::string_view bytes) {
    field_reader r(bytes);
    std::uint64_t magic = 0;
    r.field("the header", magic);
    if (magic != snapshot_magic) throw error("bcl: these bytes are not a saved balancer state");
    std::uint64_t version = 0;
    r.field("the version", version);
    if (version != snapshot_version)
        throw error("bcl: saved state has format version " + std::to_string(version) +
                    "; this build reads version " + std::to_string(snapshot_version));
    balancer_snapshot s;
    option_fields(r, s);
    validate(s.opt); // bounds every count read below
    component_fields(r, s);
    r.expect_end();
    return s;
}

} // namespace bcl::detail
