#pragma once
// Internal: the swap refinement loop, shared by swap_refinement and lpt_swap_partitioner.

#include <bcl/detail/config.hpp>

#include <bcl/partition/detail/pack_table.hpp>
#include <bcl/partition/detail/ranked_costs.hpp>
#include <bcl/partition/partitioner.hpp>

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace bcl::detail {

/// A heaviest pack within this fraction of the lower bound counts as meeting it: the loads are
/// running sums, and an exact tie with the bound can come out a few ulps above it.
inline constexpr double bound_tolerance = 1e-10;

/// Refines a partition held in a pack_table; see swap_refinement for the algorithm. Each round
/// looks at the heaviest pack h:
///   phase 1: the best 1-for-1 swap of h with the lightest pack, else with every other pack
///            from light to heavy;
///   phase 2: (only above effort_above, within the budget) the best 2-for-2 exchange of h with
///            the lightest pack; else lower another heavy pack, heaviest first, by a 1-for-1
///            swap with the lightest pack, to make room for h in the next round.
/// Every move strictly lowers the larger of the two packs it touches, so the sum of squared loads
/// falls and the loop cannot cycle; it is capped at 2n + 2K rounds anyway.
class swap_refiner {
public:
    /// swap_one takes the first pair it finds that lowers the heavier pack by at least this
    /// fraction of the most any swap could (half the gap) instead of searching on for the best.
    static constexpr double good_swap = 0.75;

    /// Sizes all scratch space for the shape up front: a window that needs no refinement must
    /// not leave an allocation for a later one that does.
    void reserve(pack_shape shape) {
        m_order.reserve(shape.packs);
        m_candidates.reserve(4 * shape.pack_size);
    }

    /// Refines `packs`, whose loads must be current. Phase 2 runs only while the heaviest pack is
    /// more than `effort_above` (a fraction) above the bound, and makes at most
    /// `effort_per_pack * K` searches.
    void run(const ranked_costs& ranked, pack_table& packs, double lower_bound, double effort_above,
             std::size_t effort_per_pack) {
        const std::size_t k = packs.packs();
        if (k < 2) return;
        m_packs = &packs;
        m_step = ranked.smallest_step();
        m_order.resize(k);
        m_order_kept = false;
        const double optimal = lower_bound + lower_bound * bound_tolerance;
        const double effort_level = lower_bound + lower_bound * effort_above;
        std::size_t budget = effort_per_pack * k;
        const std::size_t max_rounds = 2 * ranked.size() + 2 * k;
        for (std::size_t round = 0; round < max_rounds; ++round) {
            std::size_t h = 0;
            std::size_t l = 0;
            for (std::size_t p = 1; p < k; ++p) {
                if (packs.load(p) > packs.load(h)) h = p;
                if (packs.load(p) < packs.load(l)) l = p;
            }
            const double top = packs.load(h);
            if (top <= optimal) return;
            const double least_gain = top * 1e-12; // below this a "gain" is rounding noise
            // Once h is within one step of the lightest pack (integer token counts: within one
            // token), no 1-for-1 swap can help any pair of packs: skip the searches, which
            // would all come back empty.
            const bool singles_can_help = top - packs.load(l) > m_step;
            if (singles_can_help) {
                if (swap_one(h, l, top - packs.load(l), least_gain)) continue;
                // Phase 1, continued: the lightest pack did not help; every pack, light to heavy.
                sort_by_load();
                if (try_each_lighter(h, top, least_gain, l)) continue;
            }

            // Phase 2: single swaps are stuck.
            if (top <= effort_level || budget == 0) return;
            --budget;
            // An exchange must gain a visible fraction of the target, or a window whose costs
            // move in tiny steps gets ground down in crumbs until the budget is gone.
            const double pair_gain = std::max(least_gain, lower_bound * effort_above / 16);
            if (swap_two(h, l, top - packs.load(l), pair_gain)) continue;
            if (!singles_can_help || !make_room(h, budget, least_gain)) return;
        }
    }

private:
    struct candidate {
        double delta;       // cost of h's item - cost of p's item
        std::uint32_t in_h; // slot in pack h
        std::uint32_t in_p; // slot in pack p
    };

    // Packs by (load, id), light to heavy. The first time in a window, a sort; after that an
    // insertion sort of the previous order: between two calls only the few packs that moves
    // touched have new loads, so the order is nearly sorted already (about K compares, where a
    // fresh sort takes K log K with mispredicted branches). The order is total, so either gives
    // the same result.
    void sort_by_load() {
        const pack_table& packs = *m_packs;
        const auto lighter = [&packs](std::uint32_t x, std::uint32_t y) {
            return packs.load(x) < packs.load(y) || (packs.load(x) == packs.load(y) && x < y);
        };
        if (!m_order_kept) {
            for (std::size_t p = 0; p < m_order.size(); ++p)
                m_order[p] = static_cast<std::uint32_t>(p);
            std::sort(m_order.begin(), m_order.end(), lighter);
            m_order_kept = true;
            return;
        }
        for (std::size_t i = 1; i < m_order.size(); ++i) {
            const std::uint32_t p = m_order[i];
            std::size_t j = i;
            for (; j > 0 && lighter(p, m_order[j - 1]); --j) m_order[j] = m_order[j - 1];
            m_order[j] = p;
        }
    }

    // 1-for-1 swaps of pack h against every lighter pack but `skip`, light to heavy (m_order must
    // be current); applies the first that helps.
    bool try_each_lighter(std::size_t h, double top, double least_gain, std::size_t skip) {
        for (const std::uint32_t p : m_order) {
            const double gap = top - m_packs->load(p);
            // p and every later pack are as heavy as h, or too close for a swap to help.
            if (gap <= least_gain || gap <= m_step) return false;
            if (p != skip && swap_one(h, p, gap, least_gain)) return true;
        }
        return false;
    }

    // Lowers the heaviest pack it can, other than h, by a 1-for-1 swap with the lightest pack:
    // h's own swaps are stuck because every lighter pack is either too close to it or lacks the
    // right item; lowering its neighbours at the top opens gaps it can use next round.
    bool make_room(std::size_t h, std::size_t& budget, double least_gain) {
        const std::uint32_t lightest = m_order.front();
        for (std::size_t i = m_order.size(); i-- > 1;) {
            const std::uint32_t q = m_order[i];
            if (q == h) continue;
            const double gap = m_packs->load(q) - m_packs->load(lightest);
            if (gap <= least_gain || gap <= m_step || budget == 0) return false;
            --budget;
            if (swap_one(q, lightest, gap, least_gain)) return true;
        }
        return false;
    }

    // A 1-for-1 swap between h and p (gap = load h - load p), applied if it lowers the larger of
    // the two by more than `least_gain`: a pair (x in h, y in p) whose difference x - y in
    // (0, gap) is close to gap / 2, which would lower h the most. Both member lists are sorted by
    // cost high to low; walking h from its cheapest item up, x's best partner (cost closest to
    // x - gap/2) only moves up p, so one pass finds the best pair. The walk stops early at the
    // first pair that gets within a quarter of that best possible gain (see good_swap): the hunt
    // for the last quarter used to cost two thirds of the walking, and buys nothing the next
    // rounds do not (docs/partitioners.md).
    bool swap_one(std::size_t h, std::size_t p, double gap, double least_gain) noexcept {
        const pack_table& packs = *m_packs;
        const std::size_t hn = packs.count(h);
        const std::size_t pn = packs.count(p);
        if (hn == 0 || pn == 0 || gap / 2 <= least_gain || gap <= m_step || !(least_gain > 0.0))
            return false;
        const double* hc = packs.costs(h);
        const double* pc = packs.costs(p);
        const double half = gap / 2;
        // Gains are compared as the bit patterns of the doubles: for values >= 0 those order like
        // the values, and any negative "gain" (no improvement) is a negative integer, below
        // every positive one. Integer selections compile to conditional moves; double ones to
        // branches, which mispredict here.
        const auto bits = [](double v) { return std::bit_cast<std::int64_t>(v); };
        std::int64_t best_gain = bits(least_gain);
        // Good enough to stop at; never reached before a pair is found, even when least_gain is
        // above good_swap * half.
        const std::int64_t good = std::max(bits(half * good_swap), best_gain + 1);
        std::uint64_t best = no_pair; // slot in h << 32 | slot in p
        // p[j] ends as the dearest item costing at most x - gap/2 (or p's cheapest), p[j-1] the
        // cheapest costing more: x's best partner is one of them.
        std::size_t j = pn - 1; // p's slot, moving from its cheapest item toward its dearest
        for (std::size_t i = hn; i-- > 0;) {
            const double x = hc[i];
            const double want = x - half;
            while (j > 0 && pc[j - 1] <= want) --j;
            const std::size_t up = j > 0 ? j - 1 : j;
            const double d = x - pc[j];
            const double d_up = x - pc[up];
            // min(d, gap - d) is the gain; it is <= 0 unless 0 < d < gap, and best_gain > 0.
            const std::int64_t gain = bits(std::min(d, gap - d));
            const std::int64_t gain_up = bits(std::min(d_up, gap - d_up));
            const bool take_up = gain_up > gain;
            const std::int64_t g = take_up ? gain_up : gain;
            const std::uint64_t pair = (std::uint64_t{i} << 32) | (take_up ? up : j);
            const bool better = g > best_gain;
            best_gain = better ? g : best_gain;
            best = better ? pair : best;
            if (best_gain >= good) break;
        }
        if (best == no_pair) return false;
        exchange(h, static_cast<std::size_t>(best >> 32), p,
                 static_cast<std::size_t>(best & 0xffffffffU));
        return true;
    }

    // Swaps the item in slot i of pack h with the one in slot c of pack p; updates the loads.
    void exchange(std::size_t h, std::size_t i, std::size_t p, std::size_t c) noexcept {
        pack_table& packs = *m_packs;
        const std::uint32_t from_h = packs.members(h)[i];
        const std::uint32_t from_p = packs.members(p)[c];
        const double cost_h = packs.costs(h)[i];
        const double cost_p = packs.costs(p)[c];
        packs.load(h) -= cost_h - cost_p;
        packs.load(p) += cost_h - cost_p;
        packs.replace(h, i, from_p, cost_p);
        packs.replace(p, c, from_h, cost_h);
    }

    // The best 2-for-2 exchange between h and p, applied if it gains more than `least_gain`.
    // When single swaps are stuck, every difference x - y is <= 0 or >= gap, but two of them can
    // add up to something in (0, gap): that is how costs that move in coarse steps (integer token
    // counts) get balanced below one step. Candidates are, for each x in h, the two items of p
    // just below and the two just above it; sorted by difference, two pointers find the pair of
    // candidates (sharing no item) whose sum is closest to gap / 2. O(B log B).
    bool swap_two(std::size_t h, std::size_t p, double gap, double least_gain) {
        pack_table& packs = *m_packs;
        const std::size_t hn = packs.count(h);
        const std::size_t pn = packs.count(p);
        if (hn < 2 || pn < 2 || gap / 2 <= least_gain || !(least_gain > 0.0)) return false;
        const double* hc = packs.costs(h);
        const double* pc = packs.costs(p);
        m_candidates.clear();
        std::size_t j = pn - 1;
        for (std::size_t i = hn; i-- > 0;) {
            const double x = hc[i];
            while (j > 0 && pc[j - 1] <= x) --j;
            // p[j] is the dearest item not above x (or p's cheapest): two on each side of it.
            const std::size_t lo = j >= 2 ? j - 2 : 0;
            const std::size_t hi = std::min(pn - 1, j + 1);
            for (std::size_t c = lo; c <= hi; ++c)
                m_candidates.push_back(
                    {x - pc[c], static_cast<std::uint32_t>(i), static_cast<std::uint32_t>(c)});
        }
        // A total order (ties by slot), so the choice does not depend on the sort algorithm.
        std::sort(m_candidates.begin(), m_candidates.end(),
                  [](const candidate& a, const candidate& b) {
                      if (a.delta != b.delta) return a.delta < b.delta;
                      if (a.in_h != b.in_h) return a.in_h < b.in_h;
                      return a.in_p < b.in_p;
                  });
        // For each a (delta rising), b (delta falling) sits where the pair's sum crosses gap / 2;
        // a few neighbours of b cover pairs that share an item.
        const std::size_t m = m_candidates.size();
        const double half = gap / 2;
        double best_gain = least_gain;
        std::size_t best_a = m;
        std::size_t best_b = m;
        std::size_t b = m - 1;
        for (std::size_t a = 0; a < m; ++a) {
            const candidate& ca = m_candidates[a];
            while (b > 0 && ca.delta + m_candidates[b].delta > half) --b;
            const std::size_t from = b >= 2 ? b - 2 : 0;
            const std::size_t to = std::min(m - 1, b + 3);
            for (std::size_t c = from; c <= to; ++c) {
                // Selections, not branches: both tests are coin flips for the predictor. The
                // gain is <= 0 unless 0 < sum < gap, and best_gain > 0.
                const candidate& cb = m_candidates[c];
                const double sum = ca.delta + cb.delta;
                const double gain = std::min(sum, gap - sum);
                const bool better =
                    (cb.in_h != ca.in_h) & (cb.in_p != ca.in_p) & (gain > best_gain);
                best_gain = better ? gain : best_gain;
                best_a = better ? a : best_a;
                best_b = better ? c : best_b;
            }
        }
        if (best_a == m) return false;
        const candidate first = m_candidates[best_a];
        const candidate second = m_candidates[best_b];
        // The first exchange re-sorts both lists, so find the second pair again by rank.
        const std::uint32_t second_h = packs.members(h)[second.in_h];
        const std::uint32_t second_p = packs.members(p)[second.in_p];
        exchange(h, first.in_h, p, first.in_p);
        exchange(h, packs.slot_of(h, second_h), p, packs.slot_of(p, second_p));
        return true;
    }

    static constexpr std::uint64_t no_pair = ~std::uint64_t{0};

    pack_table* m_packs = nullptr;
    double m_step = 0.0;                 // the window's smallest cost step (ranked_costs)
    std::vector<std::uint32_t> m_order;  // packs by load, light to heavy
    bool m_order_kept = false;           // m_order holds this window's packs (sort_by_load)
    std::vector<candidate> m_candidates; // 2-for-2 search
};

} // namespace bcl::detail
