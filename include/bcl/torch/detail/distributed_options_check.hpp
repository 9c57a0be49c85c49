#pragma once
// Which settings and tables a bcl::torch::distributed_balanced_sampler accepts, in either mode,
// and how its settings read as the core's: the epoch's order, the fixed mode's epoch shape, the
// token mode's budget and plan options. The sampler checks them at construction, so that every rank
// refuses a bad setting or table before the first step. What the core checks of its own settings
// comes from the core, in its words (bcl::check_epoch_shape, bcl::check_plan_options,
// bcl::check_cost_table, bcl::check_token_budget, bcl::check_token_window, bcl::check_token_options
// and the length rule, bcl::detail::tokens::checked_length); what only the sampler knows is checked
// here: the other mode's settings left at their defaults, the rank, the seed, the order's and the
// padding's values, the tables' sizes.

#include <bcl/detail/config.hpp>

#include <bcl/detail/number_text.hpp>
#include <bcl/detail/tokens/token_records.hpp>
#include <bcl/epoch_plan.hpp>
#include <bcl/error.hpp>
#include <bcl/global_plan.hpp>
#include <bcl/keyed_order.hpp>
#include <bcl/stage_plan.hpp>
#include <bcl/token_budget.hpp>
#include <bcl/torch/detail/epoch_cursor.hpp>
#include <bcl/torch/distributed_sampler_options.hpp>

#include <bit>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace bcl::torch::detail {

/// Either mode: the order of `epoch` of the dataset indices 0..n-1 into `out`, as the settings
/// choose it: 0..n-1 without shuffle; else bcl::epoch_order's Fisher-Yates shuffle, or with
/// epoch_order_kind::keyed positions 0..n-1 of bcl::keyed_order(n, seed, epoch), what Python's
/// `_core.keyed_order(n, seed, epoch, 0, n)` gives. Reuses `out`'s storage. O(n).
inline void draw_epoch_order(const distributed_sampler_options& o, std::size_t n, std::size_t epoch,
                             std::vector<std::size_t>& out) {
    if (o.shuffle && o.order == epoch_order_kind::keyed) {
        out.resize(n);
        bcl::keyed_order(n, o.seed, epoch).fill(0, std::span<std::size_t>(out));
        return;
    }
    bcl::epoch_order(n, o.shuffle, o.seed, epoch, out);
}

/// Fixed mode: the epoch's shape (R, K, B, drop_last). O(1).
[[nodiscard]] inline bcl::epoch_shape
epoch_shape_of(const distributed_sampler_options& o) noexcept {
    return {.ranks = o.num_replicas,
            .lookahead = o.lookahead,
            .batch = o.batch_size,
            .drop_last = o.drop_last};
}

/// Token mode: the budget (R, T, m). O(1).
[[nodiscard]] inline bcl::token_budget
token_budget_of(const distributed_sampler_options& o) noexcept {
    return {.ranks = o.num_replicas, .max_tokens = o.max_tokens, .multiple_of = o.multiple_of};
}

/// Token mode: the plan's options as Python's sampler sets them (python/src/token_epoch.hpp):
/// oversized_alone and pad_to_multiple_of as given, empty micro-batches allowed with
/// token_padding::empty, every other field at its default. O(1).
[[nodiscard]] inline bcl::token_plan_options
token_options_of(const distributed_sampler_options& o) noexcept {
    bcl::token_plan_options opt;
    opt.oversized_alone = o.oversized_alone;
    opt.allow_empty_micro_batches = o.padding == token_padding::empty;
    opt.pad_to_multiple_of = o.pad_to_multiple_of;
    return opt;
}

/// Throws bcl::error "<who>: <what>".
[[noreturn]] inline void refuse_setting(const char* who, const std::string& what) {
    throw bcl::error(std::string(who) + ": " + what);
}

/// The rank against num_replicas (at least 1, checked before): throws bcl::error "<who>: rank r
/// of num_replicas R: the rank must be below num_replicas" unless r < R.
inline void check_rank(const distributed_sampler_options& o, const char* who) {
    if (o.rank >= o.num_replicas)
        refuse_setting(who, "rank " + std::to_string(o.rank) + " of num_replicas " +
                                std::to_string(o.num_replicas) +
                                ": the rank must be below num_replicas");
}

/// Either mode: throws bcl::error "<who>: order is <value>, not an epoch_order_kind
/// (fisher_yates or keyed)" for an order that is neither (a value cast into the enum).
inline void check_order_kind(const distributed_sampler_options& o, const char* who) {
    if (o.order != epoch_order_kind::fisher_yates && o.order != epoch_order_kind::keyed)
        refuse_setting(who, "order is " + std::to_string(static_cast<unsigned>(o.order)) +
                                ", not an epoch_order_kind (fisher_yates or keyed)");
}

/// Fixed mode's checks (max_tokens 0), in this order, each a bcl::error prefixed with `who`: a
/// seed of 2^63 or more; an order that is no epoch_order_kind; any token-mode setting away from its
/// default, or lengths given (naming it, and saying to set max_tokens too); the shape
/// (bcl::check_epoch_shape: R, K or B of 0, R*K*B above bcl::max_plan_records); a rank not below
/// num_replicas; the plan options (bcl::check_plan_options); the first invalid cost
/// (bcl::check_cost_table, naming its dataset index). O(N).
inline void check_fixed_mode(const distributed_sampler_options& o, std::span<const double> costs,
                             std::span<const std::uint64_t> lengths, const char* who) {
    check_counter(o.seed, who, "the seed");
    check_order_kind(o, who);
    const auto token_only = [who](const std::string& what) {
        refuse_setting(who, what + ", but it is for token-budget micro-batches: set max_tokens too "
                                   "(or leave it at its default for batches of batch_size)");
    };
    if (o.micro_batches != 0) token_only("micro_batches is " + std::to_string(o.micro_batches));
    if (o.multiple_of != 1) token_only("multiple_of is " + std::to_string(o.multiple_of));
    if (o.oversized_alone) token_only("oversized_alone is true");
    if (o.pad_to_multiple_of != 1)
        token_only("pad_to_multiple_of is " + std::to_string(o.pad_to_multiple_of));
    if (o.padding != token_padding::repeat) token_only("padding is not token_padding::repeat");
    if (!lengths.empty()) token_only("lengths has " + std::to_string(lengths.size()) + " entries");
    bcl::check_epoch_shape(epoch_shape_of(o), who);
    check_rank(o, who);
    bcl::check_plan_options(o.plan, who);
    if (o.stages == 1) {
        bcl::check_cost_table(costs, who);
        return;
    }
    if (o.plan.cap != 0.0 || o.plan.batching != bcl::batch_cost::packed)
        refuse_setting(who, "stages is " + std::to_string(o.stages) +
                                ", but a plan cap and padded batching are for one cost a record "
                                "(leave plan.cap and plan.batching at their defaults)");
    (void)bcl::check_stage_costs(costs, o.stages, who); // naming the record and the stage
}

/// Token mode's checks (max_tokens above 0), the settings before the tables, in this order, each
/// a bcl::error prefixed with `who`: a seed of 2^63 or more; an order that is no
/// epoch_order_kind; any fixed-mode setting away from its default (batch_size, drop_last, plan;
/// naming it); the budget over K steps (bcl::check_token_budget: R, m or K of 0, T above 2^31, R*K
/// above bcl::max_plan_records); a rank not below num_replicas; the window
/// (bcl::check_token_window: M of 0 or not a multiple of m, R*K*M above bcl::max_plan_records);
/// pad_to_multiple_of of 0 or above T (bcl::check_token_options); a padding that is no
/// token_padding; costs neither empty nor one per length; fewer than R*m dataset indices; the first
/// invalid cost (bcl::check_cost_table); the first length above T once rounded up to
/// pad_to_multiple_of, without oversized_alone, or above 2^31 with it
/// (bcl::detail::tokens::checked_length, naming its dataset index). O(N).
inline void check_token_mode(const distributed_sampler_options& o, std::span<const double> costs,
                             std::span<const std::uint64_t> lengths, const char* who) {
    check_counter(o.seed, who, "the seed");
    check_order_kind(o, who);
    const auto fixed_only = [who](const std::string& what) {
        refuse_setting(who, what + ", but it is for batches of batch_size; with max_tokens a "
                                   "micro-batch holds as many records as fit and every record is "
                                   "planned, packed, at its own cost (leave it at its default)");
    };
    if (o.stages != 1) fixed_only("stages is " + std::to_string(o.stages));
    if (o.batch_size != 0) fixed_only("batch_size is " + std::to_string(o.batch_size));
    if (o.drop_last) fixed_only("drop_last is true");
    if (o.plan.batching != bcl::batch_cost::packed)
        fixed_only("plan_options::batching is not packed");
    if (std::bit_cast<std::uint64_t>(o.plan.cap) != 0)
        fixed_only("plan_options::cap is " + bcl::detail::number_text(o.plan.cap));
    if (!o.plan.level_steps) fixed_only("plan_options::level_steps is false");

    const bcl::token_budget budget = token_budget_of(o);
    bcl::check_token_budget(budget, o.lookahead, who);
    check_rank(o, who);
    bcl::check_token_window(budget, o.micro_batches, o.lookahead, who);
    bcl::check_token_options(token_options_of(o), budget, who);
    if (o.padding != token_padding::repeat && o.padding != token_padding::empty &&
        o.padding != token_padding::error)
        refuse_setting(who, "padding is " + std::to_string(static_cast<unsigned>(o.padding)) +
                                ", not a token_padding (repeat, empty or error)");

    const std::size_t n = lengths.size();
    if (!costs.empty() && costs.size() != n)
        refuse_setting(who, "costs has " + std::to_string(costs.size()) +
                                " entries, but lengths has " + std::to_string(n) +
                                "; give one cost per length, or none for the default "
                                "L + L^2/24576");
    if (n / o.multiple_of < o.num_replicas)
        refuse_setting(
            who, std::to_string(n) + " dataset indices (lengths) cannot give one to " +
                     "each of the num_replicas * multiple_of = " + std::to_string(o.num_replicas) +
                     " * " + std::to_string(o.multiple_of) + " micro-batches of a step");
    bcl::check_cost_table(costs, who);
    for (std::size_t i = 0; i < n; ++i)
        (void)bcl::detail::tokens::checked_length(lengths[i], i, "dataset index", o.max_tokens,
                                                  o.oversized_alone, o.pad_to_multiple_of, who);
}

} // namespace bcl::torch::detail
