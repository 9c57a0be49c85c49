#pragma once
// What bcl-sim prints for a run of micro-batch mode (--max-tokens): the table, the JSON and the
// CSV, from the run's result and the flags as given. Fixed-size batches' are report.hpp; what
// both share, report_common.hpp.

#include "report_common.hpp"
#include "token_metrics.hpp"
#include "token_policies.hpp"
#include "token_simulate.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cstddef>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>

namespace bcl_sim::report {

/// Micro-batch mode's settings, as the run resolved them.
inline nlohmann::ordered_json tokens_json(const sim_config& cfg, const token_sim_result& res) {
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
inline nlohmann::ordered_json token_policy_json(const token_policy_result& p) {
    const bcl_sim::token_metrics& m = p.metrics;
    return {{"policy", p.name},
            {"efficiency", m.efficiency},
            {"imbalance", m.imbalance},
            {"micro_steps", m.micro_steps},
            {"micro_steps_bound", m.micro_steps_bound},
            {"steps_within_one_of_bound", m.steps_within_one_of_bound},
            {"over_budget", m.over_budget},
            {"max_delay_steps", p.extras.max_delay_steps},
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

inline void print_json(const cli_options& opt, const token_sim_result& res) {
    nlohmann::ordered_json out;
    out["config"] = config_json(opt, res, bcl_sim::requested_token_policies(opt.cfg));
    out["config"]["tokens"] = tokens_json(opt.cfg, res);
    out["policies"] = nlohmann::ordered_json::array();
    for (const auto& p : res.policies) out["policies"].push_back(token_policy_json(p));
    out["skipped"] = skipped_json(res.skipped);
    fmt::print("{}\n", out.dump(2));
}

/// The CSV of micro-batch mode: token_policy_json's fields, the note last and quoted.
inline void print_csv(const token_sim_result& res) {
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
    print_skipped_csv(res.skipped);
}

/// The table of micro-batch mode, with a legend of its columns.
inline void print_table(const cli_options& opt, const token_sim_result& res) {
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
        const bcl_sim::token_metrics& m = p.metrics;
        fmt::print("{:<14}{:>11.4f}{:>10.3f}{:>9}{:>7}{:>8.3f}{:>9}{:>7}{:>9.3f}{:>10.0f}{:>8.2f}"
                   "{:>8.2f}{:>9.2f}\n",
                   p.name, m.efficiency, m.imbalance, m.micro_steps, m.micro_steps_bound,
                   m.steps_within_one_of_bound, m.over_budget, p.extras.max_delay_steps,
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
    print_notes(res.policies);
    print_skipped(res.skipped);
}

/// --trace: a micro-batch-mode run keeps no per-step slowest-rank and mean cost of whole batches
/// (its figures are per micro-step), so the file holds the header alone.
inline void write_trace(const std::string& path, const token_sim_result&) {
    write_trace(path, [](std::ostream&) {});
}

} // namespace bcl_sim::report
