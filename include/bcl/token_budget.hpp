#pragma once
// The budget and settings of a token plan (bcl::token_budget and bcl::token_plan_options, defined
// with the token plan's parts so that they may read them), and the checks every token path (the
// planner, the epoch planner, the samplers) makes of them, so that each refuses the same
// settings in the same words.

#include <bcl/detail/config.hpp>

#include <bcl/detail/plan/limits.hpp>
#include <bcl/detail/tokens/budget.hpp>
#include <bcl/detail/tokens/token_records.hpp>
#include <bcl/error.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace bcl {

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

/// A record's length as a plan with this budget and these settings counts it (padded to a
/// multiple of pad_to_multiple_of), checked: throws bcl::error naming `what` and `index`
/// ("record 7", "dataset index 7") where it is above max_tokens (or above 2^31 with
/// oversized_alone), saying how to let it through.
[[nodiscard]] inline std::uint64_t check_token_length(std::uint64_t length, std::size_t index,
                                                      std::string_view what, const token_budget& b,
                                                      const token_plan_options& opt,
                                                      std::string_view who) {
    return detail::tokens::checked_length(length, index, what, b.max_tokens, opt.oversized_alone,
                                          opt.pad_to_multiple_of, who);
}

/// The longest length check_token_length takes under `b` and `opt`: T (or 2^31 with
/// oversized_alone) rounded down to a multiple of pad_to_multiple_of, since a length counts
/// padded up to one. A length up to it is taken and one above it refused, so a pass over a table
/// compares each length with it and calls the check (for its message) only above it. The
/// settings checked already (check_token_budget, check_token_options). O(1), noexcept.
[[nodiscard]] inline std::uint64_t longest_token_length(const token_budget& b,
                                                        const token_plan_options& opt) noexcept {
    const std::uint64_t bound =
        opt.oversized_alone ? detail::tokens::max_record_tokens : b.max_tokens;
    const std::uint64_t pad = opt.pad_to_multiple_of == 0 ? 1 : opt.pad_to_multiple_of;
    return bound / pad * pad;
}

} // namespace bcl
