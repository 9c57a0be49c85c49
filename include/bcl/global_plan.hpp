#pragma once
// The global plan: one coordinated plan for a window of K steps of all R ranks' records, the same
// bit for bit on every rank, so each rank computes it alone and keeps its own share.

#include <bcl/detail/config.hpp>

#include <bcl/detail/plan/geometry.hpp>
#include <bcl/detail/plan/limits.hpp>
#include <bcl/detail/plan/packed_layout.hpp>
#include <bcl/detail/plan/padded_layout.hpp>
#include <bcl/detail/plan/quantize.hpp>
#include <bcl/detail/plan/word_sort.hpp>
#include <bcl/detail/random.hpp>
#include <bcl/error.hpp>
#include <bcl/options.hpp>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace bcl {

/// The window of a global plan: R ranks, K steps, B records per rank per step. An aggregate, so
/// `bcl::plan_shape{.ranks = 64, .steps = 8, .batch = 16}` works.
struct plan_shape {
    std::size_t ranks = 0; ///< R, data-parallel ranks
    std::size_t steps = 0; ///< K, steps per window
    std::size_t batch = 0; ///< B, records per rank per step
};

/// Where one record goes: the step of the window (0 is the first) and the rank that trains it. An
/// aggregate of two 32-bit integers, compared with ==.
struct plan_slot {
    std::uint32_t step;
    std::uint32_t rank;

    friend bool operator==(const plan_slot&, const plan_slot&) = default;
};

/// Settings of a global plan. Every field has the value that plans for a packed trainer with no
/// cap by default. There is no memory budget: a plan balances cost alone (the rank-local
/// bcl::balancer keeps a budget, bcl::options::memory_budget).
struct plan_options {
    /// What a batch costs: packed (the sum of its records' costs) or padded (its size times its
    /// costliest record's). Default packed.
    batch_cost batching = batch_cost::packed;
    /// Each cost is clipped to min(cost, cap) before planning, exactly; 0 (the default) for none.
    /// The plan still places every record: a cap changes what the plan balances, never what it
    /// emits. Must be >= 0 (+infinity caps nothing).
    double cap = 0.0;
    /// Packed only. A step costs its heaviest pack, so when a record is too dear to balance away
    /// (with the cheapest records beside it, its pack is still above the mean), its step's other
    /// packs are filled up to its pack, taking dear records off the other steps. Default true:
    /// on Mooncake's tail it takes the plan from 0.960 to 0.9999 of the ideal step time
    /// (docs/global.md), and it is never worse than false: when it levels a step, the flat plan
    /// of the window is made too and the levelled one kept only if its objective is at most the
    /// flat one's (a window of one step, where levelling tends to lose, mostly keeps the flat
    /// plan). It then costs up to one more dealing of the window; a window that levels nothing
    /// costs nothing more. False deals every pack toward the same mean (the flat plan), so the
    /// other batches of such a step stay near the mean (its costliest batch is the dear record's
    /// either way), at the price of ranks waiting for that one.
    bool level_steps = true;
};

/// A digest of a plan: equal plans have equal digests on every platform, and a plan that differs
/// from another in one slot always has another digest (each slot passes through a bijection of
/// the running state). Chainable: plan_digest(next, plan_digest(first)) digests two windows, so
/// an epoch's digest is the chain over its windows, which ranks can compare in one allreduce
/// (a mismatch means records lost or duplicated, never a small error). O(n), noexcept.
[[nodiscard]] inline std::uint64_t plan_digest(std::span<const plan_slot> plan,
                                               std::uint64_t previous = 0) noexcept {
    std::uint64_t h = detail::mix64(previous ^ 0x9e3779b97f4a7c15ULL) ^ plan.size();
    for (const plan_slot& s : plan) {
        h ^= (std::uint64_t{s.step} << 32) | s.rank;
        h *= 0xbf58476d1ce4e5b9ULL; // odd: a bijection
        h ^= h >> 31;               // a bijection too
    }
    return detail::mix64(h ^ plan.size());
}

/// What a plan achieved, in the window's fixed-point units (a quantized cost is
/// floor(min(cost, cap) * 2^scale)); cost_of() converts back. All integers, so equal on every rank.
struct plan_summary {
    std::uint64_t digest = 0; ///< plan_digest of the window's plan
    std::size_t ranks = 0;    ///< R
    std::size_t steps = 0;    ///< steps used: ceil(n / (R*B))
    int scale = 0;            ///< the window's fixed-point exponent
    /// The sum of the records' quantized costs (padded: of the packs' padded costs).
    std::uint64_t total = 0;
    std::uint64_t objective = 0; ///< the sum over steps of the step's costliest pack
    /// No plan of this window has a smaller objective. Packed: the largest of total / R (rounded
    /// up), the dearest record with the cheapest records that must share its pack, and, when
    /// that pack outweighs any pack without the record, that pack plus the mean of what its step
    /// cannot hold; padded: the objective itself (sorted runs are optimal there). Weak where many
    /// records each outweigh a pack.
    std::uint64_t lower_bound = 0;
    std::uint64_t heaviest = 0; ///< the costliest pack

    /// A quantized value in cost units.
    [[nodiscard]] double cost_of(std::uint64_t quantized) const noexcept {
        return std::ldexp(static_cast<double>(quantized), -scale);
    }
    /// objective / lower_bound - 1: how far the plan can be from the best (0 when it is optimal).
    [[nodiscard]] double gap() const noexcept {
        return lower_bound == 0 ? 0.0
                                : static_cast<double>(objective - lower_bound) /
                                      static_cast<double>(lower_bound);
    }
    /// total / (R * objective): the mean rank's step time over the slowest rank's, as planned.
    [[nodiscard]] double efficiency() const noexcept {
        return objective == 0 ? 1.0
                              : static_cast<double>(total) /
                                    (static_cast<double>(ranks) * static_cast<double>(objective));
    }
};

/// Plans windows, keeping its scratch space between calls. See plan() for the contract.
class global_planner {
public:
    /// Sizes the scratch for windows of this shape, so that plan() allocates nothing for windows
    /// up to its size. Throws bcl::error for a shape plan() refuses (a count of 0, R*K*B above
    /// max_plan_records), and what std::vector::reserve throws.
    void reserve(plan_shape shape) {
        const std::size_t n = detail::plan::geometry_of(0, shape.ranks, shape.steps, shape.batch,
                                                        max_plan_records, "bcl::global_planner")
                                  .capacity;
        m_q.reserve(n);
        m_word.reserve(n);
        m_index.reserve(n);
        m_cost.reserve(n);
        m_sort.reserve(n);
        m_packed.reserve(n, shape.ranks * shape.steps, shape.batch);
    }

    /// Plans the window `costs` (all ranks' records, n of them) into `out` (one slot per cost, in
    /// input order). Each rank gets n / R records in ceil(n / (R*B)) steps, exactly B per step but
    /// in the last, which holds the rest on every rank (the short final step). Steps are ordered
    /// heaviest first (the short step last); within a step the j-th heaviest pack goes to rank
    /// (j + step) mod R, so no rank always gets the heaviest.
    ///
    /// Objective: the sum over steps of the step's costliest pack (what R synchronous ranks
    /// wait for). Packed: the steps led by a record too dear to balance away are formed first,
    /// their other packs filled up to that record's pack; the rest is dealt by LPT (dearest
    /// record to the lightest pack with a free slot) into packs of B, refined by a few passes of
    /// single swaps between heavy and light packs, and the packs, sorted by cost, are cut into
    /// steps of R. With opt.level_steps the objective is never above that of the plan with
    /// level_steps = false: when levelling forms a step, that flat plan is made too and the one
    /// with the smaller objective kept (ties: the levelled one), and the summary describes the
    /// plan kept. Padded: sorted runs of B, cut into steps of R runs (optimal). docs/global.md
    /// has the details and the measurements.
    ///
    /// Bit-identical everywhere: the capped costs are quantized once to 64-bit integers by
    /// integer operations on their bits (a power-of-two scale from the dearest cost's exponent,
    /// so no sum can overflow); every comparison, sum and tie-break after that is on integers,
    /// ties going to the lower input index. The plan is the same with every compiler, standard
    /// library and floating-point flag (even -ffast-math).
    ///
    /// O(n log n): a radix sort, LPT with a winner tree (O(n log(R*K))), O(n) per refinement
    /// pass, O(R*B log n) per levelled step, and the flat plan too if a step is levelled. Allocates
    /// nothing once it has seen its largest window (or after reserve()). Throws bcl::error,
    /// changing nothing (`out` and later results alike), if a count of the shape is 0, R*K*B is
    /// above max_plan_records, n is above R*K*B or not a multiple of R, out.size() != n, the
    /// options are invalid (batching neither packed nor padded, a negative or NaN cap), or a cost
    /// is NaN, negative, infinite or above bcl::max_estimate (naming its index and value).
    plan_summary plan(std::span<const double> costs, plan_shape shape, const plan_options& opt,
                      std::span<plan_slot> out) {
        constexpr std::string_view who = "bcl::global_planner";
        const detail::plan::geometry g = detail::plan::geometry_of(
            costs.size(), shape.ranks, shape.steps, shape.batch, max_plan_records, who);
        if (out.size() != costs.size())
            throw error(std::string(who) + ": the plan has " + std::to_string(out.size()) +
                        " slots for " + std::to_string(costs.size()) + " costs");
        if (opt.batching != batch_cost::packed && opt.batching != batch_cost::padded)
            throw error(std::string(who) + ": plan_options::batching is neither packed nor padded");
        const std::uint64_t cap = detail::plan::cap_bits(opt.cap, who);
        const std::uint64_t largest = detail::plan::checked_largest(costs, cap, who);
        // Nothing below throws (but bad_alloc while the scratch grows).
        const detail::plan::fixed_point scale = detail::plan::scale_for(largest, g.capacity);
        m_q.resize(costs.size());
        detail::plan::quantize(costs, cap, scale, m_q);
        place_records(scale(largest), scale.headroom);
        const detail::plan::layout_totals totals =
            opt.batching == batch_cost::padded
                ? detail::plan::padded_layout(g, m_cost, m_index, out)
                : m_packed.run(g, m_cost, m_index, out, opt.level_steps);
        plan_summary summary;
        summary.digest = plan_digest(out);
        summary.ranks = g.ranks;
        summary.steps = g.steps;
        summary.scale = scale.exponent();
        summary.total = totals.total;
        summary.objective = totals.objective;
        summary.lower_bound = totals.lower_bound;
        summary.heaviest = totals.heaviest;
        return summary;
    }

    /// plan() with the default options.
    plan_summary plan(std::span<const double> costs, plan_shape shape, std::span<plan_slot> out) {
        return plan(costs, shape, plan_options{}, out);
    }

private:
    // The records in cost order: place 0 is the dearest record, ties to the lower input index.
    // m_index[p] is the input index of the record at place p and m_cost[p] its quantized cost,
    // by one sort of words ((top - q) << index bits | index).
    void place_records(std::uint64_t top, unsigned index_bits) {
        const std::size_t n = m_q.size();
        m_word.resize(n);
        for (std::size_t i = 0; i < n; ++i) m_word[i] = ((top - m_q[i]) << index_bits) | i;
        m_sort(m_word, index_bits);
        m_index.resize(n);
        m_cost.resize(n);
        const std::uint64_t mask = (std::uint64_t{1} << index_bits) - 1;
        for (std::size_t p = 0; p < n; ++p) {
            m_index[p] = static_cast<std::uint32_t>(m_word[p] & mask);
            m_cost[p] = m_q[m_index[p]];
        }
    }

    std::vector<std::uint64_t> m_q;     // quantized cost by input index
    std::vector<std::uint64_t> m_word;  // sort words
    std::vector<std::uint32_t> m_index; // input index by place
    std::vector<std::uint64_t> m_cost;  // quantized cost by place
    detail::plan::word_sort m_sort;
    detail::plan::packed_layout m_packed;
};

/// The plan of one window, as global_planner::plan() computes it (see there for the contract,
/// the complexity and what it throws). Allocates a planner and the result; for many windows keep
/// a global_planner instead.
[[nodiscard]] inline std::vector<plan_slot> plan_window(std::span<const double> costs,
                                                        plan_shape shape, const plan_options& opt) {
    std::vector<plan_slot> out(costs.size());
    global_planner planner;
    (void)planner.plan(costs, shape, opt, out);
    return out;
}

/// plan_window() with the default options (packed, no cap).
[[nodiscard]] inline std::vector<plan_slot> plan_window(std::span<const double> costs,
                                                        plan_shape shape) {
    return plan_window(costs, shape, plan_options{});
}

} // namespace bcl
