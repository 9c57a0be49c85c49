#pragma once
// Choosing which buffered records form the next round of the sliding policy.

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

namespace bcl::detail {

/// Chooses `count` items out of `costs` whose total is as close as it can get to `target`, where
/// the first `forced` items must be chosen. Starts from the oldest items (the lowest indices), then
/// repeatedly applies the single swap (one chosen for one unchosen) that brings the total closest to
/// the target, until no swap helps or `max_swaps` were made.
///
/// O(m log m) to sort the m candidates, O(m) per swap (two-pointer search over both sorted lists).
/// Scratch space is kept between calls, so it allocates nothing once warmed up.
class target_selector {
public:
    static constexpr std::size_t max_swaps = 64;

    /// Writes chosen[i] = 1 for the chosen items, 0 for the others. Returns the chosen total.
    /// Preconditions: forced <= count <= costs.size() == chosen.size().
    double operator()(std::span<const double> costs, std::size_t forced, std::size_t count,
                      double target, std::span<std::uint8_t> chosen) {
        const std::size_t n = costs.size();
        double total = 0.0;
        for (std::size_t i = 0; i < n; ++i) {
            chosen[i] = i < count ? 1 : 0;
            if (i < count) total += costs[i];
        }
        if (count == forced || count == n) return total;

        const auto by_cost = [&costs](std::uint32_t x, std::uint32_t y) {
            return costs[x] < costs[y] || (costs[x] == costs[y] && x < y);
        };
        m_in.clear();
        m_out.clear();
        for (std::size_t i = forced; i < n; ++i)
            (i < count ? m_in : m_out).push_back(static_cast<std::uint32_t>(i));
        std::sort(m_in.begin(), m_in.end(), by_cost);
        std::sort(m_out.begin(), m_out.end(), by_cost);

        const double tolerance = 1e-12 * std::abs(target);
        for (std::size_t swap = 0; swap < max_swaps; ++swap) {
            const double want = target - total; // the change a swap should bring
            if (std::abs(want) <= tolerance) break;
            // For each chosen item x (cheapest first) the ideal partner costs x + want, which rises
            // with x, so the pointer into the unchosen list only moves forward.
            double best = std::abs(want);
            std::size_t best_in = m_in.size();
            std::size_t best_out = 0;
            std::size_t j = 0;
            for (std::size_t i = 0; i < m_in.size(); ++i) {
                const double ideal = costs[m_in[i]] + want;
                while (j + 1 < m_out.size() && costs[m_out[j + 1]] <= ideal) ++j;
                for (std::size_t c = j; c <= j + 1 && c < m_out.size(); ++c) {
                    const double miss = std::abs(want - (costs[m_out[c]] - costs[m_in[i]]));
                    if (miss < best) {
                        best = miss;
                        best_in = i;
                        best_out = c;
                    }
                }
            }
            if (best_in == m_in.size() || best >= std::abs(want) - tolerance) break;
            const std::uint32_t leaving = m_in[best_in];
            const std::uint32_t joining = m_out[best_out];
            total += costs[joining] - costs[leaving];
            chosen[leaving] = 0;
            chosen[joining] = 1;
            replace_sorted(m_in, best_in, joining, by_cost);
            replace_sorted(m_out, best_out, leaving, by_cost);
        }
        return total;
    }

private:
    template <class Less>
    static void replace_sorted(std::vector<std::uint32_t>& list, std::size_t at, std::uint32_t item,
                               const Less& less) {
        list[at] = item;
        while (at > 0 && less(list[at], list[at - 1])) {
            std::swap(list[at - 1], list[at]);
            --at;
        }
        while (at + 1 < list.size() && less(list[at + 1], list[at])) {
            std::swap(list[at + 1], list[at]);
            ++at;
        }
    }

    std::vector<std::uint32_t> m_in;  // chosen candidates, by cost
    std::vector<std::uint32_t> m_out; // unchosen candidates, by cost
};

} // namespace bcl::detail
