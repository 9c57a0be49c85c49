#pragma once
// Every input of a simulation run (sim_config), the checks both modes make of it, and the inputs
// resolved from it: --mean-cost, and mffd's default bin.

#include "batching.hpp"
#include "calibration.hpp"
#include "cost_and_cap.hpp"
#include "input.hpp"
#include "policy_runner.hpp"
#include "stage_settings.hpp"
#include "workload.hpp"

#include <bcl/error.hpp>
#include <bcl/options.hpp>
#include <bcl/validate.hpp>

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
    /// --stages and its flags: stage mode (stage_simulate.hpp).
    stage_settings stages;

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

namespace detail {

// The sizes of a run: counts of at least 1, within what a plan holds, and finite budgets.
inline void validate_sizes(const sim_config& cfg) {
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
}

// The cap and its prior, and how batches are costed and emitted.
inline void validate_cap_and_batches(const sim_config& cfg) {
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
}

// The time noise, the drift and the --window blocks: each within the run.
inline void validate_timing(const sim_config& cfg) {
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
}

// Epochs and the mean cost the bcl policies aim at, and a prior that --calibrate can rescale.
inline void validate_epochs_and_mean(const sim_config& cfg) {
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
}

} // namespace detail

/// Checks the inputs both modes read, and the balancer's options they make (bcl::validate);
/// throws input_error naming the first bad one. Each mode checks its own flags after these
/// (validate() in simulate.hpp, validate_tokens() in token_simulate.hpp).
inline void validate_settings(const sim_config& cfg) {
    detail::validate_sizes(cfg);
    detail::validate_cap_and_batches(cfg);
    detail::validate_timing(cfg);
    detail::validate_epochs_and_mean(cfg);
    bcl::options opt{.batch_size = cfg.batch, .lookahead = cfg.lookahead};
    opt.cap = bcl_cap(cfg.cap, cfg.cap_action, cfg.cost); // throws for a cap that costs nothing
    opt.memory_budget = cfg.memory_budget;
    opt.buffer_windows = cfg.buffer_windows;
    opt.max_age = cfg.max_age;
    validate_options(opt);
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
