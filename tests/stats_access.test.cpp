// bcl/detail/stats_access.hpp, as a specification: the complete state of a bcl::running_stats
// (count, mean, sum of squared deviations, min, max), read out and made back exactly. A
// running_stats made from what was read from another is indistinguishable from it: the same
// answers now, and the same answers after any further values, bit for bit. What is made is
// exactly what is given, so a saved state restores to the double it held.

#include <bcl/detail/stats_access.hpp>
#include <bcl/statistics.hpp>

#include <catch2/catch.hpp>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

namespace {

using bcl::running_stats;
using bcl::detail::stats_access;

std::uint64_t bits(double x) {
    return std::bit_cast<std::uint64_t>(x);
}

/// Whether two running_stats answer every query with the same bits.
bool same_answers(const running_stats& a, const running_stats& b) {
    return a.count() == b.count() && bits(a.mean()) == bits(b.mean()) &&
           bits(a.variance()) == bits(b.variance()) && bits(a.min()) == bits(b.min()) &&
           bits(a.max()) == bits(b.max()) && bits(a.cv()) == bits(b.cv());
}

} // namespace

TEST_CASE("stats_access: an empty running_stats reads as all zeros", "[stats_access]") {
    const stats_access::raw r = stats_access::read(running_stats{});
    CHECK(r.count == 0);
    CHECK(r.mean == 0.0);
    CHECK(r.m2 == 0.0);
    CHECK(r.min == 0.0);
    CHECK(r.max == 0.0);
    STATIC_REQUIRE(noexcept(stats_access::read(running_stats{})));
    STATIC_REQUIRE(noexcept(stats_access::make(r)));
}

TEST_CASE("stats_access: read gives the count, mean, squared deviations, min and max",
          "[stats_access]") {
    // 2, 4, 4, 4, 5, 5, 7, 9: mean 40 / 8 = 5; squared deviations 9+1+1+1+0+0+4+16 = 32.
    running_stats s;
    for (const double x : {2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0}) s.add(x);
    const stats_access::raw r = stats_access::read(s);
    CHECK(r.count == 8);
    CHECK(r.mean == 5.0);
    CHECK(r.m2 == 32.0);
    CHECK(r.min == 2.0);
    CHECK(r.max == 9.0);
}

TEST_CASE("stats_access: make holds exactly the fields given, and read gives them back",
          "[stats_access]") {
    // Values no sequence of add() would produce in this form, and the edges of the double range.
    const double tiny = std::numeric_limits<double>::denorm_min();
    const double huge = std::numeric_limits<double>::max();
    const std::vector<stats_access::raw> given{
        {1, 0.1, 0.0, 0.1, 0.1},
        {3, 1.0 / 3.0, 2.0 / 9.0, 0.0, 1.0},
        {std::uint64_t{1} << 63, 1e120, 1e250, tiny, huge},
        {std::numeric_limits<std::uint64_t>::max(), -0.0, tiny, -huge, huge},
    };
    for (const stats_access::raw& r : given) {
        const running_stats s = stats_access::make(r);
        CHECK(s.count() == r.count);
        CHECK(bits(s.mean()) == bits(r.mean));
        CHECK(bits(s.min()) == bits(r.min));
        CHECK(bits(s.max()) == bits(r.max));
        const stats_access::raw back = stats_access::read(s);
        CHECK(back.count == r.count);
        CHECK(bits(back.mean) == bits(r.mean));
        CHECK(bits(back.m2) == bits(r.m2));
        CHECK(bits(back.min) == bits(r.min));
        CHECK(bits(back.max) == bits(r.max));
    }
}

TEST_CASE("stats_access: a running_stats remade from its reading continues bit for bit as the "
          "original",
          "[stats_access]") {
    for (std::uint64_t seed = 1; seed <= 20; ++seed) {
        std::mt19937_64 gen(seed);
        std::lognormal_distribution<double> cost(3.0, 1.5);
        running_stats original;
        const auto first = static_cast<int>(gen() % 50);
        for (int i = 0; i < first; ++i) original.add(cost(gen));
        running_stats remade = stats_access::make(stats_access::read(original));
        REQUIRE(same_answers(original, remade));
        for (int i = 0; i < 50; ++i) {
            const double x = cost(gen);
            original.add(x);
            remade.add(x);
        }
        CHECK(same_answers(original, remade));
        // Merging, too, sees the same state.
        running_stats left_a;
        running_stats left_b = stats_access::make(stats_access::read(left_a));
        left_a.merge(original);
        left_b.merge(remade);
        CHECK(same_answers(left_a, left_b));
    }
}
