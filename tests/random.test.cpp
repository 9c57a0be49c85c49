// bcl::detail::splitmix64 and shuffle, as a specification: the generator is SplitMix64 (its
// published first outputs from state 0), below(b) is uniform on [0, b) with nothing favoured,
// and shuffle is Fisher-Yates: a permutation, the same for the same seed, every order of three
// items about equally often.

#include <bcl/detail/random.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <numeric>
#include <vector>

TEST_CASE("splitmix64: the published sequence from state 0", "[random]") {
    bcl::detail::splitmix64 rng(0);
    CHECK(rng.next() == 0xe220a8397b1dcdafULL);
    CHECK(rng.next() == 0x6e789e6aa1b965f4ULL);
    CHECK(rng.next() == 0x06c45d188009454fULL);
    // The state advances by the golden-ratio increment, once per output.
    CHECK(rng.state() == 3 * 0x9e3779b97f4a7c15ULL);
}

TEST_CASE("splitmix64: below(b) stays in [0, b) and favours no value", "[random]") {
    bcl::detail::splitmix64 rng(7);
    CHECK(rng.below(1) == 0);
    for (const std::uint64_t bound : {2ULL, 3ULL, 7ULL, 10ULL}) {
        std::vector<std::size_t> seen(bound, 0);
        const std::size_t draws = 20000 * bound;
        for (std::size_t i = 0; i < draws; ++i) {
            const std::uint64_t x = rng.below(bound);
            REQUIRE(x < bound);
            ++seen[x];
        }
        // Each value within 5% of its share (about 7 standard deviations at 20,000 a value).
        for (const std::size_t n : seen) {
            CHECK(n > 19000);
            CHECK(n < 21000);
        }
    }
    // A bound just above half of 2^64 rejects about half the words and still stays below it.
    const std::uint64_t big = (1ULL << 63) + 12345;
    for (int i = 0; i < 1000; ++i) REQUIRE(rng.below(big) < big);
}

TEST_CASE("shuffle: Fisher-Yates, a permutation, the same for the same seed, orders uniform",
          "[random]") {
    std::vector<int> a(100);
    std::iota(a.begin(), a.end(), 0);
    std::vector<int> b = a;
    bcl::detail::splitmix64 r1(42);
    bcl::detail::splitmix64 r2(42);
    bcl::detail::shuffle(a.data(), a.size(), r1);
    bcl::detail::shuffle(b.data(), b.size(), r2);
    CHECK(a == b);
    std::vector<int> sorted = a;
    std::sort(sorted.begin(), sorted.end());
    std::vector<int> expected(100);
    std::iota(expected.begin(), expected.end(), 0);
    CHECK(sorted == expected);
    CHECK(a != expected);
    // Nothing to shuffle: no draw.
    bcl::detail::splitmix64 idle(5);
    bcl::detail::shuffle(a.data(), 1, idle);
    bcl::detail::shuffle(a.data(), 0, idle);
    CHECK(idle.state() == bcl::detail::splitmix64(5).state());
    // All 6 orders of three items, each near 1/6 of 60,000 shuffles.
    std::map<std::array<int, 3>, std::size_t> orders;
    bcl::detail::splitmix64 rng(9);
    for (int i = 0; i < 60000; ++i) {
        std::array<int, 3> x{0, 1, 2};
        bcl::detail::shuffle(x.data(), 3, rng);
        ++orders[x];
    }
    REQUIRE(orders.size() == 6);
    for (const auto& [order, n] : orders) {
        CHECK(n > 9500);
        CHECK(n < 10500);
    }
}
