#pragma once
// What a calibration keeps in a saved state: the fit and the batches awaiting their times, with
// the fields a state writes and reads and the checks that each could have been reached.

#include <bcl/detail/config.hpp>

#include <bcl/calibrated_cost.hpp>
#include <bcl/detail/saved_part.hpp>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace bcl::detail {

/// The fit's counts in a saved state, each by its name. visit() lists them once, in the order
/// the state's bytes hold them, for the writer, the reader and the check alike.
struct calibration_counts {
    std::uint64_t feature_records = 0; ///< records whose features the fit counted
    std::uint64_t observed = 0;        ///< batch times it took
    std::uint64_t downweighted = 0;    ///< of those, how many counted less (outliers)
    std::uint64_t has_fit = 0;         ///< 1 once it has fitted coefficients
    std::uint64_t stale = 0;           ///< 1 if times came since the last refit

    bool operator==(const calibration_counts&) const = default;

    /// visit(name, field) for every field, in the state's order.
    template <class Counts, class Visit>
    static void visit(Counts& c, Visit&& visit) {
        visit("feature_records", c.feature_records);
        visit("observed", c.observed);
        visit("downweighted", c.downweighted);
        visit("has_fit", c.has_fit);
        visit("stale", c.stale);
    }
    static constexpr std::size_t fields = 5;
};

/// The calibration part of a saved state, for any feature count (0: the balancer does not
/// calibrate, and everything else is empty).
struct calibration_snapshot {
    std::size_t features = 0;
    /// The fit: normal matrix (N*N), normal vector, fitted coefficients, feature totals (N each),
    /// effective count, error scale.
    std::vector<double> numbers;
    calibration_counts counts;
    std::vector<double> applied;      ///< the coefficients in force (the estimator's)
    std::vector<double> waiting_sums; ///< N feature sums of each batch formed and not yet popped
    /// The last min(horizon, batches) emitted batches, oldest first: 1 awaiting its time, 2
    /// observed; and N feature sums each.
    std::vector<std::uint8_t> ledger_state;
    std::vector<double> ledger_sums;

    [[nodiscard]] static constexpr std::size_t number_fields(std::size_t n) noexcept {
        return n * n + 3 * n + 2;
    }
};

/// A balancer's calibration's part of a saved state (batch_calibration's, and no_calibration's:
/// nothing but a feature count of 0).
struct calibration_saved {
    calibration_snapshot calibration; // a calibrating balancer's fit and its waiting batches

    /// `horizon` the options', `waiting_batches` the batches formed and not yet popped.
    template <class Io, class Part>
    static void fields(Io& io, Part& s, std::size_t horizon, std::size_t waiting_batches) {
        auto& c = s.calibration;
        io.count("the calibration feature count", c.features, max_calibration_features, 0);
        if (c.features == 0) return;
        const std::size_t n = c.features;
        io.items("the calibration fit", c.numbers, calibration_snapshot::number_fields(n));
        calibration_counts::visit(c.counts, [&](const char* name, auto& x) { io.field(name, x); });
        io.items("the calibrated coefficients", c.applied, n);
        io.items("the waiting batches' features", c.waiting_sums, waiting_batches * n);
        io.length("the calibration ledger size", c.ledger_state, horizon, 8 * (n + 1));
        io.items("the calibration ledger", c.ledger_state);
        io.items("the ledger sums", c.ledger_sums, c.ledger_state.size() * n);
    }

    /// A fit that a calibration could have reached, and sums and ledger entries it could have
    /// kept. (Its counts, its ledger's length and its waiting batches against the balancer's are
    /// the snapshot's to check.)
    void check() const {
        const calibration_snapshot& s = calibration;
        const std::size_t n = s.features;
        if (n == 0) return;
        check_saved(s.numbers.size() == calibration_snapshot::number_fields(n) &&
                        s.applied.size() == n,
                    "calibration fields of the wrong size");
        for (const double x : s.numbers)
            check_saved(std::isfinite(x), "a calibration number that is not finite");
        for (std::size_t j = 0; j < n; ++j)
            check_saved(s.numbers[j * n + j] >= 0.0, "a negative variance");
        for (std::size_t j = n * n + n; j < n * n + 3 * n + 2; ++j)
            check_saved(s.numbers[j] >= 0.0, "a negative fit coefficient, feature total or count");
        bool any = false;
        for (const double c : s.applied) {
            check_saved(c >= 0.0 && c <= 1e300,
                        "a calibrated coefficient that is negative or not finite");
            any = any || c > 0.0;
        }
        check_saved(any, "calibrated coefficients that are all zero");
        const calibration_counts& counts = s.counts;
        check_saved(counts.downweighted <= counts.observed && counts.has_fit <= 1 &&
                        counts.stale <= 1,
                    "calibration counts that do not fit the balancer's");
        check_saved(s.ledger_sums.size() == s.ledger_state.size() * n,
                    "a calibration ledger of the wrong size");
        for (const std::uint8_t state : s.ledger_state)
            check_saved(state == 1 || state == 2, "a calibration ledger entry of no known state");
        for (const double x : s.waiting_sums)
            check_saved(x >= 0.0 && x < HUGE_VAL,
                        "a batch feature sum that is negative or not finite");
        for (const double x : s.ledger_sums)
            check_saved(x >= 0.0 && x < HUGE_VAL,
                        "a batch feature sum that is negative or not finite");
    }
};

} // namespace bcl::detail
