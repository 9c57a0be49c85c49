// bcl::epoch_layout and bcl::epoch_windows, as a specification: the order's length and each
// rank's share are DistributedSampler's and BatchSampler's; the windows tile the kept order, R*K*B
// records each but the last, and each rank's batch i lies in window i / K.

#include <bcl/epoch_layout.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <string>

using Catch::Matchers::Contains;

TEST_CASE("epoch layout: the layout is DistributedSampler's, then BatchSampler's drop_last",
          "[epoch_layout]") {
    for (std::size_t n = 0; n < 60; ++n)
        for (std::size_t r = 1; r <= 7; ++r)
            for (std::size_t b = 1; b <= 5; ++b)
                for (const bool drop_last : {false, true}) {
                    CAPTURE(n, r, b, drop_last);
                    const bcl::epoch_layout l = bcl::epoch_layout::of(
                        n, {.ranks = r, .lookahead = 1, .batch = b, .drop_last = drop_last});
                    // DistributedSampler: num_samples = ceil((n - R) / R) with drop_last when R
                    // does not divide n, else ceil(n / R); total_size = num_samples * R.
                    const double samples = drop_last && n % r != 0
                                               ? std::ceil((double(n) - double(r)) / double(r))
                                               : std::ceil(double(n) / double(r));
                    const auto m0 = static_cast<std::size_t>(std::max(0.0, samples));
                    REQUIRE(l.padded == m0 * r);
                    REQUIRE(l.per_rank == (drop_last ? m0 / b * b : m0));
                    REQUIRE(l.batches == (drop_last ? m0 / b : (m0 + b - 1) / b));
                    REQUIRE(l.kept() == l.per_rank * r);
                }
}

TEST_CASE("epoch layout: the windows tile the kept order, R*K*B records each but the last",
          "[epoch_layout]") {
    for (std::size_t n = 0; n < 90; ++n)
        for (std::size_t r = 1; r <= 5; ++r)
            for (std::size_t b = 1; b <= 4; ++b)
                for (std::size_t k = 1; k <= 4; ++k)
                    for (const bool drop_last : {false, true}) {
                        CAPTURE(n, r, b, k, drop_last);
                        const bcl::epoch_shape shape{
                            .ranks = r, .lookahead = k, .batch = b, .drop_last = drop_last};
                        const bcl::epoch_windows w = bcl::epoch_windows::of(n, shape);
                        REQUIRE(w.layout.kept() == bcl::epoch_layout::of(n, shape).kept());
                        std::size_t covered = 0;
                        for (std::size_t i = 0; i < w.count(); ++i) {
                            REQUIRE(w.first(i) == covered);
                            REQUIRE(w.records(i) > 0);
                            REQUIRE(w.records(i) % r == 0); // every rank as many
                            if (i + 1 < w.count()) REQUIRE(w.records(i) == r * k * b);
                            covered += w.records(i);
                        }
                        REQUIRE(covered == w.layout.kept());
                        REQUIRE(w.records(w.count()) == 0);
                        // Batch i of a rank is in window i / K, and every window holds K of a
                        // rank's batches but the last, which holds the rest.
                        for (std::size_t i = 0; i < w.layout.batches; ++i) {
                            const std::size_t win = w.window_of_batch(i);
                            REQUIRE(win < w.count());
                            const std::size_t mine = w.records(win) / r;
                            REQUIRE(i % k < (mine + b - 1) / b);
                        }
                    }
}

TEST_CASE("epoch layout: a shape with a count of 0 or a window above max_plan_records is "
          "refused, naming it",
          "[epoch_layout]") {
    REQUIRE_THROWS_WITH(bcl::epoch_windows::of(10, {.ranks = 0, .lookahead = 1, .batch = 1}, "me"),
                        Contains("me: the ranks (0)"));
    REQUIRE_THROWS_WITH(bcl::epoch_windows::of(10, {.ranks = 1, .lookahead = 0, .batch = 1}),
                        Contains("lookahead (0)"));
    REQUIRE_THROWS_WITH(
        bcl::epoch_windows::of(10, {.ranks = 1024, .lookahead = 2048, .batch = 1024}),
        Contains("records in one plan window"));
    REQUIRE_THROWS_WITH(bcl::check_plan_options({.cap = -1.0}, "me"), Contains("me"));
}
