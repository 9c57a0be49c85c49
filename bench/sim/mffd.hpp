#pragma once
// The mffd baseline: NeMo-RL's sequence packing (mffd_pack, adjust_bin_count, mffd_runner), as
// NeMo-RL's own code runs it (nemo_rl/data/packing/algorithms.py).

#include "input.hpp"
#include "policy_runner.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <iterator>
#include <set>
#include <span>
#include <stdexcept>
#include <utility>
#include <vector>

namespace bcl_sim {

namespace detail {

// An item of mffd_pack: its length and its index in the input.
struct mffd_item {
    double length;
    std::uint32_t index;
};

// Longer first, and among equal lengths the lower index first: the order of NeMo-RL's lists that
// are sorted by length, longest first (Python's stable sort keeps input order among ties).
struct longest_first {
    bool operator()(const mffd_item& a, const mffd_item& b) const noexcept {
        return a.length > b.length || (a.length == b.length && a.index < b.index);
    }
};

// Shorter first, and among equal lengths the lower index first: NeMo-RL's shortest-first lists.
struct shortest_first {
    bool operator()(const mffd_item& a, const mffd_item& b) const noexcept {
        return a.length < b.length || (a.length == b.length && a.index < b.index);
    }
};

// The first item of a longest-first pool that fits `room`: the longest that fits, the lowest index
// among equals, as NeMo-RL's scans for the first (largest) item that fits find it (phases 2 and
// 4). end() if none fits.
[[nodiscard]] inline std::set<mffd_item, longest_first>::iterator
first_fitting(std::set<mffd_item, longest_first>& pool, double room) {
    return pool.lower_bound(mffd_item{room, 0});
}

} // namespace detail

/// NeMo-RL's modified first-fit decreasing (ModifiedFirstFitDecreasingPacker._pack_implementation,
/// after Johnson and Garey, 1985) over item lengths with bin capacity C = `capacity`. Items are
/// large (> C/2), medium (> C/3), small (> C/6) or tiny; ties of length are broken by input index
/// as NeMo-RL's stable sorts break them.
///   1. Each large item opens a bin, longest first.
///   2. Forward over those bins: add the longest medium item that fits.
///   3. Backward over the large bins without a medium item: if the two shortest small items fit
///      together, add the shortest and then the longest small item that fits beside it.
///   4. Forward over the large bins: keep adding the longest remaining item that fits.
///   5. What is left, longest first, goes into the open bin with the least in it if it fits there
///      (NeMo-RL checks only that bin), else into a new bin. These bins come last, least full
///      first (ties: the bin placed there first). The phase starts from one empty bin, which
///      NeMo-RL drops (with any bin left empty) when it returns the bins.
/// NeMo-RL raises for a length above the capacity or not above 0; here such a length is simply a
/// large (its own bin) or tiny item. Returns the bins as lists of item indices in the order their
/// items were added. O(n log n).
[[nodiscard]] inline std::vector<std::vector<std::uint32_t>>
mffd_pack(std::span<const double> lengths, double capacity) {
    using detail::mffd_item;
    std::vector<mffd_item> items(lengths.size());
    for (std::size_t i = 0; i < lengths.size(); ++i)
        items[i] = {lengths[i], static_cast<std::uint32_t>(i)};
    std::vector<mffd_item> large;
    for (const mffd_item& item : items)
        if (item.length > capacity / 2) large.push_back(item);
    std::sort(large.begin(), large.end(), detail::longest_first{});

    std::vector<std::vector<std::uint32_t>> bins; // phases 1-4: one bin per large item
    std::vector<mffd_item> leftover;              // phase 5's items, longest first
    if (large.empty()) {
        leftover = std::move(items); // phases 1-4 have nothing to do
        std::sort(leftover.begin(), leftover.end(), detail::longest_first{});
    } else {
        std::set<mffd_item, detail::longest_first> medium;
        std::set<mffd_item, detail::shortest_first> small;
        std::set<mffd_item, detail::longest_first> rest; // phase 4's pool: medium, small, tiny
        for (const mffd_item& item : items) {
            if (item.length > capacity / 2) continue;
            if (item.length > capacity / 3)
                medium.insert(item);
            else if (item.length > capacity / 6)
                small.insert(item);
            else
                rest.insert(item);
        }
        std::vector<double> used;
        for (const mffd_item& item : large) { // phase 1
            bins.push_back({item.index});
            used.push_back(item.length);
        }
        const std::size_t nl = bins.size();
        std::vector<bool> has_medium(nl, false);
        for (std::size_t b = 0; b < nl; ++b) { // phase 2
            const auto it = detail::first_fitting(medium, capacity - used[b]);
            if (it == medium.end()) continue;
            bins[b].push_back(it->index);
            used[b] += it->length;
            has_medium[b] = true;
            medium.erase(it);
        }
        for (std::size_t b = nl; b-- > 0;) { // phase 3
            if (has_medium[b] || small.size() < 2) continue;
            const double room = capacity - used[b];
            const auto s1 = small.begin();
            if (s1->length + std::next(s1)->length > room) continue;
            const mffd_item first = *s1;
            small.erase(s1);
            // The longest small item that fits beside the first; among equal lengths the last in
            // the shortest-first list (NeMo-RL scans it from the end), so the highest index.
            auto s2 = small.upper_bound(mffd_item{room - first.length, 0xffffffffU});
            s2 = std::prev(s2); // the second shortest fits, so there is one
            bins[b].push_back(first.index);
            bins[b].push_back(s2->index);
            used[b] += first.length + s2->length;
            small.erase(s2);
        }
        rest.insert(medium.begin(), medium.end());
        rest.insert(small.begin(), small.end());
        for (std::size_t b = 0; b < nl; ++b) { // phase 4
            for (auto it = detail::first_fitting(rest, capacity - used[b]); it != rest.end();
                 it = detail::first_fitting(rest, capacity - used[b])) {
                bins[b].push_back(it->index);
                used[b] += it->length;
                rest.erase(it);
            }
        }
        leftover.assign(rest.begin(), rest.end());
    }

    // Phase 5. NeMo-RL keeps the open bins in a list sorted by load, inserting a bin after those
    // of equal load (bisect_right) and trying only the first. That list is the bins ordered by
    // (load, when last inserted): a min-heap on that pair finds the same bin.
    struct open_bin {
        double load;
        std::uint64_t inserted;
        std::uint32_t bin;
        bool operator>(const open_bin& o) const noexcept {
            return load > o.load || (load == o.load && inserted > o.inserted);
        }
    };
    std::vector<std::vector<std::uint32_t>> fresh(1); // starts with one empty bin
    std::vector<open_bin> open{{0.0, 0, 0}};
    std::uint64_t inserted = 1;
    for (const mffd_item& item : leftover) {
        open_bin slot{0.0, 0, static_cast<std::uint32_t>(fresh.size())};
        if (item.length <= capacity - open.front().load) {
            std::pop_heap(open.begin(), open.end(), std::greater<>{});
            slot = open.back();
            open.pop_back();
        } else {
            fresh.emplace_back();
        }
        fresh[slot.bin].push_back(item.index);
        open.push_back({slot.load + item.length, inserted++, slot.bin});
        std::push_heap(open.begin(), open.end(), std::greater<>{});
    }
    std::sort(open.begin(), open.end(), std::greater<>{});
    for (auto it = open.rbegin(); it != open.rend(); ++it) // least full first
        if (!fresh[it->bin].empty()) bins.push_back(std::move(fresh[it->bin]));
    return bins;
}

/// NeMo-RL's bin-count adjustment (SequencePacker._adjust_bin_count), which NeMo-RL's
/// shard_by_batch_size calls with min_bin_count = bin_count_multiple = the data-parallel size:
/// the target is max(bins, min_bins) rounded up to a multiple of `multiple`. The bins are ranked
/// by item count, most first, ties to the highest index; each new bin, appended at the end, takes
/// the last item of the first ranked bin that still has more than one item, so one bin is emptied
/// down to a single item before the next gives any. Throws input_error, as NeMo-RL raises, when
/// there are fewer items than target bins.
inline void adjust_bin_count(std::vector<std::vector<std::uint32_t>>& bins, std::size_t min_bins,
                             std::size_t multiple) {
    const std::size_t current = bins.size();
    std::size_t target = std::max(current, min_bins);
    if (multiple > 0 && target % multiple != 0) target += multiple - target % multiple;
    if (target == current) return;
    std::size_t items = 0;
    for (const auto& bin : bins) items += bin.size();
    if (items < target)
        throw input_error(fmt::format(
            "mffd: NeMo-RL's packer cannot make {} bins of at least one sequence from {} "
            "sequences (it raises ValueError); use a larger --batch or --bin-tokens",
            target, items));
    std::vector<std::pair<std::size_t, std::size_t>> ranked; // (items, bin), most first
    for (std::size_t b = 0; b < current; ++b) ranked.emplace_back(bins[b].size(), b);
    std::sort(ranked.begin(), ranked.end(), std::greater<>{});
    std::size_t source = 0;
    while (bins.size() < target) {
        // With at least `target` items some ranked bin still has two (at most one bin of
        // mffd_pack's is empty: none), so this never runs off the end.
        while (source < ranked.size() && bins[ranked[source].second].size() <= 1) ++source;
        if (source == ranked.size())
            throw std::logic_error("adjust_bin_count: no bin left to take a sequence from");
        std::vector<std::uint32_t>& from = bins[ranked[source].second];
        const std::uint32_t moved = from.back();
        from.pop_back();
        bins.push_back({moved});
    }
}

/// `mffd`: NeMo-RL's sequence packing (BatchedDataDict.shard_by_batch_size with
/// sequence_packing_args, algorithm modified_first_fit_decreasing). Each step's R*B records, global
/// positions [s*R*B, (s+1)*R*B) (the records fixed-count batching uses in that step, in sampler
/// order), are packed into token bins with mffd_pack, their count adjusted to a multiple of R with
/// adjust_bin_count(bins, R, R), and bin j goes to rank j mod R. A rank's time is the sum of its
/// bins' record costs (packed sequences with per-document attention); packed bins are never
/// padded, whatever --batching says. NeMo-RL's rounding of each length up to its
/// sequence_length_pad_multiple is not modelled (a multiple of 1).
class mffd_runner final : public policy_runner {
public:
    explicit mffd_runner(const sim_context& ctx) : m_ctx(ctx) {}
    void run(std::size_t first, std::size_t count, step_block out) override {
        out.pad_to = 0.0; // packed bins: no padding
        const std::size_t R = m_ctx.ranks;
        const std::size_t B = m_ctx.batch;
        std::vector<sample> items(R * B);
        std::vector<double> lengths(R * B);
        for (std::size_t s = first; s < first + count; ++s) {
            // Global position s*R*B + j is rank j mod R's record s*B + j / R.
            for (std::size_t j = 0; j < R * B; ++j) {
                items[j] = fetch(m_ctx, j % R, std::uint64_t{s} * B + j / R);
                lengths[j] = items[j].length;
            }
            auto bins = mffd_pack(lengths, m_ctx.bin_tokens);
            m_packed_bins += bins.size();
            ++m_steps;
            adjust_bin_count(bins, R, R);
            m_bins_per_rank = std::max(m_bins_per_rank, bins.size() / R);
            for (std::size_t b = 0; b < bins.size(); ++b) {
                const std::size_t rank = b % R;
                for (const std::uint32_t i : bins[b]) {
                    out.charge(s - first, rank, R, items[i]);
                    m_capped += items[i].capped ? 1 : 0;
                    observe(m_ctx, s, rank, items[i].id);
                }
            }
        }
    }
    [[nodiscard]] policy_extras extras() const override {
        policy_extras e;
        e.capped = m_capped;
        const double packed =
            m_steps > 0 ? static_cast<double>(m_packed_bins) / static_cast<double>(m_steps) : 0.0;
        e.note = fmt::format("bins of {} tokens; MFFD packs {:.1f} bins per step on average, "
                             "rounded up to a multiple of R = {} (at most {} per rank)",
                             m_ctx.bin_tokens, packed, m_ctx.ranks, m_bins_per_rank);
        if (packed < static_cast<double>(m_ctx.ranks))
            e.note += fmt::format(
                ". Fewer packed bins than ranks: the extra bins hold one record each, so most "
                "ranks idle. Pass --bin-tokens with the trainer's micro-batch token budget "
                "(e.g. the max sequence length) to model a typical NeMo-RL setup");
        if (m_ctx.batching == batch_cost::padded)
            e.note += ". Under --batching padded its bins are still packed, not padded: a rank "
                      "spends the sum of its records' costs";
        return e;
    }

private:
    sim_context m_ctx;
    std::size_t m_bins_per_rank = 0;
    std::size_t m_packed_bins = 0; // before the adjustment
    std::size_t m_steps = 0;
    std::uint64_t m_capped = 0;
};

} // namespace bcl_sim
