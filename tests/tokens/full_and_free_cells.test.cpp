// Cases of bcl::token_planner found from the Python package, as a specification: a record above
// the budget closes its micro-batch (no record of no tokens joins it, while a micro-batch full of
// records within the budget still takes one), records of no cost still fill every micro-batch
// (LPT's ties go to the cell of fewer records), and a window of more micro-batches than a plan
// may hold is a bcl::error, not an overflow.

#include "support/error_message.hpp"

#include <bcl/detail/tokens/cell_packer.hpp>
#include <bcl/token_plan.hpp>

#include <catch2/catch.hpp>

#include <cstddef>
#include <cstdint>
#include <set>
#include <span>
#include <string>
#include <tuple>
#include <vector>

namespace {

using cell = std::tuple<std::uint32_t, std::uint32_t, std::uint32_t>; // step, micro, rank

std::set<cell> cells_of(const std::vector<bcl::micro_slot>& plan) {
    std::set<cell> cells;
    for (const bcl::micro_slot& s : plan) cells.insert({s.step, s.micro, s.rank});
    return cells;
}

} // namespace

TEST_CASE("a record above the budget keeps its micro-batch even from records of no tokens",
          "[tokens]") {
    bcl::token_planner planner;
    const std::vector<std::uint64_t> tokens{0, 100, 0};
    std::vector<bcl::micro_slot> plan(tokens.size());
    const bcl::token_plan_options alone{.oversized_alone = true};
    const bcl::token_plan_summary s =
        planner.plan_held(tokens, {}, {}, {.ranks = 1, .max_tokens = 50}, 1, alone, plan);
    CHECK(s.oversized == 1);
    CHECK(plan[1] != plan[0]);
    CHECK(plan[1] != plan[2]);
}

TEST_CASE("a micro-batch full of records within the budget still takes a record of no tokens",
          "[tokens]") {
    // T = 1, m = 2: two micro-batches of one token each, the empty record beside either.
    bcl::token_planner planner;
    const std::vector<std::uint64_t> tokens{1, 1, 0};
    std::vector<bcl::micro_slot> plan(tokens.size());
    const bcl::token_plan_summary s = planner.plan_held(
        tokens, {}, {}, {.ranks = 1, .max_tokens = 1, .multiple_of = 2}, 1, {}, plan);
    CHECK(s.micro_batches == 2);
    CHECK(cells_of(plan).size() == 2);
}

TEST_CASE("a group kept in one micro-batch holds a record above the budget only alone",
          "[tokens]") {
    bcl::token_planner planner;
    const std::vector<std::uint64_t> tokens{100, 0, 5, 5};
    const std::vector<std::uint64_t> groups{7, 7, 8, 9};
    std::vector<bcl::micro_slot> plan(tokens.size());
    const bcl::token_plan_options opt{.oversized_alone = true, .group_together = true};
    const std::string message = bcl_test::bcl_error_message([&] {
        (void)planner.plan_held(tokens, {}, groups, {.ranks = 1, .max_tokens = 50}, 1, opt, plan);
    });
    CHECK_THAT(message, Catch::Matchers::Contains("group 7 holds record 0, above max_tokens "
                                                  "(50) and so alone in its micro-batch, beside "
                                                  "other records"));
    const std::vector<std::uint64_t> apart{7, 6, 8, 9}; // alone in a group of its own: planned
    const bcl::token_plan_summary s =
        planner.plan_held(tokens, {}, apart, {.ranks = 1, .max_tokens = 50}, 1, opt, plan);
    CHECK(s.oversized == 1);
    CHECK(plan[0] != plan[1]);
}

TEST_CASE("records of no cost fill every micro-batch", "[tokens]") {
    bcl::token_planner planner;
    const std::vector<std::uint64_t> tokens{1, 1, 1, 1};
    std::vector<bcl::micro_slot> plan(tokens.size());
    SECTION("costs of 0 given") {
        const std::vector<double> costs(tokens.size(), 0.0);
        const bcl::token_plan_summary s =
            planner.plan_held(tokens, costs, {}, {.ranks = 2, .max_tokens = 10}, 1, {}, plan);
        CHECK(s.micro_batches == 1);
        CHECK(cells_of(plan).size() == 2); // both ranks' micro-batch holds a record
    }
    SECTION("records of no tokens, whose default cost is 0") {
        const std::vector<std::uint64_t> empty(8, 0);
        std::vector<bcl::micro_slot> out(empty.size());
        const bcl::token_plan_summary s =
            planner.plan_held(empty, {}, {}, {.ranks = 2, .max_tokens = 10}, 2, {}, out);
        CHECK(s.micro_steps == 2);
        CHECK(cells_of(out).size() == 4);
    }
}

TEST_CASE("the packer's ties go to the cell of fewer records, then the lower id", "[tokens]") {
    // Record 0 costs 1 and takes cell 0; the records of no cost then tie on load 0 in cells 1
    // and 2: record 1 takes cell 1 (the lower id), record 2 cell 2 (fewer records than cell 1),
    // and record 3 cell 1 again (load 0, one record, the lower id).
    bcl::detail::tokens::cell_packer packer;
    const std::vector<std::uint64_t> tokens{1, 1, 1, 1};
    const std::vector<std::uint64_t> cost{1, 0, 0, 0};
    const std::vector<std::uint32_t> order{0, 1, 2, 3};
    REQUIRE(packer.deal(order, tokens, cost, 3, 10));
    CHECK(packer.cell_of(0) == 0);
    CHECK(packer.cell_of(1) == 1);
    CHECK(packer.cell_of(2) == 2);
    CHECK(packer.cell_of(3) == 1);
}

TEST_CASE("a stream window of more micro-batches than a plan holds is an error", "[tokens]") {
    bcl::token_planner planner;
    const std::vector<std::uint64_t> tokens{10, 20, 30, 40};
    std::vector<bcl::micro_slot> plan(tokens.size());
    const std::size_t huge = std::size_t{1} << 62; // R * K * M wraps to 0 in 64 bits
    const std::string message = bcl_test::bcl_error_message([&] {
        (void)planner.plan_stream(tokens, {}, {.ranks = 4, .max_tokens = 64}, huge, 1, true, {},
                                  plan);
    });
    CHECK_THAT(message, Catch::Matchers::Contains("cells a plan may hold"));
}
