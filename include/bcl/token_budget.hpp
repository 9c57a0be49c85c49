#pragma once
// The budget and settings of a token plan, and the checks every token path (the planner, the
// epoch planner, the libtorch sampler) makes of them, so that each refuses the same settings in
// the same words.

#include <bcl/detail/config.hpp>

#include <bcl/detail/plan/limits.hpp>
#include <bcl/detail/tokens/token_records.hpp>
#include <bcl/error.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace bcl {

/// The budget of a token plan. An aggregate:
/// `bcl::token_budget{.ranks = 8, .max_tokens = 131072}`.
struct token_budget {
    std::size_t ranks = 0;        ///< R, data-parallel ranks
    std::uint64_t max_tokens = 0; ///< T, the most tokens one micro-batch holds (at most 2^31)
    std::size_t multiple_of = 1;  ///< m: every step's micro-batch count is a multiple of it
};

/// Settings of a token plan; every field's default is the strict plan.
struct token_plan_options {
    /// A record above max_tokens: false (the default) refuses it, naming its index; true gives it
    /// a micro-batch of its own (the summary counts them: such a micro-batch is above T).
    bool oversized_alone = false;
    /// With groups: false (the default) keeps each group's records on one rank (in one step);
    /// true also keeps them in one micro-batch (a group above max_tokens is then an error).
    bool group_together = false;
    /// A stream's window takes records up to this share of its token capacity (R * K * M * T):
    /// 1 (the default) packs as many as fit; less leaves room that balance can use, at the price
    /// of more micro-steps (docs/tokens.md measures the trade).
    double max_fill = 1.0;
    /// Records too few (or too large) to give every rank a record in each of its micro-batches:
    /// false (the default) refuses the plan; true gives the ranks short of records empty
    /// micro-batches (padding, which a trainer runs as a step of zero weight that still joins
    /// the collectives), every rank still the same count, the summary's `padding` counting them.
    /// Only where no plan without them exists.
    bool allow_empty_micro_batches = false;
    /// Each record counts as its length rounded up to a multiple of this, for the budget and for
    /// the default cost: context-parallel trainers pad each sequence to a multiple of 2 * CP.
    /// 1 (the default) counts lengths as they are; 0, or above max_tokens, is an error.
    std::uint64_t pad_to_multiple_of = 1;
};

/// Checks a budget for plans of `steps` steps: throws bcl::error (prefixed with `who`) for R, T,
/// m or steps of 0, T above 2^31, and m or R * steps above bcl::max_plan_records.
inline void check_token_budget(const token_budget& b, std::size_t steps, std::string_view who) {
    if (b.ranks == 0 || b.max_tokens == 0 || b.multiple_of == 0 || steps == 0)
        throw error(std::string(who) + ": the ranks (" + std::to_string(b.ranks) +
                    "), max_tokens (" + std::to_string(b.max_tokens) + "), multiple_of (" +
                    std::to_string(b.multiple_of) + ") and steps (" + std::to_string(steps) +
                    ") must all be at least 1");
    if (b.max_tokens > detail::tokens::max_record_tokens)
        throw error(std::string(who) + ": max_tokens is " + std::to_string(b.max_tokens) +
                    ", above 2^31");
    if (b.multiple_of > max_plan_records)
        throw error(std::string(who) + ": multiple_of is " + std::to_string(b.multiple_of) +
                    ", above the " + std::to_string(max_plan_records) +
                    " micro-batches a plan may hold");
    if (b.ranks > max_plan_records || steps > max_plan_records / b.ranks)
        throw error(std::string(who) + ": " + std::to_string(b.ranks) + " ranks * " +
                    std::to_string(steps) + " steps is above the " +
                    std::to_string(max_plan_records) + " cells a plan may hold");
}

/// Checks a stream's window of `steps` steps of `micro_batches` micro-batches on every rank (the
/// budget checked already): throws bcl::error for M of 0 or not a multiple of m, and for
/// R * steps * M above bcl::max_plan_records.
inline void check_token_window(const token_budget& b, std::size_t micro_batches, std::size_t steps,
                               std::string_view who) {
    if (micro_batches == 0 || micro_batches % b.multiple_of != 0)
        throw error(std::string(who) + ": micro_batches is " + std::to_string(micro_batches) +
                    "; it must be a positive multiple of multiple_of (" +
                    std::to_string(b.multiple_of) + ")");
    if (micro_batches > max_plan_records / (b.ranks * steps))
        throw error(std::string(who) + ": " + std::to_string(b.ranks) + " ranks * " +
                    std::to_string(steps) + " steps * " + std::to_string(micro_batches) +
                    " micro-batches is above the " + std::to_string(max_plan_records) +
                    " cells a plan may hold");
}

/// Checks the settings against a budget: throws bcl::error for pad_to_multiple_of of 0 or
/// above max_tokens, and max_fill outside (0, 1].
inline void check_token_options(const token_plan_options& opt, const token_budget& b,
                                std::string_view who) {
    if (opt.pad_to_multiple_of == 0 || opt.pad_to_multiple_of > b.max_tokens)
        throw error(std::string(who) + ": pad_to_multiple_of is " +
                    std::to_string(opt.pad_to_multiple_of) +
                    "; it must be at least 1 and at most max_tokens (" +
                    std::to_string(b.max_tokens) + ")");
    if (!(opt.max_fill > 0.0 && opt.max_fill <= 1.0))
        throw error(std::string(who) + ": max_fill must be in (0, 1] (got " +
                    std::to_string(opt.max_fill) + ")");
}

} // namespace bcl
