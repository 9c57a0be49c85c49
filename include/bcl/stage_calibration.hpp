#pragma once
// Online calibration of a multimodal_cost's two stages from the times a trainer measures for each
// (the vision encoder, then the language model), as a calibrating balancer fits one cost to its
// batch times (docs/calibration.md): each stage has its own fit, the balancer's, and the stages
// meet only in the one scale that puts the coefficients in force in the prior's units.

#include <bcl/detail/config.hpp>

#include <bcl/calibrated_cost.hpp>
#include <bcl/cost_check.hpp>
#include <bcl/detail/calibration/cost_fit.hpp>
#include <bcl/detail/number_text.hpp>
#include <bcl/error.hpp>
#include <bcl/multimodal_cost.hpp>
#include <bcl/options.hpp>
#include <bcl/validate.hpp>

#include <array>
#include <cmath>
#include <cstddef>
#include <span>
#include <string>

namespace bcl {

/// Fits the coefficients of a multimodal_cost to measured per-stage times, online.
///
/// The trainer reports, for each batch (or micro-batch) it ran, the batch's summed features per
/// stage (multimodal_cost::batch_features) and each stage's measured time. Each stage is fitted on
/// its own, by the balancer's fit (bcl::calibration_options: relative error, forgetting, outlier
/// times down-weighted, a small pull toward the prior's shape, coefficients >= 0): a stage's times
/// move that stage's fit and no other.
///
/// Units. The fit is in the times' unit (summary()[s].fitted). The coefficients in force
/// (estimator(), summary()[s].applied) are the fits times one scale, the same for both stages,
/// chosen so that a record of the mean features of the observed batches costs, summed over the
/// stages, what the prior says. That is the balancer's rule ("a record of the long-run mean
/// features costs what the prior says") on a record's total cost: the totals stay in the prior's
/// units, and the ratio between the stages is the measured one, which is what a plan of stage
/// costs trades (a rescaling per stage would hold each stage to the prior's share and lose it).
///
/// When. The coefficients in force change at each observe() once every stage has a fit; until
/// then they are the prior's. A stage is fitted from its first time above zero of a batch with
/// features of it (the vision encoder's, from the first batch holding an image).
///
/// Plans every rank computes (a global plan) need the same costs on every rank: observe the same
/// reports in the same order on every rank (gather each rank's micro-batch features and times,
/// a few numbers, and observe them in rank order); the fit is then the same bit for bit.
///
/// Throws bcl::error for bad input, changing nothing. observe() is O(1): two refits of a
/// 4-variable non-negative least-squares problem, solved exactly (docs/calibration.md, "The fit").
class stage_calibration {
public:
    static constexpr std::size_t stages = multimodal_cost::stages;
    static constexpr std::size_t features_per_stage = multimodal_cost::features_per_stage;
    using stage_table = multimodal_cost::stage_table;
    using stage_times = std::array<double, stages>;

    /// Starts from `prior`'s coefficients (its merge is kept). Throws bcl::error for options
    /// out of range (as a balancer checks options::calibration, the horizon too, unused here), or a
    /// prior with a stage whose coefficients are all 0: its fit could not be put in the prior's
    /// units (the prior says the stage is free), and its shape is the prior's to decide.
    explicit stage_calibration(const multimodal_cost& prior, const calibration_options& opt = {})
        : m_prior(checked_prior(prior, opt)),
          m_estimator(prior), m_fits{fit_type(opt, prior.coefficients()[0]),
                                     fit_type(opt, prior.coefficients()[1])} {}

    /// A batch ran: `batch_features` its summed features per stage, `seconds` each stage's
    /// measured time (any unit, the same for both stages and every call). Throws bcl::error,
    /// changing nothing, for a time negative or not finite, or a feature negative, above
    /// bcl::max_estimate or not finite, naming the stage.
    void observe(const stage_table& batch_features, const stage_times& seconds) {
        check(batch_features, seconds);
        for (std::size_t s = 0; s < stages; ++s) {
            fit_type& fit = m_fits[s];
            fit.count_record(batch_features[s]);
            fit.add(batch_features[s], seconds[s]);
            multimodal_cost::stage_vector per_stage{}; // its own rescaling: not what applies
            (void)fit.refit(per_stage);
        }
        apply();
    }

    /// The same from spans: `batch_features` the two stages' features row after row (6 numbers),
    /// `seconds` a time per stage (2). Throws bcl::error, changing nothing, for other sizes too.
    void observe(std::span<const double> batch_features, std::span<const double> seconds) {
        if (seconds.size() != stages)
            throw error("bcl::stage_calibration::observe: " + std::to_string(seconds.size()) +
                        " times for 2 stages (vision encoder, language model)");
        if (batch_features.size() != stages * features_per_stage)
            throw error(
                "bcl::stage_calibration::observe: " + std::to_string(batch_features.size()) +
                " features; a batch has 3 a stage, 6 for 2 stages (vision encoder, "
                "language model)");
        stage_table x{};
        for (std::size_t s = 0; s < stages; ++s)
            for (std::size_t j = 0; j < features_per_stage; ++j)
                x[s][j] = batch_features[s * features_per_stage + j];
        observe(x, stage_times{seconds[0], seconds[1]});
    }

    /// The estimator with the coefficients in force: the prior's until every stage has a fit.
    [[nodiscard]] const multimodal_cost& estimator() const noexcept { return m_estimator; }
    [[nodiscard]] const multimodal_cost& prior() const noexcept { return m_prior; }

    /// What each stage's fit has learned, [multimodal_cost::vision] and [language]: fitted in the
    /// times' unit, applied the coefficients in force, times observed and down-weighted.
    [[nodiscard]] std::array<calibration_summary<features_per_stage>, stages>
    summary() const noexcept {
        std::array<calibration_summary<features_per_stage>, stages> out{};
        for (std::size_t s = 0; s < stages; ++s) {
            const auto& n = m_fits[s].save();
            out[s] = {n.fitted, m_estimator.coefficients()[s], n.observed, n.downweighted,
                      n.has_fit};
        }
        return out;
    }

private:
    using fit_type = detail::cost_fit<features_per_stage>;

    static const multimodal_cost& checked_prior(const multimodal_cost& prior,
                                                const calibration_options& opt) {
        detail::check_calibration(opt);
        for (std::size_t s = 0; s < stages; ++s) {
            bool any = false;
            for (const double c : prior.coefficients()[s]) any = any || c > 0.0;
            if (!any)
                throw error("bcl::stage_calibration: the prior's " +
                            std::string(detail::multimodal_stage_name(s)) +
                            " coefficients are all 0; a stage the prior calls free cannot be "
                            "calibrated");
        }
        return prior;
    }

    static void check(const stage_table& x, const stage_times& seconds) {
        for (std::size_t s = 0; s < stages; ++s) {
            if (!(seconds[s] >= 0.0 && seconds[s] < HUGE_VAL))
                throw error("bcl::stage_calibration::observe: the " +
                            std::string(detail::multimodal_stage_name(s)) + "'s time is " +
                            detail::number_text(seconds[s]) + "; a time must be finite and >= 0");
            for (std::size_t j = 0; j < features_per_stage; ++j)
                if (!valid_cost(x[s][j]))
                    throw_invalid_cost("bcl::stage_calibration::observe: the " +
                                           std::string(detail::multimodal_stage_name(s)) +
                                           "'s feature " + std::to_string(j) + " is ",
                                       x[s][j]);
        }
    }

    // Puts the fits in force once every stage has one: theta_s * k, with k the prior's total
    // cost of the mean observed batch over the fits' (the features' totals give the same ratio as
    // their means). A scale that is not a positive finite number, or coefficients out of range,
    // leave the coefficients in force as they are.
    void apply() noexcept {
        double prior_total = 0.0;
        double fitted_total = 0.0;
        for (std::size_t s = 0; s < stages; ++s) {
            const auto& n = m_fits[s].save();
            if (!n.has_fit) return;
            for (std::size_t j = 0; j < features_per_stage; ++j) {
                prior_total += m_prior.coefficients()[s][j] * n.feature_totals[j];
                fitted_total += n.fitted[j] * n.feature_totals[j];
            }
        }
        const double to_prior_units = prior_total / fitted_total;
        if (!(fitted_total > 0.0 && fitted_total < HUGE_VAL) ||
            !(to_prior_units > 0.0 && to_prior_units < HUGE_VAL))
            return;
        stage_table next{};
        for (std::size_t s = 0; s < stages; ++s)
            for (std::size_t j = 0; j < features_per_stage; ++j) {
                next[s][j] = m_fits[s].save().fitted[j] * to_prior_units;
                if (!(next[s][j] >= 0.0 && next[s][j] <= max_coefficient)) return;
            }
        // In range, so the constructor's checks pass: this cannot throw.
        m_estimator = multimodal_cost(next, m_estimator.merge());
    }

    static constexpr double max_coefficient = 1e300; // multimodal_cost's

    multimodal_cost m_prior;
    multimodal_cost m_estimator;
    std::array<fit_type, stages> m_fits;
};

} // namespace bcl
