#pragma once
// Checking a balancer's settings, and what valid settings imply: the records it holds and the
// longest a record can wait.

#include <bcl/detail/config.hpp>

#include <bcl/cost_check.hpp>
#include <bcl/cost_estimator.hpp>
#include <bcl/detail/caps/cap_kinds.hpp>
#include <bcl/detail/rounds/round_policy.hpp>
#include <bcl/error.hpp>
#include <bcl/options.hpp>

#include <cmath>
#include <cstddef>
#include <string>
#include <variant>

namespace bcl {

namespace detail {

inline void check_choices(const options& opt) {
    if (opt.emission != emission_order::costliest_first && opt.emission != emission_order::shuffled)
        throw error("bcl::options::emission has no such order (" +
                    std::to_string(static_cast<int>(opt.emission)) + ")");
    if (opt.batching != batch_cost::packed && opt.batching != batch_cost::padded)
        throw error("bcl::options::batching has no such batch cost (" +
                    std::to_string(static_cast<int>(opt.batching)) + ")");
}

inline void check_cap_and_budget(const options& opt) {
    const cap_options& cap = opt.cap;
    validate_cap_kind(cap); // the kind exists and its fields are in range
    if (cap.action != cap_action::clip && cap.action != cap_action::truncate)
        throw error("bcl::options::cap.action has no such action (" +
                    std::to_string(static_cast<int>(cap.action)) + ")");
    if (!valid_cost(opt.mean_cost))
        throw error("bcl::options::mean_cost must be >= 0 and at most bcl::max_estimate (got " +
                    std::to_string(opt.mean_cost) + ")");
    if (!(opt.memory_budget >= 0.0 && opt.memory_budget < HUGE_VAL))
        throw error("bcl::options::memory_budget must be finite and >= 0 (got " +
                    std::to_string(opt.memory_budget) + ")");
}

/// Most batches calibration_options::horizon may keep waiting for their times.
inline constexpr std::size_t max_calibration_horizon = std::size_t{1} << 20;

inline void check_calibration(const calibration_options& c) {
    if (!(c.forgetting > 0.0 && c.forgetting <= 1.0))
        throw error("bcl::options::calibration.forgetting must be in (0, 1] (got " +
                    std::to_string(c.forgetting) + ")");
    if (!(c.prior_weight >= 0.0 && c.prior_weight <= 1e12))
        throw error("bcl::options::calibration.prior_weight must be >= 0 and at most 1e12 (got " +
                    std::to_string(c.prior_weight) + ")");
    if (c.horizon == 0 || c.horizon > max_calibration_horizon)
        throw error("bcl::options::calibration.horizon must be from 1 to " +
                    std::to_string(max_calibration_horizon) + " (got " + std::to_string(c.horizon) +
                    ")");
    if (!(c.outlier_threshold > 0.0 && c.outlier_threshold < HUGE_VAL))
        throw error("bcl::options::calibration.outlier_threshold must be finite and > 0 (got " +
                    std::to_string(c.outlier_threshold) + ")");
}

} // namespace detail

/// Throws bcl::error naming the first invalid option. Called by every balancer constructor.
inline void validate(const options& opt) {
    if (opt.batch_size == 0) throw error("bcl::options::batch_size must be at least 1 (got 0)");
    if (opt.lookahead == 0) throw error("bcl::options::lookahead must be at least 1 (got 0)");
    if (opt.batch_size > max_window_records / opt.lookahead)
        throw error("bcl::options: batch_size * lookahead = " + std::to_string(opt.batch_size) +
                    " * " + std::to_string(opt.lookahead) + " exceeds the largest window of " +
                    std::to_string(max_window_records) + " records");
    // Each check reads only what the ones before it have found valid, and builds nothing.
    detail::require_known_policy(opt);
    detail::check_choices(opt);
    detail::check_cap_and_budget(opt);
    detail::check_calibration(opt.calibration);
    detail::validate_policy_settings(opt, max_window_records, max_delay_limit);
}

/// Records a balancer with these (valid) options holds before it must emit a round.
[[nodiscard]] inline std::size_t buffer_capacity(const options& opt) {
    return std::visit([](const auto& rounds) { return rounds.capacity(); },
                      detail::make_round_policy(opt));
}

/// Largest number of batches a record can wait beyond the batch it would have been in without
/// balancing (arrival position / B), for these (valid) options.
[[nodiscard]] inline std::size_t max_delay_bound(const options& opt) {
    return std::visit([](const auto& rounds) { return rounds.max_delay(); },
                      detail::make_round_policy(opt));
}

} // namespace bcl
