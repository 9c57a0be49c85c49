// The outlier cap (cost_and_cap.hpp): the truncation math, --cap and --cap-action, and that
// under a truncating cap every policy, bcl's through its balancer and the baselines through
// stream_cap, runs on the same truncated records.
// Expected numbers are derived in the comments, never copied from the code's output.

#include "cost_and_cap.hpp"
#include "random.hpp"
#include "sim_test_support.hpp"
#include "simulate.hpp"

#include <bcl/options.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <vector>

using Catch::Matchers::Contains;

using bcl_sim::sim_config;
using bcl_sim_test::hand_settings;
using bcl_sim_test::run_by_hand;
using bcl_sim_test::two_ranks;

TEST_CASE("sim: truncation keeps the largest whole length within the cost cap", "[sim][cap]") {
    using bcl_sim::truncated_length;
    // a=0, b=1, c=0.01: cost(L) = L + L^2/100. cost(150) = 150 + 225 = 375.
    const bcl_sim::cost_model quad{0.0, 1.0, 0.01, {}};
    // Cap 200: L^2/100 + L - 200 = 0 -> L = (-1 + sqrt(1 + 8)) / 0.02 = 100 exactly.
    CHECK(truncated_length(quad, 150.0, 200.0) == 100.0);
    // Cap 300: L = (-1 + sqrt(13)) / 0.02 = 130.28; cost(130) = 299 <= 300, cost(131) = 302.61.
    CHECK(truncated_length(quad, 150.0, 300.0) == 130.0);
    // Within the cap (cost(50) = 75): untouched, even when not a whole number.
    CHECK(truncated_length(quad, 50.0, 200.0) == 50.0);
    CHECK(truncated_length(quad, 99.5, 200.0) == 99.5);
    // a = 24 moves the root by nothing: 24 + L + L^2/100 = 224 -> L = 100.
    CHECK(truncated_length(bcl_sim::cost_model{24.0, 1.0, 0.01, {}}, 150.0, 224.0) == 100.0);
    // c = 0: L = (cap - a) / b. b = 2, cap 50: 25; with a = 10: 20; cap 51 gives 25.5 -> 25.
    CHECK(truncated_length(bcl_sim::cost_model{0.0, 2.0, 0.0, {}}, 40.0, 50.0) == 25.0);
    CHECK(truncated_length(bcl_sim::cost_model{10.0, 2.0, 0.0, {}}, 40.0, 50.0) == 20.0);
    CHECK(truncated_length(bcl_sim::cost_model{0.0, 2.0, 0.0, {}}, 40.0, 51.0) == 25.0);
    // b = 0, c = 1: L = sqrt(cap): cap 49 -> 7; cap 50 -> 7.07 -> 7.
    CHECK(truncated_length(bcl_sim::cost_model{0.0, 0.0, 1.0, {}}, 10.0, 49.0) == 7.0);
    CHECK(truncated_length(bcl_sim::cost_model{0.0, 0.0, 1.0, {}}, 10.0, 50.0) == 7.0);
    // Even an empty record costs more than the cap (a = 100 > 50): cut to 0.
    CHECK(truncated_length(bcl_sim::cost_model{100.0, 1.0, 0.0, {}}, 40.0, 50.0) == 0.0);
    // Cost does not depend on length: nothing to cut.
    CHECK(truncated_length(bcl_sim::cost_model{100.0, 0.0, 0.0, {}}, 40.0, 50.0) == 40.0);
    // The default cost and a cap of cost(8192) = 8192 + 8192^2/24576: back to 8192 exactly, even
    // if the computed root lands a hair below it.
    const bcl_sim::cost_model def = bcl_sim::default_cost();
    CHECK(truncated_length(def, 20000.0, def(8192.0)) == 8192.0);
    CHECK(truncated_length(def, 8193.0, def(8192.0)) == 8192.0);
}

TEST_CASE("sim: --cap and --cap-action parse, and a fixed cap is a length", "[sim][cap][input]") {
    using bcl::cap_kind;
    CHECK(bcl_sim::parse_cap("none").kind == cap_kind::none);
    const auto p99 = bcl_sim::parse_cap("p99");
    CHECK(p99.kind == cap_kind::quantile);
    CHECK(p99.quantile == Approx(0.99));
    CHECK(bcl_sim::parse_cap("p99.5").quantile == Approx(0.995));
    CHECK(bcl_sim::parse_cap("p50").quantile == Approx(0.5));
    const auto fixed = bcl_sim::parse_cap("32768");
    CHECK(fixed.kind == cap_kind::fixed);
    CHECK(fixed.tokens == 32768.0);
    CHECK(bcl_sim::describe(p99) == "p99");
    CHECK(bcl_sim::describe(fixed) == "32768");
    for (const char* bad : {"p", "p0", "p100", "p-1", "px", "q99", "0", "-5", "abc", "", "p99%"})
        CHECK_THROWS_AS(bcl_sim::parse_cap(bad), bcl_sim::input_error);
    CHECK_THROWS_WITH(bcl_sim::parse_cap("p100"), Contains("below 100"));
    CHECK(bcl_sim::parse_cap_action("clip") == bcl::cap_action::clip);
    CHECK(bcl_sim::parse_cap_action("truncate") == bcl::cap_action::truncate);
    CHECK_THROWS_AS(bcl_sim::parse_cap_action("drop"), bcl_sim::input_error);

    // A fixed cap of T tokens is bcl's cost cap cost(T): 8192 + 8192^2/24576 under the default.
    const auto cap = bcl_sim::bcl_cap(bcl_sim::parse_cap("8192"), bcl::cap_action::truncate,
                                      bcl_sim::default_cost());
    CHECK(cap.kind == cap_kind::fixed);
    CHECK(cap.value == Approx(8192.0 + 8192.0 * 8192.0 / 24576.0));
    CHECK(cap.action == bcl::cap_action::truncate);
    // p99 keeps bcl's warm-up: ceil(10 / 0.01) = 1000 records.
    const auto q = bcl_sim::bcl_cap(p99, bcl::cap_action::clip, bcl_sim::default_cost());
    CHECK(q.quantile == Approx(0.99));
    CHECK(bcl::cap_warmup(q) == 1000);
    // A cap that costs nothing (a = b = c = 0) is refused.
    CHECK_THROWS_WITH(
        bcl_sim::bcl_cap(fixed, bcl::cap_action::clip, bcl_sim::cost_model{0.0, 0.0, 0.0, {}}),
        Contains("must cost more than 0"));

    sim_config cfg;
    cfg.memory_budget = -1.0;
    CHECK_THROWS_WITH(bcl_sim::validate(cfg), Contains("--memory-budget"));
    cfg.memory_budget = std::numeric_limits<double>::infinity();
    CHECK_THROWS_WITH(bcl_sim::validate(cfg), Contains("--memory-budget"));
}

TEST_CASE("sim: a fixed cap, clipped and truncated, on two ranks by hand", "[sim][cap]") {
    // two_ranks: rank 0 reads 10, 10, 1, 1; rank 1 reads 5, 5, 6, 6. B = 2, K = 2, cost = length.
    // Fixed cap 8 (cost units; here cost = length): the two 10s of rank 0 are above it.
    hand_settings clip;
    clip.cap = bcl::cap_options{.kind = bcl::cap_kind::fixed, .value = 8.0};
    hand_settings truncate = clip;
    truncate.cap.action = bcl::cap_action::truncate;

    // none under clip: the records are untouched and nothing is counted (clip only changes what
    // bcl balances on): 10+10, 5+5 | 1+1, 6+6.
    const auto none_clip = run_by_hand("none", two_ranks, 2, 2, 2, clip);
    CHECK(none_clip.costs == std::vector<double>{20, 10, 2, 12});
    CHECK(none_clip.extras.capped == 0);
    // none under truncate: the 10s become 8s: 8+8, 5+5 | 1+1, 6+6. Tokens = costs here.
    const auto none_trunc = run_by_hand("none", two_ranks, 2, 2, 2, truncate);
    CHECK(none_trunc.costs == std::vector<double>{16, 10, 2, 12});
    CHECK(none_trunc.tokens == none_trunc.costs);
    CHECK(none_trunc.extras.capped == 2);

    // tumbling under clip balances the estimates {8, 8, 1, 1} as {8, 1} + {8, 1}, but the rank
    // pays the true 10 + 1 = 11 per batch; rank 1: {6, 5} + {6, 5} = 11. bcl counts 2 capped.
    const auto tumbling_clip = run_by_hand("tumbling", two_ranks, 2, 2, 2, clip);
    CHECK(tumbling_clip.costs == std::vector<double>{11, 11, 11, 11});
    CHECK(tumbling_clip.tokens == tumbling_clip.costs);
    CHECK(tumbling_clip.extras.capped == 2);
    // tumbling under truncate: bcl calls the truncation, the records become 8s: 9 per batch.
    const auto tumbling_trunc = run_by_hand("tumbling", two_ranks, 2, 2, 2, truncate);
    CHECK(tumbling_trunc.costs == std::vector<double>{9, 11, 9, 11});
    CHECK(tumbling_trunc.extras.capped == 2);
    // The library's own largest batch memory is the simulator's largest batch: 11 tokens.
    CHECK(tumbling_trunc.extras.peak_batch_memory == 11.0);

    // The other baselines see the same truncated records: 2 capped, 40 tokens in all.
    for (const char* policy : {"global", "mffd", "verl_kk", "length_grouped"}) {
        hand_settings s = truncate;
        s.bin_tokens = 15.0;
        s.dataset = 16;
        s.epoch = 8;
        const auto run = run_by_hand(policy, two_ranks, 2, 2, 2, s);
        INFO(policy);
        CHECK(run.extras.capped == 2);
        double total = 0.0;
        for (const double t : run.tokens) total += t;
        CHECK(total == 8 + 8 + 1 + 1 + 5 + 5 + 6 + 6);
        CHECK(run.tokens == run.costs);
    }
    // The global plan pairs {8, 8, 6, 6, 5, 5, 1, 1} into 4 packs of 2: each 8 needs a 1 to stay
    // at or under 11, which leaves {6, 5} twice: heaviest 11.
    const auto global = run_by_hand("global", two_ranks, 2, 2, 2, truncate);
    CHECK(*std::max_element(global.costs.begin(), global.costs.end()) == 11.0);
}

namespace {

std::vector<std::vector<double>> heavy_streams(std::size_t ranks, std::size_t per_rank,
                                               std::uint64_t seed) {
    // Pareto-like lengths ceil(50 * U^(-1/1.2)): a heavy tail with many distinct values.
    std::vector<std::vector<double>> streams(ranks, std::vector<double>(per_rank));
    bcl_sim::splitmix rng(seed);
    for (auto& stream : streams)
        for (double& x : stream)
            x = std::ceil(50.0 * std::pow(bcl_sim::unit_interval_open0(rng.next()), -1.0 / 1.2));
    return streams;
}

} // namespace

TEST_CASE("sim: under a truncating quantile cap every policy runs on the same records",
          "[sim][cap]") {
    // 3 ranks, B = 4, K = 5, 100 steps: 400 records per rank, 20 whole windows. The p90 with a
    // warm-up of 20 records, re-read every 64, under the default cost. bcl caps through its
    // balancer (with_truncation), the baselines through stream_cap, which follows the balancer's
    // rule. Tumbling pushes exactly the records of each window and emits them in it, so per rank
    // and window it holds exactly the tokens none holds, and caps exactly as many records.
    const auto streams = heavy_streams(3, 400, 99);
    hand_settings s;
    s.cost = bcl_sim::default_cost();
    s.cap = bcl::cap_options{.kind = bcl::cap_kind::quantile,
                             .quantile = 0.9,
                             .warmup = 20,
                             .action = bcl::cap_action::truncate};
    s.bin_tokens = 1e6;
    const std::size_t R = 3, B = 4, K = 5, steps = 100;
    const auto none = run_by_hand("none", streams, B, K, steps, s);
    const auto tumbling = run_by_hand("tumbling", streams, B, K, steps, s);
    // About 10% of the 3 * 380 records after the warm-up.
    CHECK(none.extras.capped > 60);
    CHECK(none.extras.capped < 180);
    CHECK(tumbling.extras.capped == none.extras.capped);
    for (std::size_t r = 0; r < R; ++r)
        for (std::size_t w = 0; w < steps / K; ++w) {
            double a = 0.0, b = 0.0;
            for (std::size_t t = w * K; t < (w + 1) * K; ++t) {
                a += none.tokens[t * R + r];
                b += tumbling.tokens[t * R + r];
            }
            CHECK(b == Approx(a).epsilon(1e-12));
        }
    // Truncation never grows a record: every policy holds at most the uncapped tokens.
    double uncapped = 0.0, capped = 0.0;
    for (const auto& stream : streams)
        for (const double x : stream) uncapped += x;
    for (const double t : none.tokens) capped += t;
    CHECK(capped < uncapped);
    // The other baselines read the same capped stream (whole windows and megabatches here).
    for (const char* policy : {"global", "mffd", "verl_kk", "length_grouped"}) {
        const auto run = run_by_hand(policy, streams, B, K, steps, s);
        INFO(policy);
        CHECK(run.extras.capped == none.extras.capped);
        double total = 0.0;
        for (const double t : run.tokens) total += t;
        CHECK(total == Approx(capped).epsilon(1e-12));
    }
    // Clip leaves the baselines' records alone; bcl still counts what it clipped, the same
    // records (the quantile sketch sees uncapped costs either way).
    s.cap.action = bcl::cap_action::clip;
    CHECK(run_by_hand("none", streams, B, K, steps, s).extras.capped == 0);
    CHECK(run_by_hand("tumbling", streams, B, K, steps, s).extras.capped == none.extras.capped);
}

TEST_CASE("sim: --cap-prior parses, resolves and needs a quantile cap", "[sim][cap][input]") {
    using kind = bcl_sim::cap_prior_spec::kind;
    CHECK(bcl_sim::parse_cap_prior("none").what == kind::none);
    CHECK(bcl_sim::parse_cap_prior("exact").what == kind::exact);
    const auto t = bcl_sim::parse_cap_prior("8192");
    CHECK(t.what == kind::tokens);
    CHECK(t.tokens == 8192.0);
    for (const char* bad : {"", "0", "-5", "p99", "exacto", "nan"})
        CHECK_THROWS_AS(bcl_sim::parse_cap_prior(bad), bcl_sim::input_error);
    CHECK_THROWS_WITH(bcl_sim::parse_cap_prior("-5"), Contains("a prior must be a length > 0"));

    // exact: the nearest-rank q-quantile of the lengths 1..100 at q = 0.9 is the 90th, 90 tokens;
    // under cost = L + L^2/100 it costs 90 + 81 = 171.
    std::vector<double> lengths;
    for (int i = 100; i >= 1; --i) lengths.push_back(i);
    const bcl_sim::cost_model quad{0.0, 1.0, 0.01, {}};
    const auto p90 = bcl_sim::parse_cap("p90");
    const auto exact =
        bcl_sim::resolve_cap_prior(bcl_sim::parse_cap_prior("exact"), p90, quad, &lengths);
    REQUIRE(exact);
    CHECK(exact->tokens == 90.0);
    CHECK(exact->cost == Approx(171.0));
    // A length is priced like a fixed --cap: 50 tokens cost 50 + 25 = 75.
    const auto fifty =
        bcl_sim::resolve_cap_prior(bcl_sim::parse_cap_prior("50"), p90, quad, nullptr);
    REQUIRE(fifty);
    CHECK(fifty->cost == Approx(75.0));
    CHECK(!bcl_sim::resolve_cap_prior({}, p90, quad, nullptr));
    // A prior needs a quantile cap, and exact needs lengths to take the quantile of.
    CHECK_THROWS_WITH(bcl_sim::resolve_cap_prior(t, bcl_sim::parse_cap("6000"), quad, &lengths),
                      Contains("needs a quantile --cap"));
    CHECK_THROWS_WITH(
        bcl_sim::resolve_cap_prior(bcl_sim::parse_cap_prior("exact"), p90, quad, nullptr),
        Contains("no workload lengths"));
    sim_config cfg;
    cfg.cap_prior = t;
    CHECK_THROWS_WITH(bcl_sim::validate(cfg), Contains("needs a quantile --cap"));
    cfg.cap = bcl_sim::parse_cap("p99");
    CHECK_NOTHROW(bcl_sim::validate(cfg));
}

TEST_CASE("sim: --mean-cost exact is the workload's mean cost as the run's cap leaves it",
          "[sim][cap]") {
    // The lengths 1..100 under cost = L + L^2/100: sum of L is 5050, sum of L^2 is 338350.
    std::vector<double> lengths;
    for (int i = 100; i >= 1; --i) lengths.push_back(i);
    sim_config cfg;
    cfg.cost = bcl_sim::cost_model{0.0, 1.0, 0.01, {}};
    bcl_sim::parse_mean_cost("exact", cfg);
    const auto exact = [&](const char* cap, bcl::cap_action action) {
        cfg.cap = bcl_sim::parse_cap(cap);
        cfg.cap_action = action;
        const std::optional<double> mean = bcl_sim::resolve_mean_cost(cfg, lengths);
        REQUIRE(mean);
        return *mean;
    };
    // No cap: (5050 + 3383.5) / 100.
    CHECK(exact("none", bcl::cap_action::clip) == Approx(84.335));
    // p90: the exact quantile is 90 tokens, costing 171. Lengths 1..90 cost 4095 + 2470.65 (the
    // sum of L^2 up to 90 is 247065); the ten above cost 171 each, clipped or truncated to 90.
    CHECK(exact("p90", bcl::cap_action::clip) == Approx(82.7565));
    CHECK(exact("p90", bcl::cap_action::truncate) == Approx(82.7565));
    // A fixed cap of 50.5 tokens costs 50.5 + 25.5025 = 76.0025. Lengths 1..50 cost 1275 + 429.25;
    // clipped, the fifty above cost 76.0025 each; truncated, they keep 50 whole tokens, cost 75.
    CHECK(exact("50.5", bcl::cap_action::clip) == Approx((1704.25 + 50 * 76.0025) / 100));
    CHECK(exact("50.5", bcl::cap_action::truncate) == Approx((1704.25 + 50 * 75.0) / 100));
    // A mean cost given as a number is taken as it is, cap or not.
    bcl_sim::parse_mean_cost("12.5", cfg);
    CHECK(bcl_sim::resolve_mean_cost(cfg, lengths) == 12.5);
}

TEST_CASE("sim: a truncating quantile cap uses the prior during its warm-up", "[sim][cap]") {
    // Two ranks, B = 1, three steps, cost = length; a p50 cap whose warm-up is 3 records, so all
    // three records of each rank arrive before it ends. Without a prior nothing is capped then.
    // With a prior of 5: rank 0's 10 and 7 are cut to 5, rank 1's 6 too: three records capped.
    const std::vector<std::vector<double>> streams{{10, 2, 7}, {1, 6, 3}};
    hand_settings s;
    s.cap = bcl::cap_options{.kind = bcl::cap_kind::quantile,
                             .quantile = 0.5,
                             .warmup = 3,
                             .action = bcl::cap_action::truncate};
    const auto plain = run_by_hand("none", streams, 1, 1, 3, s);
    CHECK(plain.costs == std::vector<double>{10, 1, 2, 6, 7, 3});
    CHECK(plain.extras.capped == 0);
    s.cap_prior = 5.0;
    const auto prior = run_by_hand("none", streams, 1, 1, 3, s);
    CHECK(prior.costs == std::vector<double>{5, 1, 2, 5, 5, 3});
    CHECK(prior.extras.capped == 3);
    // Every baseline reads the same capped stream: 3 capped, 5+2+5 + 1+5+3 = 21 tokens.
    for (const char* policy : {"length_grouped", "mffd", "verl_kk", "global"}) {
        hand_settings b = s;
        b.bin_tokens = 100.0;
        b.dataset = 6; // length_grouped: megabatches of 1 record, one epoch of all 6
        b.epoch = 6;
        const auto run = run_by_hand(policy, streams, 1, 1, 3, b);
        INFO(policy);
        CHECK(run.extras.capped == 3);
        double total = 0.0;
        for (const double x : run.tokens) total += x;
        CHECK(total == 21.0);
    }
}

TEST_CASE("sim: a record's cost is one bcl accepts, or the run is refused naming the record",
          "[sim][cap][input]") {
    const bcl_sim::cost_model affine{0.0, 1.0, 0.0, {}};
    CHECK(bcl_sim::record_cost(affine, 100.0, 0, 0) == 100.0);
    // Above bcl::max_estimate (1e120): the library refuses it, so the simulator does.
    const bcl_sim::cost_model huge{0.0, 1e119, 0.0, {}};
    CHECK(bcl_sim::record_cost(huge, 5.0, 1, 7) == Approx(5e119));
    CHECK_THROWS_WITH(bcl_sim::record_cost(huge, 11.0, 1, 7),
                      Contains("record 7 of rank 1 has length 11") &&
                          Contains("at most bcl::max_estimate"));
    const bcl_sim::cost_model squared{0.0, 0.0, 1e300, {}};
    CHECK_THROWS_AS(bcl_sim::record_cost(squared, 1e10, 0, 3), bcl_sim::input_error);
}
