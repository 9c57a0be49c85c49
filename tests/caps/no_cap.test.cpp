// bcl::detail::no_cap, as a specification: the cap kind spelled "none" caps nothing. Its cap is
// +infinity for every record, whatever was added; it accepts any cap_options (it has no field of
// its own), is settled from the start, sketches nothing, keeps no state, and leaves a whole stream
// of known costs unclipped (level +infinity). It is default-constructible, so a balancer without
// a cap needs no options to build one.

#include <bcl/detail/caps/no_cap.hpp>
#include <bcl/detail/saved_part.hpp>
#include <bcl/options.hpp>

#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

using bcl::detail::no_cap;

TEST_CASE("no_cap: the cap is +infinity for every record, whatever was added", "[caps][no_cap]") {
    STATIC_REQUIRE(no_cap::name == "none");
    STATIC_REQUIRE(std::is_default_constructible_v<no_cap>);
    STATIC_REQUIRE_FALSE(bcl::detail::keeps_state<no_cap>);
    no_cap cap(bcl::cap_options{.kind = bcl::cap_kind::none, .value = 3.0, .quantile = 0.5});
    for (const double estimate : {0.0, 1.0, 1e300, std::numeric_limits<double>::max()}) {
        CHECK(cap.current() == HUGE_VAL);
        CHECK(std::isinf(cap.current()));
        CHECK(cap.settled());
        cap.add(estimate, cap.current());
    }
    CHECK(cap.current() == HUGE_VAL);
    CHECK(no_cap::sketched(1000) == 0);
    const std::vector<double> costs{1e300, 1.0, 0.0};
    CHECK(no_cap::stream_level(costs) == HUGE_VAL);
    CHECK(no_cap::stream_level({}) == HUGE_VAL);
}

TEST_CASE("no_cap: any cap_options are valid, since none of their fields is its own",
          "[caps][no_cap]") {
    for (const double x : {-1.0, 0.0, 2.0, HUGE_VAL, std::nan("")})
        CHECK_NOTHROW(no_cap::validate(bcl::cap_options{.value = x, .quantile = x, .prior = x}));
    // What it is built from changes nothing.
    CHECK(no_cap(bcl::cap_options{.value = 5.0}).current() == no_cap().current());
}
