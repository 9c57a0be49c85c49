#pragma once
// Internal: a token plan's units dealt into its cells (R a micro-step, M micro-steps a step, K
// steps) and the cells laid out into micro-steps: the deals tried in turn at one count, and the
// stream's test of which prefix of its candidates packs.

#include <bcl/detail/config.hpp>

#include <bcl/detail/plan/word_sort.hpp>
#include <bcl/detail/tokens/cell_leveller.hpp>
#include <bcl/detail/tokens/cell_packer.hpp>
#include <bcl/detail/tokens/cell_rebalancer.hpp>
#include <bcl/detail/tokens/first_fit.hpp>
#include <bcl/detail/tokens/micro_layout.hpp>
#include <bcl/detail/tokens/rank_groups.hpp>
#include <bcl/detail/tokens/search_packer.hpp>
#include <bcl/detail/tokens/token_records.hpp>
#include <bcl/detail/tokens/token_units.hpp>

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <numeric>
#include <span>
#include <utility>
#include <vector>

namespace bcl::detail::tokens {

/// Deals a plan's units into cells at one micro-batch count, and lays the cells out. The deals,
/// in turn: LPT with the token capacity (cell_packer); where it leaves a unit without room, the
/// units by tokens (by LPT when costs do not follow tokens, then first fit, then, in small plans,
/// the bounded search), whose balance moves and swaps win back (cell_rebalancer); where a unit
/// outweighs the mean cell, levelled micro-steps (cell_leveller), kept if they cost less. Groups
/// kept to a rank go to (step, rank) bins first (rank_group_dealer). Keeps its scratch.
class cell_planner {
public:
    /// order(): the indices of `cost`, dearest first (ties to the lower index). A radix sort of
    /// one word per record ((top - cost) above the index's bits) where the costs leave room for
    /// the index, as the records' own do; a comparison sort otherwise (groups' summed costs).
    void order_by_cost(std::span<const std::uint64_t> cost) {
        const std::size_t n = cost.size();
        m_order.resize(n);
        const auto index_bits = static_cast<unsigned>(std::bit_width(n));
        const std::uint64_t top = n == 0 ? 0 : *std::max_element(cost.begin(), cost.end());
        if (index_bits < 64 && top < (std::uint64_t{1} << (64 - index_bits))) {
            m_words.resize(n);
            for (std::size_t i = 0; i < n; ++i) m_words[i] = ((top - cost[i]) << index_bits) | i;
            m_word_sort(m_words, index_bits);
            const std::uint64_t mask = (std::uint64_t{1} << index_bits) - 1;
            for (std::size_t p = 0; p < n; ++p)
                m_order[p] = static_cast<std::uint32_t>(m_words[p] & mask);
            return;
        }
        std::iota(m_order.begin(), m_order.end(), std::uint32_t{0});
        std::sort(m_order.begin(), m_order.end(), [cost](std::uint32_t a, std::uint32_t b) {
            return cost[a] > cost[b] || (cost[a] == cost[b] && a < b);
        });
    }

    /// A stream window's candidates (`cost`, by record) dearest first, once per window
    /// (order_by_cost): the order packs() filters to each prefix it tries.
    void order_candidates(std::span<const std::uint64_t> cost) {
        order_by_cost(cost);
        m_by_cost.assign(m_order.begin(), m_order.end());
    }

    /// Whether LPT packs the first `count` of `records` (order_candidates() made their order)
    /// into `cells` cells of `capacity` tokens. The last prefix that packed is remembered, so
    /// that plan() of that prefix into those cells keeps the deal instead of dealing again.
    bool packs(const token_records& records, std::size_t count, std::size_t cells,
               std::uint64_t capacity) {
        m_prefix.clear();
        for (const std::uint32_t r : m_by_cost)
            if (r < count) m_prefix.push_back(r);
        const bool ok =
            m_packer.deal(m_prefix, std::span<const std::uint64_t>(records.tokens).first(count),
                          std::span<const std::uint64_t>(records.cost).first(count), cells,
                          capacity, std::span<const std::uint8_t>(records.alone).first(count));
        m_last_packed = ok ? count : not_packed;
        return ok;
    }

    /// The prefix that packs() packed last, or not_packed.
    [[nodiscard]] std::size_t last_packed() const noexcept { return m_last_packed; }
    static constexpr std::size_t not_packed = ~std::size_t{0};

    /// Plans the units `u` into `steps` steps of `micro` micro-steps of R cells each of
    /// `capacity` tokens (by_rank: groups kept to their rank; allow_empty: cells may be left
    /// empty). True if it packed; then cell_of() (by unit) and layout() hold the plan kept.
    /// `dealt`: packs() just packed these units (the prefix it tried last) into these cells, and
    /// that deal is kept.
    bool plan(const token_units& u, std::size_t r, std::size_t steps, std::size_t micro,
              std::uint64_t capacity, bool by_rank, bool allow_empty, bool dealt = false) {
        m_allow_empty = allow_empty;
        m_steps_free = !by_rank;
        if (by_rank) return plan_by_rank(u, r, steps, micro, capacity);
        const std::size_t cells = r * steps * micro;
        if (dealt)
            m_order.assign(m_prefix.begin(), m_prefix.end());
        else
            order_by_cost(u.cost);
        const bool found = dealt ? keep_deal(u, m_packer.cells_of(), false, cells, capacity)
                                 : deal_units(u, cells, capacity);
        const std::uint64_t best = found ? m_layout.lay_out(m_cell_of, u.cost, cells, r, micro) : 0;
        // Levelling forms a micro-step only where the dearest record is above the mean cell;
        // elsewhere it would deal every record as LPT just did. Where no deal packed at this
        // count, levelling (the same deal after a few steps) is not tried either: a failed count
        // then costs one deal, not three.
        // Levelled cells are filled by cost, not tokens, so they need room: where the records
        // leave less than 1/32 of the cells' tokens free, the levelled deal (a whole LPT pass)
        // does not pack, as a rule, and is not tried.
        // (h * c > S as h > S / c: a group's summed cost times the cells may pass 2^64.)
        const std::uint64_t room = cells * capacity;
        const bool levels = found && !m_allow_empty && u.cost[m_order[0]] > sum(u.cost) / cells &&
                            room - std::min(room, sum(u.tokens)) >= room / 32;
        if (levels && m_leveller.plan(m_order, u.tokens, u.cost, cells, r, capacity, u.alone)) {
            const std::uint64_t levelled =
                m_alt_layout.lay_out(m_leveller.cells_of(), u.cost, cells, r, micro);
            if (levelled < best) {
                std::swap(m_layout, m_alt_layout);
                m_cell_of.assign(m_leveller.cells_of().begin(), m_leveller.cells_of().end());
            }
        }
        return found;
    }

    /// Where each unit went in the plan kept: its cell.
    [[nodiscard]] std::span<const std::uint32_t> cell_of() const noexcept { return m_cell_of; }
    /// The plan kept, laid out into micro-steps.
    [[nodiscard]] micro_layout& layout() noexcept { return m_layout; }
    /// False where groups bind their records to a step (the step dealing would move them).
    [[nodiscard]] bool steps_free() const noexcept { return m_steps_free; }

private:
    [[nodiscard]] static std::uint64_t sum(std::span<const std::uint64_t> v) noexcept {
        return std::accumulate(v.begin(), v.end(), std::uint64_t{0});
    }

    // Deals the units (m_order, dearest first) into `cells` cells: LPT with the token capacity
    // (cell_packer), or, where it leaves a unit without room, the units by tokens, largest
    // first: by LPT when costs do not follow tokens (when they do, as the default cost's, that
    // is the deal just tried), then by first fit (each to the lowest cell with room; first_fit),
    // the tightest greedy packing, then, in small plans, the bounded search (search_packer).
    // LPT first: most counts tried pack by it, in one pass. True if a deal packed; m_cell_of
    // then holds it.
    bool deal_units(const token_units& u, std::size_t cells, std::uint64_t capacity) {
        if (m_packer.deal(m_order, u.tokens, u.cost, cells, capacity, u.alone, m_allow_empty))
            return keep_deal(u, m_packer.cells_of(), false, cells, capacity);
        const bool differs = by_tokens_differs(u);
        const std::span<const std::uint32_t> by_tokens = differs ? m_by_tokens : m_order;
        if (differs &&
            m_packer.deal(m_by_tokens, u.tokens, u.cost, cells, capacity, u.alone, m_allow_empty))
            return keep_deal(u, m_packer.cells_of(), false, cells, capacity);
        if (m_first_fit.deal(by_tokens, u.tokens, cells, capacity, u.alone, m_allow_empty))
            return keep_deal(u, m_first_fit.cell_of(), true, cells, capacity);
        if (!m_allow_empty && by_tokens.size() <= search_records &&
            m_search.pack(by_tokens, u.tokens, cells, capacity, u.alone, search_budget))
            return keep_deal(u, m_search.cell_of(), true, cells, capacity);
        return false;
    }

    // Keeps `placed` (by unit: its cell) as m_cell_of. A packing for tokens (`tight`: first
    // fit, the search) gives up balance; moves and swaps (cell_rebalancer) win it back where the
    // plan has few enough cells. LPT's deals balance as they pack and are kept as they are.
    // Returns true.
    bool keep_deal(const token_units& u, std::span<const std::uint32_t> placed, bool tight,
                   std::size_t cells, std::uint64_t capacity) {
        m_cell_of.assign(placed.begin(), placed.end());
        if (tight && cells <= rebalance_cells)
            m_rebalancer.rebalance(m_cell_of, u.tokens, u.cost, cells, capacity, u.alone,
                                   2 * cells);
        return true;
    }

    // m_by_tokens: the units by tokens, largest first (ties: the dearer, then the lower index).
    // False, and m_by_tokens untouched, when that is m_order (costs follow tokens).
    bool by_tokens_differs(const token_units& u) {
        const auto before = [&u](std::uint32_t a, std::uint32_t b) {
            const std::uint64_t ta = u.tokens[a];
            const std::uint64_t tb = u.tokens[b];
            return ta > tb ||
                   (ta == tb && (u.cost[a] > u.cost[b] || (u.cost[a] == u.cost[b] && a < b)));
        };
        if (std::is_sorted(m_order.begin(), m_order.end(), before)) return false;
        m_by_tokens.assign(m_order.begin(), m_order.end());
        std::sort(m_by_tokens.begin(), m_by_tokens.end(), before);
        return true;
    }

    // Groups kept to one rank: each group to a (step, rank) bin and each bin's units to its
    // cells (rank_group_dealer), then within each step each rank's cells, dearest first, lined
    // up across ranks (the k-th dearest of every rank in micro-step k).
    bool plan_by_rank(const token_units& u, std::size_t r, std::size_t steps, std::size_t micro,
                      std::uint64_t capacity) {
        order_by_cost(u.cost);
        if (!m_rank_groups.deal(m_order, u.tokens, u.cost, u.alone, u.group_of, u.group_tokens,
                                u.group_cost, r * steps, micro, capacity, m_allow_empty))
            return false;
        m_cell_of.assign(m_rank_groups.cell_of().begin(), m_rank_groups.cell_of().end());
        m_layout.lay_out_ranked(m_rank_groups.cell_load(), r, steps, micro);
        return true;
    }

    std::vector<std::uint32_t> m_order;     // units, dearest first
    std::vector<std::uint32_t> m_by_cost;   // a stream window's candidates, dearest first
    std::vector<std::uint32_t> m_prefix;    // those of a prefix
    std::vector<std::uint32_t> m_by_tokens; // the units by tokens, when not by cost
    std::size_t m_last_packed = not_packed; // the prefix of packs()'s last deal, if it packed
    std::vector<std::uint64_t> m_words;     // sort words
    plan::word_sort m_word_sort;
    std::vector<std::uint32_t> m_cell_of; // by unit: its cell in the plan kept
    cell_packer m_packer;
    rank_group_dealer m_rank_groups;
    first_fit_packer m_first_fit;
    cell_leveller m_leveller;
    micro_layout m_layout;
    micro_layout m_alt_layout;
    // The search where the greedy deals miss: plans of up to this many units, and at most this
    // many placements a count (exact on tight plans of tens of records; a few ms at most).
    static constexpr std::size_t search_records = 256;
    static constexpr std::size_t search_budget = 100000;
    search_packer m_search;
    // Balance won back after a packing for tokens: plans of up to this many cells, 2 rounds a
    // cell (each O(C) plus the dearest cell's records times its partners').
    static constexpr std::size_t rebalance_cells = 8192;
    cell_rebalancer m_rebalancer;
    bool m_steps_free = true;   // false where groups bind their records to a step
    bool m_allow_empty = false; // this count's deals may leave cells empty (padding)
};

} // namespace bcl::detail::tokens
