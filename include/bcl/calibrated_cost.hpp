#pragma once
// Cost estimators a balancer can calibrate online: cost linear in its coefficients over a feature
// map the user chooses, fitted to the step times the trainer reports (docs/calibration.md).

#include <bcl/detail/config.hpp>

#include <bcl/detail/number_text.hpp>
#include <bcl/error.hpp>

#include <array>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <type_traits>
#include <utility>

namespace bcl {

/// Most features a calibrated estimator may have. The fit solves a small non-negative least
/// squares problem exactly at every round that saw new times; its work doubles with each feature.
inline constexpr std::size_t max_calibration_features = 8;

/// A type E satisfies `calibratable_estimator<E, Record>` if:
///   1. it has `static constexpr std::size_t feature_count`, from 1 to max_calibration_features;
///   2. `e.features(record)` returns the record's features, a `std::array<double, feature_count>`
///      (each >= 0 and finite: the balancer checks);
///   3. `e.coefficients()` and `e.prior()` return the coefficients in force and those it started
///      from, and `e.set_coefficients(c)` replaces the coefficients in force;
///   4. its cost is the dot product of the coefficients and the features.
/// A balancer over such an estimator accepts measured batch times (balancer::observe) and refits
/// the coefficients from them. bcl::calibrated_cost is the stock one.
template <class E, class Record>
concept calibratable_estimator =
    requires(E& e, const E& ce, const Record& r,
             const std::array<double, std::remove_cvref_t<E>::feature_count>& c) {
    requires std::remove_cvref_t<E>::feature_count >= 1;
    requires std::remove_cvref_t<E>::feature_count <= max_calibration_features;
    { ce.features(r) } -> std::same_as<std::array<double, std::remove_cvref_t<E>::feature_count>>;
    {
        ce.coefficients()
        } -> std::convertible_to<std::array<double, std::remove_cvref_t<E>::feature_count>>;
    {
        ce.prior()
        } -> std::convertible_to<std::array<double, std::remove_cvref_t<E>::feature_count>>;
    e.set_coefficients(c);
};

/// What a calibrating balancer has learned so far (balancer::calibration()).
template <std::size_t N>
struct calibration_summary {
    /// The coefficients fitted to the observed times, in the times' unit per feature (seconds
    /// per token, ...); all 0 before the first fit.
    std::array<double, N> fitted{};
    /// The coefficients in force: the fit rescaled so that a record of the long-run mean features
    /// costs what the prior says (estimates stay in the prior's units). The prior before a fit.
    std::array<double, N> applied{};
    std::uint64_t times_observed = 0;
    std::uint64_t times_downweighted = 0; ///< times counted less as outliers
    bool has_fit = false;
};

/// The features {1, L, L^2} of a record of length `L = std::invoke(projection, record)`, so a
/// calibrated cost over them is `a + b*L + c*L^2`.
template <class Projection = std::identity>
struct quadratic_features {
    [[no_unique_address]] Projection projection{};

    template <class Record>
    requires std::invocable<const Projection&, const Record&>
    [[nodiscard]] std::array<double, 3> operator()(const Record& r) const {
        const auto length = static_cast<double>(std::invoke(projection, r));
        return {1.0, length, length * length};
    }
};

/// Cost = sum over j of coefficient[j] * feature[j], with `FeatureMap` giving a record's N
/// features (e.g. `{1, L, L^2, P, P^2}` for text plus image patches). Starts from a prior (the
/// coefficients a user would hard-code); a balancer refits the coefficients from measured times.
/// Coefficients are kept >= 0.
template <std::size_t N, class FeatureMap>
class calibrated_cost {
public:
    static constexpr std::size_t feature_count = N;
    using coefficient_array = std::array<double, N>;
    static_assert(N >= 1 && N <= max_calibration_features,
                  "a calibrated cost has 1 to bcl::max_calibration_features features");

    /// Throws bcl::error if a prior coefficient is negative, above 1e300 or not finite, or all
    /// are zero (the prior must say what costs something).
    calibrated_cost(FeatureMap features, coefficient_array prior)
        : m_features(std::move(features)), m_prior(checked(prior)), m_coefficients(prior) {}

    template <class Record>
    requires std::invocable<const FeatureMap&, const Record&>
    [[nodiscard]] coefficient_array features(const Record& r) const {
        return std::invoke(m_features, r);
    }

    template <class Record>
    requires std::invocable<const FeatureMap&, const Record&>
    [[nodiscard]] double operator()(const Record& r) const {
        const coefficient_array x = features(r);
        double cost = 0.0;
        for (std::size_t j = 0; j < N; ++j) cost += m_coefficients[j] * x[j];
        return cost;
    }

    [[nodiscard]] const coefficient_array& coefficients() const noexcept { return m_coefficients; }
    [[nodiscard]] const coefficient_array& prior() const noexcept { return m_prior; }
    /// The balancer's; a user who sets coefficients by hand gets what a restore would undo.
    void set_coefficients(const coefficient_array& c) noexcept { m_coefficients = c; }

private:
    static coefficient_array checked(const coefficient_array& prior) {
        bool any = false;
        for (std::size_t j = 0; j < N; ++j) {
            if (!(prior[j] >= 0.0 && prior[j] <= 1e300))
                throw error("bcl::calibrated_cost: prior coefficient " + std::to_string(j) +
                            " is " + detail::number_text(prior[j]) +
                            "; coefficients must be from 0 to 1e300");
            any = any || prior[j] > 0.0;
        }
        if (!any) throw error("bcl::calibrated_cost: every prior coefficient is 0");
        return prior;
    }

    [[no_unique_address]] FeatureMap m_features;
    coefficient_array m_prior;
    coefficient_array m_coefficients;
};

/// `a + b*L + c*L^2` that a balancer calibrates from measured times, starting from (a, b, c);
/// `bcl::calibrated_affine_quadratic(0, 1, 1.0 / 24576, &sample::tokens)`.
template <class Projection = std::identity>
[[nodiscard]] calibrated_cost<3, quadratic_features<Projection>>
calibrated_affine_quadratic(double a, double b, double c, Projection projection = {}) {
    return {quadratic_features<Projection>{std::move(projection)}, {a, b, c}};
}

} // namespace bcl
