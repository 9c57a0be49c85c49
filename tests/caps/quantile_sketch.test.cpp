// bcl::detail::quantile_sketch, as a specification: the q-quantile of the values added so far,
// by the nearest rank floor(q * (n - 1)) of the sorted values, to within 1% relative error for
// values in its covered range (1e-6 to about 6e11); zeros counted apart and returned exactly;
// values beyond the range clamped to its ends; 0 before anything is added; q outside [0, 1]
// clamped; and a sketch rebuilt from its bucket counts is the same sketch.

#include <bcl/detail/caps/quantile_sketch.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace {

using bcl::detail::quantile_sketch;

/// The exact nearest-rank quantile of `values`, by sorting.
double exact_quantile(std::vector<double> values, double q) {
    std::sort(values.begin(), values.end());
    const auto rank = static_cast<std::size_t>(q * static_cast<double>(values.size() - 1));
    return values[rank];
}

struct stream {
    std::string name;
    std::vector<double> values;
};

std::vector<stream> streams(std::uint64_t seed) {
    std::mt19937_64 gen(seed);
    std::lognormal_distribution<double> lognormal(3.0, 2.0);
    std::uniform_real_distribution<double> unit(0.0, 1.0);
    std::vector<stream> out;
    const std::size_t n = 2000 + seed % 7;
    stream s{"lognormal", {}};
    for (std::size_t i = 0; i < n; ++i) s.values.push_back(lognormal(gen));
    out.push_back(s);
    s = {"pareto", {}};
    for (std::size_t i = 0; i < n; ++i)
        s.values.push_back(1.0 / std::pow(1.0 - unit(gen), 1.0 / 1.2));
    out.push_back(s);
    s = {"all equal", std::vector<double>(n, 37.5)};
    out.push_back(s);
    s = {"one giant outlier", std::vector<double>(n, 2.0)};
    s.values[n / 2] = 1e11;
    out.push_back(s);
    s = {"sorted, spanning 1e-5 to 1e10", {}};
    for (std::size_t i = 0; i < n; ++i)
        s.values.push_back(1e-5 * std::pow(1e15, static_cast<double>(i) / static_cast<double>(n)));
    out.push_back(s);
    s = {"a third zeros", {}};
    for (std::size_t i = 0; i < n; ++i) s.values.push_back(i % 3 == 0 ? 0.0 : lognormal(gen));
    out.push_back(s);
    return out;
}

} // namespace

TEST_CASE("quantile_sketch: every quantile is within 1% of the exact nearest-rank quantile",
          "[caps][quantile_sketch]") {
    STATIC_REQUIRE(quantile_sketch::accuracy == 0.01);
    for (std::uint64_t seed = 1; seed <= 5; ++seed)
        for (const stream& s : streams(seed)) {
            quantile_sketch sketch;
            for (const double x : s.values) sketch.add(x);
            REQUIRE(sketch.count() == s.values.size());
            for (const double q : {0.0, 0.01, 0.1, 0.25, 0.5, 0.75, 0.9, 0.99, 0.999, 1.0}) {
                const double want = exact_quantile(s.values, q);
                const double got = sketch.quantile(q);
                INFO(s.name << ", seed " << seed << ", q " << q << ": exact " << want << ", sketch "
                            << got);
                // The bound, with room for rounding in the bucket arithmetic.
                CHECK(std::abs(got - want) <= 0.01 * want * (1.0 + 1e-9));
            }
        }
}

TEST_CASE("quantile_sketch: a quantile that falls on the zeros is exactly 0",
          "[caps][quantile_sketch]") {
    quantile_sketch sketch;
    CHECK(sketch.quantile(0.5) == 0.0); // nothing added yet
    CHECK(sketch.count() == 0);
    // Four zeros then six values of 100: ranks 0..3 are zeros, floor(q * 9) < 4 for q < 4/9.
    for (int i = 0; i < 4; ++i) sketch.add(0.0);
    for (int i = 0; i < 6; ++i) sketch.add(100.0);
    CHECK(sketch.zeros() == 4);
    CHECK(sketch.quantile(0.0) == 0.0);
    CHECK(sketch.quantile(0.4) == 0.0);  // rank 3
    CHECK(sketch.quantile(0.45) != 0.0); // rank 4
    CHECK(sketch.quantile(0.45) == Approx(100.0).epsilon(0.01));
    // q outside [0, 1] is clamped.
    CHECK(sketch.quantile(-3.0) == 0.0);
    CHECK(sketch.quantile(7.0) == sketch.quantile(1.0));
}

TEST_CASE("quantile_sketch: values beyond the covered range are clamped to its ends",
          "[caps][quantile_sketch]") {
    quantile_sketch tiny;
    tiny.add(1e-12);
    // At most 1e-6, and within 1% of it: the first bucket's representative.
    CHECK(tiny.quantile(0.5) <= 1e-6);
    CHECK(tiny.quantile(0.5) >= 0.99e-6);
    quantile_sketch huge;
    huge.add(1e15);
    huge.add(1e300);
    // The last bucket: gamma^2047 * 1e-6 with gamma = 1.01 / 0.99, about 6e11.
    const double top = 1e-6 * std::pow(1.01 / 0.99, 2047.0);
    CHECK(huge.quantile(1.0) == Approx(top).epsilon(0.011));
    CHECK(huge.quantile(0.0) == huge.quantile(1.0));
}

TEST_CASE("quantile_sketch: a sketch rebuilt from its counts answers exactly as the original",
          "[caps][quantile_sketch]") {
    for (const stream& s : streams(9)) {
        quantile_sketch sketch;
        for (const double x : s.values) sketch.add(x);
        const quantile_sketch copy = quantile_sketch::from_counts(sketch.buckets(), sketch.zeros());
        INFO(s.name);
        CHECK(copy.count() == sketch.count());
        CHECK(copy.zeros() == sketch.zeros());
        for (const double q : {0.0, 0.3, 0.5, 0.99, 1.0})
            CHECK(copy.quantile(q) == sketch.quantile(q));
        // And it keeps counting alike.
        quantile_sketch a = sketch;
        quantile_sketch b = copy;
        for (int i = 0; i < 50; ++i) {
            a.add(1e6);
            b.add(1e6);
        }
        CHECK(a.quantile(0.99) == b.quantile(0.99));
    }
}
