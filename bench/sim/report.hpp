#pragma once
// What bcl-sim prints: the table, the JSON and the CSV of a run, and the per-step trace, from the
// run's result and the flags as given (which the output echoes).

#include "json_output.hpp"
#include "simulator.hpp"

#include <bcl/names.hpp>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <fstream>
#include <iterator>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace bcl_sim::report {

/// The flags as given, beside the configuration they resolve to.
struct cli_options {
    sim_config cfg;
    std::string cost_text = "affine"; // a=0, b=1, c=1/24576 unless given
    std::string policy_text;          // as given
    std::string format = "table";
    std::string trace;
    std::string cap_text = "none";
    std::string cap_action_text = "clip";
    std::string cap_prior_text = "none";
    std::string mean_cost_text = "running";
    std::string epoch_start_text = "carry";
    std::string batching_text = "packed";
    std::string emission_text = "costliest_first";
    std::string progress = "auto";
    std::string true_cost_text; ///< empty: the --cost model
    std::string drift_text;     ///< empty: no drift
};

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

inline nlohmann::ordered_json cap_json(const cli_options& opt, const sim_result& res) {
    const bcl_sim::cap_spec& spec = opt.cfg.cap;
    const bcl::cap_options& cap = res.cap;
    nlohmann::ordered_json out = {{"spec", opt.cap_text},
                                  {"kind", std::string(bcl::name_of(spec.kind))},
                                  {"action", std::string(bcl_sim::describe(cap.action))}};
    out["tokens"] = spec.kind == bcl::cap_kind::fixed ? nlohmann::ordered_json(spec.tokens)
                                                      : nlohmann::ordered_json(nullptr);
    out["cost"] = spec.kind == bcl::cap_kind::fixed ? nlohmann::ordered_json(cap.value)
                                                    : nlohmann::ordered_json(nullptr);
    out["quantile"] = spec.kind == bcl::cap_kind::quantile ? nlohmann::ordered_json(cap.quantile)
                                                           : nlohmann::ordered_json(nullptr);
    out["warmup"] = spec.kind == bcl::cap_kind::quantile
                        ? nlohmann::ordered_json(bcl::cap_warmup(cap))
                        : nlohmann::ordered_json(nullptr);
    out["prior"] = res.prior ? nlohmann::ordered_json{{"spec", opt.cap_prior_text},
                                                      {"tokens", res.prior->tokens},
                                                      {"cost", res.prior->cost}}
                             : nlohmann::ordered_json(nullptr);
    return out;
}

inline nlohmann::ordered_json config_json(const cli_options& opt, const sim_result& res) {
    const sim_config& cfg = opt.cfg;
    nlohmann::ordered_json dist =
        bcl_sim::dist_json(cfg.dist_text, cfg.dist, res.dataset_records.value_or(0));
    dist["p99_length"] = res.p99_length;
    dist["mean_length"] = res.mean_length;
    dist["max_length"] = res.max_length;

    nlohmann::ordered_json policies = nlohmann::ordered_json::array();
    for (const std::string& name : bcl_sim::requested_policy_names(cfg)) policies.push_back(name);

    const bcl_sim::cost_schedule truth = cfg.truth();
    nlohmann::ordered_json drift = nullptr;
    if (truth.drift())
        drift = {{"step", truth.drift()->step}, {"cost", bcl_sim::cost_json(truth.drift()->model)}};
    return {{"dist", dist},
            {"cost", bcl_sim::cost_json(cfg.cost)},
            {"true_cost", bcl_sim::cost_json(truth.initial())},
            {"drift", drift},
            {"calibrate", cfg.calibrate},
            {"time_noise", cfg.time_noise},
            {"window", cfg.window},
            {"ranks", cfg.ranks},
            {"batch", cfg.batch},
            {"lookahead", cfg.lookahead},
            {"steps", cfg.steps},
            {"seed", cfg.seed},
            {"policies", policies},
            {"format", opt.format},
            {"bin_tokens", res.bin_tokens},
            {"bin_tokens_flag", cfg.bin_tokens},
            {"cap", cap_json(opt, res)},
            {"memory_budget", cfg.memory_budget},
            {"batching", std::string(bcl_sim::describe(cfg.batching))},
            {"emission", std::string(bcl_sim::describe(cfg.emission))},
            {"buffer_windows", cfg.buffer_windows},
            {"max_age", cfg.max_age},
            {"mean_cost", cfg.mean_cost_epoch ? nlohmann::ordered_json("epoch")
                          : res.mean_cost     ? nlohmann::ordered_json(*res.mean_cost)
                                              : nlohmann::ordered_json(nullptr)},
            {"epoch_steps", cfg.epoch_steps},
            {"epoch_start", std::string(bcl_sim::describe(cfg.epoch_start))},
            {"trace", opt.trace.empty() ? nlohmann::ordered_json(nullptr)
                                        : nlohmann::ordered_json(opt.trace)}};
}

/// Micro-batch mode's settings, as the run resolved them.
inline nlohmann::ordered_json tokens_json(const sim_config& cfg, const sim_result& res) {
    const bcl_sim::token_settings& t = cfg.tokens;
    const auto count = [](const std::optional<std::size_t>& v) {
        return v ? nlohmann::ordered_json(*v) : nlohmann::ordered_json(nullptr);
    };
    return {{"max_tokens", *t.max_tokens},
            {"shape", t.held() ? "held" : "stream"},
            {"step_records", count(t.step_records)},
            {"micro_batches", count(t.micro_batches)},
            {"lookahead", cfg.lookahead},
            {"multiple_of", t.multiple_of},
            {"oversized", t.oversized_alone ? "alone" : "error"},
            {"max_fill", t.max_fill},
            {"fixed_batch", res.fixed_batch}};
}

/// The fields of a policy in micro-batch mode, in the order JSON and CSV give them.
inline nlohmann::ordered_json token_policy_json(const policy_result& p) {
    const bcl_sim::token_metrics& m = *p.tokens;
    return {{"policy", p.name},
            {"efficiency", m.efficiency},
            {"imbalance", m.imbalance},
            {"micro_steps", m.micro_steps},
            {"micro_steps_bound", m.micro_steps_bound},
            {"steps_within_one_of_bound", m.steps_within_one_of_bound},
            {"over_budget", m.over_budget},
            {"max_delay_steps", p.extras.max_delay_batches},
            {"speedup_vs_none", p.speedup_vs_none},
            {"padding_micro_batches", m.padding},
            {"peak_micro_batch_tokens", m.peak_micro_tokens},
            {"step_records_spread", m.step_records_spread},
            {"step_heavy_excess", m.step_heavy_excess},
            {"step_cost_spread", m.step_cost_spread},
            {"step_tokens_gap", m.step_tokens_gap},
            {"steps", m.steps},
            {"records", m.records},
            {"note", p.extras.note}};
}

inline nlohmann::ordered_json policy_json(const policy_result& p, std::size_t window, bool epochs) {
    if (p.tokens) return token_policy_json(p);
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
    out["config"] = config_json(opt, res);
    if (opt.cfg.tokens.enabled()) out["config"]["tokens"] = tokens_json(opt.cfg, res);
    out["policies"] = nlohmann::ordered_json::array();
    for (const auto& p : res.policies)
        out["policies"].push_back(policy_json(p, opt.cfg.window, opt.cfg.epoch_steps > 0));
    out["skipped"] = nlohmann::ordered_json::array();
    for (const auto& s : res.skipped)
        out["skipped"].push_back({{"policy", s.name}, {"reason", s.reason}});
    fmt::print("{}\n", out.dump(2));
}

/// The CSV of micro-batch mode: token_policy_json's fields, the note last and quoted.
inline void print_token_csv(const sim_result& res) {
    bool header = false;
    for (const auto& p : res.policies) {
        const nlohmann::ordered_json row = token_policy_json(p);
        if (!header) {
            std::string names;
            for (const auto& [key, value] : row.items()) names += (names.empty() ? "" : ",") + key;
            fmt::print("{}\n", names);
            header = true;
        }
        std::string line;
        for (const auto& [key, value] : row.items()) {
            if (!line.empty()) line += ',';
            line += value.is_string() ? (key == "note" ? value.dump() : value.get<std::string>())
                                      : value.dump();
        }
        fmt::print("{}\n", line);
    }
    for (const auto& s : res.skipped) fmt::print(stderr, "bcl-sim: {}\n", s.reason);
}

inline void print_csv(const sim_result& res) {
    if (res.micro_batch_mode()) return print_token_csv(res);
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
    for (const auto& s : res.skipped) fmt::print(stderr, "bcl-sim: {}\n", s.reason);
}

// Prints `text` word-wrapped to 100 columns, later lines indented by two spaces.
inline void print_wrapped(std::string_view text) {
    std::size_t column = 0;
    while (!text.empty()) {
        const std::size_t space = text.find(' ');
        const std::string_view word = text.substr(0, space);
        text = space == std::string_view::npos ? std::string_view{} : text.substr(space + 1);
        if (column > 0 && column + 1 + word.size() > 100) {
            fmt::print("\n  ");
            column = 2;
        } else if (column > 0) {
            fmt::print(" ");
            ++column;
        }
        fmt::print("{}", word);
        column += word.size();
    }
    fmt::print("\n");
}

// The table's first lines: the workload and the cost model.
inline void print_workload(const sim_config& cfg, const sim_result& res) {
    fmt::print("bcl-sim  dist {}", bcl_sim::describe(cfg.dist));
    if (res.dataset_records) fmt::print(" ({} lengths)", *res.dataset_records);
    fmt::print(", mean length {:.0f}, p99 length {}, longest {}\n", res.mean_length, res.p99_length,
               res.max_length);
    fmt::print("         cost {} (a + b*L + c*L^2)\n", bcl_sim::describe(cfg.cost));
}

// The notes after a table: each policy's, then the policies skipped.
inline void print_notes(const sim_result& res) {
    bool header = false;
    for (const auto& p : res.policies) {
        if (p.extras.note.empty()) continue;
        if (!header) fmt::print("\n");
        header = true;
        print_wrapped(fmt::format("{}: {}", p.name, p.extras.note));
    }
}

inline void print_skipped(const sim_result& res) {
    if (!res.skipped.empty()) fmt::print("\n");
    for (const auto& s : res.skipped) print_wrapped(s.reason);
}

/// The table of micro-batch mode, with a legend of its columns.
inline void print_token_table(const cli_options& opt, const sim_result& res) {
    const sim_config& cfg = opt.cfg;
    const bcl_sim::token_settings& t = cfg.tokens;
    print_workload(cfg, res);
    fmt::print("         R={} ranks, micro-batches of at most T={} tokens, as many on every rank",
               cfg.ranks, *t.max_tokens);
    if (t.multiple_of > 1) fmt::print(" (a multiple of {})", t.multiple_of);
    fmt::print("\n");
    if (t.held())
        fmt::print("         held batches: every step each rank draws {} records (a global batch "
                   "of {}); global plans {} at a time\n",
                   *t.step_records, cfg.ranks * *t.step_records, cfg.lookahead);
    else
        fmt::print("         a stream of steps of {} micro-batches a rank; global plans windows of "
                   "{} steps\n",
                   *t.micro_batches, cfg.lookahead);
    fmt::print("         {} steps, seed {}, records above T {}; global_fixed's B = {}\n", cfg.steps,
               cfg.seed, t.oversized_alone ? "alone" : "refused", res.fixed_batch);
    fmt::print("\n{:<14}{:>11}{:>10}{:>9}{:>7}{:>8}{:>9}{:>7}{:>9}{:>10}{:>8}{:>8}{:>9}\n",
               "policy", "efficiency", "imbalance", "micro", "bound", "within1", "over_bud",
               "delay", "speedup", "peak_tok", "spread", "heavy+", "time_s");
    for (const auto& p : res.policies) {
        const bcl_sim::token_metrics& m = *p.tokens;
        fmt::print("{:<14}{:>11.4f}{:>10.3f}{:>9}{:>7}{:>8.3f}{:>9}{:>7}{:>9.3f}{:>10.0f}{:>8.2f}"
                   "{:>8.2f}{:>9.2f}\n",
                   p.name, m.efficiency, m.imbalance, m.micro_steps, m.micro_steps_bound,
                   m.steps_within_one_of_bound, m.over_budget, p.extras.max_delay_batches,
                   p.speedup_vs_none, m.peak_micro_tokens, m.step_records_spread,
                   m.step_heavy_excess, p.seconds);
    }
    fmt::print("\n");
    for (const std::string_view line : {
             "efficiency: per micro-step (micro-batch j of every rank runs together and lasts as "
             "long as the slowest), the sum of the mean rank's micro-batch cost over the sum of "
             "the slowest rank's",
             "imbalance: the slowest rank's micro-batch cost over the mean rank's, per "
             "micro-step, averaged (WLB-LLM's imbalance degree; 1 is even)",
             "micro: micro-batches per rank, all steps (the same on every rank, checked every "
             "step); bound: the token lower bound, the sum over planning units (a step; global: "
             "a pool or window) of ceil(tokens / (R*T)); within1: the share of steps whose count "
             "is at most ceil(step tokens / (R*T)) + 1",
             "over_bud: micro-batches above T tokens; delay: the most steps a record moved from "
             "the step it was drawn in; speedup: efficiency over none's; peak_tok: the most "
             "tokens of one micro-batch",
             "spread: the mean over windows of K steps of the most records a step trains over "
             "the fewest (step_records_spread); heavy+: the mean over windows of the records "
             "above T/2 its fullest step holds beyond the even share ceil(h/K) "
             "(step_heavy_excess)",
         })
        print_wrapped(line);
    print_notes(res);
    print_skipped(res);
}

inline void print_table(const cli_options& opt, const sim_result& res) {
    if (res.micro_batch_mode()) return print_token_table(opt, res);
    const sim_config& cfg = opt.cfg;
    print_workload(cfg, res);
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
    if (cfg.cap.kind != bcl::cap_kind::none || cfg.memory_budget > 0.0) {
        std::string line = "        ";
        if (cfg.cap.kind == bcl::cap_kind::fixed)
            line += fmt::format(" cap {} tokens (cost {}), {}", cfg.cap.tokens, res.cap.value,
                                bcl_sim::describe(res.cap.action));
        else if (cfg.cap.kind == bcl::cap_kind::quantile && res.prior)
            line += fmt::format(" cap {} of each rank's costs (after {} records; before, the "
                                "prior {} = {} tokens, cost {}), {}",
                                bcl_sim::describe(cfg.cap), bcl::cap_warmup(res.cap),
                                opt.cap_prior_text, res.prior->tokens, res.prior->cost,
                                bcl_sim::describe(res.cap.action));
        else if (cfg.cap.kind == bcl::cap_kind::quantile)
            line += fmt::format(" cap {} of each rank's costs (after {} records), {}",
                                bcl_sim::describe(cfg.cap), bcl::cap_warmup(res.cap),
                                bcl_sim::describe(res.cap.action));
        if (cfg.memory_budget > 0.0)
            line += fmt::format("{} memory budget {} tokens per batch",
                                cfg.cap.kind != bcl::cap_kind::none ? ";" : "", cfg.memory_budget);
        fmt::print("{}\n", line);
    }
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
    print_notes(res);
    for (const auto& p : res.policies)
        if (p.name == "tumbling" && cfg.batching == bcl_sim::batch_cost::packed) {
            fmt::print("\n");
            print_wrapped(fmt::format("tumbling: no partition or emission order of the same rounds "
                                      "reaches efficiency above {:.4f} (round_bound)",
                                      p.metrics.round_bound));
        }
    print_skipped(res);
}

// Long format, one row per (policy, step): the input of scripts/plot_sim.py.
inline void write_trace(const std::string& path, const sim_result& res) {
    std::ofstream out(path);
    if (!out) throw bcl_sim::input_error(fmt::format("--trace {}: cannot open for writing", path));
    out << "policy,step,max_cost,mean_cost\n";
    for (const auto& p : res.policies)
        for (std::size_t s = 0; s < p.step_max.size(); ++s)
            out << fmt::format("{},{},{},{}\n", p.name, s, p.step_max[s], p.step_mean[s]);
    if (!out) throw bcl_sim::input_error(fmt::format("--trace {}: write failed", path));
}

} // namespace bcl_sim::report
