// bcl::error, as a specification: the one exception type bcl throws for bad input and misuse. It
// is a std::runtime_error (so a handler for std::exception or std::runtime_error sees it), built
// explicitly from a message that what() returns unchanged. Errors the library finds are of this
// type and name what was wrong; errors from user code (an estimator) are never wrapped in it.

#include <bcl/balancer.hpp>
#include <bcl/error.hpp>
#include <bcl/options.hpp>
#include <bcl/validate.hpp>

#include <catch2/catch.hpp>

#include <exception>
#include <limits>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>

namespace {

using Catch::Matchers::Contains;

struct costed_record {
    double cost = 0.0;
};

// An estimator that fails in its own way: its exception must reach the caller as it is.
struct failing_estimator {
    double operator()(const costed_record& r) const {
        if (r.cost < 0.0) throw std::out_of_range("estimator: record out of its table");
        return r.cost;
    }
};

} // namespace

TEST_CASE("error: a std::runtime_error, built only explicitly from a message", "[error]") {
    STATIC_REQUIRE(std::is_base_of_v<std::runtime_error, bcl::error>);
    STATIC_REQUIRE(std::is_base_of_v<std::exception, bcl::error>);
    STATIC_REQUIRE(std::is_constructible_v<bcl::error, const std::string&>);
    STATIC_REQUIRE(std::is_constructible_v<bcl::error, const char*>);
    // A string does not silently become an error (explicit), and an error is an ordinary value
    // that can be copied and rethrown.
    STATIC_REQUIRE_FALSE(std::is_convertible_v<std::string, bcl::error>);
    STATIC_REQUIRE(std::is_nothrow_copy_constructible_v<bcl::error>);
}

TEST_CASE("error: what() is the message, unchanged, whatever handler catches it", "[error]") {
    const std::string message = "bcl::options::batch_size must be at least 1 (got 0)";
    try {
        throw bcl::error(message);
    } catch (const std::runtime_error& e) {
        CHECK(std::string(e.what()) == message);
        CHECK(dynamic_cast<const bcl::error*>(&e) != nullptr);
    }
    try {
        throw bcl::error("");
    } catch (const std::exception& e) {
        CHECK(std::string(e.what()).empty());
    }
    const bcl::error original("a message that survives a copy");
    const bcl::error copy = original; // NOLINT(performance-unnecessary-copy-initialization)
    CHECK(std::string(copy.what()) == "a message that survives a copy");
}

TEST_CASE("error: what the library finds wrong is a bcl::error naming it", "[error]") {
    // A bad option: caught as bcl::error, and the message names the option.
    bool caught = false;
    try {
        bcl::validate(bcl::options{.batch_size = 4, .lookahead = 0});
    } catch (const bcl::error& e) {
        caught = true;
        CHECK_THAT(e.what(), Contains("lookahead"));
    }
    CHECK(caught);
    // A bad cost: the message names the record's position and its value.
    bcl::balancer<costed_record, failing_estimator> b{failing_estimator{}, {.batch_size = 2}};
    b.push(costed_record{1.0});
    CHECK_THROWS_AS(b.push(costed_record{std::numeric_limits<double>::quiet_NaN()}), bcl::error);
    CHECK_THROWS_WITH(b.push(costed_record{std::numeric_limits<double>::quiet_NaN()}),
                      Contains("record 1") && Contains("nan"));
}

TEST_CASE("error: an exception from user code is never wrapped in a bcl::error", "[error]") {
    bcl::balancer<costed_record, failing_estimator> b{failing_estimator{}, {.batch_size = 2}};
    bool caught_as_is = false;
    try {
        b.push(costed_record{-1.0});
    } catch (const bcl::error&) {
        FAIL("the estimator's exception came out as a bcl::error");
    } catch (const std::out_of_range& e) {
        caught_as_is = std::string(e.what()) == "estimator: record out of its table";
    }
    CHECK(caught_as_is);
    CHECK(b.buffered() == 0);
}
