// bcl::detail::plan::geometry_of, as a specification: n records of a window of R ranks, K steps
// and batches of B fall into ceil((n / R) / B) steps per rank, every step full but the last; the
// packs are R a step, the last step's short when it holds fewer than B a rank. rank_of(j, s)
// seats the j-th heaviest pack of step s on rank (j + s) mod R: every step a permutation of the
// ranks, each rank taking a step's heaviest in turn. Bad shapes are errors naming the numbers.

#include <bcl/detail/plan/geometry.hpp>
#include <bcl/error.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <set>
#include <vector>

using bcl::detail::plan::geometry_of;
using Catch::Matchers::Contains;

TEST_CASE("geometry: records per rank, steps and packs, as dealing the records step by step",
          "[plan][geometry]") {
    for (std::size_t r = 1; r <= 5; ++r)
        for (std::size_t k = 1; k <= 4; ++k)
            for (std::size_t b = 1; b <= 5; ++b)
                for (std::size_t n = 0; n <= r * k * b; n += r) {
                    INFO("n " << n << ", R " << r << ", K " << k << ", B " << b);
                    const auto g = geometry_of(n, r, k, b, 1 << 20, "test");
                    // A rank's records dealt B at a time: the steps and the last one's size.
                    std::vector<std::size_t> steps;
                    for (std::size_t left = n / r; left > 0; left -= std::min(left, b))
                        steps.push_back(std::min(left, b));
                    REQUIRE(g.ranks == r);
                    REQUIRE(g.batch == b);
                    REQUIRE(g.capacity == r * k * b);
                    REQUIRE(g.per_rank == n / r);
                    REQUIRE(g.steps == steps.size());
                    REQUIRE(g.steps <= k);
                    if (!steps.empty()) REQUIRE(g.last_size == steps.back());
                    const bool short_last = !steps.empty() && steps.back() < b;
                    REQUIRE(g.short_packs == (short_last ? r : 0));
                    REQUIRE(g.full_packs == r * (steps.size() - (short_last ? 1 : 0)));
                    REQUIRE(g.packs() == r * steps.size());
                    REQUIRE(g.full_steps() * r == g.full_packs);
                }
}

TEST_CASE("geometry: each step seats its packs on every rank once, the heaviest in turn",
          "[plan][geometry]") {
    const auto g = geometry_of(60, 5, 4, 3, 1 << 20, "test");
    std::set<std::uint32_t> heaviest_ranks;
    for (std::size_t step = 0; step < 5; ++step) {
        std::set<std::uint32_t> ranks;
        for (std::size_t j = 0; j < 5; ++j) ranks.insert(g.rank_of(j, step));
        CHECK(ranks.size() == 5);
        CHECK(g.rank_of(0, step) == step % 5);
        heaviest_ranks.insert(g.rank_of(0, step));
    }
    CHECK(heaviest_ranks.size() == 5);
}

TEST_CASE("geometry: a count of 0, a window above the plan's limit, more records than the "
          "window holds and a count not a multiple of R are errors naming them",
          "[plan][geometry]") {
    CHECK_THROWS_WITH(geometry_of(0, 0, 1, 1, 100, "who"),
                      Contains("who: every count of the shape must be at least 1 (ranks = 0"));
    CHECK_THROWS_WITH(geometry_of(0, 2, 0, 1, 100, "who"), Contains("steps = 0"));
    CHECK_THROWS_WITH(geometry_of(0, 2, 1, 0, 100, "who"), Contains("batch = 0"));
    CHECK_THROWS_WITH(geometry_of(0, 4, 5, 6, 100, "who"),
                      Contains("a window of R*K*B records (ranks = 4, steps = 5, batch = 6) is "
                               "more than the 100 records a plan takes"));
    const std::size_t huge = std::numeric_limits<std::size_t>::max() / 2;
    CHECK_THROWS_WITH(geometry_of(0, huge, 4, 4, 1 << 30, "who"),
                      Contains("more than the 1073741824 records"));
    CHECK_THROWS_WITH(geometry_of(14, 2, 2, 3, 100, "who"),
                      Contains("14 costs are more than the window holds (R*K*B = 12"));
    CHECK_THROWS_WITH(geometry_of(7, 2, 2, 3, 100, "who"),
                      Contains("7 costs do not split evenly over 2 ranks"));
    CHECK_THROWS_AS(geometry_of(7, 2, 2, 3, 100, "who"), bcl::error);
}
