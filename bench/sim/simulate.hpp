#pragma once
// The policy table, a run's results, and simulate().

#include "baselines.hpp"
#include "batching.hpp"
#include "bcl_runner.hpp"
#include "calibration.hpp"
#include "cost_and_cap.hpp"
#include "global_runner.hpp"
#include "input.hpp"
#include "metrics.hpp"
#include "mffd.hpp"
#include "policy_runner.hpp"
#include "random.hpp"
#include "sim_config.hpp"
#include "token_policies.hpp"
#include "verl_kk.hpp"
#include "workload.hpp"

#include <bcl/error.hpp>
#include <bcl/names.hpp>
#include <bcl/options.hpp>
#include <bcl/validate.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace bcl_sim {

// ---------------------------------------------------------------------------------------------
// The policy table. A new policy is one more entry here.
// ---------------------------------------------------------------------------------------------

struct policy_entry {
    std::string name;
    std::string models; ///< one line: what it stands for
    /// Builds the runner. `ctx.source` is a fresh source for this policy.
    std::function<std::unique_ptr<policy_runner>(const sim_context& ctx)> make;
    /// Why the policy cannot run with this configuration, or nothing if it can.
    std::optional<std::string> (*skip)(const sim_config& cfg);
    /// Part of a run that names no policies; false: runs only when named.
    bool by_default;
};

[[nodiscard]] inline std::optional<std::string> never_skip(const sim_config&) {
    return {};
}

/// The context of a policy that reads records as fetch() gives them: under a truncating cap, the
/// capped stream (stream_cap), so it runs on the same truncated records as the bcl policies; a
/// clipping cap leaves its records alone.
[[nodiscard]] inline sim_context with_truncation(const sim_context& ctx) {
    sim_context c = ctx;
    if (ctx.cap.kind != bcl::cap_kind::none && ctx.cap.action == bcl::cap_action::truncate)
        c.truncation =
            std::make_shared<stream_cap>(ctx.source, ctx.cost, ctx.cap, ctx.ranks, ctx.cap_prior);
    return c;
}

/// A baseline's runner, on with_truncation's records.
template <class Runner>
[[nodiscard]] std::unique_ptr<policy_runner> make_baseline(const sim_context& ctx) {
    return std::make_unique<Runner>(with_truncation(ctx));
}

/// The global plan's runner, on with_truncation's records (a fixed clipping cap goes to the
/// plan itself: global_plan_cap).
template <bool LevelSteps>
[[nodiscard]] std::unique_ptr<policy_runner> make_global_runner(const sim_context& ctx) {
    return std::make_unique<global_runner>(with_truncation(ctx), LevelSteps);
}

/// A plan takes at most bcl::max_plan_records records per window.
[[nodiscard]] inline std::optional<std::string> skip_global(const sim_config& cfg) {
    const std::uint64_t window = std::uint64_t{cfg.ranks} * cfg.lookahead * cfg.batch;
    if (window <= bcl::max_plan_records) return {};
    return fmt::format("global skipped: R*K*B = {} records per window is more than a plan takes "
                       "(bcl::max_plan_records = {})",
                       window, bcl::max_plan_records);
}

[[nodiscard]] inline const std::vector<policy_entry>& policy_table() {
    static const std::vector<policy_entry> table = [] {
        std::vector<policy_entry> t{
            {"none",
             "fixed-count batches in sampler order (PyTorch DistributedSampler + DataLoader)",
             make_baseline<none_runner>, never_skip, true},
            {"length_grouped", "Hugging Face group_by_length: megabatches sorted by length",
             make_baseline<length_grouped_runner>, never_skip, true},
            {"mffd", "NeMo-RL sequence packing: pooled MFFD token bins dealt round-robin",
             make_baseline<mffd_runner>, never_skip, true},
            {"verl_kk",
             "verl balance_batch: each step's R*B records split by Karmarkar-Karp into R groups "
             "of B (needs cross-rank communication)",
             make_baseline<verl_kk_runner>, never_skip, true},
            {"global",
             "bcl global plan: every rank computes the same plan of all ranks' K-step windows "
             "from the shared cost table (bcl::global_planner; coordinated, no communication)",
             make_global_runner<true>, skip_global, true},
            {"global_flat",
             "the global plan with bcl::plan_options::level_steps off: every pack dealt toward "
             "the same mean (runs only when named)",
             make_global_runner<false>, skip_global, false},
        };
        // The library's lookahead policies, each by the name and summary its component carries
        // (bcl/names.hpp): a new policy runs here without an edit.
        for (const std::string_view name : bcl::names_of<bcl::lookahead_policy>()) {
            const bcl::lookahead_policy policy = bcl::named<bcl::lookahead_policy>(name);
            t.push_back({std::string(name),
                         "bcl " + std::string(name) + ", rank-local (bcl::balancer per rank): " +
                             std::string(bcl::policy_summary(policy)),
                         [policy](const sim_context& ctx) { return make_bcl_runner(policy, ctx); },
                         never_skip, true});
        }
        t.push_back({"sliding_true",
                     "bcl sliding estimating with the true cost in force (--true-cost, --drift) "
                     "instead of --cost, never calibrated: what a calibrated sliding should "
                     "approach (runs only when named)",
                     make_sliding_true_runner, never_skip, false});
        return t;
    }();
    return table;
}

[[nodiscard]] inline const policy_entry* find_policy(std::string_view name) {
    for (const policy_entry& e : policy_table())
        if (e.name == name) return &e;
    return nullptr;
}

/// The policies a run asks for, in the order asked and each once; when cfg.policies is empty,
/// every policy of the table that runs by default. The names must be known (validate() checks
/// that).
[[nodiscard]] inline std::vector<const policy_entry*> requested_policies(const sim_config& cfg) {
    std::vector<const policy_entry*> wanted;
    if (cfg.policies.empty()) {
        for (const policy_entry& e : policy_table())
            if (e.by_default) wanted.push_back(&e);
        return wanted;
    }
    for (const std::string& name : cfg.policies) {
        const policy_entry* e = find_policy(name);
        if (std::find(wanted.begin(), wanted.end(), e) == wanted.end()) wanted.push_back(e);
    }
    return wanted;
}

/// The names of every policy in the table, comma-separated.
[[nodiscard]] inline std::string policy_names() {
    std::string names;
    for (const policy_entry& e : policy_table()) {
        if (!names.empty()) names += ',';
        names += e.name;
    }
    return names;
}

// ---------------------------------------------------------------------------------------------
// Running a simulation.
// ---------------------------------------------------------------------------------------------

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
    /// Micro-batch mode (--max-tokens): the micro-step metrics (`metrics` is then unused).
    std::optional<token_metrics> tokens;
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

struct skipped_policy {
    std::string name;
    std::string reason;
};

/// The outcome of a run, with the inputs it resolved.
struct sim_result {
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
    std::vector<policy_result> policies;
    std::vector<skipped_policy> skipped;
    std::size_t fixed_batch = 0; ///< micro-batch mode: global_fixed's B, resolved (0 otherwise)

    /// Whether the run was in micro-batch mode (--max-tokens).
    [[nodiscard]] bool micro_batch_mode() const noexcept { return fixed_batch > 0; }
};

/// Makes a fresh source: one per policy, so every policy reads the same records from the start.
using source_factory = std::function<std::unique_ptr<record_source>()>;

/// Throws input_error "`flag` must be at least 1" for a count of 0.
inline void require_at_least_one(std::size_t value, std::string_view flag) {
    if (value == 0) throw input_error(fmt::format("{} must be at least 1", flag));
}

/// bcl::validate(opt), with the bcl::error it throws for options the library refuses reported as
/// bad input (input_error, same message).
inline void validate_options(const bcl::options& opt) {
    try {
        bcl::validate(opt);
    } catch (const bcl::error& e) {
        throw input_error(e.what());
    }
}

/// Checks the numeric inputs; throws input_error naming the first bad one.
inline void validate(const sim_config& cfg) {
    require_at_least_one(cfg.ranks, "--ranks");
    require_at_least_one(cfg.batch, "--batch");
    require_at_least_one(cfg.lookahead, "--lookahead");
    require_at_least_one(cfg.steps, "--steps");
    if (cfg.ranks > (std::size_t{1} << 20)) throw input_error("--ranks must be at most 1048576");
    if (std::uint64_t{cfg.ranks} * cfg.batch > (std::uint64_t{1} << 30))
        throw input_error("--ranks * --batch must be at most 2^30 records per step");
    if (!(cfg.bin_tokens >= 0.0) || !std::isfinite(cfg.bin_tokens))
        throw input_error("--bin-tokens must be a finite number >= 0");
    if (!(cfg.memory_budget >= 0.0) || !std::isfinite(cfg.memory_budget))
        throw input_error(fmt::format(
            "--memory-budget must be a finite number of tokens >= 0 (0 for none), got {}",
            cfg.memory_budget));
    if (cfg.cap.kind == bcl::cap_kind::fixed && !(cfg.cap.tokens > 0.0))
        throw input_error("--cap: a fixed cap must be a length > 0");
    if (cfg.cap.kind == bcl::cap_kind::quantile &&
        !(cfg.cap.quantile > 0.0 && cfg.cap.quantile < 1.0))
        throw input_error("--cap: the percentile must be above 0 and below 100");
    if (cfg.cap_prior.what == cap_prior_spec::kind::tokens &&
        !(cfg.cap_prior.tokens > 0.0 && std::isfinite(cfg.cap_prior.tokens)))
        throw input_error("--cap-prior: a prior must be a length > 0");
    if (cfg.cap_prior.what != cap_prior_spec::kind::none && cfg.cap.kind != bcl::cap_kind::quantile)
        throw input_error(fmt::format("--cap-prior {}: a prior needs a quantile --cap such as p99 "
                                      "(it is the cap until the quantile's warm-up ends), not "
                                      "--cap {}",
                                      describe(cfg.cap_prior), describe(cfg.cap)));
    if (cfg.batching != batch_cost::packed && cfg.batching != batch_cost::padded)
        throw input_error("--batching: no such batching");
    if (cfg.emission != emission_order::costliest_first && cfg.emission != emission_order::shuffled)
        throw input_error("--emission: no such emission order");
    if (!(cfg.time_noise >= 0.0 && cfg.time_noise <= 5.0))
        throw input_error(fmt::format(
            "--time-noise must be a number from 0 to 5 (the sigma of exp(N(0, sigma))), got {}",
            cfg.time_noise));
    if (cfg.drift && cfg.drift->step >= cfg.steps)
        throw input_error(fmt::format("--drift {}:{}: the run has only {} steps (0 to {})",
                                      cfg.drift->step, describe(cfg.drift->model), cfg.steps,
                                      cfg.steps - 1));
    if (cfg.window > cfg.steps)
        throw input_error(
            fmt::format("--window {}: more than the run's {} steps", cfg.window, cfg.steps));
    if (cfg.epoch_steps > (std::uint64_t{1} << 30) / cfg.batch)
        throw input_error(fmt::format("--epoch-steps {}: --epoch-steps * --batch must be at most "
                                      "2^30 records per rank per epoch",
                                      cfg.epoch_steps));
    if (cfg.mean_cost_epoch && cfg.epoch_steps == 0)
        throw input_error("--mean-cost epoch: the mean of each epoch's costs needs epochs; give "
                          "--epoch-steps N > 0 (the bcl policies then start an epoch every N "
                          "steps)");
    if (cfg.epoch_start != epoch_boundary::carry && cfg.epoch_start != epoch_boundary::fresh)
        throw input_error("--epoch-start: no such epoch start");
    if (cfg.epoch_start == epoch_boundary::fresh && cfg.epoch_steps == 0)
        throw input_error("--epoch-start fresh: a fresh balancer every epoch needs epochs; give "
                          "--epoch-steps N > 0");
    if (cfg.mean_cost_epoch && (cfg.mean_cost_exact || cfg.mean_cost))
        throw input_error("--mean-cost: epoch is one choice, not to be combined with exact or a "
                          "cost");
    if (cfg.calibrate && cfg.cost.a == 0.0 && cfg.cost.b == 0.0 && cfg.cost.c == 0.0)
        throw input_error(fmt::format("--calibrate: the prior --cost {} is 0 for every record; "
                                      "calibration rescales it, so it must cost something",
                                      describe(cfg.cost)));
    bcl::options opt{.batch_size = cfg.batch, .lookahead = cfg.lookahead};
    opt.cap = bcl_cap(cfg.cap, cfg.cap_action, cfg.cost); // throws for a cap that costs nothing
    opt.memory_budget = cfg.memory_budget;
    opt.buffer_windows = cfg.buffer_windows;
    opt.max_age = cfg.max_age;
    validate_options(opt);
    validate_tokens(cfg);
    for (const std::string& name : cfg.policies)
        if (!cfg.tokens.enabled() && !find_policy(name))
            throw input_error(fmt::format("--policy: unknown policy '{}' (expected some of {})",
                                          name, policy_names()));
}

/// The names of the policies a run asks for, in the order asked and each once, in either mode.
[[nodiscard]] inline std::vector<std::string> requested_policy_names(const sim_config& cfg) {
    if (cfg.tokens.enabled()) return requested_token_policies(cfg);
    std::vector<std::string> names;
    for (const policy_entry* e : requested_policies(cfg)) names.emplace_back(e->name);
    return names;
}

/// Micro-batch mode's part of simulate(): global_fixed's B resolved into `out`, then every
/// requested policy run on a fresh source from `fresh(observer)` (a source and the context that
/// reads it); none always runs, as the reference of speedup_vs_none. A peer whose own code raises
/// on these records is skipped, with its reason.
template <class Fresh>
void simulate_tokens(const sim_config& cfg, sim_result& out, Fresh&& fresh,
                     const emit_observer& observer) {
    out.fixed_batch = cfg.tokens.fixed_batch > 0
                          ? cfg.tokens.fixed_batch
                          : fixed_batch_for(*cfg.tokens.max_tokens, out.mean_length);
    const auto run_one = [&](const token_policy_entry& e, const emit_observer& watch) {
        auto [source, ctx] = fresh(watch);
        ctx.tokens.fixed_batch = out.fixed_batch;
        const token_run run = run_token_policy(e, ctx, cfg.steps);
        policy_result res;
        res.name = e.name;
        res.tokens = run.metrics;
        res.tokens->records = run.extras.records;
        res.extras.max_delay_batches = run.extras.max_delay_steps;
        res.extras.note = run.extras.note;
        res.seconds = run.seconds;
        return res;
    };
    const std::vector<std::string> wanted = requested_token_policies(cfg);
    const bool none_wanted = std::find(wanted.begin(), wanted.end(), "none") != wanted.end();
    const policy_result none =
        run_one(*find_token_policy("none"), none_wanted ? observer : emit_observer{});
    for (const std::string& name : wanted) {
        try {
            policy_result res = name == "none" ? none : run_one(*find_token_policy(name), observer);
            res.speedup_vs_none = speedup(res.tokens->efficiency, none.tokens->efficiency);
            out.policies.push_back(std::move(res));
        } catch (const peer_refuses& e) {
            out.skipped.push_back({name, fmt::format("{} skipped: {}", name, e.what())});
        }
    }
}

/// Runs every requested policy (none is always simulated: the others are measured against it).
/// The source factory may be given for hand-made streams; otherwise it follows cfg.dist.
/// Throws input_error for bad input.
[[nodiscard]] inline sim_result simulate(const sim_config& cfg, source_factory make_source = {},
                                         const emit_observer& observer = {}) {
    validate(cfg);
    sim_result out;
    if (!make_source) {
        if (const auto* file = std::get_if<file_spec>(&cfg.dist)) {
            auto lengths = std::make_shared<const std::vector<double>>(load_lengths(file->path));
            check_oversized(cfg.tokens, *lengths);
            out.prior = resolve_cap_prior(cfg.cap_prior, cfg.cap, cfg.cost, lengths.get());
            out.mean_cost = resolve_mean_cost(cfg, *lengths);
            out.dataset_records = lengths->size();
            out.p99_length = nearest_rank(*lengths, 0.99);
            out.mean_length = mean_of(*lengths);
            out.max_length = lengths->empty() ? 0.0 : *std::ranges::max_element(*lengths);
            const std::size_t per_rank = (lengths->size() + cfg.ranks - 1) / cfg.ranks;
            // Enough cache slots for every epoch one K-step window touches, with room to spare.
            const std::size_t slots = 2 * (cfg.lookahead * cfg.batch / per_rank) + 4;
            make_source = [lengths, ranks = cfg.ranks, seed = cfg.seed, slots] {
                return std::make_unique<file_source>(lengths, ranks, seed, slots);
            };
        } else {
            // A fixed pilot sample (independent of the seed) stands in for the p99.
            constexpr std::size_t pilot = 1 << 16;
            std::vector<double> sample_lengths(pilot);
            const std::uint64_t key = stream_key(0, domain::pilot, 0);
            for (std::size_t i = 0; i < pilot; ++i)
                sample_lengths[i] = draw_length(cfg.dist, key, i);
            out.mean_length = mean_of(sample_lengths);
            out.max_length = *std::ranges::max_element(sample_lengths);
            out.prior = resolve_cap_prior(cfg.cap_prior, cfg.cap, cfg.cost, &sample_lengths);
            out.mean_cost = resolve_mean_cost(cfg, sample_lengths);
            out.p99_length = nearest_rank(std::move(sample_lengths), 0.99);
            make_source = [dist = cfg.dist, ranks = cfg.ranks, seed = cfg.seed] {
                return std::make_unique<synthetic_source>(dist, ranks, seed);
            };
        }
    } else {
        out.prior = resolve_cap_prior(cfg.cap_prior, cfg.cap, cfg.cost, nullptr);
        if (cfg.mean_cost_exact)
            throw input_error("--mean-cost exact: no workload lengths to take the mean of");
        out.mean_cost = cfg.mean_cost;
    }
    out.bin_tokens = cfg.bin_tokens > 0.0 ? cfg.bin_tokens : context_length(out.max_length);
    if (!(out.bin_tokens > 0.0)) out.bin_tokens = 1.0; // all lengths 0: any capacity will do
    out.cap = bcl_cap(cfg.cap, cfg.cap_action, cfg.cost);

    // The context of one policy's run, reading `source` and reporting to `watch`.
    const auto context = [&](record_source* source, const emit_observer& watch) {
        sim_context ctx;
        static_cast<run_settings&>(ctx) = cfg; // the settings every policy shares, given once
        ctx.source = source;
        ctx.bin_tokens = out.bin_tokens;
        ctx.observer = watch;
        ctx.cap = out.cap;
        if (out.prior) ctx.cap_prior = out.prior->cost;
        ctx.mean_cost = out.mean_cost;
        ctx.truth = cfg.truth();
        return ctx;
    };
    if (cfg.tokens.enabled()) {
        simulate_tokens(
            cfg, out,
            [&](const emit_observer& watch) {
                auto source = std::shared_ptr<record_source>(make_source());
                sim_context ctx = context(source.get(), watch);
                return std::pair{std::move(source), std::move(ctx)};
            },
            observer);
        return out;
    }
    const std::vector<const policy_entry*> wanted = requested_policies(cfg);
    const auto run_one = [&](const policy_entry& e) {
        std::unique_ptr<record_source> source = make_source();
        return run_policy(e, context(source.get(), observer), cfg.steps);
    };

    const policy_entry* none_entry = find_policy("none");
    const bool none_wanted = std::find(wanted.begin(), wanted.end(), none_entry) != wanted.end();
    // The reference run is silent: the observer sees only the policies that were asked for.
    const policy_result none = none_wanted ? run_one(*none_entry) : [&] {
        std::unique_ptr<record_source> source = make_source();
        return run_policy(*none_entry, context(source.get(), {}), cfg.steps);
    }();

    for (const policy_entry* e : wanted) {
        if (std::optional<std::string> reason = e->skip(cfg)) {
            out.skipped.push_back({std::string(e->name), std::move(*reason)});
            continue;
        }
        policy_result res = e == none_entry ? none : run_one(*e);
        relate_to_none(res, none);
        out.policies.push_back(std::move(res));
    }
    return out;
}

} // namespace bcl_sim
