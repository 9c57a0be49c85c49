#pragma once
// Internal: records dealt into packs of exactly B (or the short size) with balanced integer
// loads, by LPT and a bounded swap refinement.

#include <bcl/detail/config.hpp>

#include <bcl/detail/plan/word_sort.hpp>

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace bcl::detail::plan {

/// Packs of records with integer loads. A record is named by its place in cost order: place 0 is
/// the dearest record of the window (ties to the lower input index), so a pack's members, kept in
/// ascending place, are also in descending cost. Packs [0, full) hold `size` records, packs
/// [full, packs()) hold `short_size` (a window whose last step is short).
///
/// deal(): LPT. The records, dearest first, each go to the lightest pack that still has a free
/// slot (ties to the lower pack id), found by a winner tree over the packs: O(log packs) per
/// record.
///
/// refine(): each pass sorts a class of packs (full or short) by load and pairs the i-th lightest
/// with the i-th heaviest; each pair makes the one swap of a record for a record that brings
/// their loads closest together, if any lowers the heavier. A swap strictly lowers the sum of
/// squared loads and keeps every load within the class's former range. O(n + packs) per pass.
///
/// heaviest_first(): the ids of a range of packs by load, for cutting them into steps.
///
/// Every choice is a comparison of integers with ties broken by place or pack id, so the result
/// depends on the costs alone. The scratch is kept; once warmed up nothing is allocated.
class pack_dealer {
public:
    void reserve(std::size_t packs, std::size_t size) {
        m_member.reserve(packs * size);
        m_member_cost.reserve(packs * size);
        m_tree.reserve(2 * std::bit_ceil(packs));
        m_count.reserve(packs);
        m_load.reserve(packs);
        m_words.reserve(packs);
        m_sort.reserve(packs);
    }

    /// Deals the records at `places` (ascending) into `full` packs of `size` and `short_packs`
    /// packs of `short_size` < size. places.size() must be full * size + short_packs *
    /// short_size; the costs are indexed by place and must be at most 2^(63 - bit_width(packs())).
    void deal(std::span<const std::uint32_t> places, std::span<const std::uint64_t> cost,
              std::size_t full, std::size_t short_packs, std::size_t size, std::size_t short_size) {
        m_size = size;
        m_full = full;
        m_packs = full + short_packs;
        m_id_bits = static_cast<unsigned>(std::bit_width(m_packs));
        m_member.resize(m_packs * size);
        m_member_cost.resize(m_packs * size);
        m_count.assign(m_packs, 0);
        m_load.assign(m_packs, 0);
        if (m_packs == 0) return;
        // A winner tree over the packs: each node holds the least word below it, a pack's word
        // being (load << id bits | id) while it has a free slot and `closed` once full, so the
        // root is the lightest open pack, ties to the lower id. A load is at most B times the
        // dearest cost, below 2^(63 - bit_width(R*K*B)) * B, so the word fits in 64 bits.
        const std::size_t leaves = std::bit_ceil(m_packs);
        m_tree.assign(2 * leaves, closed);
        for (std::size_t p = 0; p < m_packs; ++p) m_tree[leaves + p] = p;
        for (std::size_t node = leaves; node-- > 1;)
            m_tree[node] = std::min(m_tree[2 * node], m_tree[2 * node + 1]);
        const std::uint64_t id_mask = (std::uint64_t{1} << m_id_bits) - 1;
        for (const std::uint32_t at : places) {
            const auto p = static_cast<std::size_t>(m_tree[1] & id_mask);
            const std::size_t slot = m_count[p]++;
            m_member[p * size + slot] = at;
            m_member_cost[p * size + slot] = cost[at];
            m_load[p] += cost[at];
            std::size_t node = leaves + p;
            m_tree[node] = m_count[p] < (p < m_full ? size : short_size)
                               ? (m_load[p] << m_id_bits) | p
                               : closed;
            for (node /= 2; node >= 1; node /= 2)
                m_tree[node] = std::min(m_tree[2 * node], m_tree[2 * node + 1]);
        }
    }

    /// Up to `passes` refinement passes over each class; stops early once a pass swaps nothing.
    void refine(std::size_t passes) {
        for (std::size_t pass = 0; pass < passes; ++pass) {
            const bool full_moved = refine_class(0, m_full);
            const bool short_moved = refine_class(m_full, m_packs);
            if (!full_moved && !short_moved) return;
        }
    }

    [[nodiscard]] std::size_t packs() const noexcept { return m_packs; }
    [[nodiscard]] std::size_t full_packs() const noexcept { return m_full; }
    [[nodiscard]] std::uint64_t load(std::size_t p) const noexcept { return m_load[p]; }
    /// The places of pack p's records, ascending (its dearest first).
    [[nodiscard]] std::span<const std::uint32_t> members(std::size_t p) const noexcept {
        return {m_member.data() + p * m_size, m_count[p]};
    }

    /// Writes the ids of packs [first, last) to `out` (of last - first), heaviest first; packs of
    /// equal load in descending id. One radix sort of the packs' loads: O(last - first) per pass,
    /// nothing allocated once warmed up.
    void heaviest_first(std::size_t first, std::size_t last, std::span<std::uint32_t> out) {
        sort_by_load(first, last);
        const std::size_t count = last - first;
        for (std::size_t k = 0; k < count; ++k)
            out[k] = static_cast<std::uint32_t>(id_of(m_words[count - 1 - k]));
    }

private:
    // Packs [first, last) in ascending (load, id), as m_words: one word
    // ((load - least) << id bits | id) per pack, read with id_of(); the range's least load is
    // subtracted so that the keys are small and the sort skips the bytes they share.
    void sort_by_load(std::size_t first, std::size_t last) {
        m_words.resize(last - first);
        if (first == last) return;
        std::uint64_t least = m_load[first];
        for (std::size_t p = first; p < last; ++p) least = m_load[p] < least ? m_load[p] : least;
        for (std::size_t p = first; p < last; ++p)
            m_words[p - first] = ((m_load[p] - least) << m_id_bits) | p;
        m_sort(m_words, m_id_bits);
    }
    [[nodiscard]] std::size_t id_of(std::uint64_t word) const noexcept {
        return static_cast<std::size_t>(word & ((std::uint64_t{1} << m_id_bits) - 1));
    }

    bool refine_class(std::size_t first, std::size_t last) {
        const std::size_t count = last - first;
        if (count < 2) return false;
        sort_by_load(first, last);
        bool moved = false;
        for (std::size_t i = 0; i < count / 2; ++i) {
            const std::size_t light = id_of(m_words[i]);
            const std::size_t heavy = id_of(m_words[count - 1 - i]);
            if (m_load[heavy] == m_load[light]) break; // the rest lie between: all equal
            moved = swap_one(heavy, light) || moved;
        }
        return moved;
    }

    // The best single swap between the heavier pack h and the lighter pack l: x from h for y from
    // l with 0 < x - y < gap, the difference closest to gap / 2 (which leaves the two loads
    // closest). Both member lists are in descending cost; walking h from its cheapest record up,
    // x's best partner (cost closest to x - gap/2) only moves up l, so one pass finds the best
    // pair. Ties go to the first found. Returns whether it swapped.
    bool swap_one(std::size_t h, std::size_t l) noexcept {
        const std::int64_t gap = signed_of(m_load[h] - m_load[l]);
        if (gap < 2) return false; // no integer difference lies strictly between 0 and 1
        std::uint32_t* hm = m_member.data() + h * m_size;
        std::uint32_t* lm = m_member.data() + l * m_size;
        std::uint64_t* hc = m_member_cost.data() + h * m_size;
        std::uint64_t* lc = m_member_cost.data() + l * m_size;
        const std::size_t hn = m_count[h];
        const std::size_t ln = m_count[l];
        const std::int64_t half = gap / 2;
        const auto gain = [gap](std::int64_t d) noexcept {
            return d > 0 && d < gap ? (d < gap - d ? d : gap - d) : 0;
        };
        std::int64_t best = 0;
        std::size_t best_h = 0;
        std::size_t best_l = 0;
        std::size_t j = ln - 1; // l's slot, from its cheapest record toward its dearest
        for (std::size_t i = hn; i-- > 0;) {
            const std::int64_t x = signed_of(hc[i]);
            const std::int64_t want = x - half;
            while (j > 0 && signed_of(lc[j - 1]) <= want) --j;
            const std::size_t up = j > 0 ? j - 1 : j;
            const std::int64_t g = gain(x - signed_of(lc[j]));
            const std::int64_t g_up = gain(x - signed_of(lc[up]));
            if (g > best) {
                best = g;
                best_h = i;
                best_l = j;
            }
            if (g_up > best) {
                best = g_up;
                best_h = i;
                best_l = up;
            }
            if (best == half) break; // nothing beats an even split
        }
        if (best == 0) return false;
        const std::uint32_t x = hm[best_h];
        const std::uint32_t y = lm[best_l];
        const std::uint64_t x_cost = hc[best_h];
        const std::uint64_t y_cost = lc[best_l];
        m_load[h] = m_load[h] - x_cost + y_cost;
        m_load[l] = m_load[l] - y_cost + x_cost;
        // x is dearer than y, so its place is lower: y moves toward h's end, x toward l's front.
        std::size_t a = best_h;
        for (; a + 1 < hn && hm[a + 1] < y; ++a) {
            hm[a] = hm[a + 1];
            hc[a] = hc[a + 1];
        }
        hm[a] = y;
        hc[a] = y_cost;
        std::size_t b = best_l;
        for (; b > 0 && lm[b - 1] > x; --b) {
            lm[b] = lm[b - 1];
            lc[b] = lc[b - 1];
        }
        lm[b] = x;
        lc[b] = x_cost;
        return true;
    }

    [[nodiscard]] static std::int64_t signed_of(std::uint64_t v) noexcept {
        return static_cast<std::int64_t>(v); // below 2^63 by the window's scale
    }

    std::size_t m_size = 0;
    std::size_t m_full = 0;
    std::size_t m_packs = 0;
    unsigned m_id_bits = 0;
    static constexpr std::uint64_t closed = ~std::uint64_t{0}; // above every open pack's word

    std::vector<std::uint32_t> m_member;      // pack p's places at [p * size, p * size + count)
    std::vector<std::uint64_t> m_member_cost; // and their costs, alongside
    std::vector<std::uint64_t> m_tree;        // winner tree of pack words (deal)
    std::vector<std::size_t> m_count;
    std::vector<std::uint64_t> m_load;
    std::vector<std::uint64_t> m_words; // packs by load, as sort_by_load left them
    word_sort m_sort;
};

} // namespace bcl::detail::plan
