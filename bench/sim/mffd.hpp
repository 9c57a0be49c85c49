#pragma once
// The mffd baseline: NeMo-RL-style sequence packing (mffd_pack, round_bins_up, mffd_runner).

#include "policy_runner.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <fmt/format.h>
#include <iterator>
#include <limits>
#include <queue>
#include <set>
#include <span>
#include <stdexcept>
#include <utility>
#include <vector>

namespace bcl_sim {

/// Modified first-fit decreasing (Johnson and Garey, 1985) as NeMo-RL uses it for sequence
/// packing, over item lengths with bin capacity `capacity`. Items are large (> C/2), medium
/// (> C/3), small (> C/6) or tiny. 1: each large item opens a bin, longest first. 2: forward over
/// those bins, add the longest medium item that fits. 3: backward over the large bins without a
/// medium item, add the shortest small item and the longest small item that fits beside it, if
/// both fit. 4: forward over the large bins, keep adding the longest remaining item that fits.
/// 5: first-fit decreasing of what is left into new bins. An item longer than the capacity is
/// large, so it gets a bin of its own. Returns the bins as lists of item indices; deterministic
/// (ties by index).
[[nodiscard]] inline std::vector<std::vector<std::uint32_t>>
mffd_pack(std::span<const double> lengths, double capacity) {
    using key = std::pair<double, std::uint32_t>; // (length, index)
    const std::size_t n = lengths.size();
    std::vector<std::vector<std::uint32_t>> bins;
    std::vector<key> large;
    std::vector<key> rest; // medium, small and tiny: whatever phases 1-4 leave for phase 5
    for (std::size_t i = 0; i < n; ++i) {
        const key k{lengths[i], static_cast<std::uint32_t>(i)};
        (k.first > capacity / 2 ? large : rest).push_back(k);
    }

    if (!large.empty()) {
        // Largest element of `pool` not longer than `room`, or end().
        const auto longest_fitting = [](std::multiset<key>& pool, double room) {
            auto it = pool.upper_bound({room, std::numeric_limits<std::uint32_t>::max()});
            return it == pool.begin() ? pool.end() : std::prev(it);
        };
        std::multiset<key> medium, small, tiny;
        for (const key& k : rest) {
            if (k.first > capacity / 3)
                medium.insert(k);
            else if (k.first > capacity / 6)
                small.insert(k);
            else
                tiny.insert(k);
        }
        std::sort(large.begin(), large.end(), [](const key& x, const key& y) {
            return x.first > y.first || (x.first == y.first && x.second < y.second);
        });
        std::vector<double> used;    // tokens in each large bin
        for (const key& k : large) { // phase 1
            bins.push_back({k.second});
            used.push_back(k.first);
        }
        const std::size_t nl = bins.size();
        std::vector<bool> has_medium(nl, false);
        for (std::size_t b = 0; b < nl; ++b) { // phase 2
            const auto it = longest_fitting(medium, capacity - used[b]);
            if (it == medium.end())
                continue;
            bins[b].push_back(it->second);
            used[b] += it->first;
            has_medium[b] = true;
            medium.erase(it);
        }
        for (std::size_t b = nl; b-- > 0;) { // phase 3
            if (has_medium[b] || small.size() < 2)
                continue;
            const double room = capacity - used[b];
            const auto s1 = small.begin();
            if (s1->first + std::next(s1)->first > room)
                continue;
            const key first_small = *s1;
            small.erase(s1);
            const auto s2 = longest_fitting(small, room - first_small.first);
            bins[b].push_back(first_small.second);
            bins[b].push_back(s2->second);
            used[b] += first_small.first + s2->first;
            small.erase(s2);
        }
        tiny.insert(medium.begin(), medium.end());
        tiny.insert(small.begin(), small.end());
        for (std::size_t b = 0; b < nl; ++b) { // phase 4
            for (auto it = longest_fitting(tiny, capacity - used[b]); it != tiny.end();
                 it = longest_fitting(tiny, capacity - used[b])) {
                bins[b].push_back(it->second);
                used[b] += it->first;
                tiny.erase(it);
            }
        }
        rest.assign(tiny.begin(), tiny.end());
    }
    std::sort(rest.begin(), rest.end(), [](const key& x, const key& y) {
        return x.first > y.first || (x.first == y.first && x.second < y.second);
    });

    // Phase 5: first fit, longest first, over a row of bins whose unopened ones are empty (every
    // item left is at most C/2, so it fits an empty bin). A max tree over the bins' free room finds
    // the leftmost bin with enough room in O(log n); leaves open left to right, so leaf i is the
    // i-th new bin.
    if (!rest.empty()) {
        std::size_t leaves = 1;
        while (leaves < rest.size())
            leaves *= 2;
        std::vector<double> room(2 * leaves, capacity);
        const std::size_t first_new = bins.size();
        for (const key& k : rest) {
            std::size_t node = 1;
            while (node < leaves)
                node = room[2 * node] >= k.first ? 2 * node : 2 * node + 1;
            const std::size_t b = first_new + (node - leaves);
            if (b == bins.size())
                bins.emplace_back();
            bins[b].push_back(k.second);
            room[node] -= k.first;
            for (node /= 2; node >= 1; node /= 2)
                room[node] = std::max(room[2 * node], room[2 * node + 1]);
        }
    }
    return bins;
}

/// NeMo-RL's bin-count rounding: adds bins until their number is a multiple of `multiple`, each
/// new bin taking the last-added item of the bin that holds the most items (ties: the first such
/// bin). Needs at least that many items in total.
inline void round_bins_up(std::vector<std::vector<std::uint32_t>>& bins, std::size_t multiple) {
    if (multiple == 0)
        return;
    const std::size_t target = (bins.size() + multiple - 1) / multiple * multiple;
    if (target == bins.size())
        return;
    // Max-heap on (items, -bin index).
    using entry = std::pair<std::size_t, std::size_t>; // (items, bin)
    const auto before = [](const entry& a, const entry& b) {
        return a.first < b.first || (a.first == b.first && a.second > b.second);
    };
    std::priority_queue<entry, std::vector<entry>, decltype(before)> heap(before);
    for (std::size_t b = 0; b < bins.size(); ++b)
        heap.emplace(bins[b].size(), b);
    while (bins.size() < target) {
        const auto [items, b] = heap.top();
        if (items < 2)
            throw std::logic_error("round_bins_up: not enough items to fill the bins");
        heap.pop();
        const std::uint32_t moved = bins[b].back();
        bins[b].pop_back();
        heap.emplace(items - 1, b);
        bins.push_back({moved});
        heap.emplace(1, bins.size() - 1);
    }
}

/// `mffd`: NeMo-RL-style pooled sequence packing. Each step's R*B records (global positions
/// [s*R*B, (s+1)*R*B), the records fixed-count batching would use in that step) are packed into
/// token bins with mffd_pack, the bin count is rounded up to a multiple of R (round_bins_up),
/// and bin j goes to rank j mod R. A rank's time is the sum of its bins' record costs (packed
/// sequences with per-document attention).
class mffd_runner final : public policy_runner {
public:
    explicit mffd_runner(const sim_context& ctx) : m_ctx(ctx) {}
    void run(std::size_t first, std::size_t count, step_block out) override {
        const std::size_t R = m_ctx.ranks;
        const std::size_t B = m_ctx.batch;
        std::vector<sample> items(R * B);
        std::vector<double> lengths(R * B);
        for (std::size_t s = first; s < first + count; ++s) {
            for (std::size_t r = 0; r < R; ++r)
                for (std::size_t j = 0; j < B; ++j) {
                    items[r * B + j] = fetch(m_ctx, r, std::uint64_t{s} * B + j);
                    lengths[r * B + j] = items[r * B + j].length;
                }
            auto bins = mffd_pack(lengths, m_ctx.bin_tokens);
            m_packed_bins += bins.size();
            ++m_steps;
            round_bins_up(bins, R);
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
        return e;
    }

private:
    sim_context m_ctx;
    std::size_t m_bins_per_rank = 0;
    std::size_t m_packed_bins = 0; // before rounding up
    std::size_t m_steps = 0;
    std::uint64_t m_capped = 0;
};

} // namespace bcl_sim
