#pragma once
// What bcl-sim prints for a run of stage mode (--stages): the table, the JSON and the CSV, from
// the run's result and the flags as given. The other modes' are report.hpp and token_report.hpp.

#include "json_output.hpp"
#include "report_common.hpp"
#include "stage_metrics.hpp"
#include "stage_simulate.hpp"
#include "stage_workload.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace bcl_sim::report {

/// A patch distribution as JSON.
inline nlohmann::ordered_json patches_json(const bcl_sim::patch_spec& p) {
    return {{"median", p.median}, {"sigma", p.sigma}, {"min", p.lo}, {"max", p.hi}};
}

/// Stage mode's settings, as the run resolved them.
inline nlohmann::ordered_json stages_json(const sim_config& cfg, const stage_sim_result& res) {
    const bcl_sim::stage_settings& s = cfg.stages;
    const bcl_sim::modality_mix mix = s.mix_or_default();
    return {{"sync", std::string(bcl_sim::describe(s.sync_or_default()))},
            {"shape", std::string(bcl_sim::describe(s.shape_or_default()))},
            {"micro_steps", s.held() ? nlohmann::ordered_json(s.micro_steps_or_default())
                                     : nlohmann::ordered_json(nullptr)},
            {"lookahead",
             s.held() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(cfg.lookahead)},
            {"mix", {{"text", mix.text}, {"image", mix.image}, {"multi", mix.multi}}},
            {"image_patches", patches_json(bcl_sim::one_image_patches)},
            {"multi_patches", patches_json(bcl_sim::several_images_patches)},
            {"vision_cost", "0.09 * (P + P^2 / 8192)"},
            {"language_cost", "T + T^2 / 24576, T = text + P / 4"},
            {"mean_text", res.mean_text},
            {"mean_patches", res.mean_patches}};
}

/// A stage figure for each stage, keyed by its name.
template <class Of>
nlohmann::ordered_json per_stage_json(const Of& of) {
    nlohmann::ordered_json out;
    for (std::size_t s = 0; s < bcl_sim::stage_count; ++s)
        out[std::string(bcl_sim::stage_names[s])] = of(s);
    return out;
}

/// The fields of a policy in stage mode, in the order JSON gives them.
inline nlohmann::ordered_json stage_policy_json(const stage_policy_result& p, stage_sync sync) {
    const bcl_sim::stage_metrics& m = p.metrics;
    return {{"policy", p.name},
            {"efficiency", sync_efficiency(m, sync)},
            {"bound", sync_bound(m, sync)},
            {"stage_sync_efficiency", m.stage_sync()},
            {"stage_sync_bound", m.stage_sync_bound()},
            {"step_sync_efficiency", m.step_sync()},
            {"step_sync_bound", m.step_sync_bound()},
            {"stage_efficiency", per_stage_json([&](std::size_t s) { return m.of_stage(s); })},
            {"stage_bound", per_stage_json([&](std::size_t s) { return m.stage_bound_of(s); })},
            {"speedup_vs_none", p.speedup_vs_none},
            {"max_delay_steps", p.max_delay_steps},
            {"steps_restaged", p.steps_restaged ? nlohmann::ordered_json(*p.steps_restaged)
                                                : nlohmann::ordered_json(nullptr)},
            {"micro_steps", m.micro_steps},
            {"records", m.records},
            {"seconds", p.seconds}};
}

inline void print_json(const cli_options& opt, const stage_sim_result& res) {
    const sim_config& cfg = opt.cfg;
    nlohmann::ordered_json out;
    nlohmann::ordered_json dist =
        bcl_sim::dist_json(cfg.dist_text, cfg.dist, res.dataset_records.value_or(0));
    out["config"] = {{"dist", dist},         {"ranks", cfg.ranks},
                     {"batch", cfg.batch},   {"steps", cfg.steps},
                     {"seed", cfg.seed},     {"policies", bcl_sim::requested_stage_policies(cfg)},
                     {"format", opt.format}, {"stages", stages_json(cfg, res)}};
    out["policies"] = nlohmann::ordered_json::array();
    for (const auto& p : res.policies)
        out["policies"].push_back(stage_policy_json(p, cfg.stages.sync_or_default()));
    out["skipped"] = nlohmann::ordered_json::array();
    fmt::print("{}\n", out.dump(2));
}

/// The CSV of stage mode: stage_policy_json's fields, a stage's as <field>_<stage>, null empty.
inline void print_csv(const cli_options& opt, const stage_sim_result& res) {
    bool header = false;
    for (const auto& p : res.policies) {
        std::vector<std::string> names;
        std::vector<std::string> values;
        const auto add = [&](std::string key, const nlohmann::ordered_json& value) {
            names.push_back(std::move(key));
            values.push_back(value.is_null()     ? std::string()
                             : value.is_string() ? value.get<std::string>()
                                                 : value.dump());
        };
        const nlohmann::ordered_json row = stage_policy_json(p, opt.cfg.stages.sync_or_default());
        for (const auto& [key, value] : row.items()) {
            if (value.is_object())
                for (const auto& [stage, figure] : value.items()) add(key + "_" + stage, figure);
            else
                add(key, value);
        }
        if (!header) fmt::print("{}\n", fmt::join(names, ","));
        header = true;
        fmt::print("{}\n", fmt::join(values, ","));
    }
}

/// The table of stage mode, with a legend of its columns.
inline void print_table(const cli_options& opt, const stage_sim_result& res) {
    const sim_config& cfg = opt.cfg;
    const bcl_sim::stage_settings& s = cfg.stages;
    const bcl_sim::modality_mix mix = s.mix_or_default();
    fmt::print("bcl-sim --stages  text lengths {}", bcl_sim::describe(cfg.dist));
    if (res.dataset_records) fmt::print(" ({} lengths)", *res.dataset_records);
    fmt::print(", mean text {:.0f}, mean patches {:.0f}\n", res.mean_text, res.mean_patches);
    fmt::print(
        "         records: {:g}% text only, {:g}% one image (patches lognormal, median 1000, "
        "sigma 0.8, in [64, 16384]), {:g}% several images or a video (median 4000, sigma "
        "0.9, in [256, 32768])\n",
        100 * mix.text, 100 * mix.image, 100 * mix.multi);
    fmt::print("         vision encoder 0.09*(P + P^2/8192); language model T + T^2/24576, T = "
               "text + P/4\n");
    if (s.held())
        fmt::print("         R={} ranks, held batches of R*B*M = {} records (B={}, M={} "
                   "micro-steps), {} held batches, seed {}\n",
                   cfg.ranks, cfg.ranks * cfg.batch * s.micro_steps_or_default(), cfg.batch,
                   s.micro_steps_or_default(), cfg.steps, cfg.seed);
    else if (s.local())
        fmt::print("         R={} ranks, each balancing its own stream alone (rank r reads the "
                   "records r, r+R, r+2R, ...), B={} records a rank a step, windows of K={} "
                   "batches, {} steps, seed {}\n",
                   cfg.ranks, cfg.batch, cfg.lookahead, cfg.steps, cfg.seed);
    else
        fmt::print("         R={} ranks, a stream of steps of B={} records a rank, windows of K={} "
                   "steps, {} steps, seed {}\n",
                   cfg.ranks, cfg.batch, cfg.lookahead, cfg.steps, cfg.seed);
    fmt::print("         --sync {}: efficiency is the {} column\n",
               bcl_sim::describe(s.sync_or_default()),
               s.sync_or_default() == bcl_sim::stage_sync::stage ? "per_stage" : "per_step");
    std::size_t width = 10; // the policy column: its longest name and a space
    for (const auto& p : res.policies) width = std::max(width, p.name.size() + 1);
    fmt::print("\n{:<{}}{:>11}{:>8}{:>9}{:>8}{:>10}{:>8}{:>10}{:>8}{:>9}{:>7}{:>10}{:>8}\n",
               "policy", width, "per_stage", "bound", "vision", "bound", "language", "bound",
               "per_step", "bound", "speedup", "delay", "restaged", "time_s");
    for (const auto& p : res.policies) {
        const bcl_sim::stage_metrics& m = p.metrics;
        fmt::print("{:<{}}{:>11.4f}{:>8.4f}{:>9.4f}{:>8.4f}{:>10.4f}{:>8.4f}{:>10.4f}{:>8.4f}"
                   "{:>9.3f}{:>7}{:>10}{:>8.2f}\n",
                   p.name, width, m.stage_sync(), m.stage_sync_bound(), m.of_stage(0),
                   m.stage_bound_of(0), m.of_stage(1), m.stage_bound_of(1), m.step_sync(),
                   m.step_sync_bound(), p.speedup_vs_none, p.max_delay_steps,
                   p.steps_restaged ? fmt::format("{}", *p.steps_restaged) : std::string("-"),
                   p.seconds);
    }
    fmt::print("\n");
    for (const std::string_view line : {
             "per_stage: the ranks meet in every stage; the work over R times the sum over "
             "micro-steps and stages of the slowest rank. vision, language: one stage's mean rank "
             "load over its slowest, summed over micro-steps. per_step: one meeting; the work over "
             "R times the sum over micro-steps of the slowest rank's summed cost",
             "bound: beside each figure, the same with the slowest rank replaced by max(the mean "
             "rank load, the dearest record) of each micro-step (and stage): no sharing of a "
             "micro-step's records among the ranks does better",
             "speedup: efficiency over none's; delay: the most micro-steps a record was trained "
             "after the one it arrived in; restaged: micro-steps whose ranks the stage plan "
             "changed; time_s: the policy's planning time",
         })
        print_wrapped(line);
}

} // namespace bcl_sim::report
