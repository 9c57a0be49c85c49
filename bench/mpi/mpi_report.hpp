#pragma once
// bcl-mpi-bench's output, on rank 0: the JSON document or the table.

#include "mpi_runs.hpp"
#include "mpi_setup.hpp"

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <mpi.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <iterator>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <variant>
#include <vector>

namespace bcl_mpi {

// ---------------------------------------------------------------------------------------------
// Output (rank 0).
// ---------------------------------------------------------------------------------------------

struct run_context {
    int ranks = 0;
    double mean_batch_cost = 0.0;
    double ms_per_cost = 0.0;
    std::string mpi_library;
};

inline nlohmann::ordered_json config_json(const bench_config& cfg, const run_context& run) {
    return {{"dist", bcl_sim::dist_json(cfg.dist_text, cfg.dist, cfg.dataset_records.value_or(0))},
            {"cost", bcl_sim::cost_json(cfg.cost)},
            {"true_cost", bcl_sim::cost_json(cfg.true_cost)},
            {"calibrate", cfg.calibrate},
            {"time_noise", cfg.calibrate ? cfg.time_noise : 0.0},
            {"ranks", run.ranks},
            {"batch", cfg.batch},
            {"lookahead", cfg.lookahead},
            {"steps", cfg.steps},
            {"rounds", cfg.rounds},
            {"seed", cfg.seed},
            {"policies", cfg.policies},
            {"step_ms", cfg.step_ms},
            {"wait", cfg.wait_text},
            {"mean_batch_cost", run.mean_batch_cost},
            {"ms_per_cost_unit", run.ms_per_cost},
            {"format", cfg.format},
            {"mpi_library", run.mpi_library}};
}

/// {"a", "b", "c"} of a calibrated row, null for the others.
inline nlohmann::ordered_json coefficients_json(const std::optional<std::array<double, 3>>& c) {
    if (!c) return nullptr;
    return {{"a", (*c)[0]}, {"b", (*c)[1]}, {"c", (*c)[2]}};
}

inline void print_json(const bench_config& cfg, const run_context& run,
                       const std::vector<policy_report>& reports) {
    nlohmann::ordered_json out;
    out["config"] = config_json(cfg, run);
    out["policies"] = nlohmann::ordered_json::array();
    for (const policy_report& p : reports)
        out["policies"].push_back({{"policy", p.name},
                                   {"wall_s", p.wall_s},
                                   {"wall_s_rounds", p.round_walls},
                                   {"mean_step_ms", p.mean_step_ms},
                                   {"measured_speedup_vs_none", p.measured_speedup},
                                   {"predicted_speedup_vs_none", p.predicted_speedup},
                                   {"predicted_step_ms", p.predicted_step_ms},
                                   {"overhead_ms_per_step", p.mean_step_ms - p.predicted_step_ms},
                                   {"predicted_efficiency", p.predicted_efficiency},
                                   {"batches", p.batches_max},
                                   {"batches_min", p.batches_min},
                                   {"batches_max", p.batches_max},
                                   {"same_batch_count", p.batches_min == p.batches_max},
                                   {"contract_ok", p.contract_ok},
                                   {"same_plan", p.same_plan},
                                   {"calibrated", p.fitted_cost.has_value()},
                                   {"fitted_cost", coefficients_json(p.fitted_cost)},
                                   {"fitted_seconds", coefficients_json(p.fitted_seconds)}});
    fmt::print("{}\n", out.dump(2));
}

inline void print_table(const bench_config& cfg, const run_context& run,
                        const std::vector<policy_report>& reports) {
    fmt::print("{}  dist {}", program, bcl_sim::describe(cfg.dist));
    if (cfg.dataset_records)
        fmt::print(" ({} lengths, sharded over the ranks)", *cfg.dataset_records);
    fmt::print("\n{:>15}cost {} (a + b*L + c*L^2)", "", bcl_sim::describe(cfg.cost));
    if (cfg.true_cost_text.empty())
        fmt::print("\n");
    else
        fmt::print(", true cost {}\n", bcl_sim::describe(cfg.true_cost));
    if (cfg.calibrate)
        fmt::print(
            "{:>15}calibrate: bcl rows refit the cost from measured sleeps, noise sigma {}\n", "",
            cfg.time_noise);
    fmt::print("{:>15}R={} MPI ranks, B={}, K={}, {} steps per policy, seed {}", "", run.ranks,
               cfg.batch, cfg.lookahead, cfg.steps, cfg.seed);
    if (cfg.rounds > 1) fmt::print(", {} rounds (median shown)", cfg.rounds);
    fmt::print("\n{:>15}a batch of mean cost ({:.1f}) sleeps {} ms, wait {}; {}\n\n", "",
               run.mean_batch_cost, cfg.step_ms, cfg.wait_text, run.mpi_library);
    fmt::print("{:<18}{:>9}{:>9}{:>10}{:>10}{:>10}{:>10}{:>11}{:>6}\n", "policy", "batches",
               "wall_s", "step_ms", "pred_ms", "overhead", "speedup", "predicted", "same");
    for (const policy_report& p : reports)
        fmt::print("{:<18}{:>9}{:>9.3f}{:>10.2f}{:>10.2f}{:>10.2f}{:>10.3f}{:>11.3f}{:>6}\n",
                   p.name, p.batches_max, p.wall_s, p.mean_step_ms, p.predicted_step_ms,
                   p.mean_step_ms - p.predicted_step_ms, p.measured_speedup, p.predicted_speedup,
                   p.batches_min == p.batches_max ? "yes" : "NO");
    for (const policy_report& p : reports)
        if (p.fitted_cost)
            fmt::print("\n{}: calibrated from the prior {}: fitted a={:.4g}, b={:.4g}, c={:.4g} in "
                       "true cost units (mean over ranks; true cost {})\n",
                       p.name, bcl_sim::describe(cfg.cost), (*p.fitted_cost)[0],
                       (*p.fitted_cost)[1], (*p.fitted_cost)[2], bcl_sim::describe(cfg.true_cost));
    fmt::print(
        "\n\nstep_ms: measured wall time per step (slowest rank); pred_ms: mean over steps of "
        "the costliest rank's\nbatch, from the gathered batch costs; overhead: the "
        "difference (allreduce, wake-up latency);\nspeedup / predicted: none's step time "
        "over the policy's, measured / from the same batch costs.\n");
    // The overhead is about the same per step for every policy, so it pulls the measured
    // speedups toward 1 by roughly overhead / step: say so when that is no longer small.
    const policy_report& none = reports.front();
    if (none.predicted_step_ms > 0.0 &&
        none.mean_step_ms - none.predicted_step_ms > 0.05 * none.predicted_step_ms)
        fmt::print("\nnote: the overhead is {:.0f}% of none's step; it is about the same for every "
                   "policy, so the measured\nspeedups read low by about that much. A larger "
                   "--step-ms makes it smaller.\n",
                   100.0 * (none.mean_step_ms - none.predicted_step_ms) / none.predicted_step_ms);
}

inline std::string mpi_library_version() {
    std::string text(MPI_MAX_LIBRARY_VERSION_STRING, '\0');
    int length = 0;
    MPI_Get_library_version(text.data(), &length);
    text.resize(static_cast<std::size_t>(std::max(length, 0)));
    const std::size_t cut = text.find_first_of(",\n");
    return std::string(bcl_sim::detail::trim(text.substr(0, cut)));
}

} // namespace bcl_mpi
