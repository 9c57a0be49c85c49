// bcl/names.hpp, as a specification: every choice of bcl::options is known by one name, the
// policies' and cap kinds' from their components, in the order of the enum's values; a name that
// is none of them is an error that lists them.

#include <bcl/names.hpp>
#include <bcl/options.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

using Catch::Matchers::Contains;

namespace {

template <class Enum>
std::vector<std::string_view> all_names() {
    const auto names = bcl::names_of<Enum>();
    return {names.begin(), names.end()};
}

template <class Enum>
void round_trips() {
    const auto names = bcl::names_of<Enum>();
    for (std::size_t i = 0; i < names.size(); ++i) {
        const auto value = static_cast<Enum>(i);
        CHECK(bcl::name_of(value) == names[i]);
        CHECK(bcl::find_named<Enum>(names[i]) == value);
        CHECK(bcl::named<Enum>(names[i]) == value);
    }
    CHECK(bcl::name_of(static_cast<Enum>(names.size())).empty());
    CHECK_FALSE(bcl::find_named<Enum>("no such name").has_value());
}

} // namespace

TEST_CASE("names: each choice of bcl::options is spelt as the user writes it, in the order of the "
          "enum's values",
          "[names]") {
    CHECK(all_names<bcl::lookahead_policy>() ==
          std::vector<std::string_view>{"tumbling", "sliding"});
    CHECK(bcl::name_of(bcl::lookahead_policy::sliding) == "sliding");
    CHECK(all_names<bcl::cap_kind>() == std::vector<std::string_view>{"none", "fixed", "quantile"});
    CHECK(bcl::name_of(bcl::cap_kind::quantile) == "quantile");
    CHECK(all_names<bcl::emission_order>() ==
          std::vector<std::string_view>{"costliest_first", "shuffled"});
    CHECK(all_names<bcl::batch_cost>() == std::vector<std::string_view>{"packed", "padded"});
    CHECK(all_names<bcl::cap_action>() == std::vector<std::string_view>{"clip", "truncate"});
    round_trips<bcl::lookahead_policy>();
    round_trips<bcl::cap_kind>();
    round_trips<bcl::emission_order>();
    round_trips<bcl::batch_cost>();
    round_trips<bcl::cap_action>();
}

TEST_CASE("names: a name that is none of the choices is an error listing them", "[names]") {
    REQUIRE_THROWS_AS(bcl::named<bcl::lookahead_policy>("fastest"), bcl::error);
    REQUIRE_THROWS_WITH(bcl::named<bcl::lookahead_policy>("fastest"),
                        Contains("no lookahead policy is named 'fastest'") &&
                            Contains("the lookahead policies are tumbling, sliding"));
    REQUIRE_THROWS_WITH(bcl::named<bcl::cap_kind>("p99"),
                        Contains("the cap kinds are none, fixed, quantile"));
    REQUIRE_THROWS_WITH(bcl::named<bcl::batch_cost>(""), Contains("no batch cost is named ''"));
}

TEST_CASE("names: bcl::for_each_option_field names every field of bcl::options once", "[names]") {
    std::vector<std::string> names;
    const bcl::options changed;
    bcl::for_each_option_field([&](const char* name, auto field) {
        names.emplace_back(name);
        // Each accessor reaches a field of an options object, for reading and writing.
        bcl::options o;
        field(o) = std::remove_cvref_t<decltype(field(o))>{};
        (void)field(changed);
    });
    CHECK(names.front() == "batch_size");
    for (const char* expected :
         {"policy", "cap.kind", "cap.quantile", "calibration.horizon", "memory_budget"})
        CHECK(std::count(names.begin(), names.end(), expected) == 1);
    std::vector<std::string> sorted = names;
    std::sort(sorted.begin(), sorted.end());
    CHECK(std::adjacent_find(sorted.begin(), sorted.end()) == sorted.end());
}
