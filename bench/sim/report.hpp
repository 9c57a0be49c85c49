#pragma once
// What bcl-sim prints for a run of fixed-size batches: the table, the JSON and the CSV, and the
// per-step trace, from the run's result and the flags as given (which the output echoes).
// Micro-batch mode's are token_report.hpp; what both share, report_common.hpp.

#include "calibration.hpp"
#include "policy_table.hpp"
#include "report_common.hpp"
#include "simulate.hpp"

#include <bcl/names.hpp>
#include <bcl/options.hpp>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstddef>
#include <optional>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

namespace bcl_sim::report {

inline constexpr const char* metric_fields[] = {"efficiency",
                                                "goodput",
                                                "cv",
                                                "cv_reduction",
                                                "speedup_vs_none",
                                                "p99_step_ratio",
                                                "mean_gap_to_lb",
                                                "max_delay_batches",
                                                "capped",
                                                "peak_batch_tokens",
                                                "over_budget_batches",
                                                "fitted_a",
                                                "fitted_b",
                                                "fitted_c",
                                                "calibration_error"};

/// The fitted cost of a calibrated policy as JSON {"a", "b", "c"}, null for the others.
inline nlohmann::ordered_json fitted_json(const policy_result& p) {
    if (!p.extras.calibration) return nullptr;
    const auto& f = p.extras.calibration->fitted;
    return {{"a", f[0]}, {"b", f[1]}, {"c", f[2]}};
}

/// calibration_error of a calibrated policy, null for the others (and for a run of no batch).
inline nlohmann::ordered_json calibration_error_json(const policy_result& p) {
    if (!p.extras.calibration) return nullptr;
    const std::optional<double> e = bcl_sim::calibration_error(*p.extras.calibration);
    return e ? nlohmann::ordered_json(*e) : nlohmann::ordered_json(nullptr);
}

/// --window W: the policy's efficiency over steps [w*W, (w+1)*W) (the last block may be shorter),
/// and for a calibrated policy the relative RMS error of its fit over the same steps.
inline nlohmann::ordered_json windows_json(const policy_result& p, std::size_t window) {
    nlohmann::ordered_json out = nlohmann::ordered_json::array();
    for (std::size_t first = 0; window > 0 && first < p.step_max.size(); first += window) {
        const std::size_t end = std::min(p.step_max.size(), first + window);
        double max_sum = 0.0;
        double mean_sum = 0.0;
        for (std::size_t s = first; s < end; ++s) {
            max_sum += p.step_max[s];
            mean_sum += p.step_mean[s];
        }
        nlohmann::ordered_json w = {{"first_step", first},
                                    {"steps", end - first},
                                    {"efficiency", max_sum > 0.0 ? mean_sum / max_sum : 1.0}};
        if (p.extras.calibration) {
            const std::optional<double> e =
                bcl_sim::relative_rms(*p.extras.calibration, first, end);
            w["calibration_error"] =
                e ? nlohmann::ordered_json(*e) : nlohmann::ordered_json(nullptr);
        }
        out.push_back(std::move(w));
    }
    return out;
}

inline nlohmann::ordered_json policy_json(const policy_result& p, std::size_t window, bool epochs) {
    nlohmann::ordered_json out = {
        {"policy", p.name},
        {"efficiency", p.metrics.efficiency},
        {"goodput", p.metrics.goodput},
        {"round_bound", p.metrics.round_bound},
        {"epoch_bound",
         epochs ? nlohmann::ordered_json(p.metrics.epoch_bound) : nlohmann::ordered_json(nullptr)},
        {"cv", p.metrics.cv},
        {"cv_reduction", p.cv_reduction},
        {"speedup_vs_none", p.speedup_vs_none},
        {"p99_step_ratio", p.metrics.p99_step_ratio},
        {"mean_gap_to_lb", p.extras.mean_gap_to_lb
                               ? nlohmann::ordered_json(*p.extras.mean_gap_to_lb)
                               : nlohmann::ordered_json(nullptr)},
        {"max_delay_batches", p.extras.max_delay_batches},
        {"capped", p.extras.capped},
        {"peak_batch_tokens", p.peak_batch_tokens},
        {"over_budget_batches", p.over_budget_batches},
        {"calibrated", p.extras.calibration.has_value()},
        {"fitted_cost", fitted_json(p)},
        {"calibration_error", calibration_error_json(p)}};
    if (window > 0) out["windows"] = windows_json(p, window);
    return out;
}

inline void print_json(const cli_options& opt, const sim_result& res) {
    nlohmann::ordered_json out;
    out["config"] = config_json(opt, res, bcl_sim::requested_policy_names(opt.cfg));
    out["policies"] = nlohmann::ordered_json::array();
    for (const auto& p : res.policies)
        out["policies"].push_back(policy_json(p, opt.cfg.window, opt.cfg.epoch_steps > 0));
    out["skipped"] = skipped_json(res.skipped);
    fmt::print("{}\n", out.dump(2));
}

inline void print_csv(const sim_result& res) {
    fmt::print("policy");
    for (const char* f : metric_fields) fmt::print(",{}", f);
    fmt::print("\n");
    for (const auto& p : res.policies) {
        // Calibrated policies only: the fitted a, b, c and calibration_error; empty otherwise.
        std::string calibration = ",,,";
        if (p.extras.calibration) {
            const auto& f = p.extras.calibration->fitted;
            const std::optional<double> e = bcl_sim::calibration_error(*p.extras.calibration);
            calibration = fmt::format("{},{},{},{}", f[0], f[1], f[2],
                                      e ? fmt::format("{}", *e) : std::string());
        }
        fmt::print("{},{},{},{},{},{},{},{},{},{},{},{},{}\n", p.name, p.metrics.efficiency,
                   p.metrics.goodput, p.metrics.cv, p.cv_reduction, p.speedup_vs_none,
                   p.metrics.p99_step_ratio,
                   p.extras.mean_gap_to_lb ? fmt::format("{}", *p.extras.mean_gap_to_lb) : "",
                   p.extras.max_delay_batches, p.extras.capped, p.peak_batch_tokens,
                   p.over_budget_batches, calibration);
    }
    print_skipped_csv(res.skipped);
}

// The table's line for a cap (and its prior) and a memory budget, empty without either.
inline std::string cap_and_budget_line(const cli_options& opt, const sim_result& res) {
    const sim_config& cfg = opt.cfg;
    if (cfg.cap.kind == bcl::cap_kind::none && !(cfg.memory_budget > 0.0)) return {};
    std::string line = "        ";
    if (cfg.cap.kind == bcl::cap_kind::fixed)
        line += fmt::format(" cap {} tokens (cost {}), {}", cfg.cap.tokens, res.cap.value,
                            bcl_sim::describe(res.cap.action));
    else if (cfg.cap.kind == bcl::cap_kind::quantile && res.prior)
        line +=
            fmt::format(" cap {} of each rank's costs (after {} records; before, the "
                        "prior {} = {} tokens, cost {}), {}",
                        bcl_sim::describe(cfg.cap), bcl::cap_warmup(res.cap), opt.cap_prior_text,
                        res.prior->tokens, res.prior->cost, bcl_sim::describe(res.cap.action));
    else if (cfg.cap.kind == bcl::cap_kind::quantile)
        line += fmt::format(" cap {} of each rank's costs (after {} records), {}",
                            bcl_sim::describe(cfg.cap), bcl::cap_warmup(res.cap),
                            bcl_sim::describe(res.cap.action));
    if (cfg.memory_budget > 0.0)
        line += fmt::format("{} memory budget {} tokens per batch",
                            cfg.cap.kind != bcl::cap_kind::none ? ";" : "", cfg.memory_budget);
    return line;
}

// The table's lines on the settings beyond the workload: each only where it is not the default.
inline void print_settings(const cli_options& opt, const sim_result& res) {
    const sim_config& cfg = opt.cfg;
    const bcl_sim::cost_schedule truth = cfg.truth();
    if (cfg.true_cost || truth.drift()) {
        fmt::print("         true cost {}", bcl_sim::describe(truth.initial()));
        if (truth.drift())
            fmt::print(", from step {} {}", truth.drift()->step,
                       bcl_sim::describe(truth.drift()->model));
        fmt::print(" (what the ranks spend; the policies estimate with the cost above)\n");
    }
    if (cfg.calibrate)
        fmt::print("         calibrate: tumbling and sliding fit the cost online from batch times "
                   "with noise sigma {}\n",
                   cfg.time_noise);
    fmt::print("         R={} ranks, B={} records per rank per step, K={} lookahead, {} steps, "
               "seed {}\n",
               cfg.ranks, cfg.batch, cfg.lookahead, cfg.steps, cfg.seed);
    if (const std::string line = cap_and_budget_line(opt, res); !line.empty())
        fmt::print("{}\n", line);
    if (cfg.batching == bcl_sim::batch_cost::padded)
        fmt::print("         batching padded: a rank spends B x its batch's costliest record "
                   "(mffd: the sum, its bins pack)\n");
    if (cfg.emission != bcl_sim::emission_order::costliest_first)
        fmt::print("         emission {}\n", bcl_sim::describe(cfg.emission));
    if (cfg.epoch_steps > 0)
        fmt::print("         epochs of {} steps: the bcl policies {}, on its {} records{}\n",
                   cfg.epoch_steps,
                   cfg.epoch_start == bcl_sim::epoch_boundary::fresh
                       ? "start a fresh balancer per rank every epoch"
                       : "carry each rank's balancer into every epoch (next_epoch)",
                   cfg.epoch_steps * cfg.batch,
                   cfg.mean_cost_epoch ? ", aiming at their own mean cost" : "");
    if (cfg.buffer_windows != bcl::options{}.buffer_windows ||
        cfg.max_age != bcl::options{}.max_age)
        fmt::print("         sliding buffer {} windows, max_age {} (a record at most {} batches "
                   "late)\n",
                   cfg.buffer_windows, cfg.max_age, (cfg.max_age + 1) * cfg.lookahead - 1);
}

inline void print_table(const cli_options& opt, const sim_result& res) {
    print_workload(opt.cfg, res);
    print_settings(opt, res);
    fmt::print("\n{:<16}{:>11}{:>9}{:>9}{:>8}{:>8}{:>10}{:>11}{:>7}{:>8}{:>10}{:>9}{:>9}\n",
               "policy", "efficiency", "goodput", "speedup", "cv", "cv_red", "p99/mean",
               "gap_to_lb", "delay", "capped", "peak_tok", "over_bud", "time_s");
    for (const auto& p : res.policies) {
        const std::string gap =
            p.extras.mean_gap_to_lb ? fmt::format("{:.2e}", *p.extras.mean_gap_to_lb) : "-";
        fmt::print("{:<16}{:>11.4f}{:>9.4f}{:>9.3f}{:>8.3f}{:>8.3f}{:>10.3f}{:>11}{:>7}{:>8}"
                   "{:>10.0f}{:>9}{:>9.2f}\n",
                   p.name, p.metrics.efficiency, p.metrics.goodput, p.speedup_vs_none, p.metrics.cv,
                   p.cv_reduction, p.metrics.p99_step_ratio, gap, p.extras.max_delay_batches,
                   p.extras.capped, p.peak_batch_tokens, p.over_budget_batches, p.seconds);
    }
    print_notes(res.policies);
    for (const auto& p : res.policies)
        if (p.name == "tumbling" && opt.cfg.batching == bcl_sim::batch_cost::packed) {
            fmt::print("\n");
            print_wrapped(fmt::format("tumbling: no partition or emission order of the same rounds "
                                      "reaches efficiency above {:.4f} (round_bound)",
                                      p.metrics.round_bound));
        }
    print_skipped(res.skipped);
}

/// --trace: one row per (policy, step), each step's slowest-rank cost and mean rank cost.
inline void write_trace(const std::string& path, const sim_result& res) {
    write_trace(path, [&res](std::ostream& out) {
        for (const auto& p : res.policies)
            for (std::size_t s = 0; s < p.step_max.size(); ++s)
                out << fmt::format("{},{},{},{}\n", p.name, s, p.step_max[s], p.step_mean[s]);
    });
}

} // namespace bcl_sim::report
