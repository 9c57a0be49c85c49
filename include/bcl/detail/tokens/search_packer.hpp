#pragma once
// Internal: records packed into cells of at most T tokens, none empty, by a bounded depth-first
// search: for a micro-batch count at which the greedy deals (LPT, first fit) leave a record
// without room though a packing exists.

#include <bcl/detail/config.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace bcl::detail::tokens {

/// Depth-first search over the records, largest first, each tried in every cell with room; cells
/// holding the same tokens are interchangeable, so only the first of them is tried (an empty
/// cell once). A branch ends when the tokens left exceed the room left, or when fewer records
/// are left than empty cells. Records that `closing` marks take an empty cell and close it. The
/// search stops after `budget` placements: exact where that suffices (tight plans of tens of
/// records), a bounded try on larger ones. Integers only: the same on every platform. The
/// scratch is kept.
class search_packer {
public:
    /// Packs `records` (indices into `tokens`, largest first) into `cells` cells of `capacity`
    /// tokens, none empty. True if it found a packing within `budget` placements; then
    /// cell_of() gives each record's cell.
    bool pack(std::span<const std::uint32_t> records, std::span<const std::uint64_t> tokens,
              std::size_t cells, std::uint64_t capacity, std::span<const std::uint8_t> closing,
              std::size_t budget) {
        const std::size_t n = records.size();
        if (cells == 0 || n < cells) return false;
        m_records = records;
        m_tokens = tokens;
        m_closing = closing;
        m_capacity = capacity;
        m_left = budget;
        m_cell_of.assign(tokens.size(), 0);
        m_used.assign(cells, 0);
        m_count.assign(cells, 0);
        m_closed.assign(cells, 0);
        m_tokens_after.assign(n + 1, 0);
        for (std::size_t k = n; k-- > 0;)
            m_tokens_after[k] = m_tokens_after[k + 1] + tokens_of(records[k]);
        if (m_tokens_after[0] > cells * capacity) return false;
        m_empty = cells;
        return place(0);
    }

    [[nodiscard]] std::span<const std::uint32_t> cell_of() const noexcept { return m_cell_of; }

private:
    [[nodiscard]] bool closes(std::uint32_t r) const noexcept {
        return !m_closing.empty() && m_closing[r] != 0;
    }
    [[nodiscard]] std::uint64_t tokens_of(std::uint32_t r) const noexcept {
        return closes(r) ? m_capacity : m_tokens[r];
    }

    // Places records[k..]: true once every record is placed and no cell is empty. Recursion
    // one level a record: only plans of a few hundred records are searched.
    bool place(std::size_t k) { // NOLINT(misc-no-recursion)
        const std::size_t n = m_records.size();
        if (k == n) return m_empty == 0;
        if (n - k < m_empty) return false; // too few records left for the empty cells
        std::uint64_t room = 0;
        for (std::size_t c = 0; c < m_used.size(); ++c)
            if (m_closed[c] == 0) room += m_capacity - m_used[c];
        if (m_tokens_after[k] > room) return false;
        const std::uint32_t r = m_records[k];
        const std::uint64_t t = tokens_of(r);
        const bool closing = closes(r);
        bool tried_empty = false;
        for (std::size_t c = 0; c < m_used.size(); ++c) {
            if (m_closed[c] != 0 || m_used[c] + t > m_capacity) continue;
            if (closing && m_count[c] != 0) continue;
            // Interchangeable with a cell tried before: the same tokens used (empty ones alike).
            if (m_count[c] == 0) {
                if (tried_empty) continue;
                tried_empty = true;
            } else if (same_as_earlier(c)) {
                continue;
            }
            if (m_left == 0) return false;
            --m_left;
            m_cell_of[r] = static_cast<std::uint32_t>(c);
            m_used[c] += t;
            m_empty -= m_count[c] == 0 ? 1 : 0;
            ++m_count[c];
            m_closed[c] = closing ? 1 : 0;
            if (place(k + 1)) return true;
            m_closed[c] = 0;
            --m_count[c];
            m_empty += m_count[c] == 0 ? 1 : 0;
            m_used[c] -= t;
        }
        return false;
    }

    // Whether a non-empty open cell before `c` holds the same tokens (so was tried already).
    [[nodiscard]] bool same_as_earlier(std::size_t c) const noexcept {
        for (std::size_t d = 0; d < c; ++d)
            if (m_closed[d] == 0 && m_count[d] != 0 && m_used[d] == m_used[c]) return true;
        return false;
    }

    std::span<const std::uint32_t> m_records;
    std::span<const std::uint64_t> m_tokens;
    std::span<const std::uint8_t> m_closing;
    std::uint64_t m_capacity = 0;
    std::size_t m_left = 0;                    // placements the search may still try
    std::size_t m_empty = 0;                   // cells without a record
    std::vector<std::uint32_t> m_cell_of;      // by record
    std::vector<std::uint64_t> m_used;         // by cell: its tokens
    std::vector<std::size_t> m_count;          // by cell: its records
    std::vector<std::uint8_t> m_closed;        // by cell: holds a record that closes it
    std::vector<std::uint64_t> m_tokens_after; // by position: the tokens from it on
};

} // namespace bcl::detail::tokens
