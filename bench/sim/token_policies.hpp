#pragma once
// Micro-batch mode (--max-tokens): its policy table, the checks of its flags, and a run of one of
// its policies.

#include "input.hpp"
#include "metrics.hpp"
#include "policy_runner.hpp"
#include "sim_config.hpp"
#include "token_metrics.hpp"
#include "token_peers.hpp"
#include "token_runner.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace bcl_sim {

/// A policy of micro-batch mode. A new one is one more entry in token_policy_table().
struct token_policy_entry {
    std::string name;
    std::string models; ///< one line: what it stands for
    std::function<std::unique_ptr<token_runner>(const sim_context& ctx)> make;
};

/// A peer's runner: `plan` on each step's records (token_peer_runner), with `note`.
template <class Plan>
[[nodiscard]] std::function<std::unique_ptr<token_runner>(const sim_context&)>
make_peer(Plan plan, std::string note) {
    return [plan, note](const sim_context& ctx) -> std::unique_ptr<token_runner> {
        return std::make_unique<token_peer_runner>(ctx, plan, note);
    };
}

[[nodiscard]] inline const std::vector<token_policy_entry>& token_policy_table() {
    static const std::vector<token_policy_entry> table = [] {
        const auto t = [](const sim_context& ctx) {
            return static_cast<double>(*ctx.tokens.max_tokens);
        };
        return std::vector<token_policy_entry>{
            {"none",
             "each rank's records packed in arrival order (sequential: a micro-batch closes when "
             "the next record would take it above T); the count per step is the most any rank "
             "needs, the others running empty micro-batches: a trainer that does not balance",
             make_peer(
                 [t](std::span<const double> lengths, std::span<const double>,
                     const sim_context& ctx) {
                     return none_plan(lengths, ctx.ranks, t(ctx), ctx.tokens.multiple_of);
                 },
                 "sequential packing per rank, padded to the most any rank needs")},
            {"global",
             "bcl's token plan (bcl::token_planner): every rank plans the same micro-batches of "
             "all ranks' records, K held batches or a window of K steps at a time, and keeps its "
             "share; no communication",
             [](const sim_context& ctx) -> std::unique_ptr<token_runner> {
                 return std::make_unique<token_global_runner>(ctx);
             }},
            {"verl_dynamic",
             "verl's dynamic batch size: balance_batch (Karmarkar-Karp, equal sizes) across "
             "ranks, then rearrange_micro_batches per rank (all-reduced count, Karmarkar-Karp "
             "into micro-batches, one more until all fit T)",
             make_peer(
                 [t](std::span<const double> lengths, std::span<const double>,
                     const sim_context& ctx) {
                     return verl_dynamic_plan(lengths, ctx.ranks, t(ctx), ctx.tokens.multiple_of);
                 },
                 "balance_batch, then rearrange_micro_batches with the strict budget, on "
                 "verl's workload 24576 L + L^2; the repartition loop taken as collective")},
            {"skyrl",
             "SkyRL's balanced bin packing (max_tokens_per_microbatch): each worker's contiguous "
             "chunk packed longest first into the least-loaded bin that fits, counts padded to "
             "the most over the workers",
             make_peer(
                 [t](std::span<const double> lengths, std::span<const double>,
                     const sim_context& ctx) { return skyrl_plan(lengths, ctx.ranks, t(ctx)); },
                 "padding micro-batches cost nothing; SkyRL has no multiple, so --multiple-of "
                 "does not apply")},
            {"nemo_rl",
             "NeMo-RL's sequence packing: the step's records packed by MFFD into bins of T "
             "tokens, the bin count a multiple of R, bins dealt round-robin",
             make_peer(
                 [t](std::span<const double> lengths, std::span<const double>,
                     const sim_context& ctx) { return nemo_rl_plan(lengths, ctx.ranks, t(ctx)); },
                 "modified_first_fit_decreasing, microbatch_order packer; --multiple-of does not "
                 "apply (the count is a multiple of R)")},
            {"fixed_length",
             "WLB-LLM's baseline: each rank's records concatenated and cut into micro-batches of "
             "exactly T tokens, records split; the count per step is the most any rank needs, "
             "the others idle",
             make_peer(
                 [t](std::span<const double> lengths, std::span<const double>,
                     const sim_context& ctx) {
                     return fixed_length_plan(lengths, ctx.ranks, t(ctx), ctx.tokens.multiple_of);
                 },
                 "records split at every T tokens (a piece costs by its own length); idle ranks "
                 "run empty micro-batches")},
            {"global_fixed",
             "bcl's fixed-B global plan on the same records, micro-batches of B records "
             "whatever their tokens: the paper's shape beside the token shape",
             [](const sim_context& ctx) -> std::unique_ptr<token_runner> {
                 return std::make_unique<token_fixed_runner>(ctx);
             }},
        };
    }();
    return table;
}

[[nodiscard]] inline const token_policy_entry* find_token_policy(std::string_view name) {
    for (const token_policy_entry& e : token_policy_table())
        if (e.name == name) return &e;
    return nullptr;
}

/// The names of micro-batch mode's policies, comma-separated.
[[nodiscard]] inline std::string token_policy_names() {
    std::string names;
    for (const token_policy_entry& e : token_policy_table()) {
        if (!names.empty()) names += ',';
        names += e.name;
    }
    return names;
}

/// The largest --max-tokens: a plan's records hold at most 2^31 tokens.
inline constexpr std::uint64_t max_token_budget = std::uint64_t{1} << 31;

/// Checks micro-batch mode's flags (run_settings::tokens and what does not apply with them);
/// throws input_error naming the first problem. Without --max-tokens, refuses the mode's other
/// flags.
inline void validate_tokens(const sim_config& cfg) {
    const token_settings& t = cfg.tokens;
    if (!t.enabled()) {
        const char* given = t.step_records       ? "--step-records"
                            : t.micro_batches    ? "--micro-batches"
                            : t.multiple_of != 1 ? "--multiple-of"
                            : t.oversized_alone  ? "--oversized"
                            : t.max_fill != 1.0  ? "--max-fill"
                                                 : nullptr;
        if (given != nullptr)
            throw input_error(fmt::format("{} is a flag of micro-batch mode; give --max-tokens T "
                                          "(the most tokens of one micro-batch) with it",
                                          given));
        return;
    }
    if (*t.max_tokens == 0) throw input_error("--max-tokens must be at least 1 token");
    if (*t.max_tokens > max_token_budget)
        throw input_error(fmt::format("--max-tokens {} is above 2^31", *t.max_tokens));
    if (t.step_records && t.micro_batches)
        throw input_error("--max-tokens takes one of --step-records N (held batches of N records "
                          "a rank) and --micro-batches M (a stream of steps of M micro-batches a "
                          "rank), not both");
    if (!t.step_records && !t.micro_batches)
        throw input_error("--max-tokens needs --step-records N (held batches: every step each "
                          "rank draws N records) or --micro-batches M (a stream of steps: every "
                          "step M micro-batches on every rank)");
    if (t.step_records && *t.step_records == 0)
        throw input_error("--step-records must be at least 1");
    if (t.micro_batches && *t.micro_batches == 0)
        throw input_error("--micro-batches must be at least 1");
    if (t.multiple_of == 0) throw input_error("--multiple-of must be at least 1");
    if (!(t.max_fill > 0.0 && t.max_fill <= 1.0))
        throw input_error(fmt::format("--max-fill must be in (0, 1] (got {})", t.max_fill));
    if (t.held() && t.max_fill != 1.0)
        throw input_error("--max-fill is a flag of a stream of steps (--micro-batches M): held "
                          "batches take every record of the step");
    if (t.micro_batches && *t.micro_batches % t.multiple_of != 0)
        throw input_error(fmt::format("--micro-batches {} must be a multiple of --multiple-of {}",
                                      *t.micro_batches, t.multiple_of));
    const std::uint64_t per_rank =
        t.held() ? *t.step_records : *t.micro_batches * std::max<std::size_t>(t.fixed_batch, 1);
    if (std::uint64_t{cfg.ranks} * cfg.lookahead * per_rank > bcl::max_plan_records)
        throw input_error(fmt::format("--ranks * --lookahead * {} is above the 2^30 records a "
                                      "plan may hold",
                                      t.held() ? "--step-records" : "--micro-batches * --batch"));
    // What micro-batch mode does not model: refused rather than ignored.
    const struct {
        bool given;
        const char* flag;
    } not_here[] = {
        {cfg.cap.kind != bcl::cap_kind::none, "--cap"},
        {cfg.cap_prior.what != cap_prior_spec::kind::none, "--cap-prior"},
        {cfg.memory_budget > 0.0, "--memory-budget (the budget is --max-tokens)"},
        {cfg.batching != batch_cost::packed, "--batching padded"},
        {cfg.emission != emission_order::costliest_first, "--emission"},
        {cfg.epoch_steps > 0, "--epoch-steps"},
        {cfg.calibrate, "--calibrate"},
        {cfg.true_cost.has_value(), "--true-cost"},
        {cfg.drift.has_value(), "--drift"},
        {cfg.window > 0, "--window"},
        {cfg.mean_cost.has_value() || cfg.mean_cost_exact || cfg.mean_cost_epoch, "--mean-cost"},
        {cfg.bin_tokens > 0.0, "--bin-tokens (nemo_rl's bins are --max-tokens)"},
        {cfg.buffer_windows != bcl::options{}.buffer_windows ||
             cfg.max_age != bcl::options{}.max_age,
         "--buffer-windows and --max-age"},
    };
    for (const auto& f : not_here)
        if (f.given)
            throw input_error(
                fmt::format("{} does not apply in micro-batch mode (--max-tokens)", f.flag));
    for (const std::string& name : cfg.policies)
        if (!find_token_policy(name))
            throw input_error(fmt::format("--policy: '{}' is not a policy of micro-batch mode "
                                          "(expected some of {})",
                                          name, token_policy_names()));
}

/// Throws input_error if some of the workload's `lengths` are above --max-tokens and the run
/// refuses them (no --oversized alone): how many, and the longest.
inline void check_oversized(const token_settings& t, const std::vector<double>& lengths) {
    if (!t.enabled() || t.oversized_alone) return;
    const auto limit = static_cast<double>(*t.max_tokens);
    std::size_t above = 0;
    double longest = 0.0;
    for (const double l : lengths) {
        above += l > limit ? 1 : 0;
        longest = std::max(longest, l);
    }
    if (above > 0)
        throw input_error(fmt::format(
            "{} of the workload's {} lengths are above --max-tokens {} (the longest is {}); pass "
            "--oversized alone to give each a micro-batch of its own, or a larger --max-tokens",
            above, lengths.size(), limit, longest));
}

/// The names of the policies a micro-batch-mode run asks for, in the order asked and each once;
/// without --policy, every policy of the table.
[[nodiscard]] inline std::vector<std::string> requested_token_policies(const sim_config& cfg) {
    std::vector<std::string> names;
    if (cfg.policies.empty()) {
        for (const token_policy_entry& e : token_policy_table()) names.push_back(e.name);
        return names;
    }
    for (const std::string& name : cfg.policies)
        if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
    return names;
}

/// One policy's outcome in micro-batch mode.
struct token_run {
    token_metrics metrics;
    token_extras extras;
    double seconds = 0.0;
};

/// Runs one policy of micro-batch mode for `steps` steps. `ctx.source` must be fresh. Throws
/// peer_refuses where the peer's own code raises, std::logic_error if a step breaks what every
/// trainer needs (token_metrics_accumulator).
[[nodiscard]] inline token_run run_token_policy(const token_policy_entry& entry,
                                                const sim_context& ctx, std::size_t steps) {
    const auto start = std::chrono::steady_clock::now();
    std::unique_ptr<token_runner> runner = entry.make(ctx);
    token_metrics_accumulator acc(entry.name, ctx.ranks,
                                  static_cast<double>(*ctx.tokens.max_tokens), runner->pads(),
                                  ctx.lookahead);
    for (std::size_t first = 0; first < steps;) {
        const token_block block = runner->run(first, steps - first);
        if (block.steps.empty() || block.steps.size() > steps - first)
            throw std::logic_error(fmt::format("policy {} ran {} steps from step {}", entry.name,
                                               block.steps.size(), first));
        for (std::size_t k = 0; k < block.steps.size(); ++k) acc.add(block.steps[k], first + k);
        acc.add_bound(block.bound);
        first += block.steps.size();
    }
    token_run out;
    out.metrics = acc.result();
    out.extras = runner->extras();
    out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return out;
}

} // namespace bcl_sim
