// bcl::detail::plan's quantization, as a specification: a valid cost x becomes exactly
// floor(x * 2^scale) (std::ldexp and std::floor are exact on doubles, so they are the reference),
// the map is monotone, the largest cost lands in [2^(62-h), 2^(63-h)) for h = bit_width of the
// window's capacity, so a full window of the largest costs sums below 2^63; a cap clips before
// quantizing, and a cap that is not a cost is an error.

#include "support/error_message.hpp"

#include <bcl/cost_estimator.hpp>
#include <bcl/detail/plan/quantize.hpp>
#include <bcl/global_plan.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

using Catch::Matchers::Contains;

namespace {

namespace qz = bcl::detail::plan;

/// The reference: floor(x * 2^exponent), in doubles, exact for a power-of-two scale.
std::uint64_t expected_quantum(double x, int exponent) {
    return static_cast<std::uint64_t>(std::floor(std::ldexp(x, exponent)));
}

} // namespace

TEST_CASE("quantize: floor(x * 2^scale) by integer operations, order kept, no overflow at the "
          "largest window of the largest costs",
          "[plan][quantize]") {
    std::mt19937_64 gen(11);
    const auto random_cost = [&gen] {
        // Any finite bit pattern of a value in [0, max_estimate]: exponents across the range.
        for (;;) {
            const double x = std::bit_cast<double>(gen() >> 1);
            if (x <= bcl::max_estimate) return x;
        }
    };
    for (int i = 0; i < 2000; ++i) {
        const double a = random_cost();
        const double b = random_cost();
        const double top = std::max({a, b, bcl::max_estimate * std::ldexp(1.0, -(i % 1200))});
        const std::uint64_t capacity = 1 + gen() % bcl::max_plan_records;
        const qz::fixed_point q = qz::scale_for(qz::cost_bits(top), capacity);
        INFO(a << " " << b << " top " << top << " capacity " << capacity);
        CHECK(q(qz::cost_bits(a)) == expected_quantum(a, q.exponent()));
        CHECK(q(qz::cost_bits(b)) == expected_quantum(b, q.exponent()));
        if (a < b) CHECK(q(qz::cost_bits(a)) <= q(qz::cost_bits(b)));
        if (a == b) CHECK(q(qz::cost_bits(a)) == q(qz::cost_bits(b)));
        // The top lands in [2^(62-h), 2^(63-h)): 32 bits of it kept at least, and capacity of
        // them sum below 2^63.
        const std::uint64_t t = q(qz::cost_bits(top));
        const auto h = static_cast<unsigned>(std::bit_width(capacity));
        CHECK(t < (std::uint64_t{1} << (63 - h)));
        CHECK(t >= (std::uint64_t{1} << (62 - h)));
    }
    // The largest window of the largest costs: 2^30 records of 1e120 sum below 2^63.
    const qz::fixed_point q =
        qz::scale_for(qz::cost_bits(bcl::max_estimate), bcl::max_plan_records);
    const std::uint64_t each = q(qz::cost_bits(bcl::max_estimate));
    CHECK(each <= (std::numeric_limits<std::uint64_t>::max() >> 1) / bcl::max_plan_records);
    CHECK(each >= std::uint64_t{1} << 31);
    // -0.0 is 0, and an all-zero window quantizes to zeros.
    CHECK(qz::cost_bits(-0.0) == 0);
    CHECK(qz::scale_for(0, 16)(0) == 0);
}

TEST_CASE("quantize: monotone over sorted costs of every magnitude, subnormals included",
          "[plan][quantize]") {
    std::vector<double> costs{
        0.0, 4.9e-324, 1e-320, 2.2250738585072014e-308, 1e-300, 1e-10, 0.1, 1.0, 1.5,
        3.0, 1e10,     1e100,  bcl::max_estimate};
    std::sort(costs.begin(), costs.end());
    for (const std::uint64_t capacity :
         {std::uint64_t{1}, std::uint64_t{1000}, std::uint64_t{bcl::max_plan_records}}) {
        const qz::fixed_point q = qz::scale_for(qz::cost_bits(costs.back()), capacity);
        for (std::size_t i = 0; i + 1 < costs.size(); ++i) {
            INFO(costs[i] << " then " << costs[i + 1] << ", capacity " << capacity);
            CHECK(q(qz::cost_bits(costs[i])) <= q(qz::cost_bits(costs[i + 1])));
            CHECK(q(qz::cost_bits(costs[i])) == expected_quantum(costs[i], q.exponent()));
        }
    }
}

TEST_CASE("quantize: a cap clips every cost before quantizing; 0 and +infinity cap nothing; a "
          "negative or NaN cap is an error",
          "[plan][quantize]") {
    const std::vector<double> costs{0.5, 7.0, 3.25, 100.0, 2.0, 0.0};
    for (const double cap : {0.0, 1.0, 3.25, 50.0, std::numeric_limits<double>::infinity()}) {
        INFO("cap " << cap);
        const std::uint64_t bits = qz::cap_bits(cap, "test");
        const bool none = cap == 0.0 || std::isinf(cap);
        const auto clipped = [&](double x) { return none ? x : std::min(x, cap); };
        const std::uint64_t largest = qz::checked_largest(costs, bits, "test");
        double expected_largest = 0.0;
        for (const double x : costs) expected_largest = std::max(expected_largest, clipped(x));
        CHECK(largest == qz::cost_bits(expected_largest));
        const qz::fixed_point scale = qz::scale_for(largest, 64);
        std::vector<std::uint64_t> out(costs.size());
        qz::quantize(costs, bits, scale, out);
        for (std::size_t i = 0; i < costs.size(); ++i)
            CHECK(out[i] == expected_quantum(clipped(costs[i]), scale.exponent()));
    }
    CHECK_THAT(bcl_test::bcl_error_message([] { (void)qz::cap_bits(-1.0, "who"); }),
               Contains("who") && Contains("cap -1"));
    CHECK_THAT(bcl_test::bcl_error_message(
                   [] { (void)qz::cap_bits(std::numeric_limits<double>::quiet_NaN(), "who"); }),
               Contains("cap nan"));
}

TEST_CASE("quantize: checked_largest names the index and value of the first cost that is not one",
          "[plan][quantize]") {
    const double inf = std::numeric_limits<double>::infinity();
    std::vector<double> costs{1.0, 2.0, -3.0, inf};
    const std::uint64_t no_cap = qz::cap_bits(0.0, "test");
    CHECK_THAT(
        bcl_test::bcl_error_message([&] { (void)qz::checked_largest(costs, no_cap, "who"); }),
        Contains("who") && Contains("index 2") && Contains("-3"));
    costs[2] = 3.0;
    CHECK_THAT(
        bcl_test::bcl_error_message([&] { (void)qz::checked_largest(costs, no_cap, "who"); }),
        Contains("index 3") && Contains("inf"));
    costs[3] = bcl::max_estimate;
    CHECK(qz::checked_largest(costs, no_cap, "who") == qz::cost_bits(bcl::max_estimate));
}
