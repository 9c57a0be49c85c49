#pragma once
// Internal: records dealt into cells (micro-batches) of at most T tokens, each to the cell of least
// cost that has room for it: LPT with a token capacity.

#include <bcl/detail/config.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

namespace bcl::detail::tokens {

/// Cells of a token budget and the records dealt into them. deal() takes records in the order
/// given (the dearest first, for LPT) and puts each into the cell of least cost among those with
/// room for its tokens (ties: the cell of fewer records, then the lower cell id, so that records
/// of no cost still go to empty cells first); it fails when a record fits no cell, or when a cell
/// is left empty. A record that `closing` marks (one above the budget, counted as T tokens) takes
/// an empty cell and closes it: nothing joins it, not even a record of no tokens. Every choice
/// compares integers, so the deal is the same on every platform.
///
/// A cell too full for a record is parked until a record small enough comes, and leaves for good
/// when no record to come fits it, so with records in falling token order (the default cost's
/// LPT order) each cell is parked about once per record it takes: O((n + C) log C). The scratch is
/// kept, so once it has dealt its largest input it allocates nothing.
class cell_packer {
public:
    void reserve(std::size_t records, std::size_t cells) {
        m_cell_of.reserve(records);
        m_load.reserve(cells);
        m_tokens.reserve(cells);
        m_count.reserve(cells);
        m_heap.reserve(cells);
        m_parked.reserve(cells);
        m_least_after.reserve(records + 1);
    }

    /// Deals `records` (indices into `tokens` and `cost`, in the order to deal them) into `cells`
    /// empty cells of `capacity` tokens; `closing` (by record, or empty for none) marks the
    /// records that close their cell. True if every record found room and no cell is empty (or,
    /// with `allow_empty`, whether cells are left empty or not); then cell_of() gives each
    /// record's cell and loads() each cell's cost.
    bool deal(std::span<const std::uint32_t> records, std::span<const std::uint64_t> tokens,
              std::span<const std::uint64_t> cost, std::size_t cells, std::uint64_t capacity,
              std::span<const std::uint8_t> closing = {}, bool allow_empty = false) {
        m_cell_of.assign(tokens.size(), none);
        m_load.assign(cells, 0);
        m_tokens.assign(cells, 0);
        m_count.assign(cells, 0);
        m_heap.clear();
        m_parked.clear();
        for (std::size_t c = 0; c < cells; ++c)
            m_heap.push_back({0, 0, static_cast<std::uint32_t>(c)});
        // m_heap is a min-heap by (load, count, cell): all zero, ascending ids, is one already.
        // m_least_after[k]: the fewest tokens of a record dealt after the k-th.
        m_least_after.assign(records.size() + 1, ~std::uint64_t{0});
        for (std::size_t k = records.size(); k-- > 1;)
            m_least_after[k - 1] = std::min(m_least_after[k], tokens[records[k]]);
        for (std::size_t k = 0; k < records.size(); ++k) {
            const std::uint32_t r = records[k];
            const bool closes = !closing.empty() && closing[r] != 0;
            // The parked cells with room for this record are candidates again.
            while (!m_parked.empty() && m_parked.front().load >= tokens[r]) {
                std::pop_heap(m_parked.begin(), m_parked.end(), less_room);
                const std::uint32_t c = m_parked.back().cell;
                push({m_load[c], m_count[c], c});
                m_parked.pop_back();
            }
            bool placed = false;
            while (!m_heap.empty()) {
                const std::uint32_t cell = m_heap.front().cell;
                const std::uint64_t room = capacity - m_tokens[cell];
                if (room >= tokens[r] && (!closes || m_count[cell] == 0)) {
                    m_cell_of[r] = cell;
                    m_load[cell] += cost[r];
                    m_tokens[cell] += tokens[r];
                    ++m_count[cell];
                    if (closes) { // closed: it leaves the heap
                        std::pop_heap(m_heap.begin(), m_heap.end(), later);
                        m_heap.pop_back();
                    } else { // one pass down instead of a pop and a push
                        m_heap.front() = {m_load[cell], m_count[cell], cell};
                        sink_top();
                    }
                    placed = true;
                    break;
                }
                std::pop_heap(m_heap.begin(), m_heap.end(), later);
                m_heap.pop_back();
                // Too full for this record: parked until one small enough comes (by its room,
                // in `load`), or done for good if no record to come fits it.
                if (room >= m_least_after[k]) park({room, 0, cell});
            }
            if (!placed) return false;
        }
        return allow_empty ||
               std::none_of(m_count.begin(), m_count.end(), [](std::uint32_t c) { return c == 0; });
    }

    static constexpr std::uint32_t none = ~std::uint32_t{0};

    [[nodiscard]] std::uint32_t cell_of(std::size_t record) const noexcept {
        return m_cell_of[record];
    }
    [[nodiscard]] std::span<const std::uint32_t> cells_of() const noexcept { return m_cell_of; }
    [[nodiscard]] std::span<const std::uint64_t> loads() const noexcept { return m_load; }

private:
    struct entry {
        std::uint64_t load;
        std::uint32_t count; // the cell's records when pushed (0 while parked)
        std::uint32_t cell;
    };
    // Heap order: the least load on top, ties to the fewer records, then to the lower cell.
    static bool later(const entry& x, const entry& y) noexcept {
        if (x.load != y.load) return x.load > y.load;
        if (x.count != y.count) return x.count > y.count;
        return x.cell > y.cell;
    }
    void push(entry e) {
        m_heap.push_back(e);
        std::push_heap(m_heap.begin(), m_heap.end(), later);
    }
    // Restores the heap after the top's load grew: it moves down past lighter children.
    void sink_top() noexcept {
        const std::size_t n = m_heap.size();
        const entry e = m_heap.front();
        std::size_t i = 0;
        for (;;) {
            std::size_t child = 2 * i + 1;
            if (child >= n) break;
            if (child + 1 < n && later(m_heap[child], m_heap[child + 1])) ++child;
            if (!later(e, m_heap[child])) break;
            m_heap[i] = m_heap[child];
            i = child;
        }
        m_heap[i] = e;
    }
    // The parked heap: the most room on top (an entry's `load` is its room), ties to the lower
    // cell.
    static bool less_room(const entry& x, const entry& y) noexcept {
        return x.load < y.load || (x.load == y.load && x.cell > y.cell);
    }
    void park(entry e) {
        m_parked.push_back(e);
        std::push_heap(m_parked.begin(), m_parked.end(), less_room);
    }

    std::vector<std::uint32_t> m_cell_of; // by record: its cell, or none
    std::vector<std::uint64_t> m_load;    // by cell: its cost
    std::vector<std::uint64_t> m_tokens;  // by cell: its tokens
    std::vector<std::uint32_t> m_count;   // by cell: its records
    std::vector<entry> m_heap;   // the cells that may take the next record, least load on top
    std::vector<entry> m_parked; // cells too full for the last record tried, most room on top
    std::vector<std::uint64_t> m_least_after; // by deal position
};

} // namespace bcl::detail::tokens
