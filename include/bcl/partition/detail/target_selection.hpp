#pragma once
// Choosing which buffered records form the next round of the sliding policy.

#include <bcl/detail/config.hpp>

#include <bcl/partition/detail/ranked_costs.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <utility>
#include <vector>

namespace bcl::detail {

/// Chooses `count` items out of `costs` whose total is close to `target`, where the first
/// `forced` items must be chosen. Starts from the oldest items (the lowest indices), then
/// repeatedly applies the single swap (one chosen for one unchosen) that brings the total closest
/// to the target, until the total is within tolerance() of the target, no swap helps, or
/// `max_swaps` were made.
///
/// The tolerance is a thousandth of the mean cost per chosen item (target / count): the round's
/// K batches then differ from their share of the target by about 1e-3 / B of a batch on average,
/// far below what partitioning can reach, so chasing the target further only costs time. From the
/// oldest items a round is typically a few mean costs off, and each best swap removes almost all
/// of what is left, so a round takes a handful of swaps.
///
/// O(m) to rank the m candidates (a radix sort on their cost bits), O(m) per swap (a two-pointer
/// search over both sorted lists). Scratch space is kept between calls, so it allocates nothing
/// once it has seen its largest buffer.
class target_selector {
public:
    static constexpr std::size_t max_swaps = 64;
    static constexpr double relative_tolerance = 1e-3;

    /// How close to `target` a total of `count` items must come before the search stops.
    [[nodiscard]] static double tolerance(double target, std::size_t count) noexcept {
        return relative_tolerance * std::abs(target) /
               static_cast<double>(std::max<std::size_t>(count, 1));
    }

    /// Sizes the scratch for buffers of up to n items, so that later calls allocate nothing.
    void reserve(std::size_t n) {
        m_ranked.reserve(n);
        m_in_store.reserve(n);
        m_out_store.reserve(n);
    }

    /// Writes chosen[i] = 1 for the chosen items, 0 for the others. Returns the chosen total.
    /// Preconditions: forced <= count <= costs.size() == chosen.size(); every cost finite, >= 0.
    double operator()(std::span<const double> costs, std::size_t forced, std::size_t count,
                      double target, std::span<std::uint8_t> chosen) {
        const std::size_t n = costs.size();
        double total = 0.0;
        for (std::size_t i = 0; i < n; ++i) {
            chosen[i] = i < count ? 1 : 0;
            if (i < count) total += costs[i];
        }
        if (count == forced || count == n) return total;
        const double close_enough = tolerance(target, count);
        if (std::abs(target - total) <= close_enough) return total;

        m_ranked.assign(costs.subspan(forced), "bcl::detail::target_selector");
        reserve(m_ranked.size());
        split_candidates(forced, chosen);
        total = swap_extremes(target, total, forced, chosen);

        for (std::size_t swap = 0; swap < max_swaps; ++swap) {
            const double want = target - total; // the change a swap should bring
            if (std::abs(want) <= close_enough) break;
            // For each chosen item x (cheapest first) the ideal partner costs x + want, which rises
            // with x, so the pointer into the unchosen list only moves forward.
            double best = std::abs(want);
            std::size_t best_in = m_in.size();
            std::size_t best_out = 0;
            std::size_t j = 0;
            for (std::size_t i = 0; i < m_in.size(); ++i) {
                const double ideal = m_in[i].cost + want;
                while (j + 1 < m_out.size() && m_out[j + 1].cost <= ideal) ++j;
                for (std::size_t c = j; c <= j + 1 && c < m_out.size(); ++c) {
                    const double miss = std::abs(want - (m_out[c].cost - m_in[i].cost));
                    if (miss < best) {
                        best = miss;
                        best_in = i;
                        best_out = c;
                    }
                }
            }
            if (best_in == m_in.size()) break; // no swap brings the total closer
            const item leaving = m_in[best_in];
            const item joining = m_out[best_out];
            total += joining.cost - leaving.cost;
            chosen[leaving.slot] = 0;
            chosen[joining.slot] = 1;
            replace_sorted(m_in, best_in, joining);
            replace_sorted(m_out, best_out, leaving);
        }
        return total;
    }

private:
    struct item {
        double cost;
        std::uint32_t slot;
        [[nodiscard]] bool before(const item& other) const noexcept { return cost < other.cost; }
    };

    // Both candidate lists, cheapest first, from the ranking (dearest first, so walked backwards).
    // Written without branches: whether a candidate is chosen is a coin flip for the predictor.
    void split_candidates(std::size_t forced, std::span<const std::uint8_t> chosen) {
        std::size_t in = 0;
        std::size_t out = 0;
        for (std::size_t r = m_ranked.size(); r-- > 0;) {
            const auto slot = static_cast<std::uint32_t>(forced + m_ranked.position(r));
            const item x{m_ranked.cost(r), slot};
            m_in_store.data()[in] = x;
            m_out_store.data()[out] = x;
            in += chosen[slot];
            out += 1U - chosen[slot];
        }
        m_in = std::span<item>(m_in_store.data(), in);
        m_out = std::span<item>(m_out_store.data(), out);
        // (Views of this object's own storage, valid within the call that set them.)
    }

    // While even the most extreme swap (dearest unchosen for cheapest chosen, when the total is
    // short; the reverse when it is over) does not overshoot the target, it is also the best one,
    // so such swaps are made in one pass, pairing the lists from opposite ends, instead of one
    // O(m) search each. The oldest records a round starts from are often far off its target (the
    // records earlier rounds left behind lean one way), which would otherwise take dozens of
    // searches. Returns the new total; the lists are rebuilt if anything moved.
    double swap_extremes(double target, double total, std::size_t forced,
                         std::span<std::uint8_t> chosen) {
        const double want = target - total;
        const bool raise = want > 0.0;
        const std::size_t pairs = std::min(m_in.size(), m_out.size());
        std::size_t made = 0;
        for (; made < pairs; ++made) {
            const item& leaving = raise ? m_in[made] : m_in[m_in.size() - 1 - made];
            const item& joining = raise ? m_out[m_out.size() - 1 - made] : m_out[made];
            const double change = joining.cost - leaving.cost;
            const double left = target - total;
            if (raise ? !(change > 0.0 && change <= left) : !(change < 0.0 && change >= left))
                break;
            total += change;
            chosen[leaving.slot] = 0;
            chosen[joining.slot] = 1;
        }
        if (made > 0) split_candidates(forced, chosen);
        return total;
    }

    // Puts `x` at `at` and moves it to its place; the rest of the list stays sorted.
    static void replace_sorted(std::span<item> list, std::size_t at, item x) noexcept {
        while (at > 0 && x.before(list[at - 1])) {
            list[at] = list[at - 1];
            --at;
        }
        while (at + 1 < list.size() && list[at + 1].before(x)) {
            list[at] = list[at + 1];
            ++at;
        }
        list[at] = x;
    }

    ranked_costs m_ranked; // the free candidates by cost
    // Room for n items, left uninitialized (each slot is written before it is read), so room
    // made for a large buffer costs address space, not resident memory, until it is used. A copy
    // starts empty: it is scratch, and the selector makes room before each use.
    class item_store {
    public:
        item_store() = default;
        item_store(const item_store& /*other*/) noexcept {}
        item_store& operator=(const item_store& /*other*/) noexcept { return *this; }
        item_store(item_store&& other) noexcept
            : m_items(std::move(other.m_items)), m_size(std::exchange(other.m_size, 0)) {}
        item_store& operator=(item_store&& other) noexcept {
            m_items = std::move(other.m_items);
            m_size = std::exchange(other.m_size, 0);
            return *this;
        }
        ~item_store() = default;

        void reserve(std::size_t n) {
            if (m_size >= n) return;
            m_items = std::make_unique_for_overwrite<item[]>(n);
            m_size = n;
        }
        [[nodiscard]] item* data() noexcept { return m_items.get(); }

    private:
        std::unique_ptr<item[]> m_items;
        std::size_t m_size = 0;
    };

    item_store m_in_store; // room for every candidate in each list
    item_store m_out_store;
    std::span<item> m_in;  // chosen free candidates, cheapest first
    std::span<item> m_out; // unchosen candidates, cheapest first
};

} // namespace bcl::detail
