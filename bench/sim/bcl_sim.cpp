// bcl-sim: the multi-rank simulator. Shows, on a length distribution (synthetic or a file of real
// lengths), how much of the idle time across R synchronous ranks bcl removes compared with the
// batching policies in use today. The engine is simulator.hpp; this file is flags and output.
//
//   bcl-sim --dist file:bench/workloads/sharegpt_8k_filtered_llama2_total_tokens.txt
//           --ranks 8 --batch 16 --lookahead 8 --steps 400
//
// Three modes, chosen once from the flags: fixed-size batches (simulate.hpp, report.hpp); with
// --max-tokens, micro-batch mode (token_simulate.hpp, token_report.hpp); with --stages, stage
// mode (stage_simulate.hpp, stage_report.hpp).
//
// Exit codes: 0 success, 2 bad input (flags, distribution, cost model, workload file) or a
// bcl::error from a balancer (a record or a round that does not fit --memory-budget), 1 other.

#include "cli.hpp"
#include "report.hpp"
#include "simulator.hpp"
#include "stage_report.hpp"
#include "token_report.hpp"

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace {

using bcl_sim::sim_config;
using bcl_sim::report::cli_options;

constexpr std::string_view program = "bcl-sim";

// Stage mode's text lengths unless --dist is given: the bundled ShareGPT workload, as
// bench/python/bench_stages.py reads it. The build gives the source tree's path.
#ifndef BCL_SIM_WORKLOADS
#define BCL_SIM_WORKLOADS "bench/workloads"
#endif
constexpr std::string_view stage_default_dist =
    "file:" BCL_SIM_WORKLOADS "/sharegpt_8k_filtered_llama2_total_tokens.txt";

/// Stage mode's flags as given, before they become cfg.stages.
struct stage_flags {
    bool stages = false;
    std::string sync;
    std::string shape;
    std::size_t micro_steps = 0;
    std::string mix;
};

/// Micro-batch mode's flags as given, before they become cfg.tokens: a count given is set even
/// when 0, so that validate_tokens() can refuse it.
struct token_flags {
    std::uint64_t max_tokens = 0;
    std::size_t step_records = 0;
    std::size_t micro_batches = 0;
    std::string oversized = "error";
};

// The workload, the ranks and steps, the policies and the output format.
void add_run_flags(CLI::App& app, cli_options& opt) {
    sim_config& cfg = opt.cfg;
    bcl_cli::add_workload_flags(app, cfg.dist_text, opt.cost_text);
    bcl_cli::add_count(app, "--ranks", cfg.ranks, "R, data-parallel ranks", std::size_t{1} << 20);
    bcl_cli::add_batch_flags(app, cfg.batch, cfg.lookahead);
    bcl_cli::add_count(app, "--steps", cfg.steps, "steps to simulate", bcl_cli::max_steps);
    bcl_cli::add_seed_flag(app, cfg.seed);
    app.add_option("--policy", opt.policy_text,
                   "comma list of policies (default: all but sliding_true, which runs only when "
                   "named): " +
                       bcl_sim::policy_names() +
                       "; with --max-tokens (all by default): " + bcl_sim::token_policy_names() +
                       "; with --stages (all by default): " + bcl_sim::stage_policy_names() +
                       "; with --stages --shape local (all by default): " +
                       bcl_sim::local_stage_policy_names());
    bcl_cli::add_format_flag(app, opt.format, {"table", "json", "csv"});
    app.add_option(
           "--bin-tokens", cfg.bin_tokens,
           "mffd bin capacity in tokens (default 0: the context length, the smallest power of two "
           "that holds the longest record)")
        ->capture_default_str();
}

// The cap and its prior, how batches are costed, the mean cost, epochs and the emission order.
void add_cap_and_epoch_flags(CLI::App& app, cli_options& opt) {
    sim_config& cfg = opt.cfg;
    app.add_option("--cap", opt.cap_text,
                   "outlier cap for every policy: none | p<percent> (p99, p99.5: the streaming "
                   "quantile of each rank's costs) | a length in tokens (e.g. 32768)")
        ->capture_default_str();
    bcl_cli::add_choice(app, "--cap-action", opt.cap_action_text,
                        "clip: bcl balances on the capped estimate, records untouched (baselines "
                        "unaffected); truncate: records above the cap are cut to it, for every "
                        "policy",
                        bcl_cli::choices_of<bcl::cap_action>());
    app.add_option("--cap-prior", opt.cap_prior_text,
                   "the cap a quantile --cap uses until its warm-up ends: none (no cap until "
                   "then) | exact (the exact quantile of the workload's costs) | a length in "
                   "tokens (e.g. 8192)")
        ->capture_default_str();
    bcl_cli::add_choice(app, "--batching", opt.batching_text,
                        "what a rank spends on a batch, for every policy: packed (the sum of its "
                        "records' costs) | padded (B times its costliest record's; mffd's bins "
                        "stay packed)",
                        bcl_cli::choices_of<bcl::batch_cost>());
    app.add_option("--mean-cost", opt.mean_cost_text,
                   "the mean cost per record the bcl policies aim their batches at: running (each "
                   "rank's own running mean, bcl::options::mean_cost 0) | exact (the workload's "
                   "mean cost, capped as --cap caps it, which a loader of a map-style dataset "
                   "knows) | epoch (with "
                   "--epoch-steps: each epoch's balancer gets the mean of its own epoch's costs, "
                   "capped as --cap caps them, bcl::stream_mean_cost, which a sampler that draws "
                   "its epoch up front knows and passes) | a cost")
        ->capture_default_str();
    bcl_cli::add_count(app, "--epoch-steps", cfg.epoch_steps,
                       "N > 0: the bcl policies (tumbling, sliding, sliding_true, calibrated) "
                       "start an epoch on each rank every N steps, as the samplers do: the "
                       "rank's balancer takes exactly that epoch's N*B records of its stream, "
                       "then finish(), and drains them. 0: one balancer per rank for the whole "
                       "run, never drained. The other policies run as without epochs: they work "
                       "within a step, a few steps, or the file's own epochs, so leaving their "
                       "stream uncut flatters them, never bcl",
                       bcl_cli::max_steps);
    bcl_cli::add_choice(app, "--epoch-start", opt.epoch_start_text,
                        "with --epoch-steps, what each epoch's balancer is: carry (the rank's "
                        "drained balancer goes on, bcl::balancer::next_epoch, keeping its cap, "
                        "heavy slots, calibration and running mean, as the samplers do) | fresh "
                        "(a new balancer every epoch, which learns all of it again)",
                        {"carry", "fresh"});
    bcl_cli::add_choice(app, "--emission", opt.emission_text,
                        "order in which the bcl policies emit a round's batches",
                        bcl_cli::choices_of<bcl::emission_order>());
}

// The sliding buffer, the memory budget, the trace, and the true cost and its calibration.
void add_cost_flags(CLI::App& app, cli_options& opt) {
    sim_config& cfg = opt.cfg;
    bcl_cli::add_count(app, "--buffer-windows", cfg.buffer_windows,
                       "sliding: the buffer holds this many windows of K*B records per rank",
                       std::size_t{1} << 20);
    bcl_cli::add_count(app, "--max-age", cfg.max_age,
                       "sliding: a record leaves within this many rounds of entering the buffer, "
                       "so at most (max_age + 1) * K - 1 batches late",
                       std::size_t{1} << 20);
    app.add_option("--memory-budget", cfg.memory_budget,
                   "per-batch budget on the sum of lengths (tokens) that the bcl policies must "
                   "meet; 0 for none. Every policy reports over_budget_batches against it")
        ->capture_default_str();
    app.add_option("--trace", opt.trace,
                   "write per-step max-over-ranks costs per policy to this CSV (for "
                   "scripts/plot_sim.py)");
    app.add_option("--true-cost", opt.true_cost_text,
                   "what a record of length L truly costs the ranks, affine:a=..,b=..,c=.. as "
                   "--cost takes it (default: the --cost model). Every metric is computed on it; "
                   "every policy still estimates with --cost");
    app.add_option("--drift", opt.drift_text,
                   "STEP:affine:a=..,b=..,c=..: the true cost becomes this model from step STEP "
                   "on (1 to --steps - 1); each step's metrics use the model in force");
    app.add_flag("--calibrate", cfg.calibrate,
                 "tumbling and sliding start from --cost as a prior and refit a + b*L + c*L^2 "
                 "online (bcl::calibrated_affine_quadratic) from each batch's time: its true "
                 "cost times exp(N(0, --time-noise)), drawn from a stream of its own per rank. "
                 "Their rows report fitted_cost (mean over ranks) and calibration_error (relative "
                 "RMS error of the fit's batch costs against the true ones over the last half of "
                 "the steps). The policy sliding_true (sliding estimating with the true cost in "
                 "force, never calibrated) is the reference to name next to them");
    app.add_option("--time-noise", cfg.time_noise,
                   "sigma of the lognormal noise of the observed batch times (with --calibrate)")
        ->capture_default_str();
    bcl_cli::add_count(app, "--window", cfg.window,
                       "JSON only: each policy's efficiency (and calibration_error) over blocks "
                       "of this many steps, in \"windows\"; 0 for none",
                       bcl_cli::max_steps);
}

// Micro-batch mode: --max-tokens and the flags that go with it.
void add_token_flags(CLI::App& app, cli_options& opt, token_flags& t) {
    bcl_cli::add_count(app, "--max-tokens", t.max_tokens,
                       "T: micro-batch mode. Every rank cuts its share of a step into "
                       "micro-batches of at most T tokens, as many on every rank; the policies "
                       "are then " +
                           bcl_sim::token_policy_names() + " (docs/tokens.md)",
                       bcl_sim::max_token_budget);
    bcl_cli::add_count(app, "--step-records", t.step_records,
                       "with --max-tokens: held batches, every step each rank draws N records "
                       "(the step's global batch is all R*N); --lookahead K pools K of them in one "
                       "bcl plan (default 1 here)",
                       bcl::max_plan_records);
    bcl_cli::add_count(app, "--micro-batches", t.micro_batches,
                       "with --max-tokens: a stream of steps, every step M micro-batches on every "
                       "rank; bcl plans windows of --lookahead K steps",
                       bcl::max_plan_records);
    bcl_cli::add_count(app, "--multiple-of", opt.cfg.tokens.multiple_of,
                       "with --max-tokens: every step's micro-batch count a multiple of m",
                       bcl::max_plan_records);
    bcl_cli::add_choice(app, "--oversized", t.oversized,
                        "with --max-tokens, a record above T: error (refuse it) | alone (a "
                        "micro-batch of its own, bcl::token_plan_options::oversized_alone)",
                        {"error", "alone"});
    app.add_option("--max-fill", opt.cfg.tokens.max_fill,
                   "with --micro-batches: the share of a window's R*K*M*T tokens global fills "
                   "(bcl::token_plan_options::max_fill, in (0, 1]); less leaves room for balance "
                   "at the price of micro-steps")
        ->capture_default_str();
}

// Stage mode: --stages and the flags that go with it.
void add_stage_flags(CLI::App& app, stage_flags& s) {
    app.add_flag("--stages", s.stages,
                 "stage mode: vision-language records (text and images) whose cost is a vision "
                 "encoder's and a language model's apart; the policies are then " +
                     bcl_sim::stage_policy_names() +
                     ". Text lengths from --dist (default the bundled ShareGPT workload)");
    app.add_option("--sync", s.sync,
                   "with --stages, how the ranks meet: stage (in every stage, FSDP/ZeRO-3: a "
                   "micro-step lasts the sum over stages of the slowest rank; default) | step "
                   "(once: the slowest rank's summed cost)");
    app.add_option("--shape", s.shape,
                   "with --stages: stream (default; windows of --lookahead K steps of B records "
                   "a rank) | held (held batches of R*B*M records, planned one at a time) | local "
                   "(each rank balances its own share of the stream alone, windows of K*B "
                   "records; the policies are then " +
                       bcl_sim::local_stage_policy_names() + ")");
    bcl_cli::add_count(app, "--micro-steps", s.micro_steps,
                       "with --stages --shape held: M, the micro-steps of a held batch (default 1)",
                       bcl::max_plan_records);
    app.add_option("--modality-mix", s.mix,
                   "with --stages, the shares of the records: text=..,image=..,multi=.. (text "
                   "only, one image, several images or a video; default "
                   "text=0.3,image=0.55,multi=0.15)");
}

// Stage mode's flags as given into cfg.stages: a flag given is set, so that each mode's checks
// can refuse it where it does not apply.
void resolve_stage_flags(const CLI::App& app, sim_config& cfg, const stage_flags& s) {
    bcl_sim::stage_settings& st = cfg.stages;
    st.enabled = s.stages;
    if (app.count("--sync") > 0) st.sync = bcl_sim::parse_sync(s.sync);
    if (app.count("--shape") > 0) st.shape = bcl_sim::parse_shape(s.shape);
    if (app.count("--micro-steps") > 0) st.micro_steps = s.micro_steps;
    if (app.count("--modality-mix") > 0) st.mix = bcl_sim::parse_mix(s.mix);
    st.lookahead_given = app.count("--lookahead") > 0;
    if (st.enabled && app.count("--dist") == 0) cfg.dist_text = std::string(stage_default_dist);
}

// The flags as given, parsed into the configuration; throws input_error for a bad value.
void resolve_flags(const CLI::App& app, cli_options& opt, const token_flags& t,
                   const stage_flags& stages) {
    sim_config& cfg = opt.cfg;
    resolve_stage_flags(app, cfg, stages);
    cfg.dist = bcl_sim::parse_dist(cfg.dist_text);
    cfg.cost = bcl_sim::parse_cost(opt.cost_text);
    if (!opt.true_cost_text.empty())
        cfg.true_cost = bcl_sim::parse_cost(opt.true_cost_text, "--true-cost");
    if (!opt.drift_text.empty()) cfg.drift = bcl_sim::parse_drift(opt.drift_text);
    cfg.cap = bcl_sim::parse_cap(opt.cap_text);
    cfg.cap_action = bcl_sim::parse_cap_action(opt.cap_action_text);
    cfg.cap_prior = bcl_sim::parse_cap_prior(opt.cap_prior_text);
    cfg.batching = bcl_sim::parse_batching(opt.batching_text);
    cfg.emission = bcl_sim::parse_emission(opt.emission_text);
    bcl_sim::parse_mean_cost(opt.mean_cost_text, cfg);
    cfg.epoch_start = bcl_sim::parse_epoch_start(opt.epoch_start_text);
    if (!opt.policy_text.empty()) cfg.policies = bcl_cli::split_names(opt.policy_text, "--policy");
    if (app.count("--max-tokens") > 0) cfg.tokens.max_tokens = t.max_tokens;
    if (app.count("--step-records") > 0) cfg.tokens.step_records = t.step_records;
    if (app.count("--micro-batches") > 0) cfg.tokens.micro_batches = t.micro_batches;
    cfg.tokens.oversized_alone = t.oversized == "alone";
    if (cfg.tokens.enabled()) {
        // global_fixed's B, if given; held batches plan one at a time unless told otherwise.
        if (app.count("--batch") > 0) cfg.tokens.fixed_batch = cfg.batch;
        if (cfg.tokens.held() && app.count("--lookahead") == 0) cfg.lookahead = 1;
    }
}

/// Runs `names`, a mode's policies, one `simulate` call at a time, so that the progress line can
/// say which policy runs and how far it got. The result is what a single call with all of them
/// gives: every policy reads a fresh stream, and none, the reference every call runs, is the
/// same each time.
template <class Result>
Result simulate_each(const sim_config& cfg, const std::vector<std::string>& names,
                     Result (*simulate)(const sim_config&, bcl_sim::source_factory,
                                        const bcl_sim::emit_observer&),
                     bcl_cli::progress& bar) {
    const bcl_sim::emit_observer observer =
        bar.enabled() ? bcl_sim::emit_observer([&bar](std::size_t step, std::size_t,
                                                      std::uint64_t) { bar.step(step + 1); })
                      : bcl_sim::emit_observer{};
    Result out;
    for (std::size_t i = 0; i < names.size(); ++i) {
        sim_config one = cfg;
        one.policies = {names[i]};
        bar.begin(fmt::format("bcl-sim: policy {} ({}/{})", names[i], i + 1, names.size()),
                  cfg.steps);
        Result res = simulate(one, {}, observer);
        if (i == 0) {
            out = std::move(res);
            continue;
        }
        std::move(res.policies.begin(), res.policies.end(), std::back_inserter(out.policies));
        std::move(res.skipped.begin(), res.skipped.end(), std::back_inserter(out.skipped));
    }
    bar.clear();
    return out;
}

/// Writes a run's result in the format asked for, and its trace if asked.
template <class Result>
void print_run(const cli_options& opt, const Result& res) {
    if (!opt.trace.empty()) bcl_sim::report::write_trace(opt.trace, res);
    if (opt.format == "json")
        bcl_sim::report::print_json(opt, res);
    else if (opt.format == "csv")
        bcl_sim::report::print_csv(res);
    else
        bcl_sim::report::print_table(opt, res);
}

// Runs the configuration in its mode, each mode checking every flag before its first policy
// runs, and prints the result.
void run(const cli_options& opt, bcl_cli::progress& bar) {
    const sim_config& cfg = opt.cfg;
    if (cfg.stages.enabled) {
        bcl_sim::validate_stages(cfg);
        if (!opt.trace.empty()) throw bcl_sim::input_error("--trace does not apply with --stages");
        const std::size_t unit = cfg.stages.held() ? 1 : cfg.lookahead;
        bar.begin("bcl-sim: stages, every policy", (cfg.steps + unit - 1) / unit);
        const bcl_sim::stage_sim_result res =
            bcl_sim::simulate_stages(cfg, {}, [&bar](std::size_t units) { bar.step(units); });
        bar.clear();
        if (opt.format == "json")
            bcl_sim::report::print_json(opt, res);
        else if (opt.format == "csv")
            bcl_sim::report::print_csv(opt, res);
        else
            bcl_sim::report::print_table(opt, res);
    } else if (cfg.tokens.enabled()) {
        bcl_sim::validate_tokens(cfg);
        print_run(opt, simulate_each(cfg, bcl_sim::requested_token_policies(cfg),
                                     &bcl_sim::simulate_tokens, bar));
    } else {
        bcl_sim::validate(cfg);
        print_run(
            opt, simulate_each(cfg, bcl_sim::requested_policy_names(cfg), &bcl_sim::simulate, bar));
    }
}

} // namespace

int main(int argc, char** argv) {
    cli_options opt;
    CLI::App app{"bcl-sim: simulate R synchronous data-parallel ranks and compare batching "
                 "policies (efficiency = mean rank step cost / mean slowest-rank step cost)"};
    // A flag given twice takes its last value, so a script can put defaults before the user's
    // flags.
    app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
    token_flags tokens;
    stage_flags stages;
    add_run_flags(app, opt);
    add_cap_and_epoch_flags(app, opt);
    add_cost_flags(app, opt);
    add_token_flags(app, opt, tokens);
    add_stage_flags(app, stages);
    bcl_cli::add_progress_flag(app, opt.progress);

    const bcl_cli::parsed command = bcl_cli::parse(app, argc, argv, program);
    if (command.what == bcl_cli::request::help) {
        fmt::print("{}", command.message);
        return 0;
    }
    if (command.what == bcl_cli::request::bad_input)
        return bcl_cli::report(program, {bcl_cli::exit_bad_input, command.message});

    bcl_cli::progress bar(opt.progress);
    const auto failed = bcl_cli::catch_failure([&] {
        resolve_flags(app, opt, tokens, stages);
        run(opt, bar);
    });
    if (failed) {
        bar.clear();
        return bcl_cli::report(program, *failed);
    }
    return 0;
}
