#pragma once
// Cost calibration in the simulator: the cost ranks truly spend (--true-cost, and --drift, a change
// of it mid-run), the timing noise of the times a calibrating balancer observes (--time-noise),
// and how well a calibrated fit predicts the true batch costs (calibration_error).

#include "cost_and_cap.hpp"
#include "input.hpp"
#include "random.hpp"

#include <fmt/format.h>

#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

namespace bcl_sim {

/// --drift STEP:affine:a=..,b=..,c=..: from step `step` on, the ranks truly spend `model`.
struct drift_spec {
    std::size_t step = 0;
    cost_model model = default_cost();
};

/// Parses a --drift value: a whole step >= 1, a colon, then a cost model as --cost takes it.
/// Throws input_error otherwise.
[[nodiscard]] inline drift_spec parse_drift(std::string_view text) {
    const std::size_t colon = text.find(':');
    const auto bad = [&](std::string_view why) {
        return input_error(fmt::format("--drift {}: {} (expected STEP:affine:a=..,b=..,c=.., the "
                                       "step the true cost changes at and the cost from then on)",
                                       text, why));
    };
    if (colon == std::string_view::npos) throw bad("no step");
    const std::optional<double> step = detail::parse_number(text.substr(0, colon));
    if (!step) throw bad("the step is not a number");
    if (!(*step >= 1.0) || *step != std::floor(*step) || *step > 0x1p52)
        throw bad("the step must be a whole number >= 1");
    return {static_cast<std::size_t>(*step), parse_cost(text.substr(colon + 1), "--drift")};
}

/// The true cost model in force at each step: the initial one (--true-cost, by default --cost)
/// until the drift's step, the drift's model from that step on.
class cost_schedule {
public:
    cost_schedule() = default;
    explicit cost_schedule(const cost_model& initial, std::optional<drift_spec> drift = {})
        : m_initial(initial), m_drift(drift) {}

    [[nodiscard]] const cost_model& at(std::size_t step) const noexcept {
        return m_drift && step >= m_drift->step ? m_drift->model : m_initial;
    }
    [[nodiscard]] const cost_model& initial() const noexcept { return m_initial; }
    [[nodiscard]] const std::optional<drift_spec>& drift() const noexcept { return m_drift; }

private:
    cost_model m_initial = default_cost();
    std::optional<drift_spec> m_drift;
};

/// The factor by which the time rank `rank` measures for its batch number `index` differs from
/// the batch's true cost: exp(sigma * N(0, 1)), multiplicative lognormal noise, the same for a
/// (seed, rank, index) in every policy and every tool. Drawn from the rank's own stream (domain
/// timing), so it never perturbs the workload or a balancer's seed. 1 for sigma = 0.
[[nodiscard]] inline double time_noise_factor(std::uint64_t seed, std::size_t rank,
                                              std::uint64_t index, double sigma) noexcept {
    if (sigma == 0.0) return 1.0;
    const std::uint64_t key = stream_key(seed, domain::timing, rank);
    return std::exp(sigma *
                    standard_normal(stream_word(key, 2 * index), stream_word(key, 2 * index + 1)));
}

/// What a calibrated policy learned, and how well it predicted.
struct calibration_report {
    /// The fitted coefficients a, b, c (bcl::calibration_summary::fitted at the end of the run),
    /// averaged over ranks; in the unit of the observed times, here true cost units.
    std::array<double, 3> fitted{};
    /// Per step: the sum over ranks of ((predicted - true) / true)^2, where predicted is the
    /// batch's cost under the fit in force when the batch was emitted (0 before the first fit)
    /// and true its noise-free true cost; and how many batches went into that sum (batches of
    /// true cost 0 are left out).
    std::vector<double> step_squared_error;
    std::vector<std::uint32_t> step_batches;
};

/// The relative RMS error of the batch-cost predictions over steps [from, to), nothing if that
/// range holds no batch.
[[nodiscard]] inline std::optional<double> relative_rms(const calibration_report& c,
                                                        std::size_t from, std::size_t to) {
    double sum = 0.0;
    std::uint64_t batches = 0;
    for (std::size_t s = from; s < to && s < c.step_squared_error.size(); ++s) {
        sum += c.step_squared_error[s];
        batches += c.step_batches[s];
    }
    if (batches == 0) return std::nullopt;
    return std::sqrt(sum / static_cast<double>(batches));
}

/// calibration_error: relative_rms over the last half of the run's steps (from steps / 2).
[[nodiscard]] inline std::optional<double> calibration_error(const calibration_report& c) {
    const std::size_t steps = c.step_squared_error.size();
    return relative_rms(c, steps / 2, steps);
}

} // namespace bcl_sim
