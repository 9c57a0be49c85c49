#pragma once
// Internal home of two public aggregates, bcl::token_budget and bcl::token_plan_options (include
// <bcl/token_budget.hpp>, which adds their checks): defined at the token plan's parts' layer so
// that those parts (the stream's window rule) take them as they are.

#include <bcl/detail/config.hpp>

#include <cstddef>
#include <cstdint>

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

} // namespace bcl
