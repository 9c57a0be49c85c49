// bcl::detail::tokens::read_records, as a specification: a token plan's records as integers.
// The default cost is L * 24576 + L^2 (L + L^2/24576 in units of 1/24576), shifted only when n
// of them would not add up below 2^63; given costs are quantized as the global plan's are; a
// record above T is an error naming it, or with oversized_alone is counted as T tokens, marked
// and counted.

#include <bcl/detail/tokens/token_records.hpp>
#include <bcl/error.hpp>

#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

using bcl::detail::tokens::default_cost_units;
using bcl::detail::tokens::read_records;
using bcl::detail::tokens::token_records;

TEST_CASE("the default cost is L + L^2/24576, in integers", "[tokens][token_records]") {
    CHECK(default_cost_units(0) == 0);
    CHECK(default_cost_units(1) == 24577);
    CHECK(default_cost_units(24576) == 2 * 24576ULL * 24576ULL);
    const std::vector<std::uint64_t> tokens{0, 1, 100, 4096};
    token_records r;
    read_records(tokens, {}, 4096, false, "test", r);
    for (std::size_t i = 0; i < tokens.size(); ++i) {
        CHECK(r.tokens[i] == tokens[i]);
        CHECK(r.cost[i] == default_cost_units(tokens[i]));
        // unit turns fixed point back into L + L^2/24576.
        const double l = static_cast<double>(tokens[i]);
        CHECK(static_cast<double>(r.cost[i]) * r.unit == Approx(l + l * l / 24576.0));
    }
    CHECK(r.oversized == 0);
}

TEST_CASE("default costs of the largest records are shifted so that their sum stays exact",
          "[tokens][token_records]") {
    const std::uint64_t most = bcl::detail::tokens::max_record_tokens;
    const std::vector<std::uint64_t> tokens(8, most);
    token_records r;
    read_records(tokens, {}, most, false, "test", r);
    std::uint64_t sum = 0;
    for (const std::uint64_t c : r.cost) {
        REQUIRE(c <= std::numeric_limits<std::uint64_t>::max() / 2 - sum);
        sum += c;
    }
    CHECK(sum < (std::uint64_t{1} << 63));
    const double exact = static_cast<double>(most) + std::ldexp(1.0, 62) / 24576.0;
    CHECK(static_cast<double>(r.cost[0]) * r.unit == Approx(exact));
}

TEST_CASE("given costs are read in fixed point, in proportion", "[tokens][token_records]") {
    const std::vector<std::uint64_t> tokens{1, 2, 3};
    const std::vector<double> costs{0.0, 1.5, 3.0};
    token_records r;
    read_records(tokens, costs, 10, false, "test", r);
    CHECK(r.cost[0] == 0);
    CHECK(r.cost[2] == 2 * r.cost[1]);
    CHECK(static_cast<double>(r.cost[2]) * r.unit == Approx(3.0));
}

TEST_CASE("a record above T is an error naming it, or alone, counted as T tokens",
          "[tokens][token_records]") {
    const std::vector<std::uint64_t> tokens{5, 11, 3};
    token_records r;
    try {
        read_records(tokens, {}, 10, false, "who", r);
        FAIL("a record above max_tokens was read");
    } catch (const bcl::error& e) {
        const std::string what = e.what();
        CHECK(what.find("who: record 1 has 11 tokens, above max_tokens (10)") == 0);
    }
    read_records(tokens, {}, 10, true, "who", r);
    CHECK(r.tokens == std::vector<std::uint64_t>{5, 10, 3});
    CHECK(r.alone == std::vector<std::uint8_t>{0, 1, 0});
    CHECK(r.oversized == 1);
    CHECK(r.cost[1] == default_cost_units(11)); // its cost is its own
    const std::vector<std::uint64_t> huge{bcl::detail::tokens::max_record_tokens + 1};
    CHECK_THROWS_AS(read_records(huge, {}, 10, true, "who", r), bcl::error);
}

TEST_CASE("costs of another length, negative or not finite are errors naming the field",
          "[tokens][token_records]") {
    const std::vector<std::uint64_t> tokens{1, 2};
    token_records r;
    const std::vector<double> short_costs{1.0};
    CHECK_THROWS_WITH(read_records(tokens, short_costs, 10, false, "who", r),
                      Catch::Contains("1 costs for 2 records"));
    const std::vector<double> negative{1.0, -1.0};
    CHECK_THROWS_AS(read_records(tokens, negative, 10, false, "who", r), bcl::error);
    const std::vector<double> nan{std::nan(""), 1.0};
    CHECK_THROWS_AS(read_records(tokens, nan, 10, false, "who", r), bcl::error);
    const std::vector<double> inf{1.0, std::numeric_limits<double>::infinity()};
    CHECK_THROWS_AS(read_records(tokens, inf, 10, false, "who", r), bcl::error);
}

TEST_CASE("checked_length counts a length padded and names the index where it is above T",
          "[tokens][token_records]") {
    using bcl::detail::tokens::checked_length;
    CHECK(checked_length(9, 0, "record", 100, false, 8, "t") == 16);
    CHECK(checked_length(100, 0, "record", 100, false, 1, "t") == 100);
    CHECK(checked_length(5000, 0, "record", 100, true, 1, "t") == 5000);
    CHECK_THROWS_WITH(checked_length(101, 7, "dataset index", 100, false, 1, "t"),
                      "t: dataset index 7 has 101 tokens, above max_tokens (100); truncate it, or "
                      "let such records have a micro-batch of their own");
    CHECK_THROWS_WITH(checked_length(97, 3, "record", 100, false, 8, "t"),
                      Catch::Matchers::Contains("record 3 has 97 tokens (104 padded to a "
                                                "multiple of 8)"));
    CHECK_THROWS_WITH(checked_length((std::uint64_t{1} << 31) + 1, 2, "record", 100, true, 1, "t"),
                      Catch::Matchers::Contains("no record may have more than 2^31"));
}
