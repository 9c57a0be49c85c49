#pragma once
// Internal: a token plan's cells cut into micro-steps of R and steps of M, and what that costs.

#include <bcl/detail/config.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace bcl::detail::tokens {

/// Where a cell goes.
struct cell_place {
    std::uint32_t step;
    std::uint32_t micro;
    std::uint32_t rank;
};

/// The cells of a plan, by cost: a micro-step costs its dearest cell, so for given cells the sum
/// over micro-steps is least when the cells, dearest first, are cut into micro-steps of R (any
/// other cut puts a dearer cell at the head of some micro-step). Micro-step k of the plan is step
/// k / M, micro-batch k mod M; its j-th dearest cell goes to rank (j + k) mod R, so no rank always
/// gets the dearest. Ties go to the lower cell id. O(C log C).
class micro_layout {
public:
    void reserve(std::size_t cells) {
        m_load.reserve(cells);
        m_sorted.reserve(cells);
        m_place.reserve(cells);
    }

    /// Lays out the cells that `cell_of` (by record) and `cost` (by record) describe: `cells`
    /// cells, micro-steps of `ranks`, steps of `micro_batches`. Returns the objective (the sum
    /// over micro-steps of the dearest cell).
    std::uint64_t lay_out(std::span<const std::uint32_t> cell_of,
                          std::span<const std::uint64_t> cost, std::size_t cells, std::size_t ranks,
                          std::size_t micro_batches) {
        m_load.assign(cells, 0);
        for (std::size_t r = 0; r < cell_of.size(); ++r) m_load[cell_of[r]] += cost[r];
        m_sorted.resize(cells);
        for (std::size_t c = 0; c < cells; ++c) m_sorted[c] = static_cast<std::uint32_t>(c);
        std::sort(m_sorted.begin(), m_sorted.end(), [this](std::uint32_t a, std::uint32_t b) {
            return m_load[a] > m_load[b] || (m_load[a] == m_load[b] && a < b);
        });
        m_place.resize(cells);
        std::uint64_t objective = 0;
        m_heaviest = 0;
        m_ranks = ranks;
        for (std::size_t i = 0; i < cells; ++i) {
            const std::size_t k = i / ranks;
            const std::size_t j = i % ranks;
            m_place[m_sorted[i]] = {static_cast<std::uint32_t>(k / micro_batches),
                                    static_cast<std::uint32_t>(k % micro_batches),
                                    static_cast<std::uint32_t>((j + k) % ranks)};
            if (j == 0) {
                objective += m_load[m_sorted[i]];
                m_heaviest = std::max(m_heaviest, m_load[m_sorted[i]]);
            }
        }
        m_objective = objective;
        return objective;
    }

    /// Lays out cells already bound to their rank: cell (s * R + r) * M + j is micro-batch j's
    /// cell of rank r in step s, `load` by cell. Within a step each rank's cells, dearest first,
    /// are lined up: micro-step k holds every rank's k-th dearest (for given cells per rank, the
    /// least sum over micro-steps). Returns the objective. O(C log M).
    std::uint64_t lay_out_ranked(std::span<const std::uint64_t> load, std::size_t ranks,
                                 std::size_t steps, std::size_t micro_batches) {
        const std::size_t cells = ranks * steps * micro_batches;
        m_load.assign(load.begin(), load.end());
        m_sorted.resize(cells);
        for (std::size_t c = 0; c < cells; ++c) m_sorted[c] = static_cast<std::uint32_t>(c);
        m_place.resize(cells);
        m_objective = 0;
        m_heaviest = 0;
        m_ranks = ranks;
        for (std::size_t bin = 0; bin < ranks * steps; ++bin) {
            const auto first = m_sorted.begin() + static_cast<std::ptrdiff_t>(bin * micro_batches);
            std::sort(first, first + static_cast<std::ptrdiff_t>(micro_batches),
                      [this](std::uint32_t a, std::uint32_t b) {
                          return m_load[a] > m_load[b] || (m_load[a] == m_load[b] && a < b);
                      });
            for (std::size_t j = 0; j < micro_batches; ++j)
                m_place[first[static_cast<std::ptrdiff_t>(j)]] = {
                    static_cast<std::uint32_t>(bin / ranks), static_cast<std::uint32_t>(j),
                    static_cast<std::uint32_t>(bin % ranks)};
        }
        for (std::size_t s = 0; s < steps; ++s)
            for (std::size_t j = 0; j < micro_batches; ++j) {
                std::uint64_t top = 0;
                for (std::size_t rank = 0; rank < ranks; ++rank)
                    top = std::max(top, m_load[m_sorted[((s * ranks) + rank) * micro_batches + j]]);
                m_objective += top;
                m_heaviest = std::max(m_heaviest, top);
            }
        return m_objective;
    }

    /// Numbers the micro-steps of a plan laid out as one step again: micro-step k becomes step
    /// k / micro_batches, micro-batch k mod micro_batches. O(C).
    void regroup(std::size_t micro_batches) noexcept {
        for (cell_place& p : m_place) {
            const std::uint32_t k = p.micro;
            p.step = static_cast<std::uint32_t>(k / micro_batches);
            p.micro = static_cast<std::uint32_t>(k % micro_batches);
        }
    }

    [[nodiscard]] std::uint64_t objective() const noexcept { return m_objective; }

    [[nodiscard]] const cell_place& place(std::size_t cell) const noexcept { return m_place[cell]; }
    [[nodiscard]] std::uint64_t heaviest() const noexcept { return m_heaviest; }

private:
    std::vector<std::uint64_t> m_load;   // by cell
    std::vector<std::uint32_t> m_sorted; // cells, dearest first
    std::vector<cell_place> m_place;     // by cell
    std::uint64_t m_heaviest = 0;
    std::uint64_t m_objective = 0;
    std::size_t m_ranks = 1;
};

} // namespace bcl::detail::tokens
