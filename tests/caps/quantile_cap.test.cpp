// bcl::detail::quantile_cap, as a specification: the cap kind spelled "quantile". It accepts a
// quantile strictly inside (0, 1) and a finite prior >= 0, naming the field it refuses. Its cap is
// the prior (+infinity for a prior of 0) until `warmup` estimates were added, then the sketch's
// quantile of every uncapped estimate, read when the warm-up ends and every `refresh` records
// after; between readings it is the cap last handed to add(). It is settled once a cap is in
// force. A whole stream of known costs is clipped at the exact nearest-rank quantile,
// sorted[ceil(q * n) - 1]. Its saved part is the cap last read and the sketch.

#include "support/error_message.hpp"

#include <bcl/detail/caps/quantile_cap.hpp>
#include <bcl/options.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

namespace {

using bcl::detail::quantile_cap;
using Catch::Matchers::Contains;

bcl::cap_options quantile_options(double q, std::size_t warmup, double prior = 0.0) {
    return {.kind = bcl::cap_kind::quantile, .quantile = q, .warmup = warmup, .prior = prior};
}

} // namespace

TEST_CASE("quantile_cap: a quantile outside (0, 1) or a prior negative or not finite is refused, "
          "by name",
          "[caps][quantile_cap]") {
    STATIC_REQUIRE(quantile_cap::name == "quantile");
    for (const double q : {0.0, 1.0, -0.5, 1.5, std::nan("")}) {
        INFO("quantile " << q);
        CHECK_THAT(
            bcl_test::bcl_error_message([&] { quantile_cap::validate(quantile_options(q, 10)); }),
            Contains("bcl::options::cap.quantile must be in (0, 1)"));
    }
    for (const double prior : {-1e-300, -1.0, HUGE_VAL, std::nan("")}) {
        INFO("prior " << prior);
        CHECK_THAT(bcl_test::bcl_error_message(
                       [&] { quantile_cap::validate(quantile_options(0.5, 10, prior)); }),
                   Contains("bcl::options::cap.prior must be finite and >= 0"));
    }
    // Each value is written so that it reads back exactly, however small.
    CHECK_THAT(
        bcl_test::bcl_error_message([&] { quantile_cap::validate(quantile_options(-0.25, 10)); }),
        Contains("(got -0.25)"));
    CHECK_THAT(bcl_test::bcl_error_message(
                   [&] { quantile_cap::validate(quantile_options(0.5, 10, -1e-300)); }),
               Contains("(got -1e-300)"));
    for (const double q : {1e-9, 0.5, 0.999999})
        CHECK_NOTHROW(quantile_cap::validate(quantile_options(q, 1)));
    CHECK_NOTHROW(quantile_cap::validate(quantile_options(0.5, 1, 0.0)));
    CHECK_NOTHROW(
        quantile_cap::validate(quantile_options(0.5, 1, std::numeric_limits<double>::max())));
}

TEST_CASE("quantile_cap: the prior until the warm-up ends, then the quantile; between readings "
          "the cap last handed to add()",
          "[caps][quantile_cap]") {
    STATIC_REQUIRE(quantile_cap::refresh == 64);
    quantile_cap cap(quantile_options(0.5, 5, 4.0));
    for (int i = 0; i < 5; ++i) {
        CHECK(cap.current() == 4.0);
        CHECK(cap.settled()); // a prior is a cap in force
        cap.add(10.0 * (i + 1), cap.current());
    }
    // The warm-up's estimates 10, 20, 30, 40, 50: their median (rank floor(0.5 * 4) = 2) is 30.
    CHECK(cap.current() == Approx(30.0).epsilon(0.01));
    const double read = cap.current();
    // Between readings the cap is whatever the caller last handed to add(), not a new reading.
    for (int i = 0; i < 63; ++i) {
        cap.add(1000.0, 17.0);
        CHECK(cap.current() == 17.0);
        CHECK(cap.last() == 17.0);
    }
    // The 64th record after the warm-up: read again, now that 1000 is the median.
    cap.add(1000.0, read);
    CHECK(cap.sketch().count() == 5 + 64);
    CHECK(cap.current() == Approx(1000.0).epsilon(0.01));
}

TEST_CASE("quantile_cap: without a prior, no cap and not settled until the warm-up ends",
          "[caps][quantile_cap]") {
    quantile_cap cap(quantile_options(0.9, 3));
    for (int i = 0; i < 3; ++i) {
        CHECK(cap.current() == HUGE_VAL);
        CHECK_FALSE(cap.settled());
        cap.add(1.0, cap.current());
    }
    CHECK(cap.current() == Approx(1.0).epsilon(0.01));
    CHECK(cap.settled());
    // Every record of every epoch is sketched.
    CHECK(quantile_cap::sketched(12345) == 12345);
}

TEST_CASE("quantile_cap: a stream of known costs is clipped at its exact nearest-rank quantile",
          "[caps][quantile_cap]") {
    // By hand: the median of 1..4 is the ceil(0.5 * 4) = 2nd smallest, of 1..5 the 3rd; the p90
    // of 1..10 the 9th; a tiny quantile the smallest; p99.99 of 1..10 the largest.
    const auto level = [](double q, std::vector<double> costs) {
        return quantile_cap(quantile_options(q, 1)).stream_level(costs);
    };
    CHECK(level(0.5, {4, 2, 3, 1}) == 2.0);
    CHECK(level(0.5, {5, 1, 4, 2, 3}) == 3.0);
    CHECK(level(0.9, {10, 9, 8, 7, 6, 5, 4, 3, 2, 1}) == 9.0);
    CHECK(level(1e-9, {3, 1, 2}) == 1.0);
    CHECK(level(0.9999, {10, 9, 8, 7, 6, 5, 4, 3, 2, 1}) == 10.0);
    // Against sorting, on random streams; the cap's own sketch plays no part.
    std::mt19937_64 gen(23);
    std::lognormal_distribution<double> draw(0.0, 2.0);
    for (int trial = 0; trial < 50; ++trial) {
        std::vector<double> costs(1 + gen() % 300);
        for (double& c : costs) c = draw(gen);
        const double q = std::uniform_real_distribution<double>(0.01, 0.99)(gen);
        std::vector<double> sorted = costs;
        std::sort(sorted.begin(), sorted.end());
        std::size_t rank = 1; // the smallest rank whose share of the stream reaches q
        while (static_cast<double>(rank) < q * static_cast<double>(sorted.size())) ++rank;
        quantile_cap cap(quantile_options(q, 1));
        cap.add(1e9, HUGE_VAL);
        INFO("trial " << trial << ", n " << costs.size() << ", q " << q);
        CHECK(cap.stream_level(costs) == sorted[rank - 1]);
    }
}

TEST_CASE("quantile_cap: its saved part restores the cap and the sketch; a negative cap is refused",
          "[caps][quantile_cap]") {
    quantile_cap a(quantile_options(0.75, 4));
    for (int i = 0; i < 30; ++i) a.add(static_cast<double>(i), a.current());
    quantile_cap::saved s;
    a.save_into(s);
    CHECK(s.quantile_cap == a.last());
    CHECK(s.sketch.count() == 30);
    CHECK_NOTHROW(s.check());
    quantile_cap b(quantile_options(0.75, 4));
    b.restore_from(s);
    CHECK(b.current() == a.current());
    CHECK(b.sketch().buckets() == a.sketch().buckets());
    s.quantile_cap = -1.0;
    CHECK_THAT(bcl_test::bcl_error_message([&] { s.check(); }), Contains("invalid quantile cap"));
}
