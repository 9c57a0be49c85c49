// bcl::detail::calibration_saved, as a specification: a saved calibration is checked for a fit
// a calibration could have reached (finite numbers, variances and coefficients >= 0, at least one
// coefficient in force above 0, counts that fit each other) and for ledger entries and feature
// sums it could have kept; a part of 0 features (a balancer that does not calibrate) holds
// nothing to check.

#include <bcl/detail/calibration/calibration_saved.hpp>
#include <bcl/error.hpp>

#include <catch2/catch.hpp>

#include <cmath>
#include <cstddef>
#include <functional>
#include <limits>
#include <string>

namespace {

using bcl::detail::calibration_saved;
using bcl::detail::calibration_snapshot;
using Catch::Matchers::Contains;

// A fit of two features a calibration could have reached, one batch awaiting its time and one
// observed.
calibration_saved reachable_calibration() {
    calibration_saved part;
    calibration_snapshot& c = part.calibration;
    c.features = 2;
    c.numbers.assign(calibration_snapshot::number_fields(2), 1.0);
    c.counts = {.feature_records = 10, .observed = 2, .downweighted = 1, .has_fit = 1, .stale = 0};
    c.applied = {0.5, 0.0};
    c.waiting_sums = {3.0, 9.0};
    c.ledger_state = {1, 2};
    c.ledger_sums = {1.0, 1.0, 2.0, 4.0};
    return part;
}

void check_refused(const std::function<void(calibration_saved&)>& edit, const std::string& what) {
    calibration_saved part = reachable_calibration();
    edit(part);
    CAPTURE(what);
    REQUIRE_THROWS_WITH(part.check(), Contains(what));
}

} // namespace

TEST_CASE("calibration_saved: a reachable fit passes, and so does a part of no features",
          "[calibration][state]") {
    CHECK_NOTHROW(reachable_calibration().check());
    calibration_saved none;
    CHECK_NOTHROW(none.check());
}

TEST_CASE("calibration_saved: a fit no calibration reaches is refused, naming what is wrong",
          "[calibration][state]") {
    const double nan = std::numeric_limits<double>::quiet_NaN();
    check_refused([](calibration_saved& p) { p.calibration.numbers.pop_back(); },
                  "calibration fields of the wrong size");
    check_refused([](calibration_saved& p) { p.calibration.applied.push_back(1.0); },
                  "calibration fields of the wrong size");
    check_refused([nan](calibration_saved& p) { p.calibration.numbers[5] = nan; },
                  "a calibration number that is not finite");
    check_refused([](calibration_saved& p) { p.calibration.numbers[3] = -1.0; },
                  "a negative variance");
    check_refused([](calibration_saved& p) { p.calibration.numbers.back() = -1.0; },
                  "a negative fit coefficient, feature total or count");
    check_refused(
        [](calibration_saved& p) {
            p.calibration.applied = {0.0, 0.0};
        },
        "calibrated coefficients that are all zero");
    check_refused([](calibration_saved& p) { p.calibration.applied[0] = -0.5; },
                  "a calibrated coefficient that is negative or not finite");
    check_refused([](calibration_saved& p) { p.calibration.applied[0] = 1e301; },
                  "a calibrated coefficient that is negative or not finite");
    check_refused([](calibration_saved& p) { p.calibration.counts.downweighted = 3; },
                  "calibration counts that do not fit the balancer's");
    check_refused([](calibration_saved& p) { p.calibration.counts.has_fit = 2; },
                  "calibration counts that do not fit the balancer's");
    check_refused([](calibration_saved& p) { p.calibration.ledger_sums.pop_back(); },
                  "a calibration ledger of the wrong size");
    check_refused([](calibration_saved& p) { p.calibration.ledger_state[1] = 3; },
                  "a calibration ledger entry of no known state");
    check_refused([](calibration_saved& p) { p.calibration.waiting_sums[0] = -1.0; },
                  "a batch feature sum that is negative or not finite");
    check_refused([](calibration_saved& p) { p.calibration.ledger_sums[2] = HUGE_VAL; },
                  "a batch feature sum that is negative or not finite");
}
