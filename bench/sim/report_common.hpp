#pragma once
// What both modes' outputs share: the flags as given (which every output echoes), the run's
// configuration as JSON, the table's first lines and its notes, and the trace file's header.
// Each mode prints its own rows: report.hpp (fixed-size batches) and token_report.hpp
// (micro-batch mode).

#include "json_output.hpp"
#include "run_inputs.hpp"
#include "sim_config.hpp"

#include <bcl/names.hpp>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cstddef>
#include <fstream>
#include <span>
#include <string>
#include <string_view>
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

inline nlohmann::ordered_json cap_json(const cli_options& opt, const run_inputs& res) {
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

/// The run's configuration as the JSON output's "config": every input, as given and as resolved;
/// `policies` the names the run asked for, in its mode.
inline nlohmann::ordered_json config_json(const cli_options& opt, const run_inputs& res,
                                          const std::vector<std::string>& policies) {
    const sim_config& cfg = opt.cfg;
    nlohmann::ordered_json dist =
        bcl_sim::dist_json(cfg.dist_text, cfg.dist, res.dataset_records.value_or(0));
    dist["p99_length"] = res.p99_length;
    dist["mean_length"] = res.mean_length;
    dist["max_length"] = res.max_length;

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

/// The skipped policies as the JSON output's "skipped".
inline nlohmann::ordered_json skipped_json(std::span<const skipped_policy> skipped) {
    nlohmann::ordered_json out = nlohmann::ordered_json::array();
    for (const auto& s : skipped) out.push_back({{"policy", s.name}, {"reason", s.reason}});
    return out;
}

/// The CSV output's account of the skipped policies: one line each on stderr, so that stdout
/// stays a table of rows.
inline void print_skipped_csv(std::span<const skipped_policy> skipped) {
    for (const auto& s : skipped) fmt::print(stderr, "bcl-sim: {}\n", s.reason);
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
inline void print_workload(const sim_config& cfg, const run_inputs& res) {
    fmt::print("bcl-sim  dist {}", bcl_sim::describe(cfg.dist));
    if (res.dataset_records) fmt::print(" ({} lengths)", *res.dataset_records);
    fmt::print(", mean length {:.0f}, p99 length {}, longest {}\n", res.mean_length, res.p99_length,
               res.max_length);
    fmt::print("         cost {} (a + b*L + c*L^2)\n", bcl_sim::describe(cfg.cost));
}

// The notes after a table: each policy's that has one (`policies`: either mode's results, each
// with a name and extras.note).
template <class Policies>
void print_notes(const Policies& policies) {
    bool header = false;
    for (const auto& p : policies) {
        if (p.extras.note.empty()) continue;
        if (!header) fmt::print("\n");
        header = true;
        print_wrapped(fmt::format("{}: {}", p.name, p.extras.note));
    }
}

// The policies skipped, after a table.
inline void print_skipped(std::span<const skipped_policy> skipped) {
    if (!skipped.empty()) fmt::print("\n");
    for (const auto& s : skipped) print_wrapped(s.reason);
}

/// Writes the --trace CSV `policy,step,max_cost,mean_cost` (the input of scripts/plot_sim.py):
/// the header, then what `rows(out)` writes. Throws input_error if the file cannot be written.
template <class Rows>
void write_trace(const std::string& path, const Rows& rows) {
    std::ofstream out(path);
    if (!out) throw bcl_sim::input_error(fmt::format("--trace {}: cannot open for writing", path));
    out << "policy,step,max_cost,mean_cost\n";
    rows(out);
    if (!out) throw bcl_sim::input_error(fmt::format("--trace {}: write failed", path));
}

} // namespace bcl_sim::report
