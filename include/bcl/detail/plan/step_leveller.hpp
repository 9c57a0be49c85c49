#pragma once
// Internal: the steps a record too dear to balance away leads, formed before the rest is dealt.

#include <bcl/detail/config.hpp>

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace bcl::detail::plan {

/// A step costs its heaviest pack, so only packs within one step need to match. When the dearest
/// record v, with the B-1 cheapest records beside it, is already above the mean pack of the
/// records left (a record "too dear to balance away"), its step will cost at least
/// v + those B-1 records whatever the plan; equal packs everywhere would leave its step's other
/// packs at the mean, idle for the difference. Levelling forms that step first instead, at the
/// level L of step_level() (the dear records of the step each with its own share of the cheapest
/// records): each pack of the step is filled up to L, greedily with the dearest record that still
/// leaves room for its remaining slots (at the cost of the cheapest records left). Everything the
/// step takes off the pool lowers the mean of the steps after it. Then the next dearest record is
/// checked against the new mean, and so on; what is left when no record is too dear goes to
/// pack_dealer as usual.
///
/// Records are ranks (0 the dearest) over costs sorted descending. Picks use Fenwick trees over
/// the ranks (which are still free, and the cost of the free ones), so a step of R*B records costs
/// O(R B log n), and the trees are built only once a window needs them: a window without such a
/// record costs O(B). All integers, ties to the lower rank.
class step_leveller {
public:
    void reserve(std::size_t n, std::size_t packs) {
        m_pack_of.reserve(n);
        m_rest.reserve(n);
        m_count.reserve(n + 1);
        m_sum.reserve(n + 1);
        m_load.reserve(packs);
    }

    /// Forms up to `steps` levelled steps of `ranks` packs of `batch` records from `cost` (by
    /// rank, descending; its sum is `total`). Returns how many it formed; their packs are
    /// numbered step * ranks + k, pack_of() gives a rank's pack (or `none`)
    /// and rest() the ranks left, ascending. When it forms none, it reads O(batch) costs and
    /// nothing else: pack_of() and rest() are then not to be read (every record is left).
    std::size_t level(std::span<const std::uint64_t> cost, std::size_t ranks, std::size_t batch,
                      std::size_t steps, std::uint64_t total) {
        const std::size_t n = cost.size();
        m_cost = cost;
        m_n = n;
        m_built = false;
        m_load.clear();
        // Sized for the most the window can form, so a later window of the same size that
        // levels more steps allocates nothing.
        m_load.reserve(steps * ranks);
        m_rest.reserve(n);
        std::size_t formed = 0;
        std::size_t left = n; // free records
        std::uint64_t left_total = total;
        std::size_t first_free = 0; // the dearest free rank: ranks below it are taken
        for (; formed < steps && left >= ranks * batch; ++formed) {
            // The dear record's pack at the least: itself and the B-1 cheapest free records.
            const std::uint64_t least = cost[first_free] + cheapest(batch - 1);
            const std::uint64_t mean = left_total / left * batch;
            if (least <= mean) break;
            if (!m_built) build();
            const std::uint64_t level_cost = step_level(ranks, batch);
            for (std::size_t k = 0; k < ranks; ++k) {
                const std::size_t pack = formed * ranks + k;
                std::uint64_t load = 0;
                for (std::size_t slot = 0; slot < batch; ++slot) {
                    const std::size_t after = batch - 1 - slot; // slots still to fill
                    const std::uint64_t held = load + cheapest(after);
                    const std::uint64_t room = level_cost > held ? level_cost - held : 0;
                    const std::size_t r = dearest_within(room);
                    take(r, pack);
                    load += cost[r];
                    left_total -= cost[r];
                }
                m_load.push_back(load);
            }
            left -= ranks * batch;
            while (first_free < n && m_pack_of[first_free] != none) ++first_free;
        }
        m_rest.clear();
        if (formed > 0)
            for (std::size_t r = 0; r < n; ++r)
                if (m_pack_of[r] == none) m_rest.push_back(static_cast<std::uint32_t>(r));
        return formed;
    }

    static constexpr std::uint32_t none = ~std::uint32_t{0};

    [[nodiscard]] std::uint32_t pack_of(std::size_t r) const noexcept { return m_pack_of[r]; }
    [[nodiscard]] std::uint64_t load(std::size_t pack) const noexcept { return m_load[pack]; }
    [[nodiscard]] std::span<const std::uint32_t> rest() const noexcept { return m_rest; }

private:
    // The level of the next step: the R dearest free records each with its own block of B-1 of
    // the cheapest free records (the dearest record with the cheapest block), the dearest such
    // pack. No plan can put them all in one step for less; several records too dear to balance
    // away share the step, and the fills bring every pack of it up to the dearest.
    [[nodiscard]] std::uint64_t step_level(std::size_t ranks, std::size_t batch) const noexcept {
        std::uint64_t level = 0;
        std::uint64_t cheap_before = 0;
        for (std::size_t k = 0; k < ranks; ++k) {
            const std::uint64_t cheap = cheapest((k + 1) * (batch - 1));
            level = std::max(level, m_cost[kth_free(k + 1).rank] + cheap - cheap_before);
            cheap_before = cheap;
        }
        return level;
    }

    // Fenwick trees over ranks 1..n (rank r at r + 1): free records and their costs.
    void build() {
        m_pack_of.assign(m_n, none);
        m_count.assign(m_n + 1, 0);
        m_sum.assign(m_n + 1, 0);
        for (std::size_t i = 1; i <= m_n; ++i) {
            m_count[i] += 1;
            m_sum[i] += m_cost[i - 1];
            const std::size_t parent = i + (i & (~i + 1));
            if (parent <= m_n) {
                m_count[parent] += m_count[i];
                m_sum[parent] += m_sum[i];
            }
        }
        m_top = std::bit_floor(m_n);
        m_free = m_n;
        m_free_total = m_sum.empty() ? 0 : prefix_sum(m_n);
        m_built = true;
    }

    [[nodiscard]] std::uint64_t prefix_sum(std::size_t i) const noexcept {
        std::uint64_t s = 0;
        for (; i > 0; i -= i & (~i + 1)) s += m_sum[i];
        return s;
    }
    [[nodiscard]] std::size_t prefix_count(std::size_t i) const noexcept {
        std::size_t s = 0;
        for (; i > 0; i -= i & (~i + 1)) s += m_count[i];
        return s;
    }

    // The k-th free rank (k >= 1) and the cost of the free ranks before it, by one descent.
    struct found {
        std::size_t rank;
        std::uint64_t before;
    };
    [[nodiscard]] found kth_free(std::size_t k) const noexcept {
        std::size_t pos = 0;
        std::uint64_t before = 0;
        for (std::size_t step = m_top; step > 0; step /= 2) {
            const std::size_t next = pos + step;
            if (next <= m_n && m_count[next] < k) {
                pos = next;
                k -= m_count[next];
                before += m_sum[next];
            }
        }
        return {pos, before}; // rank pos (Fenwick index pos + 1)
    }

    // The cost of the `j` cheapest free records. Before build(), all are free: a plain sum.
    [[nodiscard]] std::uint64_t cheapest(std::size_t j) const noexcept {
        if (!m_built) {
            std::uint64_t s = 0;
            for (std::size_t r = m_n - j; r < m_n; ++r) s += m_cost[r];
            return s;
        }
        if (j == 0) return 0;
        return m_free_total - kth_free(m_free - j + 1).before;
    }

    [[nodiscard]] std::size_t last_free() const noexcept { return kth_free(m_free).rank; }

    // The dearest free record costing at most `room`, or the cheapest free one if none does.
    [[nodiscard]] std::size_t dearest_within(std::uint64_t room) const noexcept {
        const auto from = static_cast<std::size_t>(
            std::partition_point(m_cost.begin(), m_cost.end(),
                                 [room](std::uint64_t c) { return c > room; }) -
            m_cost.begin());
        const std::size_t free_before = prefix_count(from);
        return free_before == m_free ? last_free() : kth_free(free_before + 1).rank;
    }

    void take(std::size_t r, std::size_t pack) noexcept {
        m_pack_of[r] = static_cast<std::uint32_t>(pack);
        for (std::size_t i = r + 1; i <= m_n; i += i & (~i + 1)) {
            m_count[i] -= 1;
            m_sum[i] -= m_cost[r];
        }
        --m_free;
        m_free_total -= m_cost[r];
    }

    std::span<const std::uint64_t> m_cost;
    std::size_t m_n = 0;
    bool m_built = false;
    std::size_t m_top = 0;
    std::size_t m_free = 0;
    std::uint64_t m_free_total = 0;
    std::vector<std::uint32_t> m_pack_of; // by rank: its levelled pack, or none
    std::vector<std::uint32_t> m_rest;    // free ranks after levelling, ascending
    std::vector<std::size_t> m_count;     // Fenwick: free ranks
    std::vector<std::uint64_t> m_sum;     // Fenwick: their costs
    std::vector<std::uint64_t> m_load;    // by levelled pack
};

} // namespace bcl::detail::plan
