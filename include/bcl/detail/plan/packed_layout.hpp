#pragma once
// Internal: the packed global plan, from ranked integer costs to a (step, rank) per record.

#include <bcl/detail/config.hpp>

#include <bcl/detail/plan/geometry.hpp>
#include <bcl/detail/plan/kk_groups.hpp>
#include <bcl/detail/plan/pack_dealer.hpp>
#include <bcl/detail/plan/step_leveller.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace bcl::detail::plan {

/// What a layout reports, in quantized units.
struct layout_totals {
    std::uint64_t total = 0;       ///< sum of the costs (padded: of the packs' padded costs)
    std::uint64_t objective = 0;   ///< sum over steps of the step's heaviest pack
    std::uint64_t heaviest = 0;    ///< heaviest pack
    std::uint64_t lower_bound = 0; ///< no plan has a smaller objective
};

/// The packed plan of a window (batch cost = the sum of its records' costs):
///   1. levelling (step_leveller): the steps led by a record too dear to balance away, each
///      filled up to that record's pack;
///   2. the records left dealt by LPT into the remaining packs and refined (pack_dealer);
///   3. the dealt full packs, heaviest first, cut into steps of R; the full steps ordered by
///      their heaviest pack (ties: levelled first, then in the order formed), the short step
///      last; the j-th heaviest pack of the s-th step goes to rank (j + s) mod R.
/// Levelling is a heuristic that can lose, most of all when one levelled step must take every
/// record left (a window of one step). So when it forms a step, the flat plan of the same window
/// (steps 2 and 3 over every record, as with levelling off) is made too, and the levelled plan is
/// kept only if its objective is at most the flat one's: the plan never has a larger objective
/// than the flat plan of its window, by construction. That costs a second dealing where a step
/// is levelled; a window that levels nothing is the flat plan and costs nothing more. Scratch is
/// kept between windows.
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
        m_all.reserve(n);
    }

    /// Plans the ranked costs (`cost` by rank, descending; `order` the input index of each rank)
    /// into out[input index] = {step, rank}. `Slot` is an aggregate of two uint32_t. Step 1 runs
    /// only if `levelling`; without it every pack is dealt alike (the flat plan).
    template <class Slot>
    layout_totals run(const geometry& g, std::span<const std::uint64_t> cost,
                      std::span<const std::uint32_t> order, std::span<Slot> out, bool levelling) {
        layout_totals totals;
        const std::size_t n = cost.size();
        if (n == 0) return totals;
        for (const std::uint64_t c : cost) totals.total += c;
        // Sized for every pack of the window, however many levelling takes: the scratch then
        // depends on the window's size alone, not on its costs.
        reserve(n, g.packs(), g.batch);
        totals.lower_bound = lower_bound(g, cost, totals.total);
        const std::size_t kept = form_packs(g, cost, totals.total, levelling);
        const pack_dealer& dealer = kept > 0 ? m_rest : m_flat;
        const std::size_t full_steps = g.full_steps();

        // Full steps, heaviest first; the short step stays last.
        m_step_order.resize(full_steps);
        for (std::size_t t = 0; t < full_steps; ++t)
            m_step_order[t] = static_cast<std::uint32_t>(t);
        std::sort(m_step_order.begin(), m_step_order.end(), [&](std::uint32_t a, std::uint32_t b) {
            const std::uint64_t la = m_load[m_step_pack[a * g.ranks]];
            const std::uint64_t lb = m_load[m_step_pack[b * g.ranks]];
            return la > lb || (la == lb && a < b);
        });
        m_slot.resize(m_load.size());
        for (std::size_t s = 0; s < g.steps; ++s) {
            const std::size_t t = s < full_steps ? m_step_order[s] : s;
            for (std::size_t j = 0; j < g.ranks; ++j) {
                const std::uint32_t p = m_step_pack[t * g.ranks + j];
                m_slot[p] = {static_cast<std::uint32_t>(s),
                             static_cast<std::uint32_t>((j + s) % g.ranks)};
            }
            const std::uint64_t top = m_load[m_step_pack[t * g.ranks]];
            totals.objective += top;
            totals.heaviest = std::max(totals.heaviest, top);
        }
        const std::size_t base = kept * g.ranks;
        for (std::size_t p = 0; p < dealer.packs(); ++p)
            for (const std::uint32_t r : dealer.members(p)) {
                const slot& at = m_slot[base + p];
                out[order[r]] = Slot{at.step, at.rank};
            }
        if (kept > 0)
            for (std::size_t r = 0; r < n; ++r)
                if (const std::uint32_t p = m_leveller.pack_of(r); p != step_leveller::none)
                    out[order[r]] = Slot{m_slot[p].step, m_slot[p].rank};
        if (g.steps == 1) keep_kk_if_lighter(g, cost, order, out, totals);
        return totals;
    }

private:
    struct slot {
        std::uint32_t step;
        std::uint32_t rank;
    };

    // A window of one step is one partition of its records into R packs of equal size, which
    // largest differencing (kk_groups, as verl splits a batch) often balances better than
    // dealing does: its packs replace the plan when their heaviest is lighter (ties keep the
    // plan). The j-th heaviest group goes to rank j, as the dealt packs of a first step do.
    template <class Slot>
    void keep_kk_if_lighter(const geometry& g, std::span<const std::uint64_t> cost,
                            std::span<const std::uint32_t> order, std::span<Slot> out,
                            layout_totals& totals) {
        const std::size_t n = cost.size();
        m_by_index.resize(n);
        for (std::size_t r = 0; r < n; ++r) m_by_index[order[r]] = cost[r];
        m_kk.split(m_by_index, g.ranks);
        const std::uint64_t heaviest = m_kk.load(0);
        if (heaviest >= totals.objective) return;
        for (std::size_t k = 0; k < g.ranks; ++k) {
            m_kk.members(k, m_members);
            for (const std::uint32_t i : m_members) out[i] = Slot{0, static_cast<std::uint32_t>(k)};
        }
        totals.objective = heaviest;
        totals.heaviest = heaviest;
    }

    // The packs of the plan kept, arranged into steps (m_load, m_step_pack). Returns how many
    // levelled steps it has: 0 for the flat plan (m_flat's packs), else those steps and m_rest's
    // packs. Levelling forms its steps and deals the rest; the flat plan is made too, and the
    // levelled one is kept unless the flat one's objective is smaller.
    std::size_t form_packs(const geometry& g, std::span<const std::uint64_t> cost,
                           std::uint64_t total, bool levelling) {
        const std::size_t full_steps = g.full_steps();
        const std::size_t formed =
            levelling ? m_leveller.level(cost, g.ranks, g.batch, full_steps, total) : 0;
        if (formed > 0) {
            m_rest.deal(m_leveller.rest(), cost, g.ranks * (full_steps - formed), g.short_packs,
                        g.batch, g.last_size);
            m_rest.refine(refine_passes);
            const std::uint64_t levelled = arrange(g, formed, m_rest);
            deal_flat(g, cost);
            if (arrange(g, 0, m_flat) < levelled) return 0;
            (void)arrange(g, formed, m_rest); // the levelled plan's arrangement back
            return formed;
        }
        deal_flat(g, cost);
        (void)arrange(g, 0, m_flat);
        return 0;
    }

    // The flat plan's packs: every record dealt by LPT and refined.
    void deal_flat(const geometry& g, std::span<const std::uint64_t> cost) {
        m_all.resize(cost.size());
        for (std::size_t r = 0; r < cost.size(); ++r) m_all[r] = static_cast<std::uint32_t>(r);
        m_flat.deal(m_all, cost, g.full_packs, g.short_packs, g.batch, g.last_size);
        m_flat.refine(refine_passes);
    }

    // The packs of a plan (the `formed` levelled steps, then `dealer`'s packs, as base + its id)
    // into steps: m_load by pack, and step t's packs at m_step_pack[t*R...], heaviest first
    // (levelled steps sorted here, the dealt full packs cut by load, the short packs last).
    // Returns the plan's objective, the sum over its steps of the heaviest pack.
    std::uint64_t arrange(const geometry& g, std::size_t formed, pack_dealer& dealer) {
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
        append_by_load(dealer, 0, dealer.full_packs(), base, base);
        append_by_load(dealer, dealer.full_packs(), dealer.packs(), base + dealer.full_packs(),
                       base);
        std::uint64_t objective = 0;
        for (std::size_t t = 0; t < g.steps; ++t) objective += m_load[m_step_pack[t * g.ranks]];
        return objective;
    }

    [[nodiscard]] bool heavier(std::uint32_t a, std::uint32_t b) const noexcept {
        return m_load[a] > m_load[b] || (m_load[a] == m_load[b] && a < b);
    }

    // The dealer's packs [first, last), heaviest first, at m_step_pack[at...] as base + id.
    void append_by_load(pack_dealer& dealer, std::size_t first, std::size_t last, std::size_t at,
                        std::size_t base) {
        dealer.sort_by_load(first, last);
        const std::span<const std::uint64_t> words = dealer.sorted_words();
        for (std::size_t k = 0; k < words.size(); ++k)
            m_step_pack[at + k] =
                static_cast<std::uint32_t>(base + dealer.id_of(words[words.size() - 1 - k]));
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
    std::vector<std::uint32_t> m_all;        // 0, 1, ..., n-1 (the flat plan)
    std::vector<std::uint64_t> m_load;       // by pack
    std::vector<std::uint32_t> m_step_pack;  // step t's packs at [t*R, (t+1)*R), heaviest first
    std::vector<slot> m_slot;                // by pack
    std::vector<std::uint32_t> m_step_order; // full steps, heaviest first
};

} // namespace bcl::detail::plan
