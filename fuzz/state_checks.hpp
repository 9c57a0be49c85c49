#pragma once
// What the fuzz targets check about saved states: which parts of two differ (for a report), and
// what must hold for a balancer restored from any state from_bytes accepts (bcl-fuzz-state, and
// bcl-fuzz-calibration's restores of corrupted states).

#include "fuzz_support.hpp"

#include <bcl/detail/state/snapshot_check.hpp>
#include <bcl/error.hpp>

#include <bit>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace bcl_fuzz {

/// Names the parts of two saved states that differ, for the report.
inline std::string first_difference(const std::string& mine, const std::string& theirs) {
    bcl::detail::balancer_snapshot a;
    bcl::detail::balancer_snapshot b;
    try {
        a = bcl::detail::snapshot_from_bytes(mine);
    } catch (const bcl::error& e) {
        return std::string("the subject's state does not even read back: ") + e.what();
    }
    try {
        b = bcl::detail::snapshot_from_bytes(theirs);
    } catch (const bcl::error& e) {
        return std::string("the reference's state does not read back: ") + e.what();
    }
    const auto bits = [](const std::vector<double>& v) {
        std::vector<std::uint64_t> out;
        for (const double x : v) out.push_back(std::bit_cast<std::uint64_t>(x));
        return out;
    };
    const bcl::statistics& x = a.stats;
    const bcl::statistics& y = b.stats;
    const bcl::detail::calibration_snapshot& p = a.calibration;
    const bcl::detail::calibration_snapshot& q = b.calibration;
    const std::pair<const char*, bool> parts[] = {
        {"rng_state", a.rng_state == b.rng_state},
        {"finished", a.finished == b.finished},
        {"arrival_cost_total", same_bits(a.arrival_cost_total, b.arrival_cost_total)},
        {"last_batch_cost", same_bits(a.last_batch_cost, b.last_batch_cost)},
        {"stats.records_in", x.records_in == y.records_in},
        {"stats.records_out", x.records_out == y.records_out},
        {"stats.records_dropped", x.records_dropped == y.records_dropped},
        {"stats.records_capped", x.records_capped == y.records_capped},
        {"stats.batches", x.batches == y.batches},
        {"stats.windows", x.windows == y.windows},
        {"stats.max_delay_batches", x.max_delay_batches == y.max_delay_batches},
        {"stats.delay_histogram", x.delay_histogram == y.delay_histogram},
        {"quantile_cap", same_bits(a.quantile_cap, b.quantile_cap)},
        {"sketch", a.sketch.count() == b.sketch.count()},
        {"waiting_batch_costs", bits(a.waiting_batch_costs) == bits(b.waiting_batch_costs)},
        {"waiting_batch_memory", bits(a.waiting_batch_memory) == bits(b.waiting_batch_memory)},
        {"waiting_arrivals", a.waiting_arrivals == b.waiting_arrivals},
        {"buffer_costs", bits(a.buffer_costs) == bits(b.buffer_costs)},
        {"buffer_arrivals", a.buffer_arrivals == b.buffer_arrivals},
        {"buffer_memory", bits(a.buffer_memory) == bits(b.buffer_memory)},
        {"calibration.numbers", bits(p.numbers) == bits(q.numbers)},
        {"calibration.counts", p.counts == q.counts},
        {"calibration.applied", bits(p.applied) == bits(q.applied)},
        {"calibration.waiting_sums", bits(p.waiting_sums) == bits(q.waiting_sums)},
        {"calibration.ledger",
         p.ledger_state == q.ledger_state && bits(p.ledger_sums) == bits(q.ledger_sums)},
    };
    std::string out;
    for (const auto& [name, same] : parts)
        if (!same) out += std::string(out.empty() ? "" : ", ") + name;
    return out.empty() ? "some statistic" : out;
}

/// Drains a balancer restored from a state that may differ from any a balancer saved, which
/// must still keep the contract: batches of 1..B records, a short one only last, each record
/// once (the `restored` ids, and `pushes` more pushed with ids from `first_new_id` on, of
/// cost (i * 5) % 11, memory 1 and `truncated_cost`), nothing left after finish() and the
/// drain. `on_batch(batch)` runs after each batch's checks. A bcl::error ends it quietly (a
/// restored state may still be refused later, e.g. a memory budget no split meets).
template <class Balancer, class OnBatch>
void drain_restored(Balancer& b, const std::vector<std::uint64_t>& restored,
                    std::uint64_t first_new_id, std::size_t pushes, double truncated_cost,
                    OnBatch&& on_batch) {
    constexpr std::uint64_t absent = UINT64_MAX;
    const std::size_t batch_size = b.settings().batch_size;
    require(b.buffered() == restored.size(),
            "a restored balancer holds " + std::to_string(b.buffered()) + " records, the state " +
                std::to_string(restored.size()));
    // Each record's position among those that may come out.
    std::vector<std::uint64_t> index_of(first_new_id + pushes, absent);
    for (std::size_t i = 0; i < restored.size(); ++i) {
        require(restored[i] < first_new_id, "a restored record's id is not below the new ones'");
        index_of[restored[i]] = i;
    }
    std::vector<bool> seen(restored.size() + pushes, false);
    std::size_t out = 0;
    bool short_seen = false;
    // Bounded: every pop that returns a batch hands out at least one record.
    const std::size_t max_pops = restored.size() + pushes + 2;
    std::size_t pops = 0;
    const auto pop_all = [&] {
        while (auto got = b.pop()) {
            require(++pops <= max_pops, "pop() keeps returning batches");
            require(!short_seen, "a batch came out after a short one");
            require(!got->empty() && got->size() <= batch_size,
                    "a batch of " + std::to_string(got->size()) + " records, batch size " +
                        std::to_string(batch_size));
            if (got->size() < batch_size) short_seen = true;
            for (const rec& r : *got) {
                const std::uint64_t i = r.id < index_of.size() ? index_of[r.id] : absent;
                check(i < seen.size() && !seen[i], [&] {
                    return "record " + std::to_string(r.id) + " came out twice or was never in";
                });
                seen[i] = true;
            }
            out += got->size();
            on_batch(std::span<const rec>(got->data(), got->size()));
        }
    };
    std::size_t pushed = 0;
    try {
        pop_all();
        for (std::size_t i = 0; i < pushes && b.can_push(); ++i) {
            const auto cost = static_cast<double>((i * 5) % 11);
            b.push(rec{first_new_id + i, cost, 1.0, truncated_cost, false});
            index_of[first_new_id + i] = restored.size() + i;
            ++pushed;
            pop_all();
        }
        const std::uint64_t dropped_before = b.stats().records_dropped;
        b.finish();
        const std::uint64_t dropped = b.stats().records_dropped - dropped_before;
        pop_all();
        require(b.buffered() == 0, std::to_string(b.buffered()) + " records left after the drain");
        require(out + dropped == restored.size() + pushed,
                std::to_string(out) + " records out and " + std::to_string(dropped) +
                    " dropped, of " + std::to_string(restored.size()) + " restored and " +
                    std::to_string(pushed) + " pushed");
    } catch (const bcl::error&) {
    }
}

} // namespace bcl_fuzz
