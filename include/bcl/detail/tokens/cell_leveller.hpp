#pragma once
// Internal: the micro-steps a record too dear to balance away leads, formed first, each of their
// cells filled up to the step's dearest; the rest dealt by LPT with a token capacity.

#include <bcl/detail/config.hpp>

#include <bcl/detail/tokens/cell_packer.hpp>

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <vector>

namespace bcl::detail::tokens {

/// A micro-step costs its dearest cell, and a record dearer than the mean cell sets the cost of
/// its micro-step whatever the plan. Levelling forms that micro-step first, with the R dearest
/// records left as its cells' first records, and fills each of its cells up to the dearest one,
/// greedily with the dearest record left that fits both the cost room and the token room (while
/// enough records are left to give every other cell one). What it takes lowers the mean of the
/// cells after it; then the next dearest record is checked the same way. The records left are
/// dealt by LPT with the token capacity (cell_packer) into the cells left. A record that
/// `closing` marks (one above the budget) may lead a cell but is never added to one, and a cell
/// it leads takes nothing more.
///
/// Records are places: place 0 is the dearest (by cost, ties to the lower index), and a free place
/// of cost at most a room, with tokens at most a room, is found by a segment tree over the places
/// holding the least tokens of a free place below each node: O(log n) per pick.
class cell_leveller {
public:
    void reserve(std::size_t records, std::size_t cells) {
        m_cell_of.reserve(records);
        m_place_cost.reserve(records);
        m_rest.reserve(records);
        m_tree.reserve(2 * std::bit_ceil(std::max<std::size_t>(records, 1)));
        m_load.reserve(cells);
        m_tokens.reserve(cells);
        m_packer.reserve(records, cells);
    }

    /// Plans the records of places `order` (place -> record, dearest first; `cost` and `tokens`
    /// by record) into `cells` cells of `capacity` tokens, micro-steps of `ranks` cells. True if
    /// every record found room and no cell is empty; then cell_of() gives each record's cell:
    /// the levelled micro-steps' cells first, then the dealt ones. `closing` (by record, or
    /// empty for none) marks the records that close their cell.
    bool plan(std::span<const std::uint32_t> order, std::span<const std::uint64_t> tokens,
              std::span<const std::uint64_t> cost, std::size_t cells, std::size_t ranks,
              std::uint64_t capacity, std::span<const std::uint8_t> closing = {}) {
        const std::size_t n = order.size();
        m_cell_of.assign(n, cell_packer::none);
        m_load.clear();
        m_tokens.clear();
        m_closed.clear();
        m_order = order;
        m_closing = closing;
        m_place_cost.resize(n);
        for (std::size_t p = 0; p < n; ++p) m_place_cost[p] = cost[order[p]];
        build(tokens, capacity);
        std::uint64_t left_cost = 0;
        for (const std::uint64_t c : m_place_cost) left_cost += c;
        std::size_t free_records = n;
        std::size_t cells_left = cells;
        std::size_t first_free = 0;
        while (cells_left >= ranks && free_records >= cells_left && first_free < n) {
            const std::uint64_t head = m_place_cost[first_free];
            // Not above the mean cell left (h * c <= S as h <= S / c, which cannot overflow).
            if (head <= left_cost / cells_left) break;
            // The R dearest free places start the step's cells.
            const std::size_t base = m_load.size();
            std::size_t p = first_free;
            for (std::size_t k = 0; k < ranks; ++k) {
                while (!is_free(p)) ++p;
                take(p, base + k, tokens);
                left_cost -= m_place_cost[p];
                --free_records;
            }
            cells_left -= ranks;
            const std::uint64_t level = m_load[base];
            for (std::size_t k = base + 1; k < base + ranks; ++k) {
                while (m_closed[k] == 0 && free_records > cells_left) {
                    const std::size_t q = dearest_within(level - m_load[k], capacity - m_tokens[k]);
                    if (q == nothing) break;
                    take(q, k, tokens);
                    left_cost -= m_place_cost[q];
                    --free_records;
                }
            }
            while (first_free < n && !is_free(first_free)) ++first_free;
        }
        // The rest, by LPT, into the cells left.
        m_rest.clear();
        for (std::size_t q = 0; q < n; ++q)
            if (is_free(q)) m_rest.push_back(order[q]);
        const std::size_t levelled = m_load.size();
        if (levelled + cells_left != cells) return false;
        if (m_rest.empty()) return cells_left == 0;
        if (!m_packer.deal(m_rest, tokens, cost, cells_left, capacity, closing)) return false;
        for (const std::uint32_t r : m_rest)
            m_cell_of[r] = static_cast<std::uint32_t>(levelled + m_packer.cell_of(r));
        return true;
    }

    [[nodiscard]] std::span<const std::uint32_t> cells_of() const noexcept { return m_cell_of; }

private:
    static constexpr std::size_t nothing = std::numeric_limits<std::size_t>::max();
    static constexpr std::uint64_t taken = std::numeric_limits<std::uint64_t>::max();

    [[nodiscard]] bool closes(std::uint32_t record) const noexcept {
        return !m_closing.empty() && m_closing[record] != 0;
    }
    // The segment tree: leaf p holds place p's tokens while it is free (more than any room for
    // a record that closes its cell, which no fill takes), `taken` after.
    void build(std::span<const std::uint64_t> tokens, std::uint64_t capacity) {
        const std::size_t n = m_order.size();
        m_leaves = std::bit_ceil(std::max<std::size_t>(n, 1));
        m_tree.assign(2 * m_leaves, taken);
        for (std::size_t p = 0; p < n; ++p)
            m_tree[m_leaves + p] = closes(m_order[p]) ? capacity + 1 : tokens[m_order[p]];
        for (std::size_t node = m_leaves; node-- > 1;)
            m_tree[node] = std::min(m_tree[2 * node], m_tree[2 * node + 1]);
    }
    [[nodiscard]] bool is_free(std::size_t p) const noexcept {
        return m_tree[m_leaves + p] != taken;
    }
    void take(std::size_t p, std::size_t cell, std::span<const std::uint64_t> tokens) {
        const std::uint32_t r = m_order[p];
        if (cell == m_load.size()) {
            m_load.push_back(0);
            m_tokens.push_back(0);
            m_closed.push_back(closes(r) ? 1 : 0);
        }
        m_cell_of[r] = static_cast<std::uint32_t>(cell);
        m_load[cell] += m_place_cost[p];
        m_tokens[cell] += tokens[r];
        std::size_t node = m_leaves + p;
        m_tree[node] = taken;
        for (node /= 2; node >= 1; node /= 2)
            m_tree[node] = std::min(m_tree[2 * node], m_tree[2 * node + 1]);
    }
    // The dearest free place of cost at most `cost_room` and tokens at most `token_room`.
    [[nodiscard]] std::size_t dearest_within(std::uint64_t cost_room,
                                             std::uint64_t token_room) const noexcept {
        const auto from = static_cast<std::size_t>(
            std::partition_point(m_place_cost.begin(), m_place_cost.end(),
                                 [cost_room](std::uint64_t c) { return c > cost_room; }) -
            m_place_cost.begin());
        return first_at_most(from, token_room);
    }
    // The first place >= from whose leaf is at most `bound`, or nothing.
    [[nodiscard]] std::size_t first_at_most(std::size_t from, std::uint64_t bound) const noexcept {
        if (from >= m_order.size()) return nothing;
        // Walk up from the leaf, then down the first subtree to the right that holds one.
        std::size_t node = m_leaves + from;
        if (m_tree[node] <= bound) return from;
        while (node > 1) {
            if (node % 2 == 0 && m_tree[node + 1] <= bound) {
                node += 1;
                while (node < m_leaves) node = m_tree[2 * node] <= bound ? 2 * node : 2 * node + 1;
                return node - m_leaves;
            }
            node /= 2;
        }
        return nothing;
    }

    std::span<const std::uint32_t> m_order;
    std::span<const std::uint8_t> m_closing; // by record: it closes its cell
    std::vector<std::uint64_t> m_place_cost; // by place
    std::vector<std::uint32_t> m_cell_of;    // by record
    std::vector<std::uint32_t> m_rest;       // records left to deal, dearest first
    std::vector<std::uint64_t> m_tree;
    std::size_t m_leaves = 1;
    std::vector<std::uint64_t> m_load;   // levelled cells' costs
    std::vector<std::uint64_t> m_tokens; // and tokens
    std::vector<std::uint8_t> m_closed;  // and whether a record that closes it leads it
    cell_packer m_packer;
};

} // namespace bcl::detail::tokens
