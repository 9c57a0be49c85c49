#pragma once
// Internal: a token plan's micro-steps dealt to its steps so that each step is a fair sample of
// the plan: records, heavy records and tokens spread evenly, not the dearest micro-steps first.

#include <bcl/detail/config.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <tuple>
#include <vector>

namespace bcl::detail::tokens {

/// What one micro-step holds, over every rank.
struct micro_step_tally {
    std::uint64_t records = 0;
    std::uint64_t heavy = 0; ///< records above half the budget
    std::uint64_t tokens = 0;
};

/// Deals micro-steps to steps. A plan's cost is the sum over its micro-steps of the dearest
/// micro-batch, whichever step each lands in, so the deal is free to make every step look like
/// the whole plan: were micro-steps numbered dearest first into steps, as the layout cuts them,
/// the first steps would take the heavy records and the last the many short ones, a curriculum
/// nobody asked for. Each step holds its count of micro-steps.
///
/// How: micro-steps holding heavy records first, most heavy first, each to the step with room
/// that holds the fewest heavy records (so no step holds more than its share, ceil(h/K), and one
/// micro-step's worth); then the others, richest in records first, each to the step with room
/// that holds the fewest records (LPT with a count per step); then swaps of two micro-steps, one
/// of the richest or the poorest step, while one narrows the spread (the most records a step
/// over the fewest) and keeps the heavy records within that bound. Within a step the
/// micro-steps keep the layout's order. Ties to the lower index: the same deal on every rank.
/// O(S * K) for S micro-steps in K steps of M, and O(S * M) a swap (at most S swaps).
class step_dealer {
public:
    /// Deals `tally.size()` micro-steps (in the layout's order) to steps of `per_step` (the last
    /// what is left); their records add up to at most 2^30 (a plan's most).
    void deal(std::span<const micro_step_tally> tally, std::size_t per_step) {
        const std::size_t s = tally.size();
        const std::size_t steps = per_step == 0 ? 0 : (s + per_step - 1) / per_step;
        m_counts.resize(steps);
        for (std::size_t step = 0; step < steps; ++step)
            m_counts[step] = std::min(per_step, s - step * per_step);
        deal_counts(tally, m_counts);
    }

    /// Deals `tally.size()` micro-steps (in the layout's order) to steps of `counts[step]` each
    /// (they add up to tally.size()): a pooled plan whose steps hold different counts.
    void deal_counts(std::span<const micro_step_tally> tally, std::span<const std::size_t> counts) {
        const std::size_t s = tally.size();
        const std::size_t steps = counts.size();
        m_step_of.resize(s);
        m_micro_of.resize(s);
        if (steps <= 1) {
            for (std::size_t k = 0; k < s; ++k) {
                m_step_of[k] = 0;
                m_micro_of[k] = static_cast<std::uint32_t>(k);
            }
            return;
        }
        m_room.assign(counts.begin(), counts.end());
        m_sum.assign(steps, micro_step_tally{});
        std::uint64_t heavy = 0;
        m_order.resize(s);
        for (std::size_t k = 0; k < s; ++k) {
            m_order[k] = static_cast<std::uint32_t>(k);
            heavy += tally[k].heavy;
        }
        std::sort(m_order.begin(), m_order.end(), [tally](std::uint32_t a, std::uint32_t b) {
            const micro_step_tally& x = tally[a];
            const micro_step_tally& y = tally[b];
            const bool xh = x.heavy > 0;
            const bool yh = y.heavy > 0;
            if (xh != yh) return xh;
            if (xh && x.heavy != y.heavy) return x.heavy > y.heavy;
            return std::tie(y.records, y.tokens, a) < std::tie(x.records, x.tokens, b);
        });
        std::uint64_t most_heavy = 0;
        for (std::size_t k = 0; k < s; ++k) most_heavy = std::max(most_heavy, tally[k].heavy);
        m_heavy_bound = (heavy + steps - 1) / steps + most_heavy;
        for (const std::uint32_t k : m_order) {
            const bool by_heavy = tally[k].heavy > 0;
            std::size_t best = steps;
            for (std::size_t step = 0; step < steps; ++step) {
                if (m_room[step] == 0) continue;
                if (best == steps || fewer(m_sum[step], m_sum[best], by_heavy)) best = step;
            }
            m_step_of[k] = static_cast<std::uint32_t>(best);
            --m_room[best];
            add(m_sum[best], tally[k], 1);
        }
        swap_to_even(tally, steps);
        // Micro-batch numbers within each step, in the layout's order.
        m_room.assign(steps, 0);
        for (std::size_t k = 0; k < s; ++k)
            m_micro_of[k] = static_cast<std::uint32_t>(m_room[m_step_of[k]]++);
    }

    [[nodiscard]] std::uint32_t step_of(std::size_t micro_step) const noexcept {
        return m_step_of[micro_step];
    }
    [[nodiscard]] std::uint32_t micro_of(std::size_t micro_step) const noexcept {
        return m_micro_of[micro_step];
    }

private:
    static bool fewer(const micro_step_tally& a, const micro_step_tally& b, bool by_heavy) {
        if (by_heavy && a.heavy != b.heavy) return a.heavy < b.heavy;
        return std::tie(a.records, a.tokens) < std::tie(b.records, b.tokens);
    }
    static void add(micro_step_tally& sum, const micro_step_tally& t, int sign) {
        if (sign > 0) {
            sum.records += t.records;
            sum.heavy += t.heavy;
            sum.tokens += t.tokens;
        } else {
            sum.records -= t.records;
            sum.heavy -= t.heavy;
            sum.tokens -= t.tokens;
        }
    }

    // Swaps two micro-steps of different steps while a swap narrows the spread (the most
    // records a step over the fewest) or, at the same spread, evens the two steps' records (their
    // sum of squares falls), keeping both within the heavy bound: the best swap each pass, at
    // most 4S passes. Every pair of micro-steps is tried in plans of up to 64 micro-steps (a
    // stream's window); in larger ones only those of the richest or the poorest step.
    // O(S^2) a pass up to 64 micro-steps, O(S * M) above.
    void swap_to_even(std::span<const micro_step_tally> tally, std::size_t steps) {
        const std::size_t s = tally.size();
        const bool every_pair = s <= 64;
        for (std::size_t pass = 0; pass < 4 * s; ++pass) {
            rank_extremes(steps);
            const std::size_t rich = m_top[0];
            const std::size_t poor = m_bottom[0];
            const std::uint64_t most = m_sum[rich].records;
            const std::uint64_t fewest = m_sum[poor].records;
            if (most - fewest < 2) return;
            swap_choice best{most, fewest, 0, s, s};
            for (std::size_t x = 0; x < s; ++x) {
                const std::size_t a = m_step_of[x];
                if (!every_pair && a != rich && a != poor) continue;
                for (std::size_t y = 0; y < s; ++y) {
                    const std::size_t b = m_step_of[y];
                    if (b == a || (every_pair && y < x)) continue;
                    consider(tally, x, y, a, b, best);
                }
            }
            if (best.take == s) return;
            const std::size_t a = m_step_of[best.take];
            const std::size_t b = m_step_of[best.give];
            add(m_sum[a], tally[best.take], -1);
            add(m_sum[a], tally[best.give], 1);
            add(m_sum[b], tally[best.give], -1);
            add(m_sum[b], tally[best.take], 1);
            m_step_of[best.take] = static_cast<std::uint32_t>(b);
            m_step_of[best.give] = static_cast<std::uint32_t>(a);
        }
    }

    struct swap_choice {
        std::uint64_t most, fewest; // the spread after the swap: most / fewest
        std::uint64_t evened;       // how far the two steps' sum of squares falls
        std::size_t take, give;     // micro-step `take` leaves its step for `give`'s
    };

    // Whether swapping micro-steps x (in step a) and y (in step b) gives a smaller spread than
    // `best`; if so it becomes `best`.
    void consider(std::span<const micro_step_tally> tally, std::size_t x, std::size_t y,
                  std::size_t a, std::size_t b, swap_choice& best) const {
        const std::uint64_t ra = m_sum[a].records - tally[x].records + tally[y].records;
        const std::uint64_t rb = m_sum[b].records - tally[y].records + tally[x].records;
        const std::uint64_t ha = m_sum[a].heavy - tally[x].heavy + tally[y].heavy;
        const std::uint64_t hb = m_sum[b].heavy - tally[y].heavy + tally[x].heavy;
        if (ha > m_heavy_bound || hb > m_heavy_bound) return;
        const std::uint64_t most = std::max({ra, rb, other_most(a, b)});
        const std::uint64_t fewest = std::min({ra, rb, other_fewest(a, b)});
        // The two steps' records get closer: |ra - rb| < |sa - sb|; the sum of squares falls by
        // 2 d (|sa - sb| - d) for a move of d.
        const std::uint64_t sa = m_sum[a].records;
        const std::uint64_t sb = m_sum[b].records;
        const std::uint64_t before = sa > sb ? sa - sb : sb - sa;
        const std::uint64_t after = ra > rb ? ra - rb : rb - ra;
        const std::uint64_t evened = after < before ? before - after : 0;
        if (less_spread(most, fewest, best.most, best.fewest) ||
            (!less_spread(best.most, best.fewest, most, fewest) && evened > best.evened))
            best = {most, fewest, evened, x, y};
    }

    [[nodiscard]] static bool less_spread(std::uint64_t m1, std::uint64_t f1, std::uint64_t m2,
                                          std::uint64_t f2) noexcept {
        // m1 / f1 < m2 / f2, exactly: a plan holds at most 2^30 records, so each product is
        // below 2^60 (a step of no records: a spread of infinity).
        if (f1 == 0) return false;
        if (f2 == 0) return true;
        return m1 * f2 < m2 * f1;
    }

    // The three steps richest in records and the three poorest (ties: the lower step), so that
    // the most and fewest of the steps other than two are read in O(1).
    void rank_extremes(std::size_t steps) {
        m_top.clear();
        m_bottom.clear();
        for (std::size_t st = 0; st < steps; ++st) {
            keep_three(m_top, st, [this](std::size_t p, std::size_t q) {
                return m_sum[p].records > m_sum[q].records;
            });
            keep_three(m_bottom, st, [this](std::size_t p, std::size_t q) {
                return m_sum[p].records < m_sum[q].records;
            });
        }
    }
    template <class Before>
    static void keep_three(std::vector<std::size_t>& kept, std::size_t st, Before before) {
        auto at = kept.begin();
        while (at != kept.end() && !before(st, *at)) ++at;
        if (at - kept.begin() >= 3) return;
        kept.insert(at, st);
        if (kept.size() > 3) kept.pop_back();
    }
    [[nodiscard]] std::uint64_t other_most(std::size_t a, std::size_t b) const noexcept {
        for (const std::size_t st : m_top)
            if (st != a && st != b) return m_sum[st].records;
        return 0;
    }
    [[nodiscard]] std::uint64_t other_fewest(std::size_t a, std::size_t b) const noexcept {
        for (const std::size_t st : m_bottom)
            if (st != a && st != b) return m_sum[st].records;
        return ~std::uint64_t{0};
    }

    std::vector<std::uint32_t> m_step_of;  // by micro-step
    std::vector<std::uint32_t> m_micro_of; // by micro-step
    std::vector<std::uint32_t> m_order;
    std::vector<std::size_t> m_top;    // the steps richest in records, richest first
    std::vector<std::size_t> m_bottom; // the poorest, poorest first
    std::vector<std::size_t> m_room;   // by step
    std::vector<std::size_t> m_counts; // by step: its micro-steps (deal())
    std::vector<micro_step_tally> m_sum;
    std::uint64_t m_heavy_bound = 0;
};

} // namespace bcl::detail::tokens
