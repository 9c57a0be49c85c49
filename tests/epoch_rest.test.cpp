// bcl::epoch_rest, as a specification: against a brute-force set of taken positions, over chains
// of after() with random prefixes and scattered records, the rest's records are exactly the
// positions never taken, in order; its span ends at the last record taken (or the old span's
// end); its parts rebuild it; parts that describe no rest are errors naming what.

#include "support/case_count.hpp"

#include <bcl/epoch_rest.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <random>
#include <set>
#include <vector>

namespace {

using Catch::Matchers::Contains;

std::vector<std::uint64_t> rest_records(const bcl::epoch_rest& r) {
    std::vector<std::uint64_t> out(r.size());
    for (std::uint64_t q = 0; q < r.size(); ++q) out[q] = r.position(q);
    return out;
}

} // namespace

TEST_CASE("epoch rest: the whole epoch is every position, in order", "[epoch_rest]") {
    for (const std::uint64_t n : {0u, 1u, 2u, 9u, 64u}) {
        const bcl::epoch_rest r(n);
        REQUIRE(r.whole());
        REQUIRE(r.size() == n);
        for (std::uint64_t q = 0; q < n; ++q) REQUIRE(r.position(q) == q);
    }
}

TEST_CASE("epoch rest: over chains of after(), the records left are those never taken, in order",
          "[epoch_rest]") {
    std::mt19937_64 rng(11);
    const std::size_t cases = 3000 / bcl_test::case_divisor;
    for (std::size_t c = 0; c < cases; ++c) {
        const std::uint64_t n = rng() % 300;
        bcl::epoch_rest rest(n);
        std::set<std::uint64_t> taken;
        CAPTURE(c, n);
        for (int link = 0; link < 4 && rest.size() > 0; ++link) {
            const std::vector<std::uint64_t> before = rest_records(rest);
            // A prefix of the rest, then a scattered few of the next window (as a step
            // boundary inside a window takes them).
            const std::uint64_t prefix = rng() % (rest.size() + 1);
            const std::uint64_t window = 1 + rng() % 40;
            std::vector<std::uint64_t> also;
            for (std::uint64_t q = prefix; q < std::min(rest.size(), prefix + window); ++q)
                if (rng() % 3 == 0) also.push_back(q);
            if (!also.empty() && rng() % 2 == 0) also.push_back(also.front()); // a repeat
            std::shuffle(also.begin(), also.end(), rng);
            for (std::uint64_t q = 0; q < prefix; ++q) taken.insert(before[q]);
            for (const std::uint64_t q : also) taken.insert(before[q]);
            const bcl::epoch_rest next = rest.after(prefix, also);

            std::vector<std::uint64_t> expected;
            for (std::uint64_t p = 0; p < n; ++p)
                if (!taken.contains(p)) expected.push_back(p);
            REQUIRE(rest_records(next) == expected);
            // The span reaches no further than the old span or the last record taken.
            std::uint64_t end = rest.start() + rest.span();
            for (const std::uint64_t q : also) end = std::max(end, before[q] + 1);
            if (next.size() > 0) {
                REQUIRE(next.start() == expected.front());
                REQUIRE(next.start() + next.span() <= std::max(end, next.start()));
            }
            // Its parts rebuild it.
            const bcl::epoch_rest again =
                bcl::epoch_rest::from_parts(n, next.start(), next.span(), next.taken(), "test");
            REQUIRE(rest_records(again) == expected);
            rest = again;
        }
    }
}

TEST_CASE("epoch rest: parts that describe no rest are errors naming what", "[epoch_rest]") {
    const std::vector<std::uint8_t> one_byte{0x02};
    REQUIRE_THROWS_WITH(bcl::epoch_rest::from_parts(10, 11, 0, {}, "me"),
                        Contains("me: the epoch's rest spans positions [11, 11 + 0)"));
    REQUIRE_THROWS_WITH(bcl::epoch_rest::from_parts(10, 5, 6, one_byte, "me"),
                        Contains("past the epoch's 10"));
    REQUIRE_THROWS_WITH(bcl::epoch_rest::from_parts(10, 0, 9, one_byte, "me"),
                        Contains("a bitmap of 1 bytes for a span of 9"));
    REQUIRE_THROWS_WITH(bcl::epoch_rest::from_parts(10, 0, 1, one_byte, "me"),
                        Contains("bits set past its span"));
    const std::vector<std::uint8_t> first_taken{0x01};
    REQUIRE_THROWS_WITH(bcl::epoch_rest::from_parts(10, 2, 3, first_taken, "me"),
                        Contains("starts at a position it marks taken"));
    REQUIRE_NOTHROW(bcl::epoch_rest::from_parts(10, 2, 3, one_byte, "me"));
    REQUIRE(bcl::epoch_rest::from_parts(10, 10, 0, {}, "me").size() == 0);
}
