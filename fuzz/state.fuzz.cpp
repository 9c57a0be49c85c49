// bcl-fuzz-state: balancer::state::from_bytes on hostile bytes, then a balancer restored from
// whatever it accepts, pushed, popped, finished and drained. Nothing may crash, hang, allocate
// absurdly or throw anything but a bcl::error; a state that reads back must behave like one a
// balancer could have saved (batches of 1..B records, the short one last, each record once,
// everything out after the drain).
//
// The first input byte picks a mode (mod 5):
//   0  the rest of the input is the state's bytes, as they are;
//   1  the same, with a correct checksum appended, so the parser goes past it;
//   2  a valid state is built from the next bytes (options, pushes, pops, finish), then its bytes
//      are mutated by the rest of the input (field-aware: u64 and f64 fields are 8-byte aligned);
//   3  as 2, then the checksum is recomputed, so the consistency checks are what stands in the way;
//   4  a valid state is built, decoded, and its fields changed (alone, or together so that the
//      simple accounting still adds up: records moved from handed out to dropped, arrival
//      positions shifted along with records_in), then encoded again with a correct checksum.
// The two bytes after the mode say how to restore (see fuzz_bytes).

#include "fuzz_support.hpp"
#include "state_checks.hpp"

#include <bcl/balancer.hpp>
#include <bcl/detail/state/snapshot_check.hpp>
#include <bcl/detail/stats_access.hpp>
#include <bcl/error.hpp>
#include <bcl/options.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace {

using namespace bcl_fuzz;

// States whose buffer holds more records than this are only parsed, not restored: a balancer
// reserves its whole buffer when it is constructed (documented), so a state of a balancer with
// millions of buffered records legitimately needs memory for millions of records.
constexpr std::size_t restore_capacity_limit = std::size_t{1} << 16;

// A valid state of a balancer with estimator type E, driven by the input.
template <class Estimator>
std::optional<std::string> build_state(const bcl::options& opt, byte_source& in) {
    using balancer_t = bcl::balancer<rec, Estimator>;
    std::optional<balancer_t> b;
    try {
        b.emplace(make_estimator(static_cast<Estimator*>(nullptr)), opt);
    } catch (const bcl::error&) {
        return std::nullopt;
    }
    const std::size_t pushes = in.byte() * std::size_t{2};
    const std::uint8_t after = in.byte();
    std::uint64_t id = 0;
    for (std::size_t i = 0; i < pushes; ++i) {
        try {
            if (b->can_push()) b->push(pick_record(in, id++));
            if ((after & 1U) != 0 || !b->can_push())
                while (b->pop()) {
                }
        } catch (const bcl::error&) {
        } catch (const estimator_failure&) {
        }
    }
    try {
        if ((after & 2U) != 0) b->finish();
        for (std::size_t k = 0; k < (after >> 2); ++k) (void)b->pop();
    } catch (const bcl::error&) {
    }
    return b->save().to_bytes();
}

// Integers on the edges of what a balancer could have counted.
constexpr std::uint64_t interesting_u64[] = {0,
                                             1,
                                             2,
                                             3,
                                             7,
                                             8,
                                             16,
                                             255,
                                             65536,
                                             std::uint64_t{1} << 26,
                                             (std::uint64_t{1} << 26) + 1,
                                             std::uint64_t{1} << 32,
                                             std::uint64_t{1} << 53,
                                             (std::uint64_t{1} << 62) + 5,
                                             INT64_MAX,
                                             std::uint64_t{1} << 63,
                                             (std::uint64_t{1} << 63) + 1,
                                             UINT64_MAX - 1,
                                             UINT64_MAX,
                                             1000000007};
constexpr std::size_t interesting_count = sizeof interesting_u64 / sizeof interesting_u64[0];

std::uint64_t pick_u64(byte_source& in) {
    const std::uint8_t pick = in.byte();
    return pick < 240 ? interesting_u64[pick % interesting_count] : in.u64();
}

// Field-aware mutations of a state's bytes. Most pick one of the first 48 fields (options,
// counters, statistics), where a changed value reaches furthest.
void mutate(std::string& bytes, byte_source& in) {
    const std::size_t mutations = 1 + in.byte() % 8;
    for (std::size_t m = 0; m < mutations && !bytes.empty(); ++m) {
        const std::uint8_t kind = in.byte();
        const std::size_t fields = std::max<std::size_t>(bytes.size() / 8, 1);
        const std::uint8_t where = in.byte();
        const std::size_t field =
            where < 192 ? where % std::min<std::size_t>(48, fields) : in.u16() % fields;
        const std::size_t at = std::min(field * 8, bytes.size() - 1);
        const auto write_u64 = [&](std::uint64_t v) {
            for (std::size_t i = 0; i < 8 && at + i < bytes.size(); ++i)
                bytes[at + i] = static_cast<char>((v >> (8 * i)) & 0xffU);
        };
        const auto read_u64 = [&] {
            std::uint64_t v = 0;
            for (std::size_t i = 0; i < 8 && at + i < bytes.size(); ++i)
                v |= std::uint64_t{static_cast<unsigned char>(bytes[at + i])} << (8 * i);
            return v;
        };
        switch (kind % 8) {
        case 0:
            bytes[at + in.byte() % 8 % (bytes.size() - at)] = static_cast<char>(in.byte());
            break;
        case 1:
            write_u64(pick_u64(in));
            break;
        case 2:
            write_u64(std::bit_cast<std::uint64_t>(pick_value(in)));
            break;
        case 3: { // a small step up or down
            const auto delta = static_cast<std::int8_t>(in.byte());
            write_u64(read_u64() + static_cast<std::uint64_t>(static_cast<std::int64_t>(delta)));
            break;
        }
        case 4:
            bytes.resize(at);
            break;
        case 5:
            bytes.insert(at, 8, static_cast<char>(in.byte()));
            break;
        case 6:
            bytes.erase(at, 8);
            break;
        default: { // copy one field over another
            const std::size_t from = (in.u16() % fields) * 8;
            if (from + 8 <= bytes.size() && at + 8 <= bytes.size())
                bytes.replace(at, 8, bytes, from, 8);
            break;
        }
        }
        note([&] {
            constexpr const char* kinds[] = {"byte set",     "integer", "number", "step",
                                             "truncated at", "insert",  "erase",  "copy"};
            std::string what =
                std::string("mutation: ") + kinds[kind % 8] + ", field " + std::to_string(field);
            if (at + 8 <= bytes.size()) what += " now " + std::to_string(read_u64());
            return what;
        });
    }
}

// Changes a decoded state's fields: alone, or several together so that the accounting a
// checker would look at first still adds up.
void mutate_fields(bcl::detail::balancer_snapshot& s, byte_source& in) {
    bcl::statistics& st = s.stats;
    const std::size_t changes = 1 + in.byte() % 4;
    for (std::size_t c = 0; c < changes; ++c) {
        const std::uint8_t what = in.byte();
        note([&] { return "field change " + std::to_string(what % 21); });
        switch (what % 21) {
        case 0: { // the heavy slots' round count, and as many remembered records as it implies
            s.heavy_seen = pick_u64(in);
            const double level = pick_value(in);
            const auto remembered = static_cast<std::size_t>(
                std::min<std::uint64_t>(s.heavy_seen, bcl::detail::heavy_slots::rounds_remembered));
            for (std::vector<double>& recent : s.heavy_recent) recent.resize(remembered, level);
            break;
        }
        case 1:
            st.batches = pick_u64(in);
            break;
        case 2:
            st.windows = pick_u64(in);
            break;
        case 3:
            s.rng_state = pick_u64(in);
            break;
        case 4:
            s.finished = !s.finished;
            break;
        case 5:
            s.opt.drop_last = !s.opt.drop_last;
            break;
        case 6: { // records counted as dropped rather than never pushed
            const std::uint64_t d = pick_u64(in) % 64;
            st.records_dropped += d;
            st.records_in += d;
            break;
        }
        case 7: { // d more records arrived (and were handed out) before some buffered record
            const std::uint64_t d = pick_u64(in);
            if (s.buffer_arrivals.empty()) break;
            const std::size_t from = in.byte() % s.buffer_arrivals.size();
            for (std::size_t i = from; i < s.buffer_arrivals.size(); ++i) s.buffer_arrivals[i] += d;
            st.records_in += d;
            st.records_out += d;
            break;
        }
        case 8: { // more records handed out before
            const std::uint64_t d = pick_u64(in);
            st.records_in += d;
            st.records_out += d;
            break;
        }
        case 9:
            st.max_delay_batches = pick_u64(in);
            break;
        case 10:
            if (!st.delay_histogram.empty())
                st.delay_histogram[in.byte() % st.delay_histogram.size()] = pick_u64(in);
            break;
        case 11:
            // Another count of waiting records: some dropped, or copies of the last appended.
            s.waiting_arrivals.resize(static_cast<std::size_t>(pick_u64(in) % 4096),
                                      s.waiting_arrivals.empty() ? 0 : s.waiting_arrivals.back());
            break;
        case 12:
            s.arrival_cost_total = pick_value(in);
            break;
        case 13:
            if (!s.buffer_costs.empty())
                s.buffer_costs[in.byte() % s.buffer_costs.size()] = pick_value(in);
            break;
        case 14:
            if (!s.waiting_batch_costs.empty())
                s.waiting_batch_costs[in.byte() % s.waiting_batch_costs.size()] = pick_value(in);
            break;
        case 15:
            s.quantile_cap = pick_value(in);
            break;
        case 16:
            s.last_batch_cost = pick_value(in);
            break;
        case 17:
            st.records_capped = pick_u64(in);
            break;
        case 18: { // a buffered record taken out of the buffer and counted as handed out
            if (s.buffer_costs.empty()) break;
            const std::size_t i = in.byte() % s.buffer_costs.size();
            s.buffer_costs.erase(s.buffer_costs.begin() + static_cast<std::ptrdiff_t>(i));
            s.buffer_arrivals.erase(s.buffer_arrivals.begin() + static_cast<std::ptrdiff_t>(i));
            if (s.tracks_memory && i < s.buffer_memory.size())
                s.buffer_memory.erase(s.buffer_memory.begin() + static_cast<std::ptrdiff_t>(i));
            ++st.records_out;
            break;
        }
        case 19: // a waiting record said to have arrived elsewhere
            if (!s.waiting_arrivals.empty())
                s.waiting_arrivals[in.byte() % s.waiting_arrivals.size()] = pick_u64(in);
            break;
        default: { // one of the running statistics
            const bcl::detail::stats_access::raw raw{pick_u64(in), pick_value(in), pick_value(in),
                                                     pick_value(in), pick_value(in)};
            const bcl::running_stats value = bcl::detail::stats_access::make(raw);
            const std::uint8_t which = in.byte() % 3;
            if (which == 0)
                st.batch_cost = value;
            else if (which == 1)
                st.gap_to_lower_bound = value;
            else
                st.delay_batches = value;
            break;
        }
        }
    }
}

// Restores a balancer from `bytes` and runs it to the end; checks what must hold for any state
// from_bytes accepts.
template <class Estimator>
void restore_and_drain(const std::string& bytes, const bcl::detail::balancer_snapshot& snap,
                       std::size_t pending_given, std::size_t pushes) {
    using balancer_t = bcl::balancer<rec, Estimator>;
    const std::size_t pending = snap.pending_records();
    std::vector<rec> records(pending_given);
    for (std::size_t i = 0; i < pending_given; ++i)
        records[i] = rec{i, static_cast<double>(i % 7), static_cast<double>(i % 3), 0.0, false};
    std::optional<typename balancer_t::state> st;
    try {
        st.emplace(balancer_t::state::from_bytes(bytes, std::move(records)));
    } catch (const bcl::error&) {
        return;
    }
    require(pending_given == pending, "from_bytes accepted " + std::to_string(pending_given) +
                                          " records for a state saved with " +
                                          std::to_string(pending));
    std::optional<balancer_t> b;
    try {
        b.emplace(make_estimator(static_cast<Estimator*>(nullptr)), snap.opt, std::move(*st));
    } catch (const bcl::error&) {
        return;
    }
    std::vector<std::uint64_t> ids(pending);
    for (std::size_t i = 0; i < pending; ++i) ids[i] = i;
    drain_restored(*b, ids, pending, pushes, 0.0, [](std::span<const rec>) {});
}

void fuzz_bytes(const std::string& bytes, byte_source& in) {
    bcl::detail::balancer_snapshot snap;
    try {
        snap = bcl::detail::snapshot_from_bytes(bytes);
    } catch (const bcl::error& e) {
        note([&] { return std::string("refused: ") + e.what(); });
        return;
    }
    note([&] {
        return "read: " + describe(snap.opt) + ", " + std::to_string(snap.pending_records()) +
               " records pending";
    });
    if (bcl::buffer_capacity(snap.opt) > restore_capacity_limit) return;
    const std::uint8_t how = in.byte();
    std::size_t pending_given = snap.pending_records();
    if ((how & 0x70U) == 0x70U) pending_given += (how & 1U) != 0 ? 1 : static_cast<std::size_t>(-1);
    if (pending_given > snap.pending_records() + 1) pending_given = 0;
    const bool memory = snap.tracks_memory != ((how & 0x80U) != 0 && (how & 0x0eU) == 0);
    const std::size_t pushes = in.byte();
    if (memory)
        restore_and_drain<memory_estimator>(bytes, snap, pending_given, pushes);
    else
        restore_and_drain<plain_estimator>(bytes, snap, pending_given, pushes);
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    byte_source in(std::span<const std::uint8_t>(data, size));
    const std::uint8_t mode = in.byte() % 5;
    // How to restore (see fuzz_bytes), read first so any length of state leaves them alone.
    const std::uint8_t restore_choices[2] = {in.byte(), in.byte()};
    note([&] { return "mode " + std::to_string(mode); });
    // Nothing is caught here: an exception that escapes (anything but a bcl::error, which is
    // caught where it may be thrown) ends in std::terminate at the throw, so the report shows
    // where it came from.
    std::string bytes;
    if (mode < 2) {
        const std::span<const std::uint8_t> rest = in.rest();
        bytes.assign(reinterpret_cast<const char*>(rest.data()), rest.size());
        if (mode == 1) reseal(bytes, false);
    } else {
        bool memory = false;
        bcl::options opt = pick_options(in, memory);
        // Huge max_age values are bcl-fuzz-balancer's business; here they would only make
        // every state large.
        if (opt.max_age > 64) opt.max_age = opt.buffer_windows + opt.max_age % 4;
        note([&] {
            return "built: " + describe(opt) + (memory ? " (with a memory estimate)" : "");
        });
        std::optional<std::string> built =
            memory ? build_state<memory_estimator>(opt, in) : build_state<plain_estimator>(opt, in);
        if (!built) return 0;
        bytes = std::move(*built);
        if (mode == 4) {
            bcl::detail::balancer_snapshot snap;
            try {
                snap = bcl::detail::snapshot_from_bytes(bytes);
            } catch (const bcl::error&) {
                return 0; // a saved state that does not read back: bcl-fuzz-balancer's finding
            }
            mutate_fields(snap, in);
            bytes = bcl::detail::to_bytes(snap);
        } else {
            mutate(bytes, in);
            if (mode == 3) reseal(bytes);
        }
    }
    byte_source choices(restore_choices);
    fuzz_bytes(bytes, choices);
    return 0;
}
