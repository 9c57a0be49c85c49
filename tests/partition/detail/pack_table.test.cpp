// bcl/partition/detail/pack_table.hpp, as a specification: a pack_table holds a partition as one
// ascending list of ranks per pack, with their costs alongside and a load per pack. reset()
// empties it for a shape; assign() loads a pack_of (rejecting an id out of range or a pack over
// its capacity, naming the item); write() gives the pack_of back with freshly summed loads and
// the heaviest; replace() and slot_of() keep a list sorted; swap_packs() exchanges two packs'
// contents but not their capacities; gather_placeholders() turns a short window dealt as if full
// into one whose last pack holds the remainder. Expectations are hand-worked.

#include "../../support/brute_force.hpp"
#include "../../support/error_message.hpp"

#include <bcl/partition/detail/pack_table.hpp>
#include <bcl/partition/detail/ranked_costs.hpp>

#include <catch2/catch.hpp>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace {

using bcl::detail::pack_table;
using bcl::detail::ranked_costs;

std::vector<std::uint32_t> members_of(const pack_table& t, std::size_t p) {
    return {t.members(p), t.members(p) + t.count(p)};
}

std::vector<double> costs_of(const pack_table& t, std::size_t p) {
    return {t.costs(p), t.costs(p) + t.count(p)};
}

} // namespace

TEST_CASE("pack_table: reset empties every pack and sets the capacities of the shape",
          "[partition][pack_table]") {
    pack_table t;
    t.reset({3, 4}, 10); // 4, 4, 2
    CHECK(t.packs() == 3);
    CHECK(t.stride() == 4);
    for (std::size_t p = 0; p < 3; ++p) {
        CHECK(t.count(p) == 0);
        CHECK(t.load(p) == 0.0);
    }
    CHECK(t.capacity(0) == 4);
    CHECK(t.capacity(2) == 2);
    t.append(1, 5, 2.5);
    t.reset({1, 1000}, 3); // a short window of a huge pack needs no more room than its items
    CHECK(t.stride() == 3);
    CHECK(t.count(0) == 0);
    CHECK(t.load(0) == 0.0);
    CHECK(t.capacity(0) == 3);
}

TEST_CASE("pack_table: assign loads a pack_of in rank order and write gives it back with fresh "
          "loads",
          "[partition][pack_table]") {
    ranked_costs ranked;
    const std::vector<double> costs{1, 6, 3,
                                    5, 2, 4}; // ranks: 6 5 4 3 2 1 at positions 1 3 5 2 4 0
    ranked.assign(costs, "test");
    pack_table t;
    t.reset({2, 3}, 6);
    const std::vector<std::uint32_t> pack_of{0, 1, 1, 0, 0, 1};
    t.assign(ranked, pack_of, "test");
    // Pack 0 holds positions 0, 3, 4 = costs 1, 5, 2 = ranks 5, 1, 4: listed 1, 4, 5.
    CHECK(members_of(t, 0) == std::vector<std::uint32_t>{1, 4, 5});
    CHECK(costs_of(t, 0) == std::vector<double>{5, 2, 1});
    CHECK(members_of(t, 1) == std::vector<std::uint32_t>{0, 2, 3}); // 6, 4, 3
    CHECK(t.load(0) == 8.0);
    CHECK(t.load(1) == 13.0);
    std::vector<std::uint32_t> out(6, 9);
    t.load(0) = -100.0; // write() recomputes what moves may have left inexact
    CHECK(t.write(ranked, out) == 13.0);
    CHECK(out == pack_of);
    CHECK(t.load(0) == 8.0);
}

TEST_CASE("pack_table: assign rejects an id out of range or a pack over capacity, naming the item "
          "and the pack",
          "[partition][pack_table][errors]") {
    ranked_costs ranked;
    const std::vector<double> costs{1, 2, 3, 4};
    ranked.assign(costs, "test");
    pack_table t;
    t.reset({2, 2}, 4);
    const std::vector<std::uint32_t> out_of_range{0, 0, 1, 2};
    CHECK_THAT(bcl_test::bcl_error_message([&] { t.assign(ranked, out_of_range, "who"); }),
               Catch::Contains("who") && Catch::Contains("item 3") &&
                   Catch::Contains("pack 2 of 2 packs"));
    t.reset({2, 2}, 4);
    const std::vector<std::uint32_t> overfull{1, 1, 0, 1};
    CHECK_THAT(bcl_test::bcl_error_message([&] { t.assign(ranked, overfull, "who"); }),
               Catch::Contains("who") && Catch::Contains("pack 1") &&
                   Catch::Contains("already holds its 2 items"));
}

TEST_CASE("pack_table: replace keeps a list ascending, slot_of finds a rank, swap_packs exchanges "
          "contents but not capacities",
          "[partition][pack_table]") {
    pack_table t;
    t.reset({2, 4}, 7); // capacities 4 and 3
    for (const std::uint32_t r : {1U, 3U, 5U, 7U}) t.append(0, r, 10.0 * r);
    for (const std::uint32_t r : {0U, 2U, 4U}) t.append(1, r, 10.0 * r);
    t.replace(0, 0, 6, 60.0); // 1 leaves; 6 goes between 5 and 7
    CHECK(members_of(t, 0) == std::vector<std::uint32_t>{3, 5, 6, 7});
    CHECK(costs_of(t, 0) == std::vector<double>{30, 50, 60, 70});
    t.replace(0, 3, 2, 20.0); // 7 leaves; 2 goes first
    CHECK(members_of(t, 0) == std::vector<std::uint32_t>{2, 3, 5, 6});
    CHECK(t.load(0) == 160.0); // loads are the caller's: still 10+30+50+70
    CHECK(t.slot_of(0, 5) == 2);
    CHECK(t.slot_of(1, 4) == 2);
    t.swap_packs(0, 1);
    CHECK(members_of(t, 0) == std::vector<std::uint32_t>{0, 2, 4});
    CHECK(members_of(t, 1) == std::vector<std::uint32_t>{2, 3, 5, 6});
    CHECK(t.load(1) == 160.0);
    CHECK(t.load(0) == 60.0);
    CHECK(t.capacity(0) == 4);
    CHECK(t.capacity(1) == 3);
}

TEST_CASE("pack_table: gather_placeholders moves the zero-cost placeholders into one pack, makes "
          "it the last and drops them",
          "[partition][pack_table]") {
    ranked_costs ranked;
    SECTION("placeholders in two packs: the last one hosts, the other trades with its cheapest") {
        // Seven items 9..3 dealt as nine, snake order: p0 {0,5,6}, p1 {1,4,7}, p2 {2,3,8}; ranks
        // 7 and 8 are placeholders. p2 (the last) holds as many as any other, so it hosts: p1's
        // placeholder 7 trades with p2's cheapest real rank, 3. Then p2 drops 7 and 8.
        const std::vector<double> costs{9, 8, 7, 6, 5, 4, 3};
        ranked.assign(costs, "test");
        pack_table t;
        t.reset({3, 3}, 9);
        const std::uint32_t deal[9] = {0, 1, 2, 2, 1, 0, 0, 1, 2};
        for (std::uint32_t r = 0; r < 9; ++r) t.append(deal[r], r, r < 7 ? costs[r] : 0.0);
        t.gather_placeholders(7, ranked);
        CHECK(members_of(t, 0) == std::vector<std::uint32_t>{0, 5, 6});
        CHECK(members_of(t, 1) == std::vector<std::uint32_t>{1, 3, 4});
        CHECK(members_of(t, 2) == std::vector<std::uint32_t>{2});
        CHECK(t.capacity(2) == 1);
        CHECK(t.load(1) == 19.0); // 8 + 6 + 5
        CHECK(t.load(2) == 7.0);
        std::vector<std::uint32_t> pack_of(7);
        t.write(ranked, pack_of);
        CHECK(bcl_test::check_fill(pack_of, bcl_test::window_capacities(7, 3, 3)) == "");
    }
    SECTION("the placeholder in pack 0: that pack becomes the last") {
        // Three items dealt as four: p0 {0, 3}, p1 {1, 2}. p0 hosts, drops 3, and trades places
        // with p1: p0 = {1, 2}, p1 = {0}.
        const std::vector<double> costs{3, 2, 1};
        ranked.assign(costs, "test");
        pack_table t;
        t.reset({2, 2}, 4);
        t.append(0, 0, 3.0);
        t.append(1, 1, 2.0);
        t.append(1, 2, 1.0);
        t.append(0, 3, 0.0);
        t.gather_placeholders(3, ranked);
        CHECK(members_of(t, 0) == std::vector<std::uint32_t>{1, 2});
        CHECK(members_of(t, 1) == std::vector<std::uint32_t>{0});
        CHECK(t.capacity(1) == 1);
        CHECK(t.capacity(0) == 2);
        CHECK(t.load(0) == 3.0);
        CHECK(t.load(1) == 3.0);
    }
}
