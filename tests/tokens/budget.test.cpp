// bcl::token_budget and bcl::token_plan_options, as a specification of their home at the token
// plan's parts: aggregates whose defaults are the strict plan (one multiple, nothing alone, no
// group kept whole, a window filled, no empty micro-batch, lengths as they are), so a plan asks
// for each leniency by name.

#include <bcl/detail/tokens/budget.hpp>

#include <catch2/catch.hpp>

#include <type_traits>

TEST_CASE("token budget and options: aggregates whose defaults are the strict plan",
          "[tokens][budget]") {
    STATIC_REQUIRE(std::is_aggregate_v<bcl::token_budget>);
    STATIC_REQUIRE(std::is_aggregate_v<bcl::token_plan_options>);
    const bcl::token_budget b{.ranks = 8, .max_tokens = 131072};
    CHECK(b.multiple_of == 1);
    const bcl::token_plan_options opt;
    CHECK_FALSE(opt.oversized_alone);
    CHECK_FALSE(opt.group_together);
    CHECK(opt.max_fill == 1.0);
    CHECK_FALSE(opt.allow_empty_micro_batches);
    CHECK(opt.pad_to_multiple_of == 1);
}
