#pragma once
// Internal: records packed into cells (micro-batches) of at most T tokens by first fit, each to
// the lowest cell with room: the tightest packing of the deals, for a count LPT cannot fill.

#include <bcl/detail/config.hpp>

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace bcl::detail::tokens {

/// First fit: deal() takes records in the order given (largest first, for first fit decreasing)
/// and puts each into the lowest-numbered cell with room for its tokens, ignoring cost; packing
/// to the left leaves whole cells for the large records that come. A record that `closing` marks
/// (one above the budget, counted as T tokens) takes an empty cell and closes it: nothing joins
/// it, not even a record of no tokens. Cells left empty
/// then take the last-placed records of cells of two or more (taking a record out keeps a cell
/// within T), so no cell is empty when there are as many records as cells. Integers only: the
/// same on every platform. O(n log C) with a tree of the cells' room; the scratch is kept.
class first_fit_packer {
public:
    /// Deals `records` (indices into `tokens`, in the order to deal them) into `cells` empty
    /// cells of `capacity` tokens. True if every record found room and no cell is empty (or,
    /// with `allow_empty`, whether cells are left empty or not); then cell_of() gives each
    /// record's cell.
    bool deal(std::span<const std::uint32_t> records, std::span<const std::uint64_t> tokens,
              std::size_t cells, std::uint64_t capacity, std::span<const std::uint8_t> closing = {},
              bool allow_empty = false) {
        if (cells == 0 || (records.size() < cells && !allow_empty)) return false;
        m_cell_of.assign(tokens.size(), none);
        m_count.assign(cells, 0);
        m_used.assign(cells, 0);
        m_leaves = std::bit_ceil(cells);
        // m_room[m_leaves + c]: cell c's room plus one, plus one more while it is empty (0:
        // closed, or no cell); an inner node the most of its two children, so the lowest cell
        // with room for t (t + 1 at least; an empty one, capacity + 2) is found from the root.
        m_room.assign(2 * m_leaves, 0);
        for (std::size_t c = 0; c < cells; ++c) m_room[m_leaves + c] = capacity + 2;
        for (std::size_t i = m_leaves; i-- > 1;)
            m_room[i] = std::max(m_room[2 * i], m_room[2 * i + 1]);
        for (const std::uint32_t r : records) {
            const bool closes = !closing.empty() && closing[r] != 0;
            if (tokens[r] > capacity && !closes) return false;
            const std::uint64_t need = closes ? capacity + 2 : tokens[r] + 1;
            if (m_room[1] < need) return false;
            std::size_t node = 1;
            while (node < m_leaves) node = m_room[2 * node] >= need ? 2 * node : 2 * node + 1;
            const std::size_t cell = node - m_leaves;
            m_cell_of[r] = static_cast<std::uint32_t>(cell);
            ++m_count[cell];
            m_used[cell] += closes ? capacity : tokens[r];
            set_room(cell, closes ? 0 : capacity - m_used[cell] + 1);
        }
        // Empty cells take the last-placed records of cells that keep one at least.
        std::size_t empty = 0;
        for (std::size_t k = records.size(); k-- > 0;) {
            while (empty < cells && m_count[empty] != 0) ++empty;
            if (empty == cells) break;
            const std::uint32_t r = records[k];
            if (m_count[m_cell_of[r]] < 2) continue;
            --m_count[m_cell_of[r]];
            m_cell_of[r] = static_cast<std::uint32_t>(empty);
            ++m_count[empty];
        }
        return allow_empty ||
               std::find(m_count.begin(), m_count.end(), std::size_t{0}) == m_count.end();
    }

    [[nodiscard]] std::span<const std::uint32_t> cell_of() const noexcept { return m_cell_of; }

private:
    static constexpr std::uint32_t none = ~std::uint32_t{0};

    void set_room(std::size_t cell, std::uint64_t room_plus_one) {
        std::size_t node = m_leaves + cell;
        m_room[node] = room_plus_one;
        for (node /= 2; node >= 1; node /= 2)
            m_room[node] = std::max(m_room[2 * node], m_room[2 * node + 1]);
    }

    std::vector<std::uint32_t> m_cell_of; // by record
    std::vector<std::size_t> m_count;     // by cell: its records
    std::vector<std::uint64_t> m_used;    // by cell: its tokens
    std::vector<std::uint64_t> m_room;    // the tree of room plus one
    std::size_t m_leaves = 0;
};

} // namespace bcl::detail::tokens
