#pragma once
// What a run resolves from its configuration before any policy runs, the same in both modes: the
// source each policy reads afresh, the workload's figures that every output echoes, the cap, its
// prior and --mean-cost in cost units, mffd's bin; and the context each policy runs in.

#include "cost_and_cap.hpp"
#include "input.hpp"
#include "metrics.hpp"
#include "policy_runner.hpp"
#include "random.hpp"
#include "sim_config.hpp"
#include "workload.hpp"

#include <bcl/options.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace bcl_sim {

/// Makes a fresh source: one per policy, so every policy reads the same records from the start.
using source_factory = std::function<std::unique_ptr<record_source>()>;

/// A policy that did not run, and why (the outputs print the reason).
struct skipped_policy {
    std::string name;
    std::string reason;
};

/// The inputs a run resolved from its configuration, which every output echoes.
struct run_inputs {
    std::optional<std::uint64_t> dataset_records; ///< lines in the workload file
    double p99_length = 0.0;  ///< nearest-rank p99 of the lengths (file, or a pilot sample)
    double mean_length = 0.0; ///< mean of the lengths (file, or the same pilot sample)
    double max_length = 0.0;  ///< longest length (file, or the same pilot sample)
    double bin_tokens = 0.0;  ///< mffd bin capacity used
    bcl::cap_options cap;     ///< the cap every policy ran with, in cost units
    /// --cap-prior resolved (its length and cost), nothing without one.
    std::optional<cap_prior> prior;
    /// --mean-cost resolved, in cost units; nothing for each rank's own running mean, and for
    /// `epoch` (each epoch's balancers get their epoch's own).
    std::optional<double> mean_cost;
};

/// A run's inputs resolved, with what its policies read.
struct resolved_run {
    run_inputs inputs;
    source_factory make_source; ///< a fresh source for each policy
    /// A workload file's lengths (a mode may check them: token_simulate.hpp's check_oversized);
    /// null for a synthetic distribution or a source the caller made.
    std::shared_ptr<const std::vector<double>> lengths;
};

namespace detail {

// `file:PATH`: the file's lengths, their figures, and a DistributedSampler-style source over them.
inline void resolve_file(const sim_config& cfg, const file_spec& file, resolved_run& run) {
    auto lengths = std::make_shared<const std::vector<double>>(load_lengths(file.path));
    run_inputs& in = run.inputs;
    in.prior = resolve_cap_prior(cfg.cap_prior, cfg.cap, cfg.cost, lengths.get());
    in.mean_cost = resolve_mean_cost(cfg, *lengths);
    in.dataset_records = lengths->size();
    in.p99_length = nearest_rank(*lengths, 0.99);
    in.mean_length = mean_of(*lengths);
    in.max_length = lengths->empty() ? 0.0 : *std::ranges::max_element(*lengths);
    const std::size_t per_rank = (lengths->size() + cfg.ranks - 1) / cfg.ranks;
    // Enough cache slots for every epoch one K-step window touches, with room to spare.
    const std::size_t slots = 2 * (cfg.lookahead * cfg.batch / per_rank) + 4;
    run.make_source = [lengths, ranks = cfg.ranks, seed = cfg.seed, slots] {
        return std::make_unique<file_source>(lengths, ranks, seed, slots);
    };
    run.lengths = std::move(lengths);
}

// A synthetic distribution: a fixed pilot sample (independent of the seed) stands in for the
// workload's figures.
inline void resolve_synthetic(const sim_config& cfg, resolved_run& run) {
    constexpr std::size_t pilot = 1 << 16;
    std::vector<double> sample_lengths(pilot);
    const std::uint64_t key = stream_key(0, domain::pilot, 0);
    for (std::size_t i = 0; i < pilot; ++i) sample_lengths[i] = draw_length(cfg.dist, key, i);
    run_inputs& in = run.inputs;
    in.mean_length = mean_of(sample_lengths);
    in.max_length = *std::ranges::max_element(sample_lengths);
    in.prior = resolve_cap_prior(cfg.cap_prior, cfg.cap, cfg.cost, &sample_lengths);
    in.mean_cost = resolve_mean_cost(cfg, sample_lengths);
    in.p99_length = nearest_rank(std::move(sample_lengths), 0.99);
    run.make_source = [dist = cfg.dist, ranks = cfg.ranks, seed = cfg.seed] {
        return std::make_unique<synthetic_source>(dist, ranks, seed);
    };
}

} // namespace detail

/// Resolves a run's inputs: from `make_source` when given (hand-made streams: no lengths to
/// take figures from), otherwise from cfg.dist. Throws input_error for a workload file it cannot
/// read, --mean-cost exact without lengths, and a cap or prior that costs nothing.
[[nodiscard]] inline resolved_run resolve_run(const sim_config& cfg, source_factory make_source) {
    resolved_run run;
    run_inputs& in = run.inputs;
    if (make_source) {
        in.prior = resolve_cap_prior(cfg.cap_prior, cfg.cap, cfg.cost, nullptr);
        if (cfg.mean_cost_exact)
            throw input_error("--mean-cost exact: no workload lengths to take the mean of");
        in.mean_cost = cfg.mean_cost;
        run.make_source = std::move(make_source);
    } else if (const auto* file = std::get_if<file_spec>(&cfg.dist)) {
        detail::resolve_file(cfg, *file, run);
    } else {
        detail::resolve_synthetic(cfg, run);
    }
    in.bin_tokens = cfg.bin_tokens > 0.0 ? cfg.bin_tokens : context_length(in.max_length);
    if (!(in.bin_tokens > 0.0)) in.bin_tokens = 1.0; // all lengths 0: any capacity will do
    in.cap = bcl_cap(cfg.cap, cfg.cap_action, cfg.cost);
    return run;
}

/// The context of one policy's run: the settings every policy shares, reading `source` and
/// reporting to `watch`.
[[nodiscard]] inline sim_context policy_context(const sim_config& cfg, const run_inputs& in,
                                                record_source* source, const emit_observer& watch) {
    sim_context ctx;
    static_cast<run_settings&>(ctx) = cfg; // the settings every policy shares, given once
    ctx.source = source;
    ctx.bin_tokens = in.bin_tokens;
    ctx.observer = watch;
    ctx.cap = in.cap;
    if (in.prior) ctx.cap_prior = in.prior->cost;
    ctx.mean_cost = in.mean_cost;
    ctx.truth = cfg.truth();
    return ctx;
}

} // namespace bcl_sim
