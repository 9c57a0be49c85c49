// bcl::detail::table_index, as a specification: a dataset index inside its table is its
// position; a negative index or one past the table is a bcl::error naming the index, what it
// has no entry of, and the table's size.

#include <bcl/detail/table_index.hpp>

#include <catch2/catch.hpp>

#include <cstddef>
#include <cstdint>

using Catch::Matchers::Contains;

TEST_CASE("table_index: an index inside the table is its position", "[table_index]") {
    CHECK(bcl::detail::table_index(0, 3, "cost", "the cost table", "who") == 0);
    CHECK(bcl::detail::table_index(std::int64_t{2}, 3, "cost", "the cost table", "who") == 2);
    CHECK(bcl::detail::table_index(std::size_t{2}, 3, "tokens", "the table", "who") == 2);
}

TEST_CASE("table_index: a negative index or one past the table is an error naming both",
          "[table_index]") {
    CHECK_THROWS_WITH(bcl::detail::table_index(3, 3, "cost", "the cost table", "bcl::x"),
                      Contains("bcl::x: dataset index 3 has no cost (the cost table has 3 "
                               "entries)"));
    CHECK_THROWS_WITH(bcl::detail::table_index(std::int64_t{-1}, 3, "tokens", "the table", "w"),
                      Contains("w: dataset index -1 has no tokens (the table has 3 entries)"));
    CHECK_THROWS_AS(bcl::detail::table_index(std::size_t{9}, 0, "cost", "t", "w"), bcl::error);
}
