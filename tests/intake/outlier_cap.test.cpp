// bcl::detail::outlier_cap: the cap in force for each record in turn. No cap is +infinity, a
// fixed cap is its value, and a quantile cap is +infinity during its warm-up, then the sketch's
// quantile of the uncapped estimates added so far, read when the warm-up ends and every `refresh`
// records after, and held in between. Reading it changes nothing; add() is what moves it; a
// restored cap continues exactly as the one it was saved from.

#include <bcl/detail/caps/quantile_sketch.hpp>
#include <bcl/detail/intake/outlier_cap.hpp>
#include <bcl/options.hpp>
#include <bcl/validate.hpp>

#include <catch2/catch.hpp>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <random>
#include <utility>
#include <vector>

namespace {

using bcl::detail::outlier_cap;
using bcl::detail::quantile_sketch;

bcl::cap_options quantile_cap_with_warmup(double q, std::size_t warmup) {
    return {.kind = bcl::cap_kind::quantile, .quantile = q, .warmup = warmup};
}

/// Estimates that only grow, so the quantile of what was added moves with every record and a
/// cap read at the wrong moment shows.
double rising(std::size_t i) {
    return 1.0 + 0.5 * static_cast<double>(i);
}

/// The cap the documentation promises for the record after `seen` records, of which the
/// reference sketch holds the values: +inf before `warmup`, the quantile at warmup, warmup + 64,
/// warmup + 128, ..., and the last such reading in between.
struct expected_cap {
    double q;
    std::size_t warmup;
    quantile_sketch values;
    double held = HUGE_VAL;

    double next() {
        const std::uint64_t seen = values.count();
        if (seen < warmup) return HUGE_VAL;
        bool read_now = false;
        for (std::uint64_t at = warmup; at <= seen; at += 64) read_now = read_now || at == seen;
        if (read_now) held = values.quantile(q);
        return held;
    }
};

} // namespace

TEST_CASE("Without a cap the cap is +infinity, and adding estimates leaves it so",
          "[outlier-cap]") {
    outlier_cap cap(bcl::cap_options{});
    CHECK(cap.current() == HUGE_VAL);
    for (std::size_t i = 0; i < 300; ++i) {
        cap.add(rising(i), cap.current());
        CHECK(cap.current() == HUGE_VAL);
    }
    CHECK(cap.sketch().count() == 0); // nothing is sketched for a cap that never reads it
}

TEST_CASE("A fixed cap is its value for every record", "[outlier-cap]") {
    outlier_cap cap(bcl::cap_options{.kind = bcl::cap_kind::fixed, .value = 12.5});
    for (std::size_t i = 0; i < 300; ++i) {
        CHECK(cap.current() == 12.5);
        cap.add(rising(i) * 10.0, 12.5);
    }
    CHECK(cap.current() == 12.5);
    CHECK(cap.sketch().count() == 0);
}

TEST_CASE("A quantile cap is +infinity during warm-up, then the quantile read at the end of "
          "warm-up and every 64 records, held in between",
          "[outlier-cap]") {
    STATIC_REQUIRE(outlier_cap::refresh == 64);
    for (const std::size_t warmup : {std::size_t{1}, std::size_t{10}, std::size_t{100}}) {
        for (const double q : {0.5, 0.9}) {
            INFO("warmup " << warmup << ", quantile " << q);
            outlier_cap cap(quantile_cap_with_warmup(q, warmup));
            expected_cap expected{q, warmup, {}};
            std::size_t reads_seen = 0;
            double previous = HUGE_VAL;
            for (std::size_t i = 0; i < warmup + 5 * 64 + 7; ++i) {
                const double want = expected.next();
                const double got = cap.current();
                INFO("record " << i);
                REQUIRE(got == want);
                if (i < warmup) REQUIRE(got == HUGE_VAL);
                if (got != previous) ++reads_seen;
                previous = got;
                cap.add(rising(i), got);
                expected.values.add(rising(i));
            }
            // The estimates rise, so every reading moves the cap: one at the end of the warm-up
            // and one per 64 records after it, never more.
            CHECK(reads_seen == 1 + 5);
        }
    }
}

TEST_CASE("A quantile cap's prior is the cap during the warm-up; the quantile takes over after it",
          "[outlier-cap]") {
    bcl::cap_options with_prior = quantile_cap_with_warmup(0.9, 20);
    with_prior.prior = 7.25;
    outlier_cap cap(with_prior);
    outlier_cap without(quantile_cap_with_warmup(0.9, 20));
    for (std::size_t i = 0; i < 20; ++i) {
        INFO("record " << i);
        REQUIRE(cap.current() == 7.25);
        REQUIRE(without.current() == HUGE_VAL);
        cap.add(rising(i), cap.current());
        without.add(rising(i), without.current());
    }
    // After the warm-up both read the same quantile of the same estimates: the prior is gone.
    CHECK(cap.current() == without.current());
    CHECK(cap.current() != 7.25);
}

TEST_CASE("A quantile cap read at the end of warm-up is the quantile of the warm-up's estimates, "
          "to within the sketch's 1%",
          "[outlier-cap]") {
    // Independent of the sketch: the nearest-rank median of 1..101 is 51.
    outlier_cap cap(quantile_cap_with_warmup(0.5, 101));
    for (std::size_t i = 1; i <= 101; ++i) {
        CHECK(cap.current() == HUGE_VAL);
        cap.add(static_cast<double>(i), cap.current());
    }
    CHECK(cap.current() == Approx(51.0).epsilon(0.01));
}

TEST_CASE("Only a quantile cap has a warm-up: the other kinds ignore their quantile field, "
          "whatever it holds",
          "[outlier-cap]") {
    // validate() checks the quantile only for a quantile cap, so a none or fixed cap may carry
    // any value there; resolving a warm-up from it (10 / (1 - 2.0) = -10 records) was undefined.
    for (const double q : {2.0, 1.0, -1.0, std::nan("")}) {
        INFO("quantile " << q);
        const bcl::cap_options none{.kind = bcl::cap_kind::none, .quantile = q};
        const bcl::cap_options fixed{.kind = bcl::cap_kind::fixed, .value = 4.0, .quantile = q};
        CHECK(bcl::cap_warmup(none) == 0);
        CHECK(bcl::cap_warmup(fixed) == 0);
        outlier_cap uncapped(none);
        outlier_cap capped(fixed);
        for (std::size_t i = 0; i < 50; ++i) {
            CHECK(uncapped.current() == HUGE_VAL);
            CHECK(capped.current() == 4.0);
            uncapped.add(rising(i), uncapped.current());
            capped.add(rising(i), 4.0);
        }
    }
}

TEST_CASE("A quantile cap's default warm-up is ceil(10 / (1 - quantile)) records",
          "[outlier-cap]") {
    // By hand: 10 / 0.1 = 100 for p90, 10 / 0.25 = 40 for p75, 10 / 0.01 = 1000 for p99.
    for (const auto& [q, warmup] :
         {std::pair{0.9, 100}, std::pair{0.75, 40}, std::pair{0.99, 1000}}) {
        INFO("quantile " << q);
        outlier_cap cap(quantile_cap_with_warmup(q, 0));
        for (int i = 0; i < warmup; ++i) {
            REQUIRE(cap.current() == HUGE_VAL);
            cap.add(3.0, cap.current());
        }
        CHECK(cap.current() < HUGE_VAL);
    }
}

TEST_CASE("Reading a quantile cap changes nothing: only add() moves it", "[outlier-cap]") {
    outlier_cap cap(quantile_cap_with_warmup(0.5, 20));
    // Reading during the warm-up, however often, does not end it.
    for (int i = 0; i < 100; ++i) CHECK(cap.current() == HUGE_VAL);
    std::uint64_t added = 0;
    for (std::size_t i = 0; i < 20 + 3 * (64 + 10); ++i) {
        const double before = cap.current();
        const auto buckets = cap.sketch().buckets();
        for (int again = 0; again < 3; ++again) REQUIRE(cap.current() == before);
        REQUIRE(cap.sketch().buckets() == buckets);
        REQUIRE(cap.sketch().count() == added);
        // Every third record is "rejected" after its cap was read: it is not added, and the next
        // record sees the same cap.
        if (i % 3 == 2) {
            REQUIRE(cap.current() == before);
            continue;
        }
        cap.add(rising(i), before);
        ++added;
    }
    CHECK(cap.current() < HUGE_VAL); // the warm-up did end, by the adds
}

TEST_CASE("A quantile cap restored from another's sketch and last reading continues exactly as it",
          "[outlier-cap]") {
    const bcl::cap_options options = quantile_cap_with_warmup(0.8, 30);
    std::mt19937_64 gen(7);
    std::lognormal_distribution<double> draw(2.0, 1.0);
    std::vector<double> values(30 + 8 * 64);
    for (double& v : values) v = draw(gen);

    // Save points: during the warm-up, at its end, on a reading, and between readings.
    for (const std::size_t saved_at :
         {std::size_t{5}, std::size_t{30}, std::size_t{94}, std::size_t{100}, std::size_t{200}}) {
        INFO("saved after " << saved_at << " records");
        outlier_cap original(options);
        for (std::size_t i = 0; i < saved_at; ++i) original.add(values[i], original.current());
        outlier_cap restored(options);
        bcl::detail::outlier_cap::saved saved;
        original.save_into(saved);
        restored.restore_from(saved);
        for (std::size_t i = saved_at; i < values.size(); ++i) {
            const double cap = original.current();
            REQUIRE(restored.current() == cap);
            original.add(values[i], cap);
            restored.add(values[i], cap);
        }
    }
}
