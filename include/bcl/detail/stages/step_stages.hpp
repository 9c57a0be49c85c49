#pragma once
// Internal: one step's records shared among R ranks so that the sum over stages of the slowest
// rank's stage cost is small, each rank keeping its count. A model whose stages synchronise
// separately (a vision encoder, then a language model, each meeting at its own all-gathers)
// waits, in every stage, for the rank slowest in that stage: a step lasts the sum of those.
// Costs are integers of one unit for every stage (stage_table), so that every choice compares
// integers and is the same on every rank and platform.

#include <bcl/detail/config.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <vector>

namespace bcl::detail::stages {

/// The most stages a record may have: the sum over stages of a step's maxima stays exact in 64
/// bits.
inline constexpr std::size_t max_stages = 16;

/// Records' stage costs in fixed point, one unit for every stage, row after row:
/// cost[i * stages + s] is record i's stage s. The unit is a power of two (or the least
/// subnormal) that puts the largest cost in [2^27, 2^28): a rank's load of a stage then stays
/// below 2^58 for the 2^30 records a plan may hold, and the sum over 16 stages of such loads
/// below 2^62.
struct stage_table {
    std::vector<std::uint64_t> cost;
    std::size_t stages = 1;
    double unit = 1.0; // cost units per fixed-point unit

    /// `costs` (n rows of `stages` valid costs, checked before) in fixed point.
    void assign(std::span<const double> costs, std::size_t stage_count) {
        stages = stage_count;
        double largest = 0.0;
        for (const double c : costs) largest = std::max(largest, c);
        unit = largest > 0.0 ? std::max(std::ldexp(1.0, std::ilogb(largest) - 27),
                                        std::numeric_limits<double>::denorm_min())
                             : 1.0;
        cost.resize(costs.size());
        for (std::size_t k = 0; k < costs.size(); ++k)
            cost[k] = static_cast<std::uint64_t>(std::llround(costs[k] / unit));
    }
    [[nodiscard]] std::size_t records() const noexcept { return cost.size() / stages; }
    [[nodiscard]] std::span<const std::uint64_t> of(std::size_t record) const noexcept {
        return std::span<const std::uint64_t>(cost).subspan(record * stages, stages);
    }
    [[nodiscard]] std::uint64_t sum(std::size_t record) const noexcept {
        std::uint64_t s = 0;
        for (const std::uint64_t c : of(record)) s += c;
        return s;
    }
};

/// One step shared among ranks by stage: improve() moves records between ranks by pairwise
/// swaps while the step's objective (the sum over stages of the largest rank load) falls;
/// deal() deals the records afresh, the dearest first, each to the rank with room where the
/// objective grows least. Either keeps every rank's count. Scratch kept between calls.
class step_stages {
public:
    /// The least objective any partition of `records` over `ranks` ranks can have: in each stage
    /// the larger of the ranks' mean load (rounded up) and the dearest record.
    /// O(records * stages).
    [[nodiscard]] static std::uint64_t bound(std::span<const std::uint32_t> records,
                                             std::size_t ranks, const stage_table& t) {
        std::uint64_t b = 0;
        for (std::size_t s = 0; s < t.stages; ++s) {
            std::uint64_t sum = 0;
            std::uint64_t dearest = 0;
            for (const std::uint32_t r : records) {
                sum += t.of(r)[s];
                dearest = std::max(dearest, t.of(r)[s]);
            }
            b += std::max((sum + ranks - 1) / ranks, dearest);
        }
        return b;
    }

    /// The objective of `rank_of` (rank_of[k]: the rank of records[k]) over `ranks` ranks.
    /// O(records * stages + ranks * stages).
    std::uint64_t objective(std::span<const std::uint32_t> records,
                            std::span<const std::uint32_t> rank_of, std::size_t ranks,
                            const stage_table& t) {
        load(records, rank_of, ranks, t);
        return total();
    }

    /// Swaps pairs of records of different ranks, each swap taken when it lowers the objective,
    /// pass after pass over the pairs in order (at most `passes`) until one takes none. Only a
    /// swap with a rank that is the slowest of some stage can lower the objective (the other
    /// ranks' loads stay, and neither rank's load can fall below a maximum it does not hold), so
    /// a pair is tried only when its first record's rank is one. Returns the objective, never
    /// above the one it started from. O(passes * stages^2 * (records / ranks) * records).
    std::uint64_t improve(std::span<const std::uint32_t> records, std::span<std::uint32_t> rank_of,
                          std::size_t ranks, const stage_table& t, std::size_t passes = 8) {
        load(records, rank_of, ranks, t);
        const std::size_t d = t.stages;
        std::uint64_t current = total();
        for (std::size_t pass = 0; pass < passes; ++pass) {
            bool swapped = false;
            for (std::size_t a = 0; a < records.size(); ++a)
                for (std::size_t b = 0; b < records.size() && slowest(rank_of[a], d); ++b) {
                    const std::uint32_t p = rank_of[a];
                    const std::uint32_t q = rank_of[b];
                    if (p == q) continue;
                    const auto ca = t.of(records[a]);
                    const auto cb = t.of(records[b]);
                    std::uint64_t after = 0;
                    for (std::size_t s = 0; s < d; ++s) {
                        const std::uint64_t lp = m_load[p * d + s] - ca[s] + cb[s];
                        const std::uint64_t lq = m_load[q * d + s] - cb[s] + ca[s];
                        after += std::max({lp, lq, largest_but(s, p, q)});
                    }
                    if (after >= current) continue;
                    for (std::size_t s = 0; s < d; ++s) {
                        m_load[p * d + s] = m_load[p * d + s] - ca[s] + cb[s];
                        m_load[q * d + s] = m_load[q * d + s] - cb[s] + ca[s];
                    }
                    rank_of[a] = q;
                    rank_of[b] = p;
                    index_top(ranks, d);
                    current = after;
                    swapped = true;
                }
            if (!swapped) break;
        }
        return current;
    }

    /// Deals `records` afresh: the dearest first (by the sum of its stages; ties to the earlier
    /// record), each to the rank with room (rank r takes counts[r]) where the objective grows
    /// least, ties to the rank of the least summed load, then the lower rank. O(records *
    /// (log records + ranks * stages)).
    void deal(std::span<const std::uint32_t> records, std::span<const std::size_t> counts,
              std::span<std::uint32_t> rank_of, const stage_table& t) {
        const std::size_t ranks = counts.size();
        const std::size_t d = t.stages;
        m_order.resize(records.size());
        for (std::size_t k = 0; k < records.size(); ++k) m_order[k] = static_cast<std::uint32_t>(k);
        // (std::sort with the position as the last key: no buffer to allocate, and the order
        // still the same everywhere.)
        std::sort(m_order.begin(), m_order.end(), [&](std::uint32_t x, std::uint32_t y) {
            const std::uint64_t sx = t.sum(records[x]);
            const std::uint64_t sy = t.sum(records[y]);
            return sx != sy ? sx > sy : x < y;
        });
        m_load.assign(ranks * d, 0);
        m_room.assign(counts.begin(), counts.end());
        m_peak.assign(d, 0);
        for (const std::uint32_t k : m_order) {
            const auto c = t.of(records[k]);
            std::size_t best = ranks;
            std::uint64_t best_growth = 0;
            std::uint64_t best_sum = 0;
            for (std::size_t r = 0; r < ranks; ++r) {
                if (m_room[r] == 0) continue;
                std::uint64_t growth = 0;
                std::uint64_t sum = 0;
                for (std::size_t s = 0; s < d; ++s) {
                    const std::uint64_t l = m_load[r * d + s] + c[s];
                    growth += l > m_peak[s] ? l - m_peak[s] : 0;
                    sum += m_load[r * d + s];
                }
                if (best == ranks || growth < best_growth ||
                    (growth == best_growth && sum < best_sum)) {
                    best = r;
                    best_growth = growth;
                    best_sum = sum;
                }
            }
            rank_of[k] = static_cast<std::uint32_t>(best);
            --m_room[best];
            for (std::size_t s = 0; s < d; ++s) {
                m_load[best * d + s] += c[s];
                m_peak[s] = std::max(m_peak[s], m_load[best * d + s]);
            }
        }
    }

private:
    void load(std::span<const std::uint32_t> records, std::span<const std::uint32_t> rank_of,
              std::size_t ranks, const stage_table& t) {
        const std::size_t d = t.stages;
        m_load.assign(ranks * d, 0);
        for (std::size_t k = 0; k < records.size(); ++k) {
            const auto c = t.of(records[k]);
            for (std::size_t s = 0; s < d; ++s) m_load[rank_of[k] * d + s] += c[s];
        }
        index_top(ranks, d);
    }

    // The three largest loads of each stage, with their ranks: the largest but two given ranks
    // is then one of them.
    void index_top(std::size_t ranks, std::size_t d) {
        m_top.assign(d, {});
        for (std::size_t s = 0; s < d; ++s) {
            auto& top = m_top[s];
            for (std::size_t r = 0; r < ranks; ++r) {
                const entry e{m_load[r * d + s], static_cast<std::uint32_t>(r)};
                for (std::size_t k = 0; k < top.size(); ++k)
                    if (!top[k].used || e.load > top[k].load) {
                        for (std::size_t j = top.size() - 1; j > k; --j) top[j] = top[j - 1];
                        top[k] = {e.load, e.rank, true};
                        break;
                    }
            }
        }
    }
    // Whether rank r holds the largest load of some stage.
    [[nodiscard]] bool slowest(std::uint32_t r, std::size_t d) const noexcept {
        for (std::size_t s = 0; s < d; ++s)
            if (m_top[s][0].used && m_top[s][0].rank == r) return true;
        return false;
    }
    [[nodiscard]] std::uint64_t largest_but(std::size_t s, std::uint32_t p,
                                            std::uint32_t q) const noexcept {
        for (const entry& e : m_top[s])
            if (e.used && e.rank != p && e.rank != q) return e.load;
        return 0;
    }
    [[nodiscard]] std::uint64_t total() const noexcept {
        std::uint64_t sum = 0;
        for (const auto& top : m_top) sum += top[0].used ? top[0].load : 0;
        return sum;
    }

    struct entry {
        std::uint64_t load = 0;
        std::uint32_t rank = 0;
        bool used = false;
    };
    std::vector<std::uint64_t> m_load; // by rank, then stage
    std::vector<std::array<entry, 3>> m_top;
    std::vector<std::uint32_t> m_order;
    std::vector<std::size_t> m_room;
    std::vector<std::uint64_t> m_peak;
};

} // namespace bcl::detail::stages
