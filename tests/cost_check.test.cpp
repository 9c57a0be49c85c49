// bcl/cost_check.hpp, as a specification: one rule for every cost and estimate (finite, >= 0, at
// most bcl::max_estimate), decided on the double's bits so that no floating-point flag can drop
// the NaN test, and one message that names what was checked and its value.

#include <bcl/cost_check.hpp>

#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <string>

using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;

TEST_CASE("cost check: a cost is finite, >= 0 and at most bcl::max_estimate", "[cost_check]") {
    constexpr double inf = std::numeric_limits<double>::infinity();
    for (const double ok :
         {0.0, -0.0, std::numeric_limits<double>::denorm_min(), 1.0, 1e-300, bcl::max_estimate})
        CHECK(bcl::valid_cost(ok));
    for (const double bad : {std::numeric_limits<double>::quiet_NaN(), -std::nan(""), inf, -inf,
                             -1.0, -std::numeric_limits<double>::denorm_min(),
                             std::nextafter(bcl::max_estimate, inf), 1e300})
        CHECK_FALSE(bcl::valid_cost(bad));
    // The rule agrees with the comparisons it replaces wherever those are defined.
    for (double x = -3.0; x < 3.0; x += 0.25) CHECK(bcl::valid_cost(x) == (x >= 0.0));
}

TEST_CASE("cost check: the message names the subject and the value, and is built only on failure",
          "[cost_check]") {
    REQUIRE_THROWS_AS(bcl::throw_invalid_cost("costs[7] is ", -2.5), bcl::error);
    REQUIRE_THROWS_WITH(bcl::throw_invalid_cost("costs[7] is ", -2.5),
                        StartsWith("costs[7] is -2.5; it must be >= 0") &&
                            Contains("at most bcl::max_estimate (1e+120)"));
    int built = 0;
    const auto subject = [&] {
        ++built;
        return std::string("record 3 has cost estimate ");
    };
    bcl::check_cost(4.0, subject);
    CHECK(built == 0);
    REQUIRE_THROWS_WITH(bcl::check_cost(std::numeric_limits<double>::quiet_NaN(), subject),
                        StartsWith("record 3 has cost estimate nan; it must be"));
    CHECK(built == 1);
}
