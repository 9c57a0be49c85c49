// detail/variant_of.hpp: a policy or cap kind chosen by its enum value, as its type (to check its
// settings before anything is built from them) or as a component built from its settings.

#include <bcl/detail/variant_of.hpp>

#include <catch2/catch.hpp>

#include <cstddef>
#include <optional>
#include <string>
#include <type_traits>
#include <variant>

namespace {

int components_built = 0; // components constructed so far

template <int N>
struct component {
    static constexpr int number = N;
    explicit component(const std::string& /*settings*/) { ++components_built; }
    static int validate(const std::string& settings) {
        return static_cast<int>(settings.size()) + N;
    }
};

using components = std::variant<component<0>, component<1>, component<2>>;

} // namespace

TEST_CASE("visit_alternative_type hands over the type at an index and builds nothing",
          "[variant-of]") {
    components_built = 0;
    for (std::size_t index = 0; index < 3; ++index) {
        int seen = -1;
        const bool known = bcl::detail::visit_alternative_type<components>(
            index, [&](auto type) { seen = decltype(type)::type::validate("abc") - 3; });
        CHECK(known);
        CHECK(seen == static_cast<int>(index));
    }
    int calls = 0;
    CHECK_FALSE(bcl::detail::visit_alternative_type<components>(3, [&](auto) { ++calls; }));
    CHECK_FALSE(bcl::detail::visit_alternative_type<components>(255, [&](auto) { ++calls; }));
    CHECK(calls == 0);
    CHECK(components_built == 0);
}

TEST_CASE("variant_of builds the alternative at an index, and nothing past the last",
          "[variant-of]") {
    components_built = 0;
    const std::optional<components> second = bcl::detail::variant_of<components>(1, std::string{});
    REQUIRE(second);
    CHECK(second->index() == 1);
    CHECK(components_built == 1);
    CHECK_FALSE(bcl::detail::variant_of<components>(3, std::string{}));
    CHECK(components_built == 1);
}
