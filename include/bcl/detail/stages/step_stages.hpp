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

/// One step shared among ranks by stage: improve() swaps records between ranks while that lowers
/// the step's objective (the sum over stages of the largest rank load) towards its bound;
/// deal() deals the records afresh, the dearest first, each to the rank with room where the
/// objective grows least. Either keeps every rank's count. Scratch kept between calls.
class step_stages {
public:
    /// The partners of a stage's slowest rank that improve()'s polishing tries, the likeliest
    /// first. A swap that lowers the objective is mostly with one of the first few; trying
    /// every partner besides costs as much again at R = 64 for a few hundredths of a percent of
    /// efficiency (the vision-language mix of tests/stage_plan.test.cpp).
    static constexpr std::size_t polish_partners = 4;
    /// The partners improve()'s levelling tries, in order, once its likeliest partner has no
    /// swap that sheds excess, before it raises the stage's target. Most such rounds find none
    /// at all: trying every partner spent about 70% of a window's planning time at R = 64 (16
    /// windows of bench/bcl_bench.cpp's stage_plan/window mix). Measured there, per stage and CPU
    /// time a record: every partner 0.9845 at 4-5 us, 16 0.9839 at 1.8 us, 8 0.9832 at 1.4 us,
    /// 4 0.9812 at 1.0 us, 2 0.9802 at 1.0 us, none 0.9789; at R = 8, and in held batches of
    /// one micro-step, 4 is within 0.0004 of every partner. 4 is where the time stops falling.
    static constexpr std::size_t level_partners = 4;

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
        const std::size_t d = t.stages;
        m_load.assign(ranks * d, 0);
        for (std::size_t k = 0; k < records.size(); ++k) {
            const auto c = t.of(records[k]);
            for (std::size_t s = 0; s < d; ++s) m_load[rank_of[k] * d + s] += c[s];
        }
        std::uint64_t sum = 0;
        for (std::size_t s = 0; s < d; ++s) {
            std::uint64_t top = 0;
            for (std::size_t r = 0; r < ranks; ++r) top = std::max(top, m_load[r * d + s]);
            sum += top;
        }
        return sum;
    }

    /// Swaps pairs of records of different ranks, every rank keeping its count, and returns the
    /// objective: never above the one it started from, nor below step_stages::bound. Two
    /// phases, each pairing one rank with one partner at a time and taking the swap between
    /// the two of the least value, found by a sorted search (each rank's records in the order
    /// of each stage's cost, p's against q's outward from the cost that levels the pair in
    /// that stage, a side given up once that stage alone rules it out): so a step costs about
    /// O(records * (stages + log(records / ranks)) + swaps * (ranks * stages + (records /
    /// ranks) * scanned)), not a pass over every pair of records after every swap.
    ///
    /// 1. Levelling: each stage has a target, at first its bound (the larger of the ranks'
    ///    mean load and the dearest record). The rank furthest above a target (a stage's
    ///    slowest) swaps with the partner whose swap lowers the excess of the two over the
    ///    targets most: the likeliest partner first (of the ranks slow in the other stages and
    ///    the least loaded, the one whose pair could keep the least excess, then the least
    ///    loaded), and, should it have no such swap, the next level_partners in that order. A
    ///    rank none of those can help stays, and that stage's target rises to its load: it is
    ///    the stage's largest, and the ranks below it need not fall further. Aiming every rank at
    ///    the bound at once, not the slowest rank at the next slowest, keeps the swaps few: one or
    ///    two a rank.
    /// 2. Polishing: a stage's slowest rank swaps with one of its first partners (by the least
    ///    objective their pair could reach, polish_partners of them) where that lowers the
    ///    objective, until none does. Only a swap with a stage's slowest rank can lower it (the
    ///    other ranks' loads stay, and neither rank's load can fall below a maximum it does not
    ///    hold); with at most polish_partners + 1 ranks every partner is tried, and improve()
    ///    ends where no single swap lowers the objective. (Should the levelling end above the
    ///    objective it started from, which a swap shedding excess in one stage can do, the
    ///    polishing starts from the given ranks.)
    ///
    /// `floor` (the step's bound, or 0) ends both phases once the objective reaches it; each
    /// phase takes at most 4 * records + ranks * stages swaps (steps take far fewer). Integers
    /// only, every tie to a fixed order: the same on every rank and platform.
    std::uint64_t improve(std::span<const std::uint32_t> records, std::span<std::uint32_t> rank_of,
                          std::size_t ranks, const stage_table& t, std::uint64_t floor = 0) {
        switch (t.stages) {
        case 2:
            return improve_with<2>(records, rank_of, ranks, t, floor);
        default:
            return improve_with<0>(records, rank_of, ranks, t, floor);
        }
    }

    /// Scratch for steps of up to `records` records over `ranks` ranks and `stages` stages:
    /// improve() and deal() of such steps then allocate nothing, deal() included where it is
    /// called only now and then (step_restager deals afresh only on some steps).
    void reserve(std::size_t records, std::size_t ranks, std::size_t stages) {
        m_cost.reserve(records * stages);
        m_sorted.reserve(records * stages);
        m_at.reserve(records * stages);
        m_load.reserve(ranks * stages);
        m_first.reserve(ranks + 1);
        m_fill.reserve(ranks + 1);
        m_top.reserve(stages);
        m_partners.reserve(ranks);
        m_order.reserve(records);
        m_open.reserve(ranks);
        m_room.reserve(ranks);
        m_peak.reserve(stages);
    }

    /// Deals `records` afresh: the dearest first (by the sum of its stages; ties to the earlier
    /// record), each to the rank with room (rank r takes counts[r]) where the objective grows
    /// least, ties to the rank of the least summed load, then the lower rank. The ranks with room
    /// are kept in that tie order, so the first that takes a record below every stage's largest
    /// load (growth 0) is the one; only where none does are they all compared. O(records *
    /// (log records + stages * ranks tried)): a few ranks a record but the first ranks' records
    /// and the last, every rank at worst.
    void deal(std::span<const std::uint32_t> records, std::span<const std::size_t> counts,
              std::span<std::uint32_t> rank_of, const stage_table& t) {
        m_d = t.stages;
        if (t.stages == 2)
            deal_with<2>(records, counts, rank_of, t);
        else
            deal_with<0>(records, counts, rank_of, t);
    }

private:
    template <std::size_t D>
    void deal_with(std::span<const std::uint32_t> records, std::span<const std::size_t> counts,
                   std::span<std::uint32_t> rank_of, const stage_table& t) {
        const std::size_t ranks = counts.size();
        const std::size_t d = dim<D>();
        // The dearest first: (std::sort with the position as the last key: no buffer to
        // allocate, and the order still the same everywhere.)
        m_order.resize(records.size());
        for (std::size_t k = 0; k < records.size(); ++k)
            m_order[k] = {t.sum(records[k]), static_cast<std::uint32_t>(k)};
        std::sort(m_order.begin(), m_order.end(), [](const entry_in& x, const entry_in& y) {
            return x.cost != y.cost ? x.cost > y.cost : x.record < y.record;
        });
        m_load.assign(ranks * d, 0);
        m_room.assign(counts.begin(), counts.end());
        m_peak.assign(d, 0);
        // The ranks with room by (summed load, rank): all loads 0 at first.
        m_open.clear();
        for (std::size_t r = 0; r < ranks; ++r)
            if (m_room[r] > 0) m_open.push_back({0, static_cast<std::uint32_t>(r)});
        for (const entry_in& dearest : m_order) {
            const std::uint32_t k = dearest.record;
            const auto c = t.of(records[k]);
            std::size_t at = m_open.size(); // the chosen rank's place in m_open
            std::uint64_t best_growth = 0;
            for (std::size_t i = 0; i < m_open.size(); ++i) {
                const std::size_t r = m_open[i].rank;
                std::uint64_t growth = 0;
                for (std::size_t s = 0; s < d; ++s) {
                    const std::uint64_t l = m_load[r * d + s] + c[s];
                    growth += l > m_peak[s] ? l - m_peak[s] : 0;
                }
                if (at == m_open.size() || growth < best_growth) {
                    at = i;
                    best_growth = growth;
                }
                if (growth == 0) break; // none after it is before it
            }
            const std::size_t best = m_open[at].rank;
            rank_of[k] = static_cast<std::uint32_t>(best);
            std::uint64_t sum = 0;
            for (std::size_t s = 0; s < d; ++s) {
                m_load[best * d + s] += c[s];
                m_peak[s] = std::max(m_peak[s], m_load[best * d + s]);
                sum += m_load[best * d + s];
            }
            // Its new place: later, by its grown sum; or gone, once full.
            const open_rank moved{sum, m_open[at].rank};
            if (--m_room[best] == 0) {
                m_open.erase(m_open.begin() + static_cast<std::ptrdiff_t>(at));
                continue;
            }
            std::size_t i = at;
            for (; i + 1 < m_open.size() && m_open[i + 1] < moved; ++i) m_open[i] = m_open[i + 1];
            m_open[i] = moved;
        }
    }

    // Signed: a swap moves x = cb - ca of a stage from one rank to the other, either way. Loads
    // stay below 2^58 (stage_table), so twice their sums fit.
    using i64 = std::int64_t;

    // A pair's value as a function of what a swap moves, stage by stage: p's load of stage s
    // becomes lp[s] + x and q's lq[s] - x. Either kind is convex in x, flat where both loads
    // are low enough and rising by one a unit beyond: so the pair's least value is the sum of
    // least(s), and x far from the flat part cannot beat a given value.
    enum class kind {
        excess, // (lp + x - lim)+ + (lq - x - lim)+: the pair's load above the targets lim
        largest // max(lp + x, lq - x, lim): the stage's largest load, lim that of the others
    };
    template <kind Kind>
    struct pair_cost {
        std::array<i64, max_stages> lp{}, lq{}, lim{};
        [[nodiscard]] i64 at(std::size_t s, i64 x) const noexcept {
            if constexpr (Kind == kind::excess)
                return std::max<i64>(0, lp[s] + x - lim[s]) + std::max<i64>(0, lq[s] - x - lim[s]);
            else
                return std::max({lp[s] + x, lq[s] - x, lim[s]});
        }
        [[nodiscard]] i64 least(std::size_t s) const noexcept {
            if constexpr (Kind == kind::excess)
                return std::max<i64>(0, lp[s] + lq[s] - 2 * lim[s]);
            else
                return std::max(lim[s], (lp[s] + lq[s] + 1) / 2);
        }
    };
    // The best swap found so far, and the value it must beat.
    struct pick {
        i64 value = 0;
        std::uint32_t ka = 0, kb = 0;
        bool found = false;
    };
    // A partner of a rank, and the least value their pair could reach (then a tie-break).
    struct partner {
        i64 least = 0;
        i64 tie = 0;
        std::uint32_t rank = 0;
        friend bool operator<(const partner& x, const partner& y) noexcept {
            return x.least != y.least ? x.least < y.least
                   : x.tie != y.tie   ? x.tie < y.tie
                                      : x.rank < y.rank;
        }
    };
    // The three largest loads of a stage, with their ranks: the largest but two given ranks is
    // then one of them.
    struct entry {
        std::uint64_t load = 0;
        std::uint32_t rank = 0;
        bool used = false;
    };

    // A record of the step in a rank's records in the order of a stage's cost: the cheaper
    // first, then the earlier.
    struct entry_in {
        std::uint64_t cost = 0;
        std::uint32_t record = 0;
        friend bool operator<(const entry_in& x, const entry_in& y) noexcept {
            return x.cost != y.cost ? x.cost < y.cost : x.record < y.record;
        }
    };

    // A rank with room in deal(), in the order ties go to: the least summed load, then the
    // lower rank.
    struct open_rank {
        std::uint64_t sum = 0;
        std::uint32_t rank = 0;
        friend bool operator<(const open_rank& x, const open_rank& y) noexcept {
            return x.sum != y.sum ? x.sum < y.sum : x.rank < y.rank;
        }
    };

    // The most rounds (a swap, or a raised target) a phase takes. A swap lowers what its phase
    // lowers by a unit at least, which alone would not bound them in practice (units are 2^-27
    // of the dearest cost). Steps take one or two a rank, and no step of the tests'
    // distributions (ties, zeros, outliers, heavy tails; up to 64 ranks of 40 records and 4
    // stages) took more than one a record: this only keeps a pathological step from running
    // long.
    [[nodiscard]] std::size_t max_rounds() const noexcept { return 4 * m_n + m_ranks * m_d; }

    // The number of stages: D, or the table's when D is 0.
    template <std::size_t D>
    [[nodiscard]] std::size_t dim() const noexcept {
        if constexpr (D == 0)
            return m_d;
        else
            return D;
    }

    template <std::size_t D>
    std::uint64_t improve_with(std::span<const std::uint32_t> records,
                               std::span<std::uint32_t> rank_of, std::size_t ranks,
                               const stage_table& t, std::uint64_t floor) {
        setup(records, rank_of, ranks, t);
        const std::uint64_t start = total();
        if (start <= floor) return start;
        level<D>(floor);
        // (A levelling swap sheds excess, and may, rarely, raise another stage's largest load
        // more than it lowers this one's: then the polishing starts from the given ranks.)
        if (total() > start) setup(records, rank_of, ranks, t);
        polish<D>(floor);
        const std::uint64_t end = total();
        for (std::size_t r = 0; r < m_ranks; ++r)
            for (std::size_t i = m_first[r]; i < m_first[r + 1]; ++i)
                rank_of[m_sorted[i].record] = static_cast<std::uint32_t>(r);
        return end;
    }

    // The step's costs (record k of the step: records[k]'s), each rank's records in each
    // stage's order (m_sorted[s * n + i], rank r's at i from m_first[r] to m_first[r + 1]), the
    // loads and each stage's three largest.
    void setup(std::span<const std::uint32_t> records, std::span<const std::uint32_t> rank_of,
               std::size_t ranks, const stage_table& t) {
        const std::size_t d = t.stages;
        const std::size_t n = records.size();
        m_d = d;
        m_n = n;
        m_ranks = ranks;
        m_cost.resize(n * d);
        for (std::size_t k = 0; k < n; ++k) {
            const auto c = t.of(records[k]);
            for (std::size_t s = 0; s < d; ++s) m_cost[k * d + s] = c[s];
        }
        m_first.assign(ranks + 1, 0);
        for (std::size_t k = 0; k < n; ++k) ++m_first[rank_of[k] + 1];
        for (std::size_t r = 0; r < ranks; ++r) m_first[r + 1] += m_first[r];
        m_sorted.resize(n * d);
        m_at.resize(n * d);
        m_load.assign(ranks * d, 0);
        for (std::size_t s = 0; s < d; ++s) {
            entry_in* l = m_sorted.data() + s * n;
            m_fill.assign(m_first.begin(), m_first.end() - 1);
            for (std::size_t k = 0; k < n; ++k) {
                const std::uint64_t c = m_cost[k * d + s];
                l[m_fill[rank_of[k]]++] = {c, static_cast<std::uint32_t>(k)};
                m_load[rank_of[k] * d + s] += c;
            }
            for (std::size_t r = 0; r < ranks; ++r) std::sort(l + m_first[r], l + m_first[r + 1]);
            for (std::size_t i = 0; i < n; ++i) m_at[s * n + l[i].record] = i;
        }
        m_top.resize(d);
        for (std::size_t s = 0; s < d; ++s) index_top(s);
        index_low();
    }

    void index_top(std::size_t s) {
        auto& top = m_top[s];
        top = {};
        for (std::size_t r = 0; r < m_ranks; ++r)
            if (!top[2].used || m_load[r * m_d + s] > top[2].load)
                offer(top, m_load[r * m_d + s], r);
    }
    // The three least loaded ranks, by the sum of their stages (entry.load holding the
    // complement, so that the largest of those are the least loaded; ties to the lower rank).
    void index_low() {
        m_low = {};
        for (std::size_t r = 0; r < m_ranks; ++r)
            if (!m_low[2].used || ~sum_of(r) > m_low[2].load) offer(m_low, ~sum_of(r), r);
    }
    [[nodiscard]] std::uint64_t sum_of(std::size_t r) const noexcept {
        std::uint64_t sum = 0;
        for (std::size_t s = 0; s < m_d; ++s) sum += m_load[r * m_d + s];
        return sum;
    }
    // Rank `rank` of `load` into the three largest (ties to the lower rank).
    static void offer(std::array<entry, 3>& top, std::uint64_t load, std::size_t rank) {
        for (std::size_t k = 0; k < top.size(); ++k)
            if (!top[k].used || load > top[k].load || (load == top[k].load && rank < top[k].rank)) {
                for (std::size_t j = top.size() - 1; j > k; --j) top[j] = top[j - 1];
                top[k] = {load, static_cast<std::uint32_t>(rank), true};
                return;
            }
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
    [[nodiscard]] i64 load(std::uint32_t r, std::size_t s) const noexcept {
        return static_cast<i64>(m_load[r * m_d + s]);
    }

    // Into `best`, the swap of a record of p for one of q of the least value (the sum over
    // stages of f at what it moves, less `offset`), if below best.value. p's records are taken
    // by their cost of stage `key`, the dearest first; for each, q's records outward from the
    // cost that would level the pair in that stage (a pointer that only falls, as p's cost
    // does), each side given up once f's stage `key` alone, with every other stage at its
    // least, cannot beat the best. Stops at the pair's least value. O((records of p) * (1 +
    // scanned)) after the pointer's O(records of q).
    template <std::size_t D, class Cost>
    void search_pair(std::uint32_t p, std::uint32_t q, std::size_t key, const Cost& f, i64 offset,
                     pick& best) const {
        const std::size_t d = dim<D>();
        i64 rest = -offset;
        for (std::size_t s = 0; s < d; ++s)
            if (s != key) rest += f.least(s);
        const i64 least = rest + f.least(key);
        if (least >= best.value) return;
        // (The best so far in locals: the compiler need not reload it after every store.)
        pick found = best;
        const Cost g = f;
        const std::size_t base = key * m_n;
        const entry_in* qe = m_sorted.data() + base + m_first[q];
        const std::size_t qn = m_first[q + 1] - m_first[q];
        const entry_in* pe = m_sorted.data() + base + m_first[p];
        const i64 bias = g.lq[key] - g.lp[key];
        std::size_t j = qn; // the first of q's whose doubled cost reaches the target
        for (std::size_t i = m_first[p + 1] - m_first[p]; i-- > 0 && found.value > least;) {
            const i64 ca = static_cast<i64>(pe[i].cost);
            const i64 target = 2 * ca + bias; // twice the cost of b that levels the pair
            while (j > 0 && 2 * static_cast<i64>(qe[j - 1].cost) >= target) --j;
            const std::uint64_t* cav = m_cost.data() + static_cast<std::size_t>(pe[i].record) * d;
            // q's records from j up, then from j - 1 down: f's stage `key` only grows away
            // from the target on either side, so each side ends at the first it rules out.
            const auto consider = [&](std::size_t at) {
                const i64 head = g.at(key, static_cast<i64>(qe[at].cost) - ca) + rest;
                if (head >= found.value) return false;
                const std::uint64_t* cbv =
                    m_cost.data() + static_cast<std::size_t>(qe[at].record) * d;
                i64 v = head - rest - offset;
                for (std::size_t s = 0; s < d; ++s)
                    if (s != key) v += g.at(s, static_cast<i64>(cbv[s]) - static_cast<i64>(cav[s]));
                if (v < found.value) found = {v, pe[i].record, qe[at].record, true};
                return found.value > least;
            };
            for (std::size_t at = j; at < qn && consider(at);) ++at;
            for (std::size_t at = j; at > 0 && found.value > least && consider(at - 1);) --at;
        }
        best = found;
    }

    // Phase 1 (see improve).
    template <std::size_t D>
    void level(std::uint64_t floor) {
        const std::size_t d = dim<D>();
        pair_cost<kind::excess> f;
        for (std::size_t s = 0; s < d; ++s) {
            std::uint64_t sum = 0;
            std::uint64_t dearest = 0;
            for (std::size_t r = 0; r < m_ranks; ++r) {
                sum += m_load[r * d + s];
                if (m_first[r + 1] > m_first[r])
                    dearest = std::max(dearest, m_sorted[s * m_n + m_first[r + 1] - 1].cost);
            }
            f.lim[s] = static_cast<i64>(std::max((sum + m_ranks - 1) / m_ranks, dearest));
        }
        const auto excess = [&](std::uint32_t r, std::size_t s) {
            return std::max<i64>(0, load(r, s) - f.lim[s]);
        };
        // A partner whose pair could shed some of p's excess, by the least the pair could keep
        // above the targets, then the least loaded (the most room in every stage).
        const auto partner_of = [&](std::uint32_t p, std::uint32_t q) {
            i64 gain = 0;
            i64 sum = 0;
            for (std::size_t s = 0; s < d; ++s) {
                gain += std::max<i64>(0, load(p, s) + load(q, s) - 2 * f.lim[s]) - excess(p, s) -
                        excess(q, s);
                sum += load(q, s);
            }
            return partner{gain, sum, q};
        };
        for (std::size_t round = 0; round < max_rounds() && total() > floor; ++round) {
            // The rank furthest above a target: a stage's slowest (ties to the earlier stage).
            i64 worst = 0;
            std::uint32_t p = 0;
            std::size_t key = 0;
            for (std::size_t s = 0; s < d; ++s)
                if (static_cast<i64>(m_top[s][0].load) - f.lim[s] > worst) {
                    worst = static_cast<i64>(m_top[s][0].load) - f.lim[s];
                    p = m_top[s][0].rank;
                    key = s;
                }
            if (worst == 0) return;
            // The best partner is most often a rank slow in another stage (the pair sheds both
            // excesses) or one of the least loaded: tried first, from these alone; should it
            // have no swap, every partner in order.
            partner first{};
            bool any = false;
            const auto consider = [&](std::uint32_t q) {
                if (q == p) return;
                const partner c = partner_of(p, q);
                if (c.least < 0 && (!any || c < first)) {
                    first = c;
                    any = true;
                }
            };
            for (std::size_t s = 0; s < d; ++s)
                if (s != key)
                    for (const entry& e : m_top[s])
                        if (e.used) consider(e.rank);
            for (const entry& e : m_low)
                if (e.used) consider(e.rank);
            pick best;
            std::uint32_t with = 0;
            const auto try_pair = [&](std::uint32_t q) {
                i64 now = 0;
                for (std::size_t s = 0; s < d; ++s) {
                    f.lp[s] = load(p, s);
                    f.lq[s] = load(q, s);
                    now += excess(p, s) + excess(q, s);
                }
                search_pair<D>(p, q, key, f, now, best);
                with = q;
            };
            if (any) try_pair(first.rank);
            if (!best.found) {
                m_partners.clear();
                for (std::uint32_t q = 0; q < m_ranks; ++q) {
                    if (q == p || (any && q == first.rank)) continue;
                    const partner c = partner_of(p, q);
                    if (c.least < 0) m_partners.push_back(c);
                }
                const std::size_t take = std::min(level_partners, m_partners.size());
                std::partial_sort(m_partners.begin(),
                                  m_partners.begin() + static_cast<std::ptrdiff_t>(take),
                                  m_partners.end());
                for (std::size_t c = 0; c < take && !best.found; ++c) try_pair(m_partners[c].rank);
            }
            if (best.found)
                swap<D>(best.ka, best.kb, p, with);
            else
                f.lim[key] = load(p, key); // p stays the stage's largest: the others need not
                                           // fall below it
        }
    }

    // Phase 2 (see improve).
    template <std::size_t D>
    void polish(std::uint64_t floor) {
        const std::size_t d = dim<D>();
        pair_cost<kind::largest> f;
        std::uint64_t current = total();
        for (std::size_t round = 0; round < max_rounds() && current > floor; ++round) {
            bool moved = false;
            for (std::size_t hs = 0; hs < d && !moved; ++hs) {
                const std::uint32_t p = m_top[hs][0].rank;
                bool seen = false;
                for (std::size_t s = 0; s < hs; ++s) seen = seen || m_top[s][0].rank == p;
                if (seen) continue;
                // Its partners by the least objective their pair could reach, then the least
                // loaded; the first few only.
                m_partners.clear();
                for (std::uint32_t q = 0; q < m_ranks; ++q) {
                    if (q == p) continue;
                    i64 least = 0;
                    i64 sum = 0;
                    for (std::size_t s = 0; s < d; ++s) {
                        least += std::max(static_cast<i64>(largest_but(s, p, q)),
                                          (load(p, s) + load(q, s) + 1) / 2);
                        sum += load(q, s);
                    }
                    if (least < static_cast<i64>(current)) m_partners.push_back({least, sum, q});
                }
                const std::size_t take = std::min(polish_partners, m_partners.size());
                std::partial_sort(m_partners.begin(),
                                  m_partners.begin() + static_cast<std::ptrdiff_t>(take),
                                  m_partners.end());
                pick best;
                best.value = static_cast<i64>(current);
                for (std::size_t c = 0; c < take && !best.found; ++c) {
                    const std::uint32_t q = m_partners[c].rank;
                    for (std::size_t s = 0; s < d; ++s) {
                        f.lp[s] = load(p, s);
                        f.lq[s] = load(q, s);
                        f.lim[s] = static_cast<i64>(largest_but(s, p, q));
                    }
                    search_pair<D>(p, q, hs, f, 0, best);
                    if (best.found) {
                        swap<D>(best.ka, best.kb, p, q);
                        current = total();
                        moved = true;
                    }
                }
            }
            if (!moved) return;
        }
    }

    // Record ka of rank p and kb of rank q change ranks.
    template <std::size_t D>
    void swap(std::uint32_t ka, std::uint32_t kb, std::uint32_t p, std::uint32_t q) {
        const std::size_t d = dim<D>();
        for (std::size_t s = 0; s < d; ++s) {
            const std::uint64_t ca = m_cost[ka * d + s];
            const std::uint64_t cb = m_cost[kb * d + s];
            m_load[p * d + s] = m_load[p * d + s] - ca + cb;
            m_load[q * d + s] = m_load[q * d + s] - cb + ca;
            const std::size_t at_a = m_at[s * m_n + ka];
            const std::size_t at_b = m_at[s * m_n + kb];
            replace(s, p, at_a, kb);
            replace(s, q, at_b, ka);
            // The three largest change only through p and q: from the others' unless p or q
            // was among them.
            auto& top = m_top[s];
            bool held = false;
            for (const entry& e : top) held = held || (e.used && (e.rank == p || e.rank == q));
            if (held) {
                index_top(s);
            } else {
                offer(top, m_load[p * d + s], p);
                offer(top, m_load[q * d + s], q);
            }
        }
        bool held = false;
        for (const entry& e : m_low) held = held || (e.used && (e.rank == p || e.rank == q));
        if (held) {
            index_low();
        } else {
            offer(m_low, ~sum_of(p), p);
            offer(m_low, ~sum_of(q), q);
        }
    }
    // In rank r's records in stage s's order, the one at place i replaced by `in`, the order kept
    // (and every moved record's place).
    void replace(std::size_t s, std::uint32_t r, std::size_t i, std::uint32_t in) {
        entry_in* l = m_sorted.data() + s * m_n;
        std::size_t* at = m_at.data() + s * m_n;
        const entry_in e{m_cost[in * m_d + s], in};
        for (; i > m_first[r] && e < l[i - 1]; --i) {
            l[i] = l[i - 1];
            at[l[i].record] = i;
        }
        for (; i + 1 < m_first[r + 1] && l[i + 1] < e; ++i) {
            l[i] = l[i + 1];
            at[l[i].record] = i;
        }
        l[i] = e;
        at[in] = i;
    }

    std::size_t m_d = 1, m_n = 0, m_ranks = 0;
    std::vector<std::uint64_t> m_cost; // by record of the step, then stage
    std::vector<std::uint64_t> m_load; // by rank, then stage
    std::vector<entry_in> m_sorted;
    std::vector<std::size_t> m_at; // m_at[s * n + k]: record k's place in m_sorted's stage s
    std::vector<std::size_t> m_first, m_fill;
    std::vector<std::array<entry, 3>> m_top;
    std::array<entry, 3> m_low{};
    std::vector<partner> m_partners;
    std::vector<entry_in> m_order; // deal()'s records, the dearest first (cost: their sum)
    std::vector<open_rank> m_open;
    std::vector<std::size_t> m_room;
    std::vector<std::uint64_t> m_peak;
};

} // namespace bcl::detail::stages
