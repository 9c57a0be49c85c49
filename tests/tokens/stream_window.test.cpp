// bcl::detail::tokens::window_rule, as a specification: a stream's window of R*K*M micro-batches
// of T tokens takes records from the front while their tokens (each its length padded to a
// multiple of k, at most T) stay within R*K*M*T and, once it holds one record a micro-batch,
// within max_fill of that; it reads only the records it takes and the first it refuses.

#include <bcl/detail/tokens/stream_window.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

namespace {

// The rule as a reader states it, over every record in turn.
std::size_t records_by_hand(const std::vector<std::uint64_t>& lengths, std::size_t cells,
                            std::uint64_t t, std::uint64_t pad, double max_fill) {
    const double capacity = static_cast<double>(cells) * static_cast<double>(t);
    const double filled = std::floor(max_fill * capacity);
    double running = 0.0;
    std::size_t taken = 0;
    for (const std::uint64_t length : lengths) {
        const std::uint64_t padded = (length + pad - 1) / pad * pad;
        const double counted = static_cast<double>(std::min(padded, t));
        if (running + counted > capacity) break;
        if (running + counted > filled && taken >= cells) break;
        running += counted;
        ++taken;
    }
    return taken;
}

} // namespace

TEST_CASE("window_rule takes the records a reader of the rule takes", "[tokens][stream_window]") {
    std::mt19937_64 rng(41);
    for (int trial = 0; trial < 3000; ++trial) {
        const bcl::token_budget b{.ranks = 1 + rng() % 8, .max_tokens = 1 + rng() % 5000};
        const std::size_t micro = 1 + rng() % 4;
        const std::size_t steps = 1 + rng() % 4;
        const std::uint64_t pad = trial % 3 == 0 ? 1 + rng() % b.max_tokens : 1;
        const double max_fill = trial % 2 == 0 ? 1.0 : 0.05 + 0.95 * double(rng() % 1000) / 1000;
        std::vector<std::uint64_t> lengths(rng() % 400);
        for (auto& l : lengths) l = rng() % (trial % 5 == 0 ? 3 * b.max_tokens : b.max_tokens + 1);
        const bcl::detail::tokens::window_rule rule(b, micro, steps, pad, max_fill);
        REQUIRE(rule.cells() == b.ranks * micro * steps);
        std::size_t read = 0;
        const std::size_t taken = rule.records(lengths.size(), [&](std::size_t i) {
            read = std::max(read, i + 1);
            return lengths[i];
        });
        CAPTURE(trial, b.ranks, b.max_tokens, micro, steps, pad, max_fill);
        CHECK(taken == records_by_hand(lengths, rule.cells(), b.max_tokens, pad, max_fill));
        CHECK(read == std::min(lengths.size(), taken + 1));
    }
}

TEST_CASE("window_rule counts a record above T as T: it fills its micro-batch alone",
          "[tokens][stream_window]") {
    const bcl::detail::tokens::window_rule rule({.ranks = 2, .max_tokens = 100}, 1, 1, 1);
    CHECK(rule.counted(5000) == 100);
    CHECK(rule.counted(99) == 99);
    const std::vector<std::uint64_t> lengths{5000, 5000, 1};
    CHECK(rule.records(lengths.size(), [&](std::size_t i) { return lengths[i]; }) == 2);
    const bcl::detail::tokens::window_rule padded({.ranks = 2, .max_tokens = 100}, 1, 1, 8);
    CHECK(padded.counted(9) == 16);
    CHECK(padded.counted(97) == 100);
}
