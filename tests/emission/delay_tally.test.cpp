// bcl::detail::delay_tally: how long records wait. A record's delay is the batch it leaves in
// minus the batch it would have been in without balancing (its arrival position / B), 0 when it
// leaves earlier. After each round the statistics hold the count, mean, variance, minimum and
// maximum of every delay so far, the largest delay, and a histogram that ends at it.

#include <bcl/detail/emission/delay_tally.hpp>
#include <bcl/statistics.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

namespace {

/// One hand-made round: its batches leave as first_batch, first_batch + 1, ...; record i (in
/// buffer order, arrivals increasing) arrived at arrivals[i] and leaves in the round's batch
/// ranks[i].
struct round_spec {
    std::uint64_t first_batch;
    std::size_t packs;
    std::size_t b;
    std::vector<std::uint64_t> arrivals;
    std::vector<std::uint32_t> ranks;
};

void run_round(bcl::detail::delay_tally& tally, const round_spec& r, bcl::statistics& stats) {
    auto counter = tally.start(r.first_batch, r.packs, r.arrivals.front(), r.b, stats);
    for (std::size_t i = 0; i < r.arrivals.size(); ++i) counter.count(i, r.arrivals[i], r.ranks[i]);
    tally.finish(stats);
}

/// Every delay of every round so far, by the definition.
struct brute_force {
    std::vector<std::uint64_t> delays;

    void add(const round_spec& r) {
        for (std::size_t i = 0; i < r.arrivals.size(); ++i) {
            const std::uint64_t left = r.first_batch + r.ranks[i];
            const std::uint64_t would_have = r.arrivals[i] / r.b;
            delays.push_back(left > would_have ? left - would_have : 0);
        }
    }

    void check(const bcl::statistics& stats) const {
        const auto n = static_cast<double>(delays.size());
        double sum = 0.0;
        for (const std::uint64_t d : delays) sum += static_cast<double>(d);
        const double mean = sum / n;
        double squares = 0.0;
        for (const std::uint64_t d : delays)
            squares += (static_cast<double>(d) - mean) * (static_cast<double>(d) - mean);
        const std::uint64_t largest = *std::max_element(delays.begin(), delays.end());
        std::vector<std::uint64_t> histogram(largest + 1, 0);
        for (const std::uint64_t d : delays) ++histogram[d];

        CHECK(stats.delay_batches.count() == delays.size());
        CHECK(stats.delay_batches.mean() == Approx(mean).epsilon(1e-12));
        CHECK(stats.delay_batches.variance() == Approx(squares / n).epsilon(1e-9).margin(1e-12));
        CHECK(stats.delay_batches.min() ==
              static_cast<double>(*std::min_element(delays.begin(), delays.end())));
        CHECK(stats.delay_batches.max() == static_cast<double>(largest));
        CHECK(stats.max_delay_batches == largest);
        CHECK(stats.delay_histogram == histogram);
    }
};

} // namespace

TEST_CASE("A round's delays, worked by hand", "[delay-tally]") {
    // B = 2; the round's batches leave as batches 2 and 3. Arrivals 0..3 would have been in
    // batches 0, 0, 1, 1; they leave in batches 3, 2, 2, 3: delays 3, 2, 1, 2.
    bcl::detail::delay_tally tally;
    bcl::statistics stats;
    run_round(tally, {2, 2, 2, {0, 1, 2, 3}, {1, 0, 0, 1}}, stats);
    CHECK(stats.delay_batches.count() == 4);
    CHECK(stats.delay_batches.mean() == 2.0);
    CHECK(stats.delay_batches.variance() == 0.5); // (1 + 0 + 1 + 0) / 4
    CHECK(stats.delay_batches.min() == 1.0);
    CHECK(stats.delay_batches.max() == 3.0);
    CHECK(stats.max_delay_batches == 3);
    CHECK(stats.delay_histogram == std::vector<std::uint64_t>{0, 1, 2, 1});
}

TEST_CASE("A record that leaves before the batch it would have been in has delay 0",
          "[delay-tally]") {
    // B = 2, batches 0 and 1: arrivals 2 and 3 (batch 1) leave in batch 0, arrivals 0 and 1
    // (batch 0) in batch 1: delays 1, 1, 0, 0.
    bcl::detail::delay_tally tally;
    bcl::statistics stats;
    run_round(tally, {0, 2, 2, {0, 1, 2, 3}, {1, 1, 0, 0}}, stats);
    CHECK(stats.delay_batches.count() == 4);
    CHECK(stats.delay_batches.mean() == 0.5);
    CHECK(stats.delay_batches.min() == 0.0);
    CHECK(stats.max_delay_batches == 1);
    CHECK(stats.delay_histogram == std::vector<std::uint64_t>{2, 2});
}

TEST_CASE("The histogram ends at the largest delay seen, not at the largest possible",
          "[delay-tally]") {
    // The oldest record (arrival 0) could wait 9 batches, but it leaves first: the largest delay
    // is that of arrival 19 (batch 9), leaving in batch 10.
    bcl::detail::delay_tally tally;
    bcl::statistics stats;
    run_round(tally, {8, 3, 2, {0, 18, 19}, {0, 2, 2}}, stats);
    // Delays: 8 - 0 = 8, 10 - 9 = 1, 10 - 9 = 1.
    CHECK(stats.max_delay_batches == 8);
    CHECK(stats.delay_histogram.size() == 9);
    bcl::statistics quick;
    run_round(tally, {8, 3, 2, {0, 18, 19}, {2, 0, 0}}, quick);
    // Delays: 10, 0 (batch 9 leaves in 8), 0.
    CHECK(quick.max_delay_batches == 10);
    CHECK(quick.delay_histogram == std::vector<std::uint64_t>{2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1});
    bcl::statistics small;
    run_round(tally, {3, 3, 2, {4, 5, 6}, {0, 0, 1}}, small);
    CHECK(small.delay_histogram == std::vector<std::uint64_t>{0, 3}); // delays 1, 1, 1
}

TEST_CASE("Delays of random rounds, with arrival gaps of many batches, equal the definition, "
          "round after round",
          "[delay-tally]") {
    std::mt19937_64 gen(8);
    for (int stream = 0; stream < 20; ++stream) {
        const std::size_t b = 1 + static_cast<std::size_t>(gen() % 6);
        bcl::detail::delay_tally tally;
        bcl::statistics stats;
        tally.reserve(4, stats);
        brute_force expected;
        std::uint64_t next_arrival = 0;
        std::uint64_t next_batch = 0;
        for (int round = 0; round < 15; ++round) {
            round_spec r{next_batch, 1 + static_cast<std::size_t>(gen() % 6), b, {}, {}};
            const std::size_t n = 1 + static_cast<std::size_t>(gen() % (3 * r.packs * b));
            for (std::size_t i = 0; i < n; ++i) {
                // Mostly the next arrival, sometimes a gap: a few batches, exactly 8 or 9, or
                // hundreds.
                switch (gen() % 8) {
                case 0:
                    next_arrival += (1 + gen() % 4) * b;
                    break;
                case 1:
                    next_arrival += (8 + gen() % 2) * b + gen() % b;
                    break;
                case 2:
                    next_arrival += (100 + gen() % 900) * b;
                    break;
                default:
                    break;
                }
                r.arrivals.push_back(next_arrival++);
                r.ranks.push_back(static_cast<std::uint32_t>(gen() % r.packs));
            }
            // Batches leave around where the records arrived: some early, most late.
            const std::uint64_t arrival_batch = r.arrivals.back() / b;
            next_batch = std::max(next_batch, arrival_batch > 3 ? arrival_batch - 3 : 0);
            r.first_batch = next_batch;
            next_batch += r.packs;
            INFO("stream " << stream << ", B " << b << ", round " << round);
            run_round(tally, r, stats);
            expected.add(r);
            expected.check(stats);
        }
    }
}
