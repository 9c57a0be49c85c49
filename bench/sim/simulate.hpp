#pragma once
// A run of fixed-size batches (B records a rank a step): its checks, each policy's run and its
// metrics, and simulate(). Micro-batch mode (--max-tokens) is token_simulate.hpp.

#include "batching.hpp"
#include "input.hpp"
#include "metrics.hpp"
#include "policy_runner.hpp"
#include "policy_table.hpp"
#include "run_inputs.hpp"
#include "sim_config.hpp"
#include "stage_settings.hpp"
#include "token_settings.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace bcl_sim {

/// One policy's outcome.
struct policy_result {
    std::string name;
    step_metrics metrics;
    double cv_reduction = 0.0;
    double speedup_vs_none = 0.0;
    policy_extras extras;
    double seconds = 0.0;
    std::vector<double> step_max;  ///< max over ranks, per step (the trace)
    std::vector<double> step_mean; ///< mean over ranks, per step
    /// Largest sum of lengths of one rank's batch in one step (mffd: all of the rank's bins).
    double peak_batch_tokens = 0.0;
    /// Rank-batches whose sum of lengths is above the memory budget; 0 without one.
    std::uint64_t over_budget_batches = 0;
};

/// Runs one policy for `steps` steps. `ctx.source` must be fresh (unread) for this policy.
[[nodiscard]] inline policy_result run_policy(const policy_entry& entry, const sim_context& ctx,
                                              std::size_t steps) {
    const auto start = std::chrono::steady_clock::now();
    std::unique_ptr<policy_runner> runner = entry.make(ctx);
    metrics_accumulator acc(steps, ctx.lookahead, ctx.epoch_steps);
    std::vector<double> block(ctx.lookahead * ctx.ranks);
    std::vector<double> tokens(ctx.lookahead * ctx.ranks);
    std::vector<double> useful(ctx.lookahead * ctx.ranks);
    const double pad_to = ctx.batching == batch_cost::padded ? static_cast<double>(ctx.batch) : 0.0;
    double peak_tokens = 0.0;
    std::uint64_t over_budget = 0;
    for (std::size_t first = 0; first < steps; first += ctx.lookahead) {
        const std::size_t count = std::min(ctx.lookahead, steps - first);
        const step_block out{std::span<double>(block.data(), count * ctx.ranks),
                             std::span<double>(tokens.data(), count * ctx.ranks),
                             std::span<double>(useful.data(), count * ctx.ranks),
                             pad_to,
                             &ctx.truth,
                             first};
        std::fill(out.costs.begin(), out.costs.end(), 0.0);
        std::fill(out.tokens.begin(), out.tokens.end(), 0.0);
        std::fill(out.useful.begin(), out.useful.end(), 0.0);
        runner->run(first, count, out);
        for (std::size_t t = 0; t < count; ++t)
            acc.add_step(out.costs.subspan(t * ctx.ranks, ctx.ranks),
                         out.useful.subspan(t * ctx.ranks, ctx.ranks));
        for (const double x : out.tokens) {
            peak_tokens = std::max(peak_tokens, x);
            over_budget += ctx.memory_budget > 0.0 && x > ctx.memory_budget ? 1 : 0;
        }
    }
    policy_result res;
    res.peak_batch_tokens = peak_tokens;
    res.over_budget_batches = over_budget;
    res.name = std::string(entry.name);
    res.metrics = acc.result();
    res.extras = runner->extras();
    res.step_max = acc.step_max();
    res.step_mean = acc.step_mean();
    res.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return res;
}

/// Fills in cv_reduction and speedup_vs_none against the `none` result. The speedup is the ratio
/// of goodputs: every policy does the same useful work, so it is the ratio of mean step times
/// under padded batching too, where the spend differs between policies. Packed, goodput is
/// efficiency exactly.
inline void relate_to_none(policy_result& res, const policy_result& none) noexcept {
    res.cv_reduction = cv_reduction(res.metrics.cv, none.metrics.cv);
    res.speedup_vs_none = speedup(res.metrics.goodput, none.metrics.goodput);
}

/// The outcome of a run of fixed-size batches, with the inputs it resolved.
struct sim_result : run_inputs {
    std::vector<policy_result> policies;
    std::vector<skipped_policy> skipped;
};

/// Checks every input of a run of fixed-size batches; throws input_error naming the first bad
/// one: a flag of micro-batch mode without --max-tokens, or an unknown policy. A config with
/// --max-tokens runs through simulate_tokens() (token_simulate.hpp), never here.
inline void validate(const sim_config& cfg) {
    if (cfg.tokens.enabled())
        throw std::invalid_argument("bcl_sim::validate: --max-tokens is micro-batch mode; check "
                                    "and run it with validate_tokens() and simulate_tokens()");
    if (cfg.stages.enabled)
        throw std::invalid_argument("bcl_sim::validate: --stages is stage mode; check and run it "
                                    "with validate_stages() and simulate_stages()");
    validate_settings(cfg);
    if (const char* flag = stage_flag_given(cfg.stages))
        throw input_error(fmt::format("{} is a flag of --stages (stage mode)", flag));
    if (const char* flag = micro_batch_flag_given(cfg.tokens))
        throw input_error(fmt::format("{} is a flag of micro-batch mode; give --max-tokens T "
                                      "(the most tokens of one micro-batch) with it",
                                      flag));
    for (const std::string& name : cfg.policies)
        if (!find_policy(name))
            throw input_error(fmt::format("--policy: unknown policy '{}' (expected some of {})",
                                          name, policy_names()));
}

/// Runs every requested policy of fixed-size batches (none is always simulated: the others are
/// measured against it). The source factory may be given for hand-made streams; otherwise it
/// follows cfg.dist. Throws input_error for bad input.
[[nodiscard]] inline sim_result simulate(const sim_config& cfg, source_factory make_source = {},
                                         const emit_observer& observer = {}) {
    validate(cfg);
    const resolved_run run = resolve_run(cfg, std::move(make_source));
    sim_result out;
    static_cast<run_inputs&>(out) = run.inputs;
    const auto run_one = [&](const policy_entry& e, const emit_observer& watch) {
        const std::unique_ptr<record_source> source = run.make_source();
        return run_policy(e, policy_context(cfg, out, source.get(), watch), cfg.steps);
    };
    const std::vector<const policy_entry*> wanted = requested_policies(cfg);
    const policy_entry* none_entry = find_policy("none");
    const bool none_wanted = std::find(wanted.begin(), wanted.end(), none_entry) != wanted.end();
    // The reference run is silent: the observer sees only the policies that were asked for.
    const policy_result none = run_one(*none_entry, none_wanted ? observer : emit_observer{});
    for (const policy_entry* e : wanted) {
        if (std::optional<std::string> reason = e->skip(cfg)) {
            out.skipped.push_back({std::string(e->name), std::move(*reason)});
            continue;
        }
        policy_result res = e == none_entry ? none : run_one(*e, observer);
        relate_to_none(res, none);
        out.policies.push_back(std::move(res));
    }
    return out;
}

} // namespace bcl_sim
