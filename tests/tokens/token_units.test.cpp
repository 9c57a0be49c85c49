// bcl::detail::tokens::token_units, as a specification: a token plan's units are its records,
// or with group_together its groups (tokens and costs summed, a record above T marking its
// group alone); groups kept to a rank number each record's group densely in the order of the
// ids; a group above T with group_together, or one holding a record above T beside others, is an
// error naming the group.

#include <bcl/detail/tokens/token_units.hpp>
#include <bcl/error.hpp>

#include <catch2/catch.hpp>

#include <cstddef>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace {

using bcl::detail::tokens::read_records;
using bcl::detail::tokens::token_records;
using bcl::detail::tokens::token_units;
using Catch::Matchers::Contains;

token_records records_of(const std::vector<std::uint64_t>& tokens, std::uint64_t max_tokens,
                         bool alone = false) {
    token_records r;
    read_records(tokens, {}, max_tokens, alone, "t", r);
    return r;
}

} // namespace

TEST_CASE("token_units: without groups, each record is a unit", "[tokens][token_units]") {
    const std::vector<std::uint64_t> tokens{5, 0, 7, 300};
    const token_records r = records_of(tokens, 100, true);
    token_units u;
    u.make(r, {}, false, 100, "t");
    CHECK(u.tokens == r.tokens);
    CHECK(u.cost == r.cost);
    CHECK(u.alone == r.alone);
    CHECK(u.unit_of == std::vector<std::uint32_t>{0, 1, 2, 3});
    CHECK(u.group_of.empty());
    u.keep_prefix(2);
    CHECK(u.tokens.size() == 2);
    CHECK(u.unit_of.size() == 2);
}

TEST_CASE("token_units: groups kept to a rank are numbered densely in the order of their ids, "
          "with their sums; together, each group is one unit",
          "[tokens][token_units]") {
    std::mt19937_64 rng(5);
    for (int trial = 0; trial < 200; ++trial) {
        std::vector<std::uint64_t> tokens(1 + rng() % 60);
        std::vector<std::uint64_t> groups(tokens.size());
        for (std::size_t i = 0; i < tokens.size(); ++i) {
            tokens[i] = rng() % 20;
            groups[i] = 1000 * (rng() % 9);
        }
        const token_records r = records_of(tokens, 1000);
        token_units kept;
        kept.make(r, groups, false, 1000, "t");
        REQUIRE(kept.group_of.size() == tokens.size());
        REQUIRE(kept.tokens == r.tokens);
        std::vector<std::uint64_t> sum(kept.group_tokens.size(), 0);
        for (std::size_t i = 0; i < tokens.size(); ++i) {
            for (std::size_t j = 0; j < tokens.size(); ++j)
                CHECK((groups[i] < groups[j]) == (kept.group_of[i] < kept.group_of[j]));
            sum[kept.group_of[i]] += tokens[i];
        }
        CHECK(sum == kept.group_tokens);
        token_units together;
        together.make(r, groups, true, 1000, "t");
        CHECK(together.tokens == kept.group_tokens);
        CHECK(together.cost == kept.group_cost);
        CHECK(together.unit_of == kept.group_of);
        CHECK(together.group_of.empty());
    }
}

TEST_CASE("token_units: a group that no micro-batch holds is an error naming it, and the "
          "records above T allowed alone close their group's micro-batch",
          "[tokens][token_units]") {
    token_units u;
    const token_records r = records_of({60, 50, 10}, 100, true);
    CHECK_THROWS_WITH(u.make(r, std::vector<std::uint64_t>{7, 7, 8}, true, 100, "t"),
                      "t: group 7 has 110 tokens, above max_tokens (100), and group_together "
                      "keeps its records in one micro-batch");
    // A record above T counts as T: beside a record of no tokens its group still has T tokens.
    const token_records big = records_of({500, 0, 10}, 100, true);
    CHECK_THROWS_WITH(u.make(big, std::vector<std::uint64_t>{3, 3, 4}, true, 100, "t"),
                      Contains("group 3 holds record 0, above max_tokens (100)"));
    u.make(big, std::vector<std::uint64_t>{3, 4, 4}, true, 100, "t");
    CHECK(u.alone == std::vector<std::uint8_t>{1, 0});
    CHECK(u.tokens == std::vector<std::uint64_t>{100, 10});
}
