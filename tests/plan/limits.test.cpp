// bcl::max_plan_records, as a specification: one limit for every plan, 2^30 records a window
// (fixed-size plans) and 2^30 cells a token plan, so that a record's position fits 32 bits with
// room, whichever plan's header a program includes.

#include <bcl/detail/plan/limits.hpp>
#include <bcl/global_plan.hpp>
#include <bcl/token_budget.hpp>

#include <catch2/catch.hpp>

#include <cstddef>
#include <cstdint>
#include <limits>

TEST_CASE("max_plan_records is 2^30, below what a 32-bit position holds", "[plan][limits]") {
    STATIC_REQUIRE(bcl::max_plan_records == std::size_t{1} << 30);
    STATIC_REQUIRE(bcl::max_plan_records < std::numeric_limits<std::uint32_t>::max());
}

TEST_CASE("a token budget above the limit is refused in its words", "[plan][limits]") {
    const bcl::token_budget budget{.ranks = bcl::max_plan_records, .max_tokens = 8};
    CHECK_NOTHROW(bcl::check_token_budget(budget, 1, "t"));
    CHECK_THROWS_WITH(bcl::check_token_budget(budget, 2, "t"),
                      Catch::Matchers::Contains("cells a plan may hold"));
}
