// bcl::stream_mean_cost: the mean of a stream's estimated costs as the cap clips them, the level
// a sampler that knows its epoch's costs passes as options::mean_cost. It equals the sorted,
// summed reference on every distribution and cap, stays finite at the largest estimates, and
// refuses a bad cost or cap by name.

#include "support/distributions.hpp"

#include <bcl/bcl.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <span>
#include <string>
#include <vector>

namespace {

using bcl_test::all_distributions;
using bcl_test::case_seed;

bcl::cap_options fixed_cap(double value) {
    return {.kind = bcl::cap_kind::fixed, .value = value};
}

bcl::cap_options quantile_cap(double q) {
    return {.kind = bcl::cap_kind::quantile, .quantile = q};
}

/// The reference: sort, read the quantile at its nearest rank, clip, sum in long double.
double reference_mean(std::vector<double> costs, const bcl::cap_options& cap) {
    if (costs.empty()) return 0.0;
    std::sort(costs.begin(), costs.end());
    double level = std::numeric_limits<double>::infinity();
    if (cap.kind == bcl::cap_kind::fixed) level = cap.value;
    if (cap.kind == bcl::cap_kind::quantile) {
        const auto n = static_cast<double>(costs.size());
        const auto rank = static_cast<std::size_t>(std::ceil(cap.quantile * n));
        level = costs[std::clamp<std::size_t>(rank, 1, costs.size()) - 1];
    }
    long double sum = 0.0L;
    for (const double c : costs) sum += std::min(c, level);
    return static_cast<double>(sum / static_cast<long double>(costs.size()));
}

std::string thrown_by(std::span<const double> costs, const bcl::cap_options& cap) {
    try {
        (void)bcl::stream_mean_cost(costs, cap);
    } catch (const bcl::error& e) {
        return e.what();
    }
    return "nothing thrown";
}

} // namespace

TEST_CASE("stream_mean_cost is the mean of the costs as the cap clips them", "[stream_mean_cost]") {
    const std::vector<bcl::cap_options> caps{{},
                                             fixed_cap(50.0),
                                             fixed_cap(1e6),
                                             quantile_cap(0.99),
                                             quantile_cap(0.5),
                                             quantile_cap(0.999)};
    std::uint64_t case_index = 0;
    for (const auto& dist : all_distributions())
        for (const std::size_t n : {1U, 2U, 7U, 100U, 4096U})
            for (const bcl::cap_options& cap : caps) {
                const std::vector<double> costs = dist.generate(n, case_seed(++case_index));
                INFO(dist.name << ", n = " << n << ", cap kind " << static_cast<int>(cap.kind)
                               << " value " << cap.value << " quantile " << cap.quantile);
                const double expected = reference_mean(costs, cap);
                const double got = bcl::stream_mean_cost(costs, cap);
                CHECK(got == Approx(expected).epsilon(1e-12).margin(1e-300));
            }
}

TEST_CASE("stream_mean_cost caps at the quantile of the costs themselves, by nearest rank",
          "[stream_mean_cost]") {
    const std::vector<double> costs{4.0, 1.0, 100.0, 2.0, 3.0};
    CHECK(bcl::stream_mean_cost(costs, {}) == Approx(22.0));
    // 0.8 * 5 = 4: the 4th smallest, 4, caps the 100.
    CHECK(bcl::stream_mean_cost(costs, quantile_cap(0.8)) == Approx(14.0 / 5.0));
    // 0.61 * 5 = 3.05, rounded up to the 4th smallest as well.
    CHECK(bcl::stream_mean_cost(costs, quantile_cap(0.61)) == Approx(14.0 / 5.0));
    // 0.6 * 5 = 3: the 3rd smallest, 3, caps 4 and 100.
    CHECK(bcl::stream_mean_cost(costs, quantile_cap(0.6)) == Approx(12.0 / 5.0));
    CHECK(bcl::stream_mean_cost(costs, fixed_cap(2.5)) == Approx(10.5 / 5.0));
    // A truncating cap counts as clipping: a truncated record costs about the cap.
    bcl::cap_options truncating = fixed_cap(2.5);
    truncating.action = bcl::cap_action::truncate;
    CHECK(bcl::stream_mean_cost(costs, truncating) == Approx(10.5 / 5.0));
}

TEST_CASE("stream_mean_cost of nothing is 0, and of the largest estimates stays finite",
          "[stream_mean_cost]") {
    CHECK(bcl::stream_mean_cost({}, {}) == 0.0);
    CHECK(bcl::stream_mean_cost({}, quantile_cap(0.99)) == 0.0);
    const std::vector<double> huge(100000, bcl::max_estimate);
    const double mean = bcl::stream_mean_cost(huge, {});
    CHECK(std::isfinite(mean));
    CHECK(mean <= bcl::max_estimate);
    CHECK(mean == Approx(bcl::max_estimate).epsilon(1e-9));
    // The value a balancer accepts as options::mean_cost.
    bcl::options opt{.batch_size = 4};
    opt.mean_cost = mean;
    CHECK_NOTHROW(bcl::validate(opt));
}

TEST_CASE("stream_mean_cost refuses a bad cost by position and a bad cap by option",
          "[stream_mean_cost][errors]") {
    const double nan = std::numeric_limits<double>::quiet_NaN();
    const std::vector<double> with_nan{1.0, 2.0, nan};
    CHECK_THAT(thrown_by(with_nan, {}), Catch::Contains("bcl::stream_mean_cost: cost 2 is nan") &&
                                            Catch::Contains("max_estimate"));
    const std::vector<double> negative{1.0, -3.0};
    CHECK_THAT(thrown_by(negative, {}), Catch::Contains("cost 1 is -3"));
    const std::vector<double> too_large{bcl::max_estimate * 10.0};
    CHECK_THAT(thrown_by(too_large, quantile_cap(0.5)), Catch::Contains("cost 0 is"));
    const std::vector<double> fine{1.0, 2.0};
    CHECK_THAT(thrown_by(fine, fixed_cap(0.0)), Catch::Contains("cap"));
    CHECK_THAT(thrown_by(fine, quantile_cap(1.5)), Catch::Contains("quantile"));
}
