#pragma once
// The online fit of a calibrated cost: measured batch times against the batches' feature sums,
// a weighted least-squares fit with exponential forgetting, robust to outlier times, pulled
// toward the prior's shape while times are scarce, and non-negative.

#include <bcl/detail/config.hpp>

#include <bcl/calibrated_cost.hpp>
#include <bcl/options.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>

namespace bcl::detail {

/// The z >= 0 minimizing z^T m z - 2 g^T z for a symmetric positive semi-definite m of `vars`
/// variables (a few). The constrained minimum is the unconstrained minimum over its own support
/// (the variables it leaves positive), and every support's unconstrained minimum that is feasible
/// is a feasible point: so the best feasible one over all 2^vars supports is the answer. A support
/// whose matrix is singular is skipped; the empty support (z = 0) is always feasible.
// Solves m z = g restricted to the variables in `support` (z zero elsewhere) by Cholesky on
// the Jacobi-scaled system (features range over many orders of magnitude). False if the
// restricted matrix is not safely positive definite.
template <std::size_t vars>
bool solve_on_support(const std::array<double, vars * vars>& m, const std::array<double, vars>& g,
                      std::uint32_t support, std::array<double, vars>& z) noexcept {
    std::array<std::size_t, vars> index{};
    std::size_t n = 0;
    for (std::size_t i = 0; i < vars; ++i)
        if (support & (1U << i)) index[n++] = i;
    std::array<double, vars> d{};
    for (std::size_t a = 0; a < n; ++a) {
        const double diagonal = m[index[a] * vars + index[a]];
        if (!(diagonal > 0.0) || !std::isfinite(diagonal)) return false;
        d[a] = 1.0 / std::sqrt(diagonal);
    }
    std::array<double, vars * vars> l{};
    for (std::size_t a = 0; a < n; ++a)
        for (std::size_t b = 0; b <= a; ++b) {
            double s = m[index[a] * vars + index[b]] * d[a] * d[b];
            for (std::size_t k = 0; k < b; ++k) s -= l[a * vars + k] * l[b * vars + k];
            if (a == b) {
                if (!(s > 1e-12)) return false;
                l[a * vars + a] = std::sqrt(s);
            } else {
                l[a * vars + b] = s / l[b * vars + b];
            }
        }
    std::array<double, vars> y{};
    for (std::size_t a = 0; a < n; ++a) {
        double s = g[index[a]] * d[a];
        for (std::size_t k = 0; k < a; ++k) s -= l[a * vars + k] * y[k];
        y[a] = s / l[a * vars + a];
    }
    for (std::size_t a = n; a-- > 0;) {
        double s = y[a];
        for (std::size_t k = a + 1; k < n; ++k) s -= l[k * vars + a] * y[k];
        y[a] = s / l[a * vars + a];
    }
    for (std::size_t a = 0; a < n; ++a) {
        z[index[a]] = y[a] * d[a];
        if (!std::isfinite(z[index[a]])) return false;
    }
    return true;
}

template <std::size_t vars>
[[nodiscard]] std::array<double, vars>
nonnegative_minimum(const std::array<double, vars * vars>& m,
                    const std::array<double, vars>& g) noexcept {
    static_assert(vars >= 1 && vars < 16);
    std::array<double, vars> best{};
    double best_objective = 0.0; // the empty support: everything zero
    for (std::uint32_t support = 1; support < (1U << vars); ++support) {
        std::array<double, vars> z{};
        if (!solve_on_support<vars>(m, g, support, z)) continue;
        double objective = 0.0; // at a support's minimum, z^T m z = g^T z
        bool feasible = true;
        for (std::size_t i = 0; i < vars; ++i) {
            if (z[i] < 0.0) feasible = false;
            objective -= g[i] * z[i];
        }
        if (feasible && objective < best_objective) {
            best_objective = objective;
            best = z;
        }
    }
    return best;
}

/// Fits coefficients theta >= 0 so that theta . x predicts the time y of a batch with feature
/// sums x. Each time is weighted by 1 / (predicted time)^2, so the fit minimizes relative error
/// (timing noise is multiplicative: a batch twice as costly jitters twice as much), and by a
/// Huber factor when its relative error is beyond outlier_threshold typical errors. Older times
/// fade by `forgetting` per newer time. The prior enters as `prior_weight` average batches that
/// say "theta is proportional to the prior": it fixes the shape while data cannot, and it is
/// scale-free (the time unit is whatever the trainer measures in).
///
/// The coefficients the balancer applies are the fit rescaled so that a record of the long-run
/// mean features costs what the prior says: estimates stay in the prior's units, so a fixed cap,
/// options::mean_cost and the running means keep their meaning.
///
/// add() is O(N^2); refit() solves the (N+1)-variable non-negative problem exactly by trying
/// every support, O(2^(N+1) (N+1)^3), once per round that saw new times.
template <std::size_t N>
class cost_fit {
public:
    using vec = std::array<double, N>;
    static constexpr std::size_t vars = N + 1; // the coefficients and the prior's scale

    /// The saved form of the fit; see cost_fit::save and cost_fit::restore.
    struct numbers {
        std::array<double, N * N> normal_matrix{}; // sum of weighted x x^T, faded
        vec normal_vector{};                       // sum of weighted y x, faded
        double effective_count = 0.0;              // sum of faded counts of times
        double error_scale = 1.0;                  // typical relative error of a time
        vec fitted{};                              // theta, in time units per feature
        vec feature_totals{};                      // sum of every pushed record's features
        std::uint64_t feature_records = 0;         // records counted in feature_totals
        std::uint64_t observed = 0;                // times added
        std::uint64_t downweighted = 0;            // times counted less as outliers
        bool has_fit = false;                      // fitted holds a fit
        bool stale = false;                        // times added since the last refit
    };

    cost_fit(const calibration_options& opt, const vec& prior) noexcept
        : m_forgetting(opt.forgetting), m_prior_weight(opt.prior_weight),
          m_threshold(opt.outlier_threshold), m_prior(prior) {}

    /// A record pushed: its features join the long-run means the rescaling uses.
    void count_record(const vec& x) noexcept {
        for (std::size_t j = 0; j < N; ++j) m_n.feature_totals[j] += x[j];
        ++m_n.feature_records;
    }

    /// A measured time y >= 0 of a batch whose features sum to x.
    void add(const vec& x, double y) noexcept {
        ++m_n.observed;
        const double predicted = m_n.has_fit ? dot(m_n.fitted, x) : y;
        const double scale = predicted > 0.0 && predicted < HUGE_VAL ? predicted : y;
        if (!(scale > 0.0)) return; // a zero time of a batch predicted free says nothing
        double weight = 1.0 / (scale * scale);
        double error_scale = m_n.error_scale;
        bool outlier = false;
        if (m_n.has_fit) {
            const double error = std::abs(y - predicted) / scale;
            const double limit = m_threshold * std::max(m_n.error_scale, min_error_scale);
            outlier = error > limit;
            if (outlier) weight *= limit / error;
            error_scale += error_rate * (std::min(error, 2.0 * limit) - error_scale);
        }
        // The update is kept only if every number stays finite: a time or a feature sum at the
        // edge of the double range (accepted, as valid input) must not turn the fit into
        // infinities that no state can hold. So every new number is worked out once to check it
        // and, if all are finite, again (the same expression, so the same bits) to store it:
        // nothing is copied, and a refused update leaves the fit as it was.
        if (!std::isfinite(weight) || !std::isfinite(error_scale)) return;
        for (std::size_t i = 0; i < N; ++i) {
            for (std::size_t j = 0; j < N; ++j)
                if (!std::isfinite(faded(m_n.normal_matrix[i * N + j], weight * x[i] * x[j])))
                    return; // counted as observed, but no evidence the fit can hold
            if (!std::isfinite(faded(m_n.normal_vector[i], weight * y * x[i]))) return;
        }
        for (std::size_t i = 0; i < N; ++i) {
            for (std::size_t j = 0; j < N; ++j) {
                double& a = m_n.normal_matrix[i * N + j];
                a = faded(a, weight * x[i] * x[j]);
            }
            double& b = m_n.normal_vector[i];
            b = faded(b, weight * y * x[i]);
        }
        m_n.effective_count = faded(m_n.effective_count, 1.0);
        m_n.error_scale = error_scale;
        m_n.downweighted += outlier ? 1 : 0;
        m_n.stale = true;
    }

    /// Refits if times were added since the last refit; returns whether `applied` was set to new
    /// coefficients (in the prior's units). A fit that cannot be expressed in them (no records
    /// yet, a fit that costs nothing, or numbers at the edge of the double range that rescale to
    /// zero or to infinity) is not applied: the coefficients in force stay.
    bool refit(vec& applied) noexcept {
        if (!m_n.stale) return false;
        m_n.stale = false;
        const vec theta = solve();
        const vec mean = mean_features();
        const double fitted_mean = dot(theta, mean);
        const double prior_mean = dot(m_prior, mean);
        const double to_prior_units = prior_mean / fitted_mean;
        if (!(fitted_mean > 0.0 && fitted_mean < HUGE_VAL) ||
            !(to_prior_units > 0.0 && to_prior_units < HUGE_VAL))
            return false;
        vec next{};
        bool any = false;
        for (std::size_t j = 0; j < N; ++j) {
            next[j] = theta[j] * to_prior_units;
            if (!(next[j] >= 0.0 && next[j] <= max_coefficient)) return false;
            any = any || next[j] > 0.0;
        }
        if (!any) return false;
        m_n.fitted = theta;
        m_n.has_fit = true;
        applied = next;
        return true;
    }

    [[nodiscard]] const numbers& save() const noexcept { return m_n; }
    void restore(const numbers& n) noexcept { m_n = n; }

private:
    // The largest coefficient a calibrated cost takes (as its prior's).
    static constexpr double max_coefficient = 1e300;
    // How fast the typical error follows new times: about the last 20.
    static constexpr double error_rate = 0.05;
    // Below 1% relative error a time is never called an outlier: clocks are not that exact.
    static constexpr double min_error_scale = 0.01;

    // A sum of the fit after one more time: the old sum faded, plus the new time's term.
    [[nodiscard]] double faded(double sum, double term) const noexcept {
        return m_forgetting * sum + term;
    }

    static double dot(const vec& a, const vec& b) noexcept {
        double s = 0.0;
        for (std::size_t j = 0; j < N; ++j) s += a[j] * b[j];
        return s;
    }

    [[nodiscard]] vec mean_features() const noexcept {
        vec m{};
        if (m_n.feature_records == 0) return m;
        for (std::size_t j = 0; j < N; ++j)
            m[j] = m_n.feature_totals[j] / static_cast<double>(m_n.feature_records);
        return m;
    }

    // Minimizes theta^T A theta - 2 b^T theta + w sum_j s_j (theta_j - alpha p_j)^2 over
    // theta >= 0, alpha >= 0, where s_j = A_jj / (effective count) is feature j's mean square in
    // a time.
    [[nodiscard]] vec solve() const noexcept {
        std::array<double, vars * vars> m{};
        std::array<double, vars> g{};
        double largest = 0.0;
        for (std::size_t j = 0; j < N; ++j)
            largest = std::max(largest, m_n.normal_matrix[j * N + j]);
        const double count = std::max(m_n.effective_count, 1e-300);
        for (std::size_t i = 0; i < N; ++i) {
            // Tiny floors keep a feature no batch has shown (or a zero prior weight) tied to the
            // prior rather than undetermined.
            const double mean_square =
                std::max(m_n.normal_matrix[i * N + i], largest * 1e-12) / count;
            const double s_floor = mean_square * std::max(m_prior_weight, 1e-12);
            for (std::size_t j = 0; j < N; ++j) m[i * vars + j] = m_n.normal_matrix[i * N + j];
            m[i * vars + i] += s_floor;
            m[i * vars + N] = -s_floor * m_prior[i];
            m[N * vars + i] = -s_floor * m_prior[i];
            m[N * vars + N] += s_floor * m_prior[i] * m_prior[i];
            g[i] = m_n.normal_vector[i];
        }
        const std::array<double, vars> best = nonnegative_minimum<vars>(m, g);
        vec theta{};
        for (std::size_t j = 0; j < N; ++j) theta[j] = best[j];
        return theta;
    }

    double m_forgetting;
    double m_prior_weight;
    double m_threshold;
    vec m_prior;
    numbers m_n;
};

} // namespace bcl::detail
