#pragma once
// Token-budget micro-batches: the records of a step (or of K steps) planned into micro-batches of
// at most T tokens on each of R ranks, as many on every rank, heavy micro-batches lined up in the
// same micro-steps across ranks; the same plan, bit for bit, on every rank, so each computes it
// alone.

#include <bcl/detail/config.hpp>

#include <bcl/detail/random.hpp>
#include <bcl/detail/tokens/cell_planner.hpp>
#include <bcl/detail/tokens/count_search.hpp>
#include <bcl/detail/tokens/step_dealer.hpp>
#include <bcl/detail/tokens/stream_window.hpp>
#include <bcl/detail/tokens/token_records.hpp>
#include <bcl/detail/tokens/token_units.hpp>
#include <bcl/error.hpp>
#include <bcl/token_budget.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <numeric>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace bcl {

/// Where one record goes: the step of the plan (0 is the first), its micro-batch in that step
/// (the micro-step: micro-batch j of every rank runs together) and the rank that trains it.
struct micro_slot {
    std::uint32_t step;
    std::uint32_t micro;
    std::uint32_t rank;

    friend bool operator==(const micro_slot&, const micro_slot&) = default;
};

/// A digest of a token plan, as plan_digest of a fixed-size one: equal plans, equal digests on
/// every platform; a plan that differs in one slot always has another; chainable. O(n), noexcept.
[[nodiscard]] inline std::uint64_t token_plan_digest(std::span<const micro_slot> plan,
                                                     std::uint64_t previous = 0) noexcept {
    std::uint64_t h = detail::splitmix64(previous ^ 0x746f6b656e706c6eULL).next() ^ plan.size();
    for (const micro_slot& s : plan) {
        h ^= (std::uint64_t{s.step} << 32) | s.rank;
        h *= 0xbf58476d1ce4e5b9ULL; // odd: a bijection
        h ^= h >> 31;
        h ^= s.micro;
        h *= 0x94d049bb133111ebULL;
        h ^= h >> 29;
    }
    return detail::splitmix64(h ^ plan.size()).next();
}

/// What a token plan achieved. Costs are in the plan's fixed-point units (cost_of() converts).
struct token_plan_summary {
    std::uint64_t digest = 0; ///< token_plan_digest of the plan
    std::size_t records = 0;  ///< records planned (a stream window: those it took)
    std::size_t ranks = 0;    ///< R
    std::size_t steps = 0;    ///< steps of the plan
    /// M: micro-batches per rank in each step; steps from `full_steps` on hold `short_by` fewer
    /// (a pooled held plan's steps each hold their own count; a stream's last step what is left).
    std::size_t micro_batches = 0;
    std::size_t full_steps = 0;        ///< the steps, from the first, that hold M micro-batches
    std::size_t short_by = 0;          ///< how many fewer the steps after them hold
    std::size_t micro_steps = 0;       ///< micro-batches per rank in all: micro-steps
    std::size_t micro_steps_bound = 0; ///< the fewest the tokens allow: ceil(tokens / (R*T))
    std::uint64_t tokens = 0;          ///< the records' tokens
    std::size_t oversized = 0;         ///< records above T, each alone in a micro-batch
    std::size_t padding = 0;           ///< empty micro-batches (allow_empty_micro_batches)
    double unit = 1.0;                 ///< cost units per fixed-point unit
    std::uint64_t total = 0;           ///< the records' costs
    std::uint64_t objective = 0;       ///< the sum over micro-steps of the dearest micro-batch
    std::uint64_t heaviest = 0;        ///< the dearest micro-batch
    /// No plan of these micro-steps has a smaller objective: the larger of total / R and the
    /// dearest record. Weak where several records each outweigh a micro-batch's share.
    std::uint64_t lower_bound = 0;

    [[nodiscard]] double cost_of(std::uint64_t q) const noexcept {
        return static_cast<double>(q) * unit;
    }
    /// The micro-batches each rank runs in step `step`.
    [[nodiscard]] std::size_t micro_batches_in(std::size_t step) const noexcept {
        return step < full_steps ? micro_batches : micro_batches - short_by;
    }
    /// The micro-step that step `step`'s first micro-batch is: the steps before it, summed.
    [[nodiscard]] std::size_t first_micro_step(std::size_t step) const noexcept {
        return step * micro_batches - (step > full_steps ? (step - full_steps) * short_by : 0);
    }
    /// total / (R * objective): the mean rank's time over the slowest rank's, per micro-step.
    [[nodiscard]] double efficiency() const noexcept {
        return objective == 0 ? 1.0
                              : static_cast<double>(total) /
                                    (static_cast<double>(ranks) * static_cast<double>(objective));
    }
};

/// Plans token-budget micro-batches, keeping its scratch between plans.
///
/// The contract of every plan: every rank runs the same number of micro-batches in every step, a
/// multiple of m (but a stream's last step, which holds what is left), none empty; every
/// micro-batch holds at most T tokens (but one holding a single record above T, with
/// oversized_alone); every record exactly once; the same plan, bit for bit, on every rank,
/// compiler and flag (integers only after each cost is read once; ties to the lower index).
///
/// How: a step's micro-batches are cells of at most T tokens; a micro-step costs its dearest
/// cell, so cells, dearest first, are cut into micro-steps of R (micro_layout). Two deals of the
/// records into the cells are made, and the one with the smaller sum over micro-steps kept (ties:
/// the first): LPT with the token capacity (each record, dearest first, to the cheapest cell with
/// room; cell_packer), and levelled micro-steps (a record dearer than the mean cell leads a
/// micro-step of the R dearest, whose other cells are filled up to it; cell_leveller). Where LPT
/// does not pack, the records by tokens, largest first: by LPT when costs do not follow tokens,
/// then by first fit (each to the lowest cell with room; first_fit), the tightest packing, which
/// reaches the token bound more often; its cells are still lined up by cost.
/// With K steps in one plan, records move between the steps (at most K-1) and ranks, which is what
/// lines the heavy cells up: one step rarely holds R records that dear.
class token_planner {
public:
    /// Plans `steps` held batches (K; 1 by default): the records are given (`tokens`, and
    /// `costs` one per record or none for the default L + L^2/24576), each step gets M
    /// micro-batches on every rank, M the smallest multiple of m with which the records fit
    /// (and at least the token bound, ceil(tokens / (R*T*K))), and every record lands in one of
    /// the K steps. `groups` (one id per record, or none): a group stays on one rank and in one
    /// step (and in one micro-batch with group_together). Writes out[i] for record i.
    ///
    /// Throws bcl::error (prefixed with `who`), changing nothing, for R, T, m or K of 0, T above
    /// 2^31, out, costs or groups of another length than tokens, no records, a record above T
    /// (naming its index; unless oversized_alone), a group above T with group_together (naming
    /// it), an invalid cost (naming its index), more than 2^30 records, and records too few or too
    /// large to fill R micro-batches of a multiple of m in every step (naming the counts).
    /// O(n log n) per micro-batch count tried; usually one or two are.
    token_plan_summary plan_held(std::span<const std::uint64_t> tokens,
                                 std::span<const double> costs,
                                 std::span<const std::uint64_t> groups, const token_budget& budget,
                                 std::size_t steps, const token_plan_options& opt,
                                 std::span<micro_slot> out,
                                 std::string_view who = "bcl::token_planner") {
        check_token_budget(budget, steps, who);
        const std::size_t n = tokens.size();
        if (out.size() != n)
            throw error(std::string(who) + ": the plan has " + std::to_string(out.size()) +
                        " slots for " + std::to_string(n) + " records");
        if (!groups.empty() && groups.size() != n)
            throw error(std::string(who) + ": " + std::to_string(groups.size()) +
                        " group ids for " + std::to_string(n) +
                        " records; give one per record, "
                        "or none");
        if (n == 0) throw error(std::string(who) + ": no records to plan");
        check_records_count(n, who);
        check_token_options(opt, budget, who);
        m_allow_empty = false;
        detail::tokens::read_records(tokens, costs, budget.max_tokens, opt.oversized_alone, who,
                                     m_records, opt.pad_to_multiple_of);
        m_units.make(m_records, groups, opt.group_together, budget.max_tokens, who);
        const std::uint64_t total_tokens = sum(m_units.tokens);
        const std::size_t bound = ceil_div(total_tokens, budget.max_tokens * budget.ranks);
        const bool by_rank = !groups.empty() && !opt.group_together;
        const bool empty = opt.allow_empty_micro_batches;
        if (by_rank ? held_by_rank(budget, steps, bound, total_tokens, empty)
                    : held_pooled(budget, steps, bound, total_tokens, empty)) {
            finish(out, m_summary, budget.max_tokens);
            return m_summary;
        }
        const std::size_t r = budget.ranks;
        const std::size_t m = budget.multiple_of;
        const std::size_t group_count = m_units.group_tokens.size();
        const std::string units = groups.empty()
                                      ? std::to_string(n) + " records"
                                      : std::to_string(group_count) +
                                            (group_count == 1 ? " group (" : " groups (") +
                                            std::to_string(n) + " records)";
        const std::string what = groups.empty() ? "records" : "groups";
        throw error(std::string(who) + ": " + units + " of " + std::to_string(total_tokens) +
                    " tokens do not fill " + std::to_string(r) +
                    " ranks' micro-batches of at most " + std::to_string(budget.max_tokens) +
                    " tokens in " + std::to_string(steps) + " step" + (steps == 1 ? "" : "s") +
                    ", a multiple of " + std::to_string(m) + " each and none empty: too few " +
                    what + ", or too many tokens for so few" +
                    (groups.empty() || opt.group_together
                         ? ""
                         : " (a group's records share one rank and step)") +
                    "; allow_empty_micro_batches (Python: padding=\"empty\") gives the ranks "
                    "short of " +
                    what + " empty micro-batches");
    }

    /// Plans one window of a stream of steps: `steps` (K) steps of `micro_batches` (M, a multiple
    /// of m) micro-batches on every rank, filled with records from the front of `tokens` (as many
    /// as fit, up to max_fill of the window's tokens; the summary's `records` says how many; give
    /// at least a window's worth). With `last` (the stream's end), a window that can hold every
    /// record left takes them all in as few micro-steps as fit (a multiple of m, the last step
    /// short if fewer than M remain); so does a window whose records left after it are too few
    /// to be planned alone (fewer than R a micro-step their tokens need), the window then longer
    /// than K steps. Writes out[i] for the records taken. Throws bcl::error as
    /// plan_held() does, and for too few records to give every micro-batch one.
    token_plan_summary plan_stream(std::span<const std::uint64_t> tokens,
                                   std::span<const double> costs, const token_budget& budget,
                                   std::size_t micro_batches, std::size_t steps, bool last,
                                   const token_plan_options& opt, std::span<micro_slot> out,
                                   std::string_view who = "bcl::token_planner") {
        check_token_budget(budget, steps, who);
        check_token_window(budget, micro_batches, steps, who);
        check_token_options(opt, budget, who);
        const std::size_t r = budget.ranks;
        const std::size_t n = tokens.size();
        if (out.size() < n)
            throw error(std::string(who) + ": the plan has " + std::to_string(out.size()) +
                        " slots for up to " + std::to_string(n) + " records");
        check_records_count(n, who);
        m_allow_empty = false;
        if (!costs.empty() && costs.size() != n)
            throw error(std::string(who) + ": " + std::to_string(costs.size()) + " costs for " +
                        std::to_string(n) +
                        " records; give one cost per record, or none for the default "
                        "L + L^2/24576");
        // The records that the window's tokens allow, in stream order (window_rule). Only these
        // are read (and checked): a caller may hand the whole rest of its stream.
        const detail::tokens::window_rule rule(budget, micro_batches, steps, opt.pad_to_multiple_of,
                                               opt.max_fill);
        const std::size_t full = rule.cells();
        const std::size_t fit = rule.records(n, [tokens](std::size_t i) { return tokens[i]; });
        // At the stream's end every record left may join the window, so all are read.
        const std::size_t read = last ? n : fit;
        detail::tokens::read_records(tokens.first(read), costs.empty() ? costs : costs.first(read),
                                     budget.max_tokens, opt.oversized_alone, who, m_records,
                                     opt.pad_to_multiple_of);
        m_units.make(m_records, {}, false, budget.max_tokens, who);
        if (last && fit == n) return plan_rest(out, budget, micro_batches, opt, who);
        if (fit < full)
            throw error(std::string(who) + ": " + std::to_string(fit) +
                        " records fit the window, fewer than its " + std::to_string(full) +
                        " micro-batches; give a window's worth of records (or last = true)");
        m_cells.order_candidates(std::span<const std::uint64_t>(m_records.cost).first(fit));
        // The longest prefix LPT packs (longest_prefix).
        const std::size_t lo = detail::tokens::longest_prefix(fit, full, [&](std::size_t count) {
            return m_cells.packs(m_records, count, full, budget.max_tokens);
        });
        if (lo == 0)
            throw error(std::string(who) + ": the stream's records do not fill " +
                        std::to_string(full) + " micro-batches of at most " +
                        std::to_string(budget.max_tokens) + " tokens, one record each at least");
        // At the stream's end, records left after this window that cannot fill every rank's
        // micro-batches alone (too few for the micro-steps their tokens need) join it.
        if (last && !tail_plans(lo, budget)) return plan_rest(out, budget, micro_batches, opt, who);
        // The last LPT deal tried is mostly this prefix's: then the plan keeps it.
        const bool dealt = m_cells.last_packed() == lo;
        keep_prefix(lo);
        const std::uint64_t window_tokens = sum(m_units.tokens);
        const bool ok = m_cells.plan(m_units, r, steps, micro_batches, budget.max_tokens, false,
                                     m_allow_empty, dealt);
        (void)ok; // LPT packed this prefix above
        finish(out.first(lo),
               summary_of(r, steps, micro_batches, ceil_div(window_tokens, budget.max_tokens * r),
                          window_tokens),
               budget.max_tokens);
        return m_summary;
    }

    /// The summary of the last plan made (plan_held's or plan_stream's return value).
    [[nodiscard]] const token_plan_summary& summary() const noexcept { return m_summary; }

private:
    static void check_records_count(std::size_t n, std::string_view who) {
        if (n > max_plan_records)
            throw error(std::string(who) + ": " + std::to_string(n) + " records, above the " +
                        std::to_string(max_plan_records) + " one plan may hold");
    }
    [[nodiscard]] static std::size_t ceil_div(std::uint64_t a, std::uint64_t b) noexcept {
        return static_cast<std::size_t>(a / b + (a % b != 0));
    }
    [[nodiscard]] static std::size_t round_up(std::size_t a, std::size_t m) noexcept {
        return (a + m - 1) / m * m;
    }
    [[nodiscard]] static std::uint64_t sum(std::span<const std::uint64_t> v) noexcept {
        return std::accumulate(v.begin(), v.end(), std::uint64_t{0});
    }

    void keep_prefix(std::size_t count) {
        m_units.keep_prefix(count);
        m_records.tokens.resize(count);
        m_records.cost.resize(count);
        m_records.alone.resize(count);
    }

    // The least count in [least, most], a multiple of m, at which `plans` packs (least_count);
    // where none does and `allow_empty`, the least in [least, most_empty] with empty
    // micro-batches allowed (with room for every unit alone a plan always exists: LPT gives each
    // its own cell). 0 if none.
    template <class Plans>
    std::size_t least_packing(std::size_t least, std::size_t most, std::size_t most_empty,
                              std::size_t m, bool allow_empty, Plans&& plans) {
        std::size_t count = detail::tokens::least_count(least, most, m, plans);
        if (count == 0 && allow_empty) {
            m_allow_empty = true;
            count = detail::tokens::least_count(least, std::max(least, most_empty), m, plans);
        }
        return count;
    }

    // K held steps pooled: their micro-steps planned as one (C of them, a multiple of m, at
    // least m a step, each cell one unit at least), then dealt to the steps, each C/K rounded to
    // a multiple of m, the first steps m more where C/m is not a multiple of K: each step its own
    // count, where one count for every step would round C up to a multiple of K*m. True if a
    // count packed; m_summary then has the counts.
    bool held_pooled(const token_budget& budget, std::size_t steps, std::size_t bound,
                     std::uint64_t total, bool allow_empty) {
        const std::size_t r = budget.ranks;
        const std::size_t m = budget.multiple_of;
        const std::size_t units = m_units.tokens.size();
        const std::size_t least = std::max(round_up(std::max<std::size_t>(bound, 1), m), steps * m);
        const std::size_t micro_steps = least_packing(
            least, units / r, round_up(ceil_div(units, r), m), m, allow_empty,
            [&](std::size_t count) {
                return m_cells.plan(m_units, r, 1, count, budget.max_tokens, false, m_allow_empty);
            });
        if (micro_steps == 0) return false;
        const std::size_t chunks = micro_steps / m;
        const std::size_t extra = chunks % steps;
        token_plan_summary s =
            summary_of(r, steps, (chunks / steps + (extra != 0 ? 1 : 0)) * m, bound, total);
        s.micro_steps = micro_steps;
        s.full_steps = extra == 0 ? steps : extra;
        s.short_by = extra == 0 ? 0 : m;
        m_summary = s;
        return true;
    }

    // Groups kept to a rank: a group's records share one rank and one step, each (step, rank)
    // a bin of M cells, so every step holds the same count M. True if a count packed.
    bool held_by_rank(const token_budget& budget, std::size_t steps, std::size_t bound,
                      std::uint64_t total, bool allow_empty) {
        const std::size_t r = budget.ranks;
        const std::size_t m = budget.multiple_of;
        const std::size_t units = m_units.tokens.size();
        const std::size_t least = round_up(std::max<std::size_t>(ceil_div(bound, steps), 1), m);
        const std::size_t micro =
            least_packing(least, units / (r * steps), round_up(ceil_div(units, r * steps), m), m,
                          allow_empty, [&](std::size_t count) {
                              return m_cells.plan(m_units, r, steps, count, budget.max_tokens, true,
                                                  m_allow_empty);
                          });
        if (micro == 0) return false;
        m_summary = summary_of(r, steps, micro, bound, total);
        return true;
    }

    static token_plan_summary summary_of(std::size_t r, std::size_t steps, std::size_t micro,
                                         std::size_t bound, std::uint64_t tokens) {
        token_plan_summary s;
        s.ranks = r;
        s.steps = steps;
        s.micro_batches = micro;
        s.full_steps = steps;
        s.micro_steps = steps * micro;
        s.micro_steps_bound = std::max<std::size_t>(bound, 1);
        s.tokens = tokens;
        return s;
    }

    // Writes the plan kept: each record's slot (by its unit's cell), and the summary's figures.
    // `max_tokens`: T, a record above T / 2 heavy (deal_steps).
    void finish(std::span<micro_slot> out, token_plan_summary s, std::uint64_t max_tokens) {
        const std::size_t n = m_units.unit_of.size();
        s.records = n;
        s.unit = m_records.unit;
        s.oversized = 0;
        std::uint64_t dearest = 0;
        for (std::size_t i = 0; i < n; ++i) {
            const detail::tokens::cell_place& at =
                m_cells.layout().place(m_cells.cell_of()[m_units.unit_of[i]]);
            out[i] = {at.step, at.micro, at.rank};
            s.oversized += m_records.alone[i];
            s.total += m_records.cost[i];
            dearest = std::max(dearest, m_records.cost[i]);
        }
        if (m_cells.steps_free() && s.steps > 1) deal_steps(out.first(n), s, max_tokens / 2);
        s.padding = 0;
        if (m_allow_empty) {
            m_cell_used.assign(s.micro_steps * s.ranks, 0);
            for (std::size_t i = 0; i < n; ++i)
                m_cell_used[(s.first_micro_step(out[i].step) + out[i].micro) * s.ranks +
                            out[i].rank] = 1;
            for (const std::uint8_t used : m_cell_used) s.padding += used == 0;
        }
        s.objective = m_cells.layout().objective();
        s.heaviest = m_cells.layout().heaviest();
        s.lower_bound = std::max<std::uint64_t>(ceil_div(s.total, s.ranks), dearest);
        s.digest = token_plan_digest(out.first(n));
        m_summary = s;
    }

    // Deals the plan's micro-steps to its steps so that each step is a fair sample of the plan
    // (step_dealer), each step its count (micro_batches_in). `out` numbers micro-step k as the
    // layout does: step k / M, micro-batch k mod M (a pooled plan: step 0, micro-batch k).
    // A record above `half` tokens is heavy.
    void deal_steps(std::span<micro_slot> out, const token_plan_summary& s, std::uint64_t half) {
        const std::size_t per_step = s.micro_batches;
        m_tally.assign(s.micro_steps, {});
        for (std::size_t i = 0; i < out.size(); ++i) {
            detail::tokens::micro_step_tally& t =
                m_tally[std::size_t{out[i].step} * per_step + out[i].micro];
            ++t.records;
            t.heavy += m_records.tokens[i] > half;
            t.tokens += m_records.tokens[i];
        }
        m_step_counts.resize(s.steps);
        for (std::size_t step = 0; step < s.steps; ++step)
            m_step_counts[step] = s.micro_batches_in(step);
        m_steps.deal_counts(m_tally, m_step_counts);
        for (micro_slot& slot : out) {
            const std::size_t k = std::size_t{slot.step} * per_step + slot.micro;
            slot.step = m_steps.step_of(k);
            slot.micro = m_steps.micro_of(k);
        }
    }

    // Whether the records after the first `count` have enough records for the micro-steps
    // their tokens need (R records a micro-step, a multiple of m), so that they may be planned
    // alone: a count too small for that can never plan.
    [[nodiscard]] bool tail_plans(std::size_t count, const token_budget& budget) const {
        const std::size_t n = m_records.tokens.size();
        std::uint64_t tokens = 0;
        for (std::size_t i = count; i < n; ++i) tokens += m_records.tokens[i];
        const std::size_t least =
            round_up(std::max<std::size_t>(ceil_div(tokens, budget.max_tokens * budget.ranks), 1),
                     budget.multiple_of);
        return least <= (n - count) / budget.ranks;
    }

    // The stream's last records, all in as few micro-steps as fit (a multiple of m; the last
    // step short when fewer than M micro-batches are left).
    token_plan_summary plan_rest(std::span<micro_slot> out, const token_budget& budget,
                                 std::size_t micro_batches, const token_plan_options& opt,
                                 std::string_view who) {
        const std::size_t r = budget.ranks;
        const std::size_t m = budget.multiple_of;
        const std::uint64_t tokens = sum(m_units.tokens);
        const std::size_t n = m_units.tokens.size();
        const std::size_t bound = ceil_div(tokens, budget.max_tokens * r);
        const std::size_t least = round_up(std::max<std::size_t>(bound, 1), m);
        const std::size_t micro_steps = least_packing(
            least, n / r, round_up(ceil_div(n, r), m), m, opt.allow_empty_micro_batches,
            [&](std::size_t count) {
                return m_cells.plan(m_units, r, 1, count, budget.max_tokens, false, m_allow_empty);
            });
        if (micro_steps != 0) {
            // Renumber: micro-step k is step k / M, micro-batch k mod M.
            m_cells.layout().regroup(micro_batches);
            const std::size_t steps = (micro_steps + micro_batches - 1) / micro_batches;
            token_plan_summary s = summary_of(r, steps, micro_batches, bound, tokens);
            s.micro_steps = micro_steps;
            if (micro_steps % micro_batches != 0) {
                s.full_steps = steps - 1;
                s.short_by = steps * micro_batches - micro_steps;
            }
            finish(out.first(n), s, budget.max_tokens);
            return m_summary;
        }
        throw error(std::string(who) + ": the stream's last " + std::to_string(n) +
                    " records do not fill " + std::to_string(r) +
                    " ranks' micro-batches of at "
                    "most " +
                    std::to_string(budget.max_tokens) + " tokens, a multiple of " +
                    std::to_string(m) +
                    " and none empty; allow_empty_micro_batches (Python: padding=\"empty\") "
                    "gives the ranks short of records empty micro-batches");
    }

    detail::tokens::token_records m_records;
    detail::tokens::token_units m_units;
    detail::tokens::cell_planner m_cells;
    bool m_allow_empty = false;            // this count's deals may leave cells empty (padding)
    std::vector<std::uint8_t> m_cell_used; // by (step, micro, rank): whether a record is in it
    std::vector<detail::tokens::micro_step_tally> m_tally; // by micro-step
    detail::tokens::step_dealer m_steps;
    std::vector<std::size_t> m_step_counts; // by step: its micro-steps
    token_plan_summary m_summary;
};

} // namespace bcl
