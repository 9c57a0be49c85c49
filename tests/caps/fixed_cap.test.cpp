// bcl::detail::fixed_cap, as a specification: the cap kind spelled "fixed" caps every record at
// cap_options::value, from the first record on and whatever records it is shown; it accepts only
// a value that is finite and > 0, naming the field and the value it refuses; it is settled from
// the start, sketches nothing, keeps no state, and clips a whole stream of known costs at its
// value.

#include "support/error_message.hpp"

#include <bcl/detail/caps/fixed_cap.hpp>
#include <bcl/detail/saved_part.hpp>
#include <bcl/options.hpp>

#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <vector>

namespace {

using bcl::detail::fixed_cap;
using Catch::Matchers::Contains;

bcl::cap_options fixed_options(double value) {
    return {.kind = bcl::cap_kind::fixed, .value = value};
}

} // namespace

TEST_CASE("fixed_cap: the value is the cap of every record, whatever was added",
          "[caps][fixed_cap]") {
    STATIC_REQUIRE(fixed_cap::name == "fixed");
    STATIC_REQUIRE_FALSE(bcl::detail::keeps_state<fixed_cap>);
    for (const double value : {1e-300, 0.5, 3.0, 1e300}) {
        INFO("value " << value);
        fixed_cap cap(fixed_options(value));
        for (const double estimate : {0.0, value / 2, value, value * 2, HUGE_VAL}) {
            CHECK(cap.current() == value);
            CHECK(cap.settled());
            cap.add(estimate, value);
        }
        CHECK(cap.current() == value);
        CHECK(fixed_cap::sketched(1000) == 0);
        // A stream's level is the value, whatever the stream holds (even nothing).
        const std::vector<double> costs{value * 10, 1.0, 0.0};
        CHECK(cap.stream_level(costs) == value);
        CHECK(cap.stream_level({}) == value);
    }
}

TEST_CASE("fixed_cap: a value that is zero, negative, infinite or not a number is refused, "
          "naming it",
          "[caps][fixed_cap]") {
    for (const double bad : {0.0, -0.0, -2.5, -HUGE_VAL, HUGE_VAL, std::nan("")}) {
        INFO("value " << bad);
        CHECK_THAT(bcl_test::bcl_error_message([&] { fixed_cap::validate(fixed_options(bad)); }),
                   Contains("bcl::options::cap.value must be finite and > 0 for a fixed cap"));
    }
    CHECK_THAT(bcl_test::bcl_error_message([&] { fixed_cap::validate(fixed_options(-2.5)); }),
               Contains("(got -2.5)"));
    // The value is written so that it reads back exactly, however small.
    CHECK_THAT(bcl_test::bcl_error_message([&] { fixed_cap::validate(fixed_options(-1e-9)); }),
               Contains("(got -1e-09)"));
    for (const double good :
         {std::numeric_limits<double>::denorm_min(), 1.0, std::numeric_limits<double>::max()})
        CHECK_NOTHROW(fixed_cap::validate(fixed_options(good)));
    // Only the value is its to check: a quantile out of range is some other kind's field.
    bcl::cap_options other = fixed_options(2.0);
    other.quantile = 7.0;
    other.prior = -1.0;
    CHECK_NOTHROW(fixed_cap::validate(other));
}
