#pragma once
// A run of stage mode (--stages): its checks, its records, every policy's plan of each unit (a
// held batch, or a stream's window) on the same records, or every rank's own balancer on its
// share of them (--shape local), and the metrics. Fixed-size batches are simulate.hpp,
// micro-batch mode token_simulate.hpp.

#include "input.hpp"
#include "sim_config.hpp"
#include "stage_local.hpp"
#include "stage_metrics.hpp"
#include "stage_policies.hpp"
#include "stage_settings.hpp"
#include "stage_workload.hpp"
#include "workload.hpp"

#include <bcl/error.hpp>
#include <bcl/global_plan.hpp>
#include <bcl/options.hpp>
#include <bcl/validate.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <variant>
#include <vector>

namespace bcl_sim {

/// One policy's outcome in stage mode.
struct stage_policy_result {
    std::string name;
    stage_metrics metrics;
    double speedup_vs_none = 0.0; ///< efficiency (under the run's sync) over none's
    /// The most micro-steps a record was trained after the one it arrived in (its position /
    /// (R*B); in a rank-local stream, its index in the rank's stream / B); earlier counts as 0.
    std::uint64_t max_delay_steps = 0;
    std::optional<std::uint64_t> steps_restaged; ///< `stages` only
    double seconds = 0.0;                        ///< planning time
};

/// The outcome of a run of stage mode, with what it resolved.
struct stage_sim_result {
    std::optional<std::uint64_t> dataset_records; ///< lines in the text workload file
    double mean_text = 0.0;                       ///< mean text length of the run's records
    double mean_patches = 0.0;                    ///< mean patches of the run's records
    std::vector<stage_policy_result> policies;
};

/// Called for every record a policy places: the policy, the run's micro-step, the rank, and the
/// record's position in the order records arrive. Tests use it to check that every policy places
/// every record exactly once.
using stage_observer = std::function<void(const std::string& policy, std::uint64_t micro_step,
                                          std::size_t rank, std::uint64_t position)>;

/// The efficiency a run reports (`efficiency`): under the run's --sync.
[[nodiscard]] inline double sync_efficiency(const stage_metrics& m, stage_sync sync) noexcept {
    return sync == stage_sync::stage ? m.stage_sync() : m.step_sync();
}
[[nodiscard]] inline double sync_bound(const stage_metrics& m, stage_sync sync) noexcept {
    return sync == stage_sync::stage ? m.stage_sync_bound() : m.step_sync_bound();
}

namespace detail {

// What stage mode does not model: refused rather than ignored.
inline void refuse_non_stage_flags(const sim_config& cfg) {
    const cost_model cost = default_cost();
    const struct {
        bool given;
        const char* flag;
    } not_here[] = {
        {cfg.tokens.enabled(), "--max-tokens (micro-batch mode is another mode)"},
        {cfg.cost.a != cost.a || cfg.cost.b != cost.b || cfg.cost.c != cost.c,
         "--cost (a record's stage costs are stage mode's own: docs/simulator.md)"},
        {cfg.cap.kind != bcl::cap_kind::none, "--cap"},
        {cfg.cap_prior.what != cap_prior_spec::kind::none, "--cap-prior"},
        {cfg.memory_budget > 0.0, "--memory-budget"},
        {cfg.batching != batch_cost::packed, "--batching padded"},
        {cfg.emission != emission_order::costliest_first, "--emission"},
        {cfg.epoch_steps > 0, "--epoch-steps"},
        {cfg.calibrate, "--calibrate"},
        {cfg.true_cost.has_value(), "--true-cost"},
        {cfg.drift.has_value(), "--drift"},
        {cfg.window > 0, "--window"},
        {cfg.mean_cost.has_value() || cfg.mean_cost_exact || cfg.mean_cost_epoch, "--mean-cost"},
        {cfg.bin_tokens > 0.0, "--bin-tokens"},
        {cfg.buffer_windows != bcl::options{}.buffer_windows ||
             cfg.max_age != bcl::options{}.max_age,
         "--buffer-windows and --max-age"},
    };
    for (const auto& f : not_here)
        if (f.given) throw input_error(fmt::format("{} does not apply with --stages", f.flag));
}

// The shape: counts of at least 1, flags that fit it, and a unit a plan can hold.
inline void validate_stage_shape(const sim_config& cfg) {
    const stage_settings& s = cfg.stages;
    require_at_least_one(cfg.ranks, "--ranks");
    require_at_least_one(cfg.batch, "--batch");
    require_at_least_one(cfg.lookahead, "--lookahead");
    require_at_least_one(cfg.steps, "--steps");
    if (s.micro_steps && *s.micro_steps == 0) throw input_error("--micro-steps must be at least 1");
    if (s.held() && s.lookahead_given)
        throw input_error("--lookahead is a flag of --shape stream: held batches are planned one "
                          "at a time (give --micro-steps M for R*B*M records a held batch)");
    if (!s.held() && s.micro_steps)
        throw input_error("--micro-steps is a flag of --shape held (a stream plans windows of "
                          "--lookahead K steps)");
    if (s.local()) {
        // Each rank's balancers: what bcl::validate accepts of B and K, under both policies.
        if (cfg.ranks > (std::size_t{1} << 20))
            throw input_error("--ranks is above the 2^20 ranks stage mode simulates");
        for (const bcl::lookahead_policy policy :
             {bcl::lookahead_policy::tumbling, bcl::lookahead_policy::sliding}) {
            bcl::options opt{.batch_size = cfg.batch, .lookahead = cfg.lookahead};
            opt.policy = policy;
            try {
                bcl::validate(opt);
            } catch (const bcl::error& e) {
                throw input_error(fmt::format(
                    "--batch and --lookahead do not fit a rank's balancer: {}", e.what()));
            }
        }
        return;
    }
    const std::uint64_t unit = std::uint64_t{cfg.ranks} * cfg.batch *
                               (s.held() ? s.micro_steps_or_default() : cfg.lookahead);
    if (cfg.ranks > (std::size_t{1} << 20) || cfg.batch > bcl::max_plan_records ||
        unit > bcl::max_plan_records)
        throw input_error(fmt::format("--ranks * --batch * {} is above the 2^30 records a plan may "
                                      "hold",
                                      s.held() ? "--micro-steps" : "--lookahead"));
}

} // namespace detail

/// Checks every input of a run of stage mode (cfg.stages.enabled); throws input_error naming the
/// first bad one: a count of 0, a flag of another mode or shape, an unknown policy (the
/// rank-local shape has its own: local_stage_policy_table()).
inline void validate_stages(const sim_config& cfg) {
    if (!cfg.stages.enabled) throw std::invalid_argument("bcl_sim::validate_stages: no --stages");
    detail::refuse_non_stage_flags(cfg);
    detail::validate_stage_shape(cfg);
    const bool local = cfg.stages.local();
    for (const std::string& name : cfg.policies)
        if (local ? !find_local_stage_policy(name) : !find_stage_policy(name))
            throw input_error(
                fmt::format("--policy: '{}' is not a policy of --stages{} (expected "
                            "some of {})",
                            name, local ? " --shape local" : "",
                            local ? local_stage_policy_names() : stage_policy_names()));
}

/// The records of a run: text lengths from cfg.dist (a file's lengths drawn uniformly, or a
/// synthetic distribution). Throws input_error for a file it cannot read.
[[nodiscard]] inline stage_source make_stage_source(const sim_config& cfg,
                                                    std::optional<std::uint64_t>* lines = nullptr) {
    const modality_mix mix = cfg.stages.mix_or_default();
    if (const auto* file = std::get_if<file_spec>(&cfg.dist)) {
        auto lengths = std::make_shared<const std::vector<double>>(load_lengths(file->path));
        if (lines) *lines = lengths->size();
        return {std::move(lengths), mix, cfg.seed};
    }
    return {cfg.dist, mix, cfg.seed};
}

/// The policies a stage-mode run asks for, in the order asked and each once; without --policy,
/// every one of its shape.
[[nodiscard]] inline std::vector<std::string> requested_stage_policies(const sim_config& cfg) {
    std::vector<std::string> names;
    if (cfg.policies.empty() && cfg.stages.local())
        for (const local_stage_policy_entry& e : local_stage_policy_table())
            names.push_back(e.name);
    else if (cfg.policies.empty())
        for (const stage_policy_entry& e : stage_policy_table()) names.push_back(e.name);
    for (const std::string& name : cfg.policies)
        if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
    return names;
}

namespace detail {

// One policy's run in stage mode: its metrics and what the result reports beside them.
struct stage_run {
    stage_metrics_accumulator acc;
    std::uint64_t delay = 0;
    double seconds = 0.0;
    std::optional<std::uint64_t> restaged;
};

// What the runs of a stage-mode run share: the records, the policies (none first), the hooks,
// and the sums of the records' text and patches.
struct stage_run_context {
    const sim_config& cfg;
    const stage_source& source;
    const std::vector<std::string>& names;
    const stage_observer& observer;
    const std::function<void(std::size_t)>& progress;
    double text_sum = 0.0;
    double patch_sum = 0.0;
};

// Held batches and streams: unit after unit, every policy plans the same records.
[[nodiscard]] inline std::vector<stage_run> run_planned_stages(stage_run_context& run) {
    const sim_config& cfg = run.cfg;
    const bool held = cfg.stages.held();
    const std::size_t r = cfg.ranks;
    const std::size_t b = cfg.batch;
    const std::size_t unit_steps = held ? cfg.stages.micro_steps_or_default() : cfg.lookahead;
    std::vector<std::unique_ptr<stage_runner>> runners;
    std::vector<stage_run> runs;
    for (const std::string& name : run.names) {
        runners.push_back(find_stage_policy(name)->make());
        runs.push_back({stage_metrics_accumulator(r, b), 0, 0.0, {}});
    }

    // Held: --steps held batches of M micro-steps; a stream: --steps steps in windows of K.
    const std::uint64_t total_steps = held ? std::uint64_t{cfg.steps} * unit_steps : cfg.steps;
    std::vector<stage_record> records;
    std::vector<bcl::plan_slot> slots;
    std::size_t done = 0;
    for (std::uint64_t first = 0; first < total_steps; first += unit_steps) {
        const auto steps =
            static_cast<std::size_t>(std::min<std::uint64_t>(unit_steps, total_steps - first));
        const std::uint64_t position0 = first * r * b;
        records.resize(steps * r * b);
        for (std::size_t i = 0; i < records.size(); ++i) {
            records[i] = run.source.at(position0 + i);
            run.text_sum += records[i].text;
            run.patch_sum += records[i].patches;
        }
        const stage_unit unit{
            records, r,    steps,
            b,       held, stream_key(cfg.seed, domain::stages, 2 + first / unit_steps)};
        slots.resize(records.size());
        for (std::size_t p = 0; p < runs.size(); ++p) {
            const auto start = std::chrono::steady_clock::now();
            runners[p]->plan(unit, slots);
            runs[p].seconds +=
                std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
            runs[p].acc.add_unit(records, slots, steps, run.names[p]);
            for (std::size_t i = 0; i < slots.size(); ++i) {
                const std::uint64_t arrived = i / (r * b);
                if (slots[i].step > arrived)
                    runs[p].delay = std::max<std::uint64_t>(runs[p].delay, slots[i].step - arrived);
                if (run.observer)
                    run.observer(run.names[p], first + slots[i].step, slots[i].rank, position0 + i);
            }
        }
        if (run.progress) run.progress(++done);
    }
    for (std::size_t p = 0; p < runs.size(); ++p) runs[p].restaged = runners[p]->steps_restaged();
    return runs;
}

// Rank-local streams: every policy runs an instance on each rank, which pops the rank's batch of
// each step from its own share of the stream (local_stage_stream); step t of the run is every
// rank's t-th batch. The steps are measured K at a time. Every policy hands out the same
// records: each rank's --steps * B, once each.
[[nodiscard]] inline std::vector<stage_run> run_local_stages(stage_run_context& run) {
    const sim_config& cfg = run.cfg;
    const std::size_t r = cfg.ranks;
    const std::size_t b = cfg.batch;
    const local_stage_setup setup{
        {&run.source, r, std::uint64_t{cfg.steps} * b}, b, cfg.lookahead, cfg.seed};
    std::vector<std::unique_ptr<local_stage_runner>> runners;
    std::vector<stage_run> runs;
    for (const std::string& name : run.names) {
        runners.push_back(find_local_stage_policy(name)->make(setup));
        runs.push_back({stage_metrics_accumulator(r, b), 0, 0.0, {}});
    }

    std::vector<local_stage_record> popped;
    std::vector<stage_record> records;
    std::vector<bcl::plan_slot> slots;
    std::size_t done = 0;
    for (std::uint64_t first = 0; first < cfg.steps; first += cfg.lookahead) {
        const auto steps =
            static_cast<std::size_t>(std::min<std::uint64_t>(cfg.lookahead, cfg.steps - first));
        for (std::size_t p = 0; p < runs.size(); ++p) {
            records.clear();
            slots.clear();
            for (std::size_t t = 0; t < steps; ++t)
                for (std::size_t rank = 0; rank < r; ++rank) {
                    popped.clear();
                    const auto start = std::chrono::steady_clock::now();
                    runners[p]->pop(rank, popped);
                    runs[p].seconds +=
                        std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
                            .count();
                    const std::uint64_t step = first + t;
                    for (const local_stage_record& x : popped) {
                        if (x.position % r != rank)
                            throw std::logic_error(
                                fmt::format("policy {} gave rank {} record {}, of rank {}'s stream",
                                            run.names[p], rank, x.position, x.position % r));
                        const std::uint64_t arrived = x.position / r / b;
                        if (step > arrived)
                            runs[p].delay = std::max<std::uint64_t>(runs[p].delay, step - arrived);
                        records.push_back(x.record);
                        slots.push_back(
                            {static_cast<std::uint32_t>(t), static_cast<std::uint32_t>(rank)});
                        if (run.observer) run.observer(run.names[p], step, rank, x.position);
                        if (p == 0) {
                            run.text_sum += x.record.text;
                            run.patch_sum += x.record.patches;
                        }
                    }
                }
            runs[p].acc.add_unit(records, slots, steps, run.names[p]);
        }
        if (run.progress) run.progress(++done);
    }
    return runs;
}

} // namespace detail

/// Runs stage mode: unit after unit (a held batch of R*B*M records in M micro-steps, or a window
/// of K steps, the last window shorter if --steps is not a multiple of K), every policy plans the
/// same records, and each plan's micro-steps are measured (stage_metrics). With --shape local,
/// every rank runs its own instance of each policy on its share of the same records instead,
/// the steps measured K at a time. `none` always runs, as the reference of speedup_vs_none.
/// `observer` sees every record every policy places (none too, even when not asked for);
/// `progress` the units done. Throws input_error for bad input, std::logic_error for a plan that
/// breaks B records a rank (a bug).
[[nodiscard]] inline stage_sim_result
simulate_stages(const sim_config& cfg, const stage_observer& observer = {},
                const std::function<void(std::size_t)>& progress = {}) {
    validate_stages(cfg);
    stage_sim_result out;
    const stage_source source = make_stage_source(cfg, &out.dataset_records);
    std::vector<std::string> names = requested_stage_policies(cfg);
    if (std::find(names.begin(), names.end(), "none") == names.end())
        names.insert(names.begin(), "none");
    detail::stage_run_context run{cfg, source, names, observer, progress};
    const std::vector<detail::stage_run> runs =
        cfg.stages.local() ? detail::run_local_stages(run) : detail::run_planned_stages(run);

    const std::uint64_t total_steps =
        cfg.stages.held() ? std::uint64_t{cfg.steps} * cfg.stages.micro_steps_or_default()
                          : cfg.steps;
    const auto count = static_cast<double>(total_steps * cfg.ranks * cfg.batch);
    out.mean_text = run.text_sum / count;
    out.mean_patches = run.patch_sum / count;
    const stage_sync sync = cfg.stages.sync_or_default();
    const double none_efficiency = sync_efficiency(runs.front().acc.result(), sync);
    for (const std::string& name : requested_stage_policies(cfg)) {
        const std::size_t p =
            static_cast<std::size_t>(std::find(names.begin(), names.end(), name) - names.begin());
        stage_policy_result res;
        res.name = name;
        res.metrics = runs[p].acc.result();
        res.speedup_vs_none =
            none_efficiency > 0.0 ? sync_efficiency(res.metrics, sync) / none_efficiency : 0.0;
        res.max_delay_steps = runs[p].delay;
        res.steps_restaged = runs[p].restaged;
        res.seconds = runs[p].seconds;
        out.policies.push_back(std::move(res));
    }
    return out;
}

} // namespace bcl_sim
