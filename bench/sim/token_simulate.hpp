#pragma once
// A run of micro-batch mode (--max-tokens): its checks, each policy's run and its metrics, and
// simulate_tokens(). Fixed-size batches are simulate.hpp.

#include "batching.hpp"
#include "cost_and_cap.hpp"
#include "input.hpp"
#include "metrics.hpp"
#include "policy_runner.hpp"
#include "run_inputs.hpp"
#include "sim_config.hpp"
#include "stage_settings.hpp"
#include "token_fixed_runner.hpp"
#include "token_metrics.hpp"
#include "token_peers.hpp"
#include "token_policies.hpp"
#include "token_runner.hpp"
#include "token_settings.hpp"

#include <bcl/global_plan.hpp>
#include <bcl/options.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace bcl_sim {

/// One policy's outcome in micro-batch mode.
struct token_policy_result {
    std::string name;
    token_metrics metrics; ///< `records` from the runner's extras
    token_extras extras;
    double speedup_vs_none = 0.0; ///< efficiency over none's
    double seconds = 0.0;
};

/// The outcome of a run of micro-batch mode, with the inputs it resolved.
struct token_sim_result : run_inputs {
    std::size_t fixed_batch = 0; ///< global_fixed's B, resolved
    std::vector<token_policy_result> policies;
    std::vector<skipped_policy> skipped;
};

namespace detail {

// The mode's own flags: T, one shape (held batches or a stream), counts of at least 1, and a
// plan's size.
inline void validate_token_shape(const sim_config& cfg) {
    const token_settings& t = cfg.tokens;
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
}

// What micro-batch mode does not model: refused rather than ignored.
inline void refuse_fixed_batch_flags(const sim_config& cfg) {
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
}

} // namespace detail

/// Checks every input of a run of micro-batch mode (cfg.tokens.max_tokens set); throws
/// input_error naming the first bad one: the settings both modes read (validate_settings), the
/// mode's own flags, a flag of fixed-size batches the mode does not model, an unknown policy.
inline void validate_tokens(const sim_config& cfg) {
    if (!cfg.tokens.enabled())
        throw std::invalid_argument("bcl_sim::validate_tokens: no --max-tokens; a run of "
                                    "fixed-size batches is checked and run by validate() and "
                                    "simulate()");
    if (cfg.stages.enabled)
        throw input_error("--stages and --max-tokens are two modes; give one of them");
    validate_settings(cfg);
    if (const char* flag = stage_flag_given(cfg.stages))
        throw input_error(fmt::format("{} is a flag of --stages (stage mode)", flag));
    detail::validate_token_shape(cfg);
    detail::refuse_fixed_batch_flags(cfg);
    for (const std::string& name : cfg.policies)
        if (!find_token_policy(name))
            throw input_error(fmt::format("--policy: '{}' is not a policy of micro-batch mode "
                                          "(expected some of {})",
                                          name, token_policy_names()));
}

/// Throws input_error if some of the workload's `lengths` are above --max-tokens and the run
/// refuses them (no --oversized alone): how many, and the longest.
inline void check_oversized(const token_settings& t, const std::vector<double>& lengths) {
    if (t.oversized_alone) return;
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

/// Runs one policy of micro-batch mode for `steps` steps. `ctx.source` must be fresh. Throws
/// peer_refuses where the peer's own code raises, std::logic_error if a step breaks what every
/// trainer needs (token_metrics_accumulator).
[[nodiscard]] inline token_policy_result
run_token_policy(const token_policy_entry& entry, const sim_context& ctx, std::size_t steps) {
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
    token_policy_result out;
    out.name = entry.name;
    out.metrics = acc.result();
    out.extras = runner->extras();
    out.metrics.records = out.extras.records;
    out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return out;
}

/// Runs every requested policy of micro-batch mode, each on a fresh source (none always runs, as
/// the reference of speedup_vs_none; the observer sees only the policies asked for), after
/// resolving global_fixed's B. The source factory may be given for hand-made streams; otherwise
/// it follows cfg.dist. A peer whose own code raises on these records is skipped, with its
/// reason. Throws input_error for bad input.
[[nodiscard]] inline token_sim_result simulate_tokens(const sim_config& cfg,
                                                      source_factory make_source = {},
                                                      const emit_observer& observer = {}) {
    validate_tokens(cfg);
    const resolved_run run = resolve_run(cfg, std::move(make_source));
    if (run.lengths) check_oversized(cfg.tokens, *run.lengths);
    token_sim_result out;
    static_cast<run_inputs&>(out) = run.inputs;
    out.fixed_batch = cfg.tokens.fixed_batch > 0
                          ? cfg.tokens.fixed_batch
                          : fixed_batch_for(*cfg.tokens.max_tokens, out.mean_length);
    const auto run_one = [&](const token_policy_entry& e, const emit_observer& watch) {
        const std::unique_ptr<record_source> source = run.make_source();
        sim_context ctx = policy_context(cfg, out, source.get(), watch);
        ctx.tokens.fixed_batch = out.fixed_batch;
        return run_token_policy(e, ctx, cfg.steps);
    };
    const std::vector<std::string> wanted = requested_token_policies(cfg);
    const bool none_wanted = std::find(wanted.begin(), wanted.end(), "none") != wanted.end();
    const token_policy_result none =
        run_one(*find_token_policy("none"), none_wanted ? observer : emit_observer{});
    for (const std::string& name : wanted) {
        try {
            token_policy_result res =
                name == "none" ? none : run_one(*find_token_policy(name), observer);
            res.speedup_vs_none = speedup(res.metrics.efficiency, none.metrics.efficiency);
            out.policies.push_back(std::move(res));
        } catch (const peer_refuses& e) {
            out.skipped.push_back({name, fmt::format("{} skipped: {}", name, e.what())});
        }
    }
    return out;
}

} // namespace bcl_sim
