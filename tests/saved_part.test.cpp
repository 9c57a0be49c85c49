// bcl/detail/saved_part.hpp, as a specification: what every component's part of a saved state
// shares. check_saved(ok, what) refuses a state no balancer could have written with a bcl::error
// that says so and names what; part_of<Part>(whole) is the Part base of a composed state, const
// exactly when the whole is (the writer walks a const state, the reader a mutable one, through the
// same field list); check_part runs a part's check() if it has one and is a no-op otherwise;
// keeps_state says whether a component declares a part (a nested `saved`).

#include <bcl/detail/saved_part.hpp>
#include <bcl/error.hpp>

#include <catch2/catch.hpp>

#include <string>
#include <type_traits>

namespace {

using bcl::detail::check_part;
using bcl::detail::check_saved;
using bcl::detail::keeps_state;
using bcl::detail::part_of;
using Catch::Matchers::Contains;

// Two components' parts and a state composed of them, as the state layer composes them.
struct counter_part {
    int count = 0;
    void check() const { check_saved(count >= 0, "counter: count is negative"); }
};
struct label_part { // nothing to check
    std::string label;
};
struct whole_state : counter_part, label_part {};

// Components: one declares a part, one keeps nothing.
struct counting_component {
    using saved = counter_part;
};
struct stateless_component {};
struct component_with_value_named_saved {
    int saved = 0; // a member, not a type: declares no part
};

} // namespace

TEST_CASE("saved_part: check_saved passes a consistent state and refuses the rest, saying why",
          "[saved_part]") {
    CHECK_NOTHROW(check_saved(true, "unused"));
    CHECK_THROWS_AS(check_saved(false, "x"), bcl::error);
    CHECK_THROWS_WITH(check_saved(false, "3 records pending but 2 counted"),
                      "bcl: saved state is inconsistent: 3 records pending but 2 counted");
}

TEST_CASE("saved_part: part_of gives the part itself, const exactly when the whole is",
          "[saved_part]") {
    whole_state w;
    auto& counter = part_of<counter_part>(w);
    auto& label = part_of<label_part>(w);
    STATIC_REQUIRE(std::is_same_v<decltype(part_of<counter_part>(w)), counter_part&>);
    STATIC_REQUIRE(std::is_same_v<decltype(part_of<label_part>(w)), label_part&>);
    // The same object, not a copy: a reader writes through it into the whole.
    counter.count = 7;
    label.label = "read";
    CHECK(w.count == 7);
    CHECK(w.label == "read");

    const whole_state& cw = w;
    STATIC_REQUIRE(std::is_same_v<decltype(part_of<counter_part>(cw)), const counter_part&>);
    STATIC_REQUIRE(std::is_same_v<decltype(part_of<label_part>(cw)), const label_part&>);
    CHECK(&part_of<counter_part>(cw) == static_cast<const counter_part*>(&w));
    CHECK(&part_of<label_part>(cw) == static_cast<const label_part*>(&w));
    STATIC_REQUIRE(noexcept(part_of<label_part>(cw)));
}

TEST_CASE("saved_part: check_part runs a part's own check, and passes a part that has none",
          "[saved_part]") {
    whole_state w;
    CHECK_NOTHROW(check_part(part_of<counter_part>(w)));
    CHECK_NOTHROW(check_part(part_of<label_part>(w)));
    w.count = -1;
    CHECK_THROWS_WITH(check_part(part_of<counter_part>(w)),
                      Contains("inconsistent") && Contains("counter: count is negative"));
    CHECK_NOTHROW(check_part(part_of<label_part>(w))); // the other part is not its business
}

TEST_CASE("saved_part: keeps_state is whether a component declares its part as a type `saved`",
          "[saved_part]") {
    STATIC_REQUIRE(keeps_state<counting_component>);
    STATIC_REQUIRE_FALSE(keeps_state<stateless_component>);
    STATIC_REQUIRE_FALSE(keeps_state<component_with_value_named_saved>);
    STATIC_REQUIRE_FALSE(keeps_state<int>);
}
