#pragma once
// Internal: the steps a record too dear to balance away leads, formed before the rest is dealt.

#include <bcl/detail/config.hpp>

#include <bcl/detail/plan/fenwick.hpp>

#include <algorithm>
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
/// Records are named by their place in cost order (place 0 the dearest) over costs sorted
/// descending. Picks use one Fenwick tree over the places (how many records are still free, and
/// what they cost), so a step of R*B records costs O(R B log n), and the tree is built only once
/// a window needs it: a window without such a record costs O(B). All integers, ties to the lower
/// place.
class step_leveller {
public:
    void reserve(std::size_t n, std::size_t packs) {
        m_pack_of.reserve(n);
        m_rest.reserve(n);
        m_free_tree.reserve(n);
        m_load.reserve(packs);
    }

    /// Forms up to `steps` levelled steps of `ranks` packs of `batch` records from `cost` (by
    /// place, descending; its sum is `total`). Returns how many it formed; their packs are
    /// numbered step * ranks + k, pack_of() gives the pack of the record at a place (or `none`)
    /// and rest() the places left, ascending. When it forms none, it reads O(batch) costs and
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
        std::size_t first_free = 0; // the dearest free place: places below it are taken
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
                    const std::size_t at = dearest_within(room);
                    take(at, pack);
                    load += cost[at];
                    left_total -= cost[at];
                }
                m_load.push_back(load);
            }
            left -= ranks * batch;
            while (first_free < n && m_pack_of[first_free] != none) ++first_free;
        }
        m_rest.clear();
        if (formed > 0)
            for (std::size_t at = 0; at < n; ++at)
                if (m_pack_of[at] == none) m_rest.push_back(static_cast<std::uint32_t>(at));
        return formed;
    }

    static constexpr std::uint32_t none = ~std::uint32_t{0};

    /// The levelled pack of the record at place `at`, or `none`.
    [[nodiscard]] std::uint32_t pack_of(std::size_t at) const noexcept { return m_pack_of[at]; }
    [[nodiscard]] std::uint64_t load(std::size_t pack) const noexcept { return m_load[pack]; }
    /// The places of the records no levelled step took, ascending.
    [[nodiscard]] std::span<const std::uint32_t> rest() const noexcept { return m_rest; }

private:
    // What the Fenwick tree sums over the places: 1 per free record, and its cost.
    struct free_records {
        std::size_t count = 0;
        std::uint64_t cost = 0;
        free_records& operator+=(const free_records& o) noexcept {
            count += o.count;
            cost += o.cost;
            return *this;
        }
        free_records& operator-=(const free_records& o) noexcept {
            count -= o.count;
            cost -= o.cost;
            return *this;
        }
    };

    // The level of the next step: the R dearest free records each with its own block of B-1 of
    // the cheapest free records (the dearest record with the cheapest block), the dearest such
    // pack. No plan can put them all in one step for less; several records too dear to balance
    // away share the step, and the fills bring every pack of it up to the dearest.
    [[nodiscard]] std::uint64_t step_level(std::size_t ranks, std::size_t batch) const noexcept {
        std::uint64_t level = 0;
        std::uint64_t cheap_before = 0;
        for (std::size_t k = 0; k < ranks; ++k) {
            const std::uint64_t cheap = cheapest((k + 1) * (batch - 1));
            level = std::max(level, m_cost[kth_free(k + 1).place] + cheap - cheap_before);
            cheap_before = cheap;
        }
        return level;
    }

    // Every record free: the tree over the places, and nothing taken.
    void build() {
        m_pack_of.assign(m_n, none);
        m_free_tree.build(m_n, [this](std::size_t at) { return free_records{1, m_cost[at]}; });
        m_free = m_n;
        m_free_total = m_free_tree.prefix(m_n).cost;
        m_built = true;
    }

    // The k-th free place (k >= 1) and the cost of the free records before it, by one descent.
    struct found {
        std::size_t place;
        std::uint64_t before;
    };
    [[nodiscard]] found kth_free(std::size_t k) const noexcept {
        const auto prefix =
            m_free_tree.longest_prefix_below(k, [](const free_records& f) { return f.count; });
        return {prefix.length, prefix.sum.cost};
    }

    // The cost of the `j` cheapest free records. Before build(), all are free: a plain sum.
    [[nodiscard]] std::uint64_t cheapest(std::size_t j) const noexcept {
        if (!m_built) {
            std::uint64_t s = 0;
            for (std::size_t at = m_n - j; at < m_n; ++at) s += m_cost[at];
            return s;
        }
        if (j == 0) return 0;
        return m_free_total - kth_free(m_free - j + 1).before;
    }

    [[nodiscard]] std::size_t last_free() const noexcept { return kth_free(m_free).place; }

    // The dearest free record costing at most `room`, or the cheapest free one if none does.
    [[nodiscard]] std::size_t dearest_within(std::uint64_t room) const noexcept {
        const auto from = static_cast<std::size_t>(
            std::partition_point(m_cost.begin(), m_cost.end(),
                                 [room](std::uint64_t c) { return c > room; }) -
            m_cost.begin());
        const std::size_t free_before = m_free_tree.prefix(from).count;
        return free_before == m_free ? last_free() : kth_free(free_before + 1).place;
    }

    void take(std::size_t at, std::size_t pack) noexcept {
        m_pack_of[at] = static_cast<std::uint32_t>(pack);
        m_free_tree.subtract(at, free_records{1, m_cost[at]});
        --m_free;
        m_free_total -= m_cost[at];
    }

    std::span<const std::uint64_t> m_cost;
    std::size_t m_n = 0;
    bool m_built = false;
    std::size_t m_free = 0;
    std::uint64_t m_free_total = 0;
    std::vector<std::uint32_t> m_pack_of; // by place: its levelled pack, or none
    std::vector<std::uint32_t> m_rest;    // free places after levelling, ascending
    fenwick<free_records> m_free_tree;    // over the places: the free records and their cost
    std::vector<std::uint64_t> m_load;    // by levelled pack
};

} // namespace bcl::detail::plan
