#pragma once
// Internal: the packed global plan, from integer costs in cost order to a (step, rank) per record.

#include <bcl/detail/config.hpp>

#include <bcl/detail/plan/geometry.hpp>
#include <bcl/detail/plan/kk_groups.hpp>
#include <bcl/detail/plan/layout_totals.hpp>
#include <bcl/detail/plan/pack_dealer.hpp>
#include <bcl/detail/plan/step_leveller.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace bcl::detail::plan {

/// The packed plan of a window (batch cost = the sum of its records' costs), run() in the steps
/// of docs/global.md ("The algorithm"; 1 and 2, the integers and the places, are the caller's):
///   3. level_steps: the steps led by a record too dear to balance away, each filled up to that
///      record's pack (step_leveller);
///   4, 5. deal_and_refine: the records left dealt by LPT into the remaining packs and refined
///      (pack_dealer);
///   6. cut_into_steps, order_steps, seat_packs: the dealt full packs, heaviest first, cut into
///      steps of R; the full steps ordered by their heaviest pack (ties: levelled first, then in
///      the order formed), the short step last; the j-th heaviest pack of the s-th step goes to
///      rank (j + s) mod R (geometry::rank_of);
///   7. keep the better (in form_packs): levelling is a heuristic that can lose, most of all when
///      one levelled step must take every record left (a window of one step). So when it forms a
///      step, the flat plan of the same window (4 to 6 over every record, as with levelling off)
///      is made too, and the levelled plan is kept only if its objective is at most the flat
///      one's: the plan never has a larger objective than the flat plan of its window, by
///      construction. That costs a second dealing where a step is levelled; a window that levels
///      nothing is the flat plan and costs nothing more;
///   8. keep_kk_if_lighter: a window of one step is also split by Karmarkar-Karp (kk_groups), and
///      those packs kept where their heaviest is lighter.
/// Scratch is kept between windows.
class packed_layout {
public:
    /// Refinement passes after dealing (each O(n)): the passes after the first few swap next to
    /// nothing on the bundled workloads (docs/global.md).
    static constexpr std::size_t refine_passes = 4;

    void reserve(std::size_t n, std::size_t packs, std::size_t batch) {
        m_rest.reserve(packs, batch);
        m_flat.reserve(packs, batch);
        m_leveller.reserve(n, packs);
        m_kk.reserve(n);
        m_by_index.reserve(n);
        m_members.reserve(n);
        m_load.reserve(packs);
        m_step_pack.reserve(packs);
        m_slot.reserve(packs);
        m_step_order.reserve(packs);
        m_every_place.reserve(n);
    }

    /// Plans the records in cost order (`cost` by place, descending; `index` the input index of
    /// the record at each place) into out[input index] = {step, rank}. `Slot` is an aggregate of
    /// two uint32_t. Levelling (step 3) runs only if `levelling`; without it every pack is dealt
    /// alike (the flat plan).
    template <class Slot>
    layout_totals run(const geometry& g, std::span<const std::uint64_t> cost,
                      std::span<const std::uint32_t> index, std::span<Slot> out, bool levelling) {
        layout_totals totals;
        if (cost.empty()) return totals;
        // Sized for every pack of the window, however many levelling takes: the scratch then
        // depends on the window's size alone, not on its costs.
        reserve(cost.size(), g.packs(), g.batch);
        totals.total = sum_of(cost);
        totals.lower_bound = lower_bound(g, cost, totals.total);
        const std::size_t levelled = form_packs(g, cost, totals.total, levelling);
        order_steps(g);
        seat_packs(g);
        sum_steps(g, totals);
        write_slots(g, levelled, index, out);
        if (g.steps == 1) keep_kk_if_lighter(g, cost, index, out, totals);
        return totals;
    }

private:
    struct slot {
        std::uint32_t step;
        std::uint32_t rank;
    };

    [[nodiscard]] static std::uint64_t sum_of(std::span<const std::uint64_t> cost) noexcept {
        std::uint64_t sum = 0;
        for (const std::uint64_t c : cost) sum += c;
        return sum;
    }

    // Steps 3 to 7: the packs of the plan kept, cut into steps (m_load, m_step_pack). Returns how
    // many levelled steps it has: 0 for the flat plan (m_flat's packs), else those steps and
    // m_rest's packs.
    std::size_t form_packs(const geometry& g, std::span<const std::uint64_t> cost,
                           std::uint64_t total, bool levelling) {
        const std::size_t formed = level_steps(g, cost, total, levelling);
        std::uint64_t levelled = 0;
        if (formed > 0) {
            deal_and_refine(m_rest, m_leveller.rest(), cost, g.ranks * (g.full_steps() - formed),
                            g);
            levelled = cut_into_steps(g, formed, m_rest);
        }
        deal_and_refine(m_flat, every_place(cost.size()), cost, g.full_packs, g);
        const std::uint64_t flat = cut_into_steps(g, 0, m_flat);
        // Keep the better: the levelled plan unless the flat one is lighter.
        if (formed == 0 || flat < levelled) return 0;
        (void)cut_into_steps(g, formed, m_rest); // the levelled plan's steps back
        return formed;
    }

    // Step 3: the steps led by a record too dear to balance away; how many it formed.
    std::size_t level_steps(const geometry& g, std::span<const std::uint64_t> cost,
                            std::uint64_t total, bool levelling) {
        return levelling ? m_leveller.level(cost, g.ranks, g.batch, g.full_steps(), total) : 0;
    }

    // Steps 4 and 5: the records at `places` dealt by LPT into `full` packs of B and the window's
    // short packs, then refined.
    static void deal_and_refine(pack_dealer& dealer, std::span<const std::uint32_t> places,
                                std::span<const std::uint64_t> cost, std::size_t full,
                                const geometry& g) {
        dealer.deal(places, cost, full, g.short_packs, g.batch, g.last_size);
        dealer.refine(refine_passes);
    }

    // Every place, 0 to n-1: the flat plan deals every record.
    [[nodiscard]] std::span<const std::uint32_t> every_place(std::size_t n) {
        m_every_place.resize(n);
        for (std::size_t at = 0; at < n; ++at) m_every_place[at] = static_cast<std::uint32_t>(at);
        return m_every_place;
    }

    // Step 6, the cut: the packs of a plan (the `formed` levelled steps, then `dealer`'s packs,
    // as base + its id) into steps: m_load by pack, and step t's packs at m_step_pack[t*R...],
    // heaviest first (levelled steps sorted here, the dealt full packs cut by load, the short
    // packs last). Returns the plan's objective, the sum over its steps of the heaviest pack.
    std::uint64_t cut_into_steps(const geometry& g, std::size_t formed, pack_dealer& dealer) {
        const std::size_t base = formed * g.ranks;
        const std::size_t packs = base + dealer.packs();
        m_load.resize(packs);
        for (std::size_t p = 0; p < base; ++p) m_load[p] = m_leveller.load(p);
        for (std::size_t p = 0; p < dealer.packs(); ++p) m_load[base + p] = dealer.load(p);
        m_step_pack.resize(packs);
        for (std::size_t p = 0; p < base; ++p) m_step_pack[p] = static_cast<std::uint32_t>(p);
        for (std::size_t t = 0; t < formed; ++t)
            std::sort(m_step_pack.begin() + static_cast<std::ptrdiff_t>(t * g.ranks),
                      m_step_pack.begin() + static_cast<std::ptrdiff_t>((t + 1) * g.ranks),
                      [this](std::uint32_t a, std::uint32_t b) { return heavier(a, b); });
        append_heaviest_first(dealer, 0, dealer.full_packs(), base, base);
        append_heaviest_first(dealer, dealer.full_packs(), dealer.packs(),
                              base + dealer.full_packs(), base);
        std::uint64_t objective = 0;
        for (std::size_t t = 0; t < g.steps; ++t) objective += top_of(g, t);
        return objective;
    }

    [[nodiscard]] bool heavier(std::uint32_t a, std::uint32_t b) const noexcept {
        return m_load[a] > m_load[b] || (m_load[a] == m_load[b] && a < b);
    }

    // The dealer's packs [first, last), heaviest first, at m_step_pack[at...] as base + id.
    void append_heaviest_first(pack_dealer& dealer, std::size_t first, std::size_t last,
                               std::size_t at, std::size_t base) {
        const std::span<std::uint32_t> to(m_step_pack.data() + at, last - first);
        dealer.heaviest_first(first, last, to);
        for (std::uint32_t& p : to) p += static_cast<std::uint32_t>(base);
    }

    // The heaviest pack of step t as cut (before order_steps).
    [[nodiscard]] std::uint64_t top_of(const geometry& g, std::size_t t) const noexcept {
        return m_load[m_step_pack[t * g.ranks]];
    }

    // Step 6, the order: the full steps as cut, heaviest first (ties: in the order cut, so
    // levelled steps first), into m_step_order; the short step stays last.
    void order_steps(const geometry& g) {
        const std::size_t full_steps = g.full_steps();
        m_step_order.resize(full_steps);
        for (std::size_t t = 0; t < full_steps; ++t)
            m_step_order[t] = static_cast<std::uint32_t>(t);
        std::sort(m_step_order.begin(), m_step_order.end(), [&](std::uint32_t a, std::uint32_t b) {
            const std::uint64_t la = top_of(g, a);
            const std::uint64_t lb = top_of(g, b);
            return la > lb || (la == lb && a < b);
        });
    }

    // Step 6, the ranks: the j-th heaviest pack of the s-th step in order goes to
    // (s, rank_of(j, s)), into m_slot by pack.
    void seat_packs(const geometry& g) {
        m_slot.resize(m_load.size());
        for (std::size_t s = 0; s < g.steps; ++s) {
            const std::size_t t = s < g.full_steps() ? m_step_order[s] : s;
            for (std::size_t j = 0; j < g.ranks; ++j)
                m_slot[m_step_pack[t * g.ranks + j]] = {static_cast<std::uint32_t>(s),
                                                        g.rank_of(j, s)};
        }
    }

    // The plan kept's objective (the sum over its steps of the heaviest pack) and heaviest pack.
    void sum_steps(const geometry& g, layout_totals& totals) const noexcept {
        for (std::size_t t = 0; t < g.steps; ++t) {
            totals.objective += top_of(g, t);
            totals.heaviest = std::max(totals.heaviest, top_of(g, t));
        }
    }

    // Every record's slot, out[index[place]]: the dealer's packs follow the `levelled` steps'.
    template <class Slot>
    void write_slots(const geometry& g, std::size_t levelled, std::span<const std::uint32_t> index,
                     std::span<Slot> out) const {
        const pack_dealer& dealer = levelled > 0 ? m_rest : m_flat;
        const std::size_t base = levelled * g.ranks;
        for (std::size_t p = 0; p < dealer.packs(); ++p)
            for (const std::uint32_t at : dealer.members(p)) {
                const slot& s = m_slot[base + p];
                out[index[at]] = Slot{s.step, s.rank};
            }
        if (levelled > 0)
            for (std::size_t at = 0; at < index.size(); ++at)
                if (const std::uint32_t p = m_leveller.pack_of(at); p != step_leveller::none)
                    out[index[at]] = Slot{m_slot[p].step, m_slot[p].rank};
    }

    // Step 8: a window of one step is one partition of its records into R packs of equal size,
    // which largest differencing (kk_groups, as verl splits a batch) often balances better than
    // dealing does: its packs replace the plan when their heaviest is lighter (ties keep the
    // plan). The j-th heaviest group goes to rank_of(j, 0) = j, as the packs of a first step do.
    template <class Slot>
    void keep_kk_if_lighter(const geometry& g, std::span<const std::uint64_t> cost,
                            std::span<const std::uint32_t> index, std::span<Slot> out,
                            layout_totals& totals) {
        const std::size_t n = cost.size();
        m_by_index.resize(n);
        for (std::size_t at = 0; at < n; ++at) m_by_index[index[at]] = cost[at];
        m_kk.split(m_by_index, g.ranks);
        const std::uint64_t heaviest = m_kk.load(0);
        if (heaviest >= totals.objective) return;
        for (std::size_t j = 0; j < g.ranks; ++j) {
            m_kk.members(j, m_members);
            for (const std::uint32_t i : m_members) out[i] = Slot{0, g.rank_of(j, 0)};
        }
        totals.objective = heaviest;
        totals.heaviest = heaviest;
    }

    // A bound on the objective of any plan. The steps' heaviest packs hold at least their means,
    // so it is at least total / R (rounded up). The dearest record v's step costs at least
    // d = v + the fewest records that must share its pack (the cheapest). If d is above
    // T = the B dearest other records (the most any other pack can hold), that step holds at
    // most M + (R-1) T for its cost M >= d, and the other steps at least their means:
    // M + (total - M - (R-1) T) / R, which grows with M, so take M = d.
    [[nodiscard]] static std::uint64_t lower_bound(const geometry& g,
                                                   std::span<const std::uint64_t> cost,
                                                   std::uint64_t total) noexcept {
        const std::size_t n = cost.size();
        const auto ceil_div = [](std::uint64_t a, std::uint64_t b) { return a / b + (a % b != 0); };
        const std::size_t least_size = g.short_packs > 0 ? g.last_size : g.batch;
        std::uint64_t dear = cost[0];
        for (std::size_t k = 1; k < least_size; ++k) dear += cost[n - k];
        std::uint64_t others = 0; // T
        for (std::size_t k = 1; k <= g.batch && k < n; ++k) others += cost[k];
        std::uint64_t bound = std::max(dear, ceil_div(total, g.ranks));
        const std::uint64_t held = dear + (g.ranks - 1) * others;
        if (dear > others && total > held)
            bound = std::max(bound, dear + ceil_div(total - held, g.ranks));
        return bound;
    }

    kk_groups m_kk;                        // a window of one step's candidate
    std::vector<std::uint64_t> m_by_index; // its costs by input index
    std::vector<std::uint32_t> m_members;  // one group's records
    pack_dealer m_rest;                    // the records levelling left (when it formed a step)
    pack_dealer m_flat;                    // every record (the flat plan)
    step_leveller m_leveller;
    std::vector<std::uint32_t> m_every_place; // 0, 1, ..., n-1 (the flat plan)
    std::vector<std::uint64_t> m_load;        // by pack
    std::vector<std::uint32_t> m_step_pack;   // step t's packs at [t*R, (t+1)*R), heaviest first
    std::vector<slot> m_slot;                 // by pack
    std::vector<std::uint32_t> m_step_order;  // full steps, heaviest first
};

} // namespace bcl::detail::plan
