#pragma once
// Internal: groups kept to one rank (GRPO: one prompt's responses on one rank and step), dealt to
// (step, rank) bins and then, bin by bin, into that bin's micro-batch cells.

#include <bcl/detail/config.hpp>

#include <bcl/detail/tokens/cell_packer.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <numeric>
#include <span>
#include <tuple>
#include <vector>

namespace bcl::detail::tokens {

/// Deals groups to bins of `micro` cells of at most T tokens each, then each bin's units to its
/// cells. The groups first by LPT on cost (the bins' loads even); where that leaves a bin fewer
/// units than its cells (a dear group alone), by count instead: each group, dearest first, to
/// the bin with the fewest units that has room for its tokens, the cheaper of those first,
/// which fills every bin that the units' number allows. Each bin's units then go to its cells by
/// LPT with the token capacity (cell_packer). Ties to the lower index: the same deal on every
/// platform. O(G log B + U log C); the scratch is kept.
class rank_group_dealer {
public:
    /// Deals the units (`by_cost`: their indices, dearest first; `group_of` by unit) of groups
    /// of `group_tokens` and `group_cost` into `bins` bins of `micro` cells of `capacity`
    /// tokens: unit u to cell b * micro + j of bin b. `alone` (by unit, or empty) marks the
    /// units that close their cell. True if every unit found room and no cell is empty (with
    /// `allow_empty`, cells and bins may be); then cell_of() and cell_load() describe the deal.
    bool deal(std::span<const std::uint32_t> by_cost, std::span<const std::uint64_t> tokens,
              std::span<const std::uint64_t> cost, std::span<const std::uint8_t> alone,
              std::span<const std::uint32_t> group_of, std::span<const std::uint64_t> group_tokens,
              std::span<const std::uint64_t> group_cost, std::size_t bins, std::size_t micro,
              std::uint64_t capacity, bool allow_empty) {
        const std::size_t groups = group_tokens.size();
        m_groups_by_cost.resize(groups);
        std::iota(m_groups_by_cost.begin(), m_groups_by_cost.end(), std::uint32_t{0});
        std::sort(m_groups_by_cost.begin(), m_groups_by_cost.end(),
                  [group_cost](std::uint32_t a, std::uint32_t b) {
                      return group_cost[a] > group_cost[b] ||
                             (group_cost[a] == group_cost[b] && a < b);
                  });
        const std::uint64_t room = capacity * micro;
        if (m_group_packer.deal(m_groups_by_cost, group_tokens, group_cost, bins, room)) {
            m_bin_of_group.assign(m_group_packer.cells_of().begin(),
                                  m_group_packer.cells_of().end());
            if (fill_bins(by_cost, tokens, cost, alone, group_of, bins, micro, capacity,
                          allow_empty))
                return true;
        }
        return deal_by_count(group_of, group_tokens, group_cost, bins, room) &&
               fill_bins(by_cost, tokens, cost, alone, group_of, bins, micro, capacity,
                         allow_empty);
    }

    /// Each unit's cell (bin b's cells are b * micro ... b * micro + micro - 1).
    [[nodiscard]] std::span<const std::uint32_t> cell_of() const noexcept { return m_cell_of; }
    /// Each cell's cost.
    [[nodiscard]] std::span<const std::uint64_t> cell_load() const noexcept { return m_cell_load; }

private:
    struct bin_entry {
        std::uint64_t records, load, tokens;
        std::uint32_t bin;
    };

    // Deals the groups (dearest first) each to the bin with the fewest units that has room for
    // its tokens, the cheaper of those first, into m_bin_of_group. O(G log B) unless bins are
    // full (then the full ones are passed over, each once per group).
    bool deal_by_count(std::span<const std::uint32_t> group_of,
                       std::span<const std::uint64_t> group_tokens,
                       std::span<const std::uint64_t> group_cost, std::size_t bins,
                       std::uint64_t room) {
        const std::size_t groups = group_tokens.size();
        m_group_records.assign(groups, 0);
        for (const std::uint32_t g : group_of) ++m_group_records[g];
        const auto after = [](const bin_entry& a, const bin_entry& b) {
            return std::tie(a.records, a.load, a.bin) > std::tie(b.records, b.load, b.bin);
        };
        std::vector<bin_entry>& heap = m_bin_heap;
        std::vector<bin_entry>& passed = m_bin_passed;
        heap.clear();
        for (std::size_t b = 0; b < bins; ++b)
            heap.push_back({0, 0, 0, static_cast<std::uint32_t>(b)});
        m_bin_of_group.assign(groups, 0);
        for (const std::uint32_t g : m_groups_by_cost) {
            passed.clear();
            while (!heap.empty() && heap.front().tokens + group_tokens[g] > room) {
                std::pop_heap(heap.begin(), heap.end(), after);
                passed.push_back(heap.back());
                heap.pop_back();
            }
            const bool placed = !heap.empty();
            if (placed) {
                std::pop_heap(heap.begin(), heap.end(), after);
                bin_entry& e = heap.back();
                e.records += m_group_records[g];
                e.load += group_cost[g];
                e.tokens += group_tokens[g];
                m_bin_of_group[g] = e.bin;
                std::push_heap(heap.begin(), heap.end(), after);
            }
            for (const bin_entry& e : passed) {
                heap.push_back(e);
                std::push_heap(heap.begin(), heap.end(), after);
            }
            if (!placed) return false;
        }
        return true;
    }

    // Deals each bin's units (dearest first) into its cells.
    bool fill_bins(std::span<const std::uint32_t> by_cost, std::span<const std::uint64_t> tokens,
                   std::span<const std::uint64_t> cost, std::span<const std::uint8_t> alone,
                   std::span<const std::uint32_t> group_of, std::size_t bins, std::size_t micro,
                   std::uint64_t capacity, bool allow_empty) {
        m_cell_of.assign(cost.size(), 0);
        m_bin_units.resize(bins);
        for (auto& units : m_bin_units) units.clear();
        for (const std::uint32_t u : by_cost) m_bin_units[m_bin_of_group[group_of[u]]].push_back(u);
        m_cell_load.assign(bins * micro, 0);
        for (std::size_t b = 0; b < bins; ++b) {
            if ((m_bin_units[b].size() < micro && !allow_empty) ||
                !m_cell_packer.deal(m_bin_units[b], tokens, cost, micro, capacity, alone,
                                    allow_empty))
                return false;
            for (const std::uint32_t u : m_bin_units[b])
                m_cell_of[u] = static_cast<std::uint32_t>(b * micro + m_cell_packer.cell_of(u));
        }
        for (std::size_t u = 0; u < cost.size(); ++u) m_cell_load[m_cell_of[u]] += cost[u];
        return true;
    }

    std::vector<std::uint32_t> m_groups_by_cost; // groups, dearest first
    std::vector<std::uint32_t> m_bin_of_group;
    std::vector<std::uint64_t> m_group_records; // by group: its units
    std::vector<bin_entry> m_bin_heap;
    std::vector<bin_entry> m_bin_passed;
    std::vector<std::vector<std::uint32_t>> m_bin_units;
    std::vector<std::uint32_t> m_cell_of;   // by unit
    std::vector<std::uint64_t> m_cell_load; // by cell
    cell_packer m_group_packer;
    cell_packer m_cell_packer;
};

} // namespace bcl::detail::tokens
