// <bcl/bcl.hpp>, as a specification: the umbrella header is enough, alone, for the whole public
// surface it lists: the range adaptor and the push/pull core, their options and statistics, the
// cost estimators and what may be attached to them (memory, truncation, calibration), the checks
// on costs and options, the partitioner concept and the default partitioner, and the version
// macros. This file includes nothing else of bcl: each name below is reached through it, and a
// small program uses each of them.

#include <bcl/bcl.hpp>

#include <catch2/catch.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace {

struct token_sample {
    std::size_t id = 0;
    std::size_t tokens = 0;
};

std::vector<token_sample> samples(std::size_t n) { // tokens 1..n
    std::vector<token_sample> all;
    for (std::size_t i = 0; i < n; ++i) all.push_back({i, i + 1});
    return all;
}

bcl::options tumbling_options(std::size_t b, std::size_t k) {
    return {.batch_size = b, .lookahead = k, .policy = bcl::lookahead_policy::tumbling};
}

using linear_tokens = decltype(bcl::linear(1.0, &token_sample::tokens));

} // namespace

TEST_CASE("bcl: the umbrella declares every public type, concept and constant", "[bcl]") {
    // Settings and what they choose from.
    STATIC_REQUIRE(std::is_aggregate_v<bcl::options>);
    STATIC_REQUIRE(std::is_aggregate_v<bcl::cap_options>);
    STATIC_REQUIRE(std::is_aggregate_v<bcl::calibration_options>);
    STATIC_REQUIRE(std::is_enum_v<bcl::lookahead_policy>);
    STATIC_REQUIRE(std::is_enum_v<bcl::cap_kind>);
    STATIC_REQUIRE(std::is_enum_v<bcl::cap_action>);
    STATIC_REQUIRE(std::is_enum_v<bcl::emission_order>);
    STATIC_REQUIRE(std::is_enum_v<bcl::batch_cost>);
    STATIC_REQUIRE(bcl::max_window_records == std::size_t{1} << 26);
    STATIC_REQUIRE(bcl::max_delay_limit == std::size_t{1} << 20);
    // Records, estimators and what attaches to them.
    STATIC_REQUIRE(bcl::record<token_sample>);
    STATIC_REQUIRE(bcl::cost_estimator<linear_tokens, token_sample>);
    STATIC_REQUIRE(bcl::max_estimate == 1e120);
    STATIC_REQUIRE(bcl::valid_cost(0.0) && !bcl::valid_cost(-1.0));
    STATIC_REQUIRE(bcl::table_key<std::uint32_t>);
    STATIC_REQUIRE(
        bcl::memory_estimator<decltype(bcl::with_memory(bcl::linear(1.0, &token_sample::tokens),
                                                        &token_sample::tokens)),
                              token_sample>);
    STATIC_REQUIRE(
        bcl::truncating_estimator<
            bcl::truncating_cost<linear_tokens, void (*)(token_sample&, double)>, token_sample>);
    STATIC_REQUIRE(bcl::calibratable_estimator<
                   bcl::calibrated_cost<3, bcl::quadratic_features<std::size_t token_sample::*>>,
                   token_sample>);
    STATIC_REQUIRE(bcl::max_calibration_features == 8);
    // The adaptor, the core, what they report, and the partitioners.
    STATIC_REQUIRE(std::is_same_v<bcl::balancer<token_sample, linear_tokens>::batch_type,
                                  std::span<token_sample>>);
    STATIC_REQUIRE(std::is_default_constructible_v<bcl::statistics>);
    STATIC_REQUIRE(std::is_default_constructible_v<bcl::running_stats>);
    STATIC_REQUIRE(std::is_default_constructible_v<bcl::calibration_summary<3>>);
    STATIC_REQUIRE(bcl::partitioner<bcl::lpt_swap_partitioner>);
    STATIC_REQUIRE(std::is_aggregate_v<bcl::refinement_effort>);
    STATIC_REQUIRE(std::is_aggregate_v<bcl::pack_shape>);
    STATIC_REQUIRE(std::is_aggregate_v<bcl::partition_summary>);
    STATIC_REQUIRE(std::is_base_of_v<std::runtime_error, bcl::error>);
}

TEST_CASE("bcl: the version macros agree with the version string", "[bcl]") {
    const std::string expected = std::to_string(BCL_VERSION_MAJOR) + "." +
                                 std::to_string(BCL_VERSION_MINOR) + "." +
                                 std::to_string(BCL_VERSION_PATCH);
    CHECK(std::string(BCL_VERSION_STRING) == expected);
}

TEST_CASE("bcl: a program using the umbrella alone balances with the adaptor and the core",
          "[bcl]") {
    const bcl::options opt = tumbling_options(4, 2);
    REQUIRE_NOTHROW(bcl::validate(opt));
    CHECK(bcl::buffer_capacity(opt) == 8); // K*B
    CHECK(bcl::max_delay_bound(opt) == 1); // K-1
    std::size_t fields = 0;
    bcl::for_each_option_field([&](const char*, auto) { ++fields; });
    CHECK(fields > 4); // at least batch_size, lookahead, drop_last, seed and more
    CHECK(bcl::cap_warmup({.kind = bcl::cap_kind::quantile, .quantile = 0.99}) == 1000);

    // The adaptor: tokens 1..20 come out in ceil(20/4) = 5 batches, 210 tokens in all.
    const auto cost = bcl::affine_quadratic(1.0, 1.0, 0.0, &token_sample::tokens);
    bcl::options with_mean = opt;
    const std::vector<token_sample> epoch = samples(20);
    with_mean.mean_cost = bcl::stream_mean_cost(epoch, cost, opt.cap); // mean of 1 + L = 11.5
    CHECK(with_mean.mean_cost == Approx(11.5));
    std::size_t batches = 0;
    std::size_t tokens = 0;
    for (auto&& batch : bcl::balance(samples(20), cost, with_mean)) {
        ++batches;
        for (const token_sample& s : batch) tokens += s.tokens;
    }
    CHECK(batches == 5);
    CHECK(tokens == 210);

    // The core, with a table of costs by id, a memory estimate and a truncation attached.
    std::vector<double> by_id(20, 2.0);
    auto estimator = bcl::with_truncation(
        bcl::with_memory(bcl::table(by_id, &token_sample::id), &token_sample::tokens),
        [](token_sample&, double) {});
    bcl::balancer<token_sample, decltype(estimator)> b{estimator, opt};
    for (token_sample& s : samples(8)) b.push(std::move(s));
    b.finish();
    std::size_t records = 0;
    while (auto batch = b.pop()) records += batch->size();
    const bcl::statistics& stats = b.stats();
    CHECK(records == 8);
    CHECK(stats.records_out == 8);
    CHECK(stats.batch_cost.mean() == 8.0); // four records of cost 2 each
    CHECK(stats.peak_batch_memory > 0.0);
}

TEST_CASE("bcl: a program using the umbrella alone calibrates and partitions", "[bcl]") {
    // A calibrating balancer accepts times for emitted batches.
    auto cost = bcl::calibrated_affine_quadratic(0.0, 1.0, 0.0, &token_sample::tokens);
    bcl::balancer<token_sample, decltype(cost)> b{cost, tumbling_options(2, 1)};
    for (token_sample& s : samples(2)) b.push(std::move(s));
    REQUIRE(b.pop());
    b.observe(0, 1.5);
    const bcl::calibration_summary<3> learned = b.calibration();
    CHECK(learned.times_observed == 1);
    CHECK(learned.applied.size() == 3);

    // The default partitioner, called directly: {4, 3, 2, 1} in 2 packs of 2 is best as
    // {4, 1} and {3, 2}, both 5.
    bcl::lpt_swap_partitioner partition{bcl::refinement_effort{}};
    const std::array<double, 4> costs{4.0, 3.0, 2.0, 1.0};
    std::array<std::uint32_t, 4> pack_of{};
    const bcl::partition_summary summary = partition(costs, bcl::pack_shape{2, 2}, pack_of);
    CHECK(summary.heaviest == 5.0);
    CHECK(pack_of[0] == pack_of[3]);
    CHECK(pack_of[1] == pack_of[2]);
    CHECK(pack_of[0] != pack_of[1]);
}
