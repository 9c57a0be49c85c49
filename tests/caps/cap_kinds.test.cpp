// The cap kinds (detail/caps/): one component per value of bcl::cap_kind, in its order, each
// checking its own fields, and each saying when its cap has settled, how many estimates a saved
// sketch must hold, and the level a whole stream of known costs is clipped at.

#include "support/error_message.hpp"

#include <bcl/detail/caps/cap_kinds.hpp>
#include <bcl/detail/intake/outlier_cap.hpp>
#include <bcl/error.hpp>
#include <bcl/options.hpp>
#include <bcl/validate.hpp>

#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <string>
#include <variant>
#include <vector>

namespace {

using bcl::cap_kind;
using bcl::cap_options;
using bcl::detail::cap_kinds;
using bcl::detail::make_cap_kind;

} // namespace

TEST_CASE("Each cap_kind value makes the component of its name", "[cap-kinds]") {
    CHECK(std::holds_alternative<bcl::detail::no_cap>(make_cap_kind({})));
    CHECK(std::holds_alternative<bcl::detail::fixed_cap>(
        make_cap_kind({.kind = cap_kind::fixed, .value = 3.0})));
    CHECK(std::holds_alternative<bcl::detail::quantile_cap>(
        make_cap_kind({.kind = cap_kind::quantile})));
    const cap_options unknown{.kind = static_cast<cap_kind>(std::variant_size_v<cap_kinds>)};
    CHECK_THAT(bcl_test::bcl_error_message([&] { (void)make_cap_kind(unknown); }),
               Catch::Contains("cap.kind has no such kind (3)"));
}

TEST_CASE("Each cap kind checks its own fields and only those", "[cap-kinds]") {
    // A fixed cap's value and a quantile cap's quantile and prior; the other kinds ignore them.
    CHECK_THAT(bcl_test::bcl_error_message([&] {
                   (void)bcl::detail::fixed_cap::validate({.kind = cap_kind::fixed, .value = 0.0});
               }),
               Catch::Contains("cap.value must be finite"));
    CHECK_THAT(bcl_test::bcl_error_message([&] {
                   (void)bcl::detail::quantile_cap::validate(
                       {.kind = cap_kind::quantile, .quantile = 1.0});
               }),
               Catch::Contains("cap.quantile must be in (0, 1)"));
    CHECK_THAT(bcl_test::bcl_error_message([&] {
                   (void)bcl::detail::quantile_cap::validate(
                       {.kind = cap_kind::quantile, .prior = NAN});
               }),
               Catch::Contains("cap.prior must be finite"));
    CHECK_NOTHROW(bcl::detail::no_cap::validate({.value = -1.0, .quantile = 7.0}));
    CHECK_NOTHROW(bcl::detail::fixed_cap::validate({.value = 2.0, .quantile = 7.0}));
    CHECK_NOTHROW(bcl::detail::quantile_cap::validate({.value = -1.0, .quantile = 0.5}));
}

TEST_CASE("A cap settles when later records will see it: a quantile cap once its warm-up ends",
          "[cap-kinds]") {
    CHECK(bcl::detail::outlier_cap({}).settled());
    CHECK(bcl::detail::outlier_cap({.kind = cap_kind::fixed, .value = 5.0}).settled());
    bcl::detail::outlier_cap quantile({.kind = cap_kind::quantile, .quantile = 0.5, .warmup = 4});
    for (int i = 0; i < 4; ++i) {
        CHECK_FALSE(quantile.settled());
        quantile.add(1.0 + i, quantile.current());
    }
    CHECK(quantile.settled());
    // With a prior the cap is in force from the first record.
    CHECK(bcl::detail::outlier_cap({.kind = cap_kind::quantile, .warmup = 4, .prior = 9.0})
              .settled());
}

TEST_CASE("Only a quantile cap sketches, every record of every epoch", "[cap-kinds]") {
    for (const cap_options& cap :
         {cap_options{}, cap_options{.kind = cap_kind::fixed, .value = 1}}) {
        std::visit([](const auto& kind) { CHECK(kind.sketched(1234) == 0); }, make_cap_kind(cap));
    }
    std::visit([](const auto& kind) { CHECK(kind.sketched(1234) == 1234); },
               make_cap_kind({.kind = cap_kind::quantile}));
}

TEST_CASE("A stream of known costs is clipped at the kind's level: none, the value, or the exact "
          "quantile",
          "[cap-kinds]") {
    std::vector<double> costs;
    for (int i = 1; i <= 100; ++i) costs.push_back(i); // the p90 of 1..100 is 90
    auto level = [&](const cap_options& cap) {
        return std::visit([&](const auto& kind) { return kind.stream_level(costs); },
                          make_cap_kind(cap));
    };
    CHECK(level({}) == HUGE_VAL);
    CHECK(level({.kind = cap_kind::fixed, .value = 42.0}) == 42.0);
    CHECK(level({.kind = cap_kind::quantile, .quantile = 0.9}) == 90.0);
    CHECK(level({.kind = cap_kind::quantile, .quantile = 0.001}) == 1.0);
}

TEST_CASE("Every cap kind saves its part of a state and continues exactly from it", "[cap-kinds]") {
    for (const cap_options& cap :
         {cap_options{}, cap_options{.kind = cap_kind::fixed, .value = 30.0},
          cap_options{.kind = cap_kind::quantile, .quantile = 0.7, .warmup = 10}}) {
        INFO("kind " << static_cast<int>(cap.kind));
        bcl::detail::outlier_cap original(cap);
        for (int i = 0; i < 150; ++i) original.add((i * 37) % 101, original.current());
        bcl::detail::outlier_cap::saved saved;
        original.save_into(saved);
        CHECK(saved.sketch.count() == (cap.kind == cap_kind::quantile ? 150U : 0U));
        bcl::detail::outlier_cap restored(cap);
        restored.restore_from(saved);
        for (int i = 150; i < 400; ++i) {
            const double c = original.current();
            REQUIRE(restored.current() == c);
            original.add((i * 53) % 97, c);
            restored.add((i * 53) % 97, c);
        }
    }
}

namespace {

/// Notes the name of each field a list walks.
struct field_names {
    std::vector<std::string> names;
    template <class T>
    void field(const char* name, const T& /*value*/) {
        names.emplace_back(name);
    }
};

} // namespace

TEST_CASE("The caps' part of a saved state is each kind's part in the list's order: a kind that "
          "keeps none adds nothing",
          "[cap-kinds]") {
    STATIC_REQUIRE(bcl::detail::keeps_state<bcl::detail::quantile_cap>);
    STATIC_REQUIRE_FALSE(bcl::detail::keeps_state<bcl::detail::no_cap>);
    STATIC_REQUIRE_FALSE(bcl::detail::keeps_state<bcl::detail::fixed_cap>);
    const bcl::detail::outlier_cap::saved part;
    field_names walked;
    bcl::detail::outlier_cap::saved::fields(walked, part);
    CHECK(walked.names == std::vector<std::string>{"the quantile cap", "the quantile sketch"});

    bcl::detail::outlier_cap::saved negative;
    negative.quantile_cap = -1.0;
    CHECK_THAT(bcl_test::bcl_error_message([&] { negative.check(); }),
               Catch::Contains("an invalid quantile cap"));
    CHECK_NOTHROW(part.check());
}

TEST_CASE("Validating a quantile outside (0, 1) refuses it without computing a warm-up from it",
          "[cap-kinds]") {
    // 1 would make the default warm-up 10 / 0 records; validate() builds the kind before it checks
    // the kind's fields, so building it must not compute one.
    for (const double q : {1.0, 2.0, -0.5, 0.0, static_cast<double>(NAN), HUGE_VAL}) {
        INFO("quantile " << q);
        const cap_options cap{.kind = cap_kind::quantile, .quantile = q};
        CHECK(bcl::cap_warmup(cap) == 0);
        CHECK_THAT(bcl_test::bcl_error_message(
                       [&] { bcl::validate(bcl::options{.batch_size = 1, .cap = cap}); }),
                   Catch::Contains("cap.quantile must be in (0, 1)"));
    }
    CHECK(bcl::cap_warmup({.kind = cap_kind::quantile, .quantile = 0.99}) == 1000);
}
