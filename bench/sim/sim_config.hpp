#pragma once
// Every input of a simulation run (sim_config), and the inputs resolved from it: --mean-cost,
// and mffd's default bin.

#include "batching.hpp"
#include "calibration.hpp"
#include "cost_and_cap.hpp"
#include "input.hpp"
#include "policy_runner.hpp"
#include "workload.hpp"

#include <bcl/options.hpp>

#include <fmt/format.h>

#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace bcl_sim {

/// Every input of a simulation run: the settings its policies share (run_settings) and what the
/// command line says beyond them.
struct sim_config : run_settings {
    std::string dist_text = "lognormal:mu=6,sigma=1";
    dist_spec dist = lognormal_spec{};
    std::size_t steps = 2000;
    std::vector<std::string> policies; ///< empty: every policy in the table
    double bin_tokens = 0.0;           ///< mffd bin capacity; 0: context_length(longest record)
    cap_spec cap;                      ///< --cap (default none)
    bcl::cap_action cap_action = bcl::cap_action::clip; ///< --cap-action
    cap_prior_spec cap_prior; ///< --cap-prior (default none): a quantile cap's warm-up cap
    /// --mean-cost: the mean cost per record the sliding rounds aim at (bcl::options::mean_cost).
    /// Empty (`running`): each rank's own running mean (bcl's default); `exact` (mean_cost_exact):
    /// the mean cost of the file's lengths (of the pilot sample for a synthetic distribution),
    /// capped as the run's --cap caps them (capped_mean_cost); `epoch`:
    /// run_settings::mean_cost_epoch.
    std::optional<double> mean_cost;
    bool mean_cost_exact = false;
    /// --true-cost: what the ranks truly spend (every metric is computed on it); nothing: `cost`.
    /// Every policy estimates with `cost`, the only model a real loader knows.
    std::optional<cost_model> true_cost;
    /// --drift: the true cost changes at a step.
    std::optional<drift_spec> drift;
    /// --window: per-policy efficiency (and calibration error) over blocks of this many steps,
    /// 0 for none.
    std::size_t window = 0;

    /// The true cost per step.
    [[nodiscard]] cost_schedule truth() const {
        return cost_schedule(true_cost.value_or(cost), drift);
    }
};

/// Parses a --mean-cost value into `cfg`: `running`, `exact`, `epoch`, or a cost > 0. Throws
/// input_error.
inline void parse_mean_cost(std::string_view text, sim_config& cfg) {
    cfg.mean_cost.reset();
    cfg.mean_cost_exact = false;
    cfg.mean_cost_epoch = false;
    if (text == "running") return;
    if (text == "exact") {
        cfg.mean_cost_exact = true;
        return;
    }
    if (text == "epoch") {
        cfg.mean_cost_epoch = true;
        return;
    }
    const std::optional<double> value = detail::parse_number(text);
    if (!value || !(*value > 0.0) || !std::isfinite(*value))
        throw input_error(
            fmt::format("--mean-cost {}: expected running, exact, epoch, or a cost > 0", text));
    cfg.mean_cost = *value;
}

/// --mean-cost resolved: for `exact` the mean cost of `lengths` as the balancer estimates it,
/// under the run's cap (capped_mean_cost), otherwise the value given, or nothing.
[[nodiscard]] inline std::optional<double> resolve_mean_cost(const sim_config& cfg,
                                                             const std::vector<double>& lengths) {
    if (!cfg.mean_cost_exact) return cfg.mean_cost;
    if (lengths.empty()) return 0.0;
    return capped_mean_cost(lengths, cfg.cost, cfg.cap, cfg.cap_action);
}

/// mffd's default bin capacity: the context length a trainer would configure for these records,
/// the smallest power of two that holds the longest. NeMo-RL sizes its packing bins as the
/// context length times the micro-batch size (train_mb_tokens), commonly with micro-batches of one.
[[nodiscard]] inline double context_length(double longest) {
    constexpr double largest_power = 0x1p62;
    if (!(longest > 1.0)) return 1.0;
    if (longest >= largest_power) return longest;
    return static_cast<double>(std::bit_ceil(static_cast<std::uint64_t>(std::ceil(longest))));
}

} // namespace bcl_sim
