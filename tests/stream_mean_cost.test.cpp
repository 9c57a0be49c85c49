// bcl::stream_mean_cost: the mean of a stream's estimated costs as the cap clips them, the level
// a sampler that knows its epoch's costs passes as options::mean_cost. It equals the sorted,
// summed reference on every distribution and cap, stays finite at the largest estimates, and
// refuses a bad cost or cap by name. Given records and an estimator instead of costs, it reads
// each record once and leaves them where they are.

#include "support/distributions.hpp"

#include <bcl/bcl.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <initializer_list>
#include <istream>
#include <limits>
#include <list>
#include <memory>
#include <ranges>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace {

using bcl_test::all_distributions;
using bcl_test::case_seed;

bcl::cap_options fixed_cap_options(double value) {
    return {.kind = bcl::cap_kind::fixed, .value = value};
}

bcl::cap_options quantile_cap_options(double q) {
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

/// A record that can only be moved, as a loader's samples often are: reading its cost must not
/// need a copy, and a record that was moved from has no payload.
struct move_only_sample {
    std::size_t length = 0;
    std::unique_ptr<int> payload = std::make_unique<int>(7);
};

/// The squared length, counting the records it is shown.
struct counting_squared_length {
    std::size_t* calls;
    double operator()(const move_only_sample& s) const {
        ++*calls;
        return static_cast<double>(s.length * s.length);
    }
};

std::vector<move_only_sample> samples_of(std::initializer_list<std::size_t> lengths) {
    std::vector<move_only_sample> samples;
    for (const std::size_t length : lengths) samples.push_back({length});
    return samples;
}

bool untouched_samples(const std::vector<move_only_sample>& samples,
                       std::initializer_list<std::size_t> lengths) {
    std::size_t i = 0;
    for (const std::size_t length : lengths) {
        if (samples[i].length != length || !samples[i].payload || *samples[i].payload != 7)
            return false;
        ++i;
    }
    return i == samples.size();
}

struct length_as_cost {
    double operator()(const int& length) const { return static_cast<double>(length); }
};

template <class Range>
concept records_have_a_mean = requires(Range&& range) {
    bcl::stream_mean_cost(std::forward<Range>(range), length_as_cost{}, bcl::cap_options{});
};

} // namespace

TEST_CASE("stream_mean_cost is the mean of the costs as the cap clips them", "[stream_mean_cost]") {
    const std::vector<bcl::cap_options> caps{{},
                                             fixed_cap_options(50.0),
                                             fixed_cap_options(1e6),
                                             quantile_cap_options(0.99),
                                             quantile_cap_options(0.5),
                                             quantile_cap_options(0.999)};
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
    CHECK(bcl::stream_mean_cost(costs, quantile_cap_options(0.8)) == Approx(14.0 / 5.0));
    // 0.61 * 5 = 3.05, rounded up to the 4th smallest as well.
    CHECK(bcl::stream_mean_cost(costs, quantile_cap_options(0.61)) == Approx(14.0 / 5.0));
    // 0.6 * 5 = 3: the 3rd smallest, 3, caps 4 and 100.
    CHECK(bcl::stream_mean_cost(costs, quantile_cap_options(0.6)) == Approx(12.0 / 5.0));
    CHECK(bcl::stream_mean_cost(costs, fixed_cap_options(2.5)) == Approx(10.5 / 5.0));
    // A truncating cap counts as clipping: a truncated record costs about the cap.
    bcl::cap_options truncating = fixed_cap_options(2.5);
    truncating.action = bcl::cap_action::truncate;
    CHECK(bcl::stream_mean_cost(costs, truncating) == Approx(10.5 / 5.0));
}

TEST_CASE("stream_mean_cost of records is the mean of their estimates as the cap clips them, each "
          "record read once and left in place",
          "[stream_mean_cost]") {
    // Squared lengths 1, 4, 9, 100.
    const std::initializer_list<std::size_t> lengths{1, 2, 3, 10};
    std::vector<move_only_sample> samples = samples_of(lengths);
    std::size_t calls = 0;
    const counting_squared_length cost{&calls};
    CHECK(bcl::stream_mean_cost(samples, cost, {}) == Approx(114.0 / 4.0));
    CHECK(calls == 4);
    CHECK(untouched_samples(samples, lengths));
    CHECK(bcl::stream_mean_cost(samples, cost, fixed_cap_options(9.0)) == Approx(23.0 / 4.0));
    // 0.75 * 4 = 3: the 3rd smallest, 9, caps the 100.
    CHECK(bcl::stream_mean_cost(samples, cost, quantile_cap_options(0.75)) == Approx(23.0 / 4.0));
    // 0.5 * 4 = 2: the 2nd smallest, 4, caps 9 and 100.
    CHECK(bcl::stream_mean_cost(samples, cost, quantile_cap_options(0.5)) == Approx(13.0 / 4.0));
    CHECK(calls == 16);
    CHECK(untouched_samples(samples, lengths));

    // Any forward range: a list (not sized), a filtered view (not const-iterable), a transformed
    // one (records made on the fly, as prvalues).
    const std::list<int> list{3, 1, 2};
    CHECK(bcl::stream_mean_cost(list, length_as_cost{}, {}) == Approx(2.0));
    std::vector<int> numbers{1, 2, 3, 4, 5, 6};
    auto even = numbers | std::views::filter([](int x) { return x % 2 == 0; });
    CHECK(bcl::stream_mean_cost(even, length_as_cost{}, {}) == Approx(4.0));
    CHECK(bcl::stream_mean_cost(numbers | std::views::transform([](int x) { return 10 * x; }),
                                length_as_cost{}, fixed_cap_options(40.0)) == Approx(180.0 / 6.0));
    CHECK(bcl::stream_mean_cost(std::vector<int>{}, length_as_cost{}, quantile_cap_options(0.9)) ==
          0.0);

    // An input range would be used up by reading it: it does not compile.
    STATIC_REQUIRE(records_have_a_mean<std::vector<int>&>);
    STATIC_REQUIRE(records_have_a_mean<const std::list<int>&>);
    STATIC_REQUIRE_FALSE(records_have_a_mean<std::ranges::istream_view<int>&>);
}

TEST_CASE("stream_mean_cost of records equals the mean of their costs on every distribution and "
          "cap",
          "[stream_mean_cost]") {
    const std::vector<bcl::cap_options> caps{
        {}, fixed_cap_options(50.0), quantile_cap_options(0.99), quantile_cap_options(0.5)};
    std::uint64_t case_index = 1000;
    for (const auto& dist : all_distributions())
        for (const std::size_t n : {1U, 7U, 1000U})
            for (const bcl::cap_options& cap : caps) {
                const std::vector<double> costs = dist.generate(n, case_seed(++case_index));
                // Records whose cost is looked up by their position, as a map-style dataset's.
                std::vector<std::size_t> indices(n);
                for (std::size_t i = 0; i < n; ++i) indices[i] = n - 1 - i;
                const auto cost_of = [&costs](const std::size_t& i) { return costs[i]; };
                INFO(dist.name << ", n = " << n << ", cap kind " << static_cast<int>(cap.kind));
                CHECK(bcl::stream_mean_cost(indices, cost_of, cap) ==
                      Approx(reference_mean(costs, cap)).epsilon(1e-12).margin(1e-300));
            }
}

TEST_CASE("stream_mean_cost of records gives the level bcl::balance takes, the records still "
          "there to balance",
          "[stream_mean_cost]") {
    const auto length_of = [](std::size_t i) { return (i * 37) % 23; };
    std::vector<move_only_sample> samples;
    for (std::size_t i = 0; i < 100; ++i) samples.push_back({length_of(i)});
    std::size_t calls = 0;
    const counting_squared_length cost{&calls};
    bcl::options opt{.batch_size = 4, .lookahead = 2};
    opt.mean_cost = bcl::stream_mean_cost(samples, cost, opt.cap);
    double sum = 0.0;
    for (std::size_t i = 0; i < 100; ++i) sum += static_cast<double>(length_of(i) * length_of(i));
    CHECK(opt.mean_cost == Approx(sum / 100.0));
    std::vector<std::size_t> seen(23, 0);
    std::size_t batches = 0;
    for (auto&& batch : bcl::balance(std::move(samples), cost, opt)) {
        CHECK(batch.size() == 4);
        ++batches;
        for (const move_only_sample& s : batch) {
            CHECK((s.payload && *s.payload == 7));
            ++seen[s.length];
        }
    }
    CHECK(batches == 25);
    for (std::size_t length = 0; length < 23; ++length) {
        std::size_t expected = 0;
        for (std::size_t i = 0; i < 100; ++i) expected += length_of(i) == length ? 1 : 0;
        CHECK(seen[length] == expected);
    }
}

TEST_CASE("stream_mean_cost of nothing is 0, and of the largest estimates stays finite",
          "[stream_mean_cost]") {
    CHECK(bcl::stream_mean_cost({}, {}) == 0.0);
    CHECK(bcl::stream_mean_cost({}, quantile_cap_options(0.99)) == 0.0);
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
    CHECK_THAT(thrown_by(too_large, quantile_cap_options(0.5)), Catch::Contains("cost 0 is"));
    const std::vector<double> fine{1.0, 2.0};
    CHECK_THAT(thrown_by(fine, fixed_cap_options(0.0)), Catch::Contains("cap"));
    CHECK_THAT(thrown_by(fine, quantile_cap_options(1.5)), Catch::Contains("quantile"));

    // Given records, the position named is the record's; what the estimator throws comes out
    // unchanged; the records stay as they were.
    const std::initializer_list<std::size_t> lengths{1, 2, 3};
    std::vector<move_only_sample> samples = samples_of(lengths);
    const auto nan_at_two = [nan](const move_only_sample& s) { return s.length == 3 ? nan : 1.0; };
    try {
        (void)bcl::stream_mean_cost(samples, nan_at_two, {});
        FAIL("nothing thrown");
    } catch (const bcl::error& e) {
        CHECK_THAT(e.what(), Catch::Contains("bcl::stream_mean_cost: cost 2 is nan"));
    }
    struct lookup_failed : std::logic_error {
        using std::logic_error::logic_error;
    };
    const auto fails_at_one = [](const move_only_sample& s) -> double {
        if (s.length == 2) throw lookup_failed("no length for this record");
        return 1.0;
    };
    CHECK_THROWS_AS(bcl::stream_mean_cost(samples, fails_at_one, {}), lookup_failed);
    CHECK_THROWS_AS(bcl::stream_mean_cost(samples, nan_at_two, quantile_cap_options(1.5)),
                    bcl::error);
    CHECK(untouched_samples(samples, lengths));
}
