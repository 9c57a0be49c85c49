#pragma once
// Everything a balancer needs to continue exactly, except the records themselves, and its
// byte format. Each component owns its part (the members, their field list and the checks of
// that part alone, in its own header); the snapshot is those parts and the balancer's own, and
// the format walks them in a fixed order, the writer and the reader through the same lists
// (field_codec.hpp), so each fact is written once and read back in the same place.

#include <bcl/detail/config.hpp>

#include <bcl/detail/calibration/batch_calibration.hpp>
#include <bcl/detail/emission/batch_order.hpp>
#include <bcl/detail/emission/ready_batches.hpp>
#include <bcl/detail/intake/outlier_cap.hpp>
#include <bcl/detail/intake/record_buffer.hpp>
#include <bcl/detail/intake/stream_history.hpp>
#include <bcl/detail/saved_part.hpp>
#include <bcl/detail/split/heavy_slots.hpp>
#include <bcl/detail/state/field_codec.hpp>
#include <bcl/error.hpp>
#include <bcl/options.hpp>
#include <bcl/statistics.hpp>
#include <bcl/validate.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace bcl::detail {

/// The balancer's own part: its options (written first, see option_fields), whether the input
/// ended, the last batch's cost, the statistics, and whether its estimator gives memory
/// estimates (whether the parts' memory sequences are meaningful).
struct balancer_saved {
    options opt;
    bool finished = false;
    double last_batch_cost = 0.0;
    statistics stats; // stats.windows counts the rounds run this epoch
    bool tracks_memory = false;

    template <class Io, class Part>
    static void fields(Io& io, Part& s) {
        io.field("the finished flag", s.finished);
        io.field("the last batch cost", s.last_batch_cost);
        auto& st = s.stats;
        statistics_fields(st, [&io](const char* name, auto& field) { io.field(name, field); });
        io.length("the delay histogram size", st.delay_histogram, max_delay_bound(s.opt) + 1, 8);
        io.items("the delay histogram", st.delay_histogram);
        io.field("the memory flag", s.tracks_memory);
    }
};

/// A saved balancer: its own part and each component's, whose members it inherits (so they
/// are named apart). A component's part is `saved` in its header.
struct balancer_snapshot : balancer_saved,
                           stream_history::saved,
                           batch_order::saved,
                           outlier_cap::saved,
                           heavy_slots::saved,
                           ready_batches_saved,
                           record_buffer_saved,
                           calibration_saved {
    /// The records it holds: the waiting batches' (ready_batches_saved::waiting_records), then
    /// the buffer's.
    [[nodiscard]] std::size_t pending_records() const noexcept {
        return waiting_records() + buffer_costs.size();
    }
};

inline constexpr std::uint64_t snapshot_magic = 0x3174617473'6c6362ULL; // "bclstat1", little-endian
/// 9: one field list per component, the round count once (statistics::windows), the waiting
/// records counted by their arrival positions, parallel sequences one after the other.
inline constexpr std::uint64_t snapshot_version = 9;

// The byte format, after the magic number and the version: the option fields (in the order
// bcl::options lists them), then each part's field list, in component_fields' order. Each list
// is walked by a field_writer (for a const snapshot) and by a field_reader; `Io` is either. A
// count the reader takes from the bytes is bounded (length, count); a sequence whose length the
// fields before it fix is its items alone (items with a count).

template <class Io, class Snapshot>
void option_fields(Io& io, Snapshot& s) {
    visit_option_fields([&](const char* name, auto field, auto) { io.field(name, field(s.opt)); });
}

/// The parts after the options, in the format's order; what bounds a part's counts comes from
/// the options and from the parts before it.
template <class Io, class Snapshot>
void component_fields(Io& io, Snapshot& s) {
    balancer_saved::fields(io, part_of<balancer_saved>(s));
    stream_history::saved::fields(io, part_of<stream_history::saved>(s));
    batch_order::saved::fields(io, part_of<batch_order::saved>(s));
    outlier_cap::saved::fields(io, part_of<outlier_cap::saved>(s));
    heavy_slots::saved::fields(io, part_of<heavy_slots::saved>(s));
    ready_batches_saved::fields(io, part_of<ready_batches_saved>(s), s.opt.lookahead,
                                s.opt.batch_size, s.tracks_memory);
    record_buffer_saved::fields(io, part_of<record_buffer_saved>(s), buffer_capacity(s.opt),
                                s.tracks_memory);
    calibration_saved::fields(io, part_of<calibration_saved>(s), s.opt.calibration.horizon,
                              s.waiting_batch_costs.size());
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
