// --batching (what a rank spends on a batch), the goodput metric, and --emission's parsing.
// Expected numbers are derived in the comments, never copied from the code's output.

#include "batching.hpp"

#include "metrics.hpp"
#include "sim_test_support.hpp"
#include "simulate.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstddef>
#include <string>
#include <vector>

using bcl_sim::batch_cost;
using bcl_sim_test::hand_settings;
using bcl_sim_test::run_by_hand;

namespace {

// Rank 0 reads 10, 2, 3, 3; rank 1 reads 4, 4, 1, 7. B = 2, K = 2, cost = length.
const std::vector<std::vector<double>> uneven{{10, 2, 3, 3}, {4, 4, 1, 7}};

hand_settings padded() {
    hand_settings s;
    s.batching = batch_cost::padded;
    return s;
}

} // namespace

TEST_CASE("sim: goodput is useful cost over what the ranks are held for", "[sim][metrics]") {
    // Spend 20, 8 | 6, 14 (step-major, two ranks); useful 12, 8 | 6, 8. Step times 20 and 14,
    // sum 34. Goodput = useful 34 / (R = 2 * 34) = 0.5. Efficiency keeps its meaning on the
    // spend: mean 48/4 = 12 over the mean step time 17.
    const std::vector<double> spend{20, 8, 6, 14};
    const std::vector<double> useful{12, 8, 6, 8};
    const auto m = bcl_sim::compute_metrics(spend, useful, 2);
    CHECK(m.goodput == Approx(0.5));
    CHECK(m.efficiency == Approx(12.0 / 17.0));
    // Packed (useful = spend), goodput is efficiency exactly.
    const auto p = bcl_sim::compute_metrics(spend, 2);
    CHECK(p.goodput == p.efficiency);
}

TEST_CASE("sim: under padded batching a batch costs B times its costliest record",
          "[sim][batching]") {
    SECTION("none") {
        // Step 0: rank 0 holds {10, 2}: 2 * 10 = 20 (useful 12); rank 1 {4, 4}: 8 (8).
        // Step 1: rank 0 {3, 3}: 6 (6); rank 1 {1, 7}: 14 (8).
        const auto run = run_by_hand("none", uneven, 2, 2, 2, padded());
        CHECK(run.costs == std::vector<double>{20, 8, 6, 14});
        CHECK(run.useful == std::vector<double>{12, 8, 6, 8});
        CHECK(run.tokens == run.useful); // tokens are the records' own lengths, never padding
        const auto m = bcl_sim::compute_metrics(run.costs, run.useful, 2);
        CHECK(m.goodput == Approx(0.5));
        // Packed, the same records cost their sums: 12, 8 | 6, 8.
        const auto packed = run_by_hand("none", uneven, 2, 2, 2);
        CHECK(packed.costs == std::vector<double>{12, 8, 6, 8});
    }
    SECTION("verl_kk balances the workload, not the padded spend") {
        // Step 0's global batch is 10, 4, 2, 4. Runs of two over the sorted values: [{1} 4,
        // {2} 2] spread 2 and [{0} 10, {3} 4] spread 6, which pops first: {0} + {2} = 12 and
        // {3} + {1} = 8. Rank 0 gets 10 and 2 (padded 20), rank 1 the 4s (8).
        // Step 1's batch is 3, 1, 3, 7: [{0} 3, {1} 1] spread 2 and [{3} 7, {2} 3] spread 4:
        // {3} + {1} = 8 (1 and 7, padded 14) to rank 0 and {2} + {0} = 6 (3 and 3, 6) to rank 1.
        const auto run = run_by_hand("verl_kk", uneven, 2, 2, 2, padded());
        CHECK(run.costs == std::vector<double>{20, 8, 14, 6});
        CHECK(run.useful == std::vector<double>{12, 8, 8, 6});
    }
    SECTION("tumbling") {
        // Rank 0's window {10, 2, 3, 3}: the best split of the cost is {10, 2} (12) and {3, 3}
        // (6), padded 20 and 6. Rank 1's {4, 4, 1, 7}: {7, 1} and {4, 4}, 8 each, padded 14
        // and 8. The order of a window's batches is the balancer's; compare each rank's pair.
        const auto run = run_by_hand("tumbling", uneven, 2, 2, 2, padded());
        std::vector<double> rank0{run.costs[0], run.costs[2]};
        std::vector<double> rank1{run.costs[1], run.costs[3]};
        std::sort(rank0.begin(), rank0.end());
        std::sort(rank1.begin(), rank1.end());
        CHECK(rank0 == std::vector<double>{6, 20});
        CHECK(rank1 == std::vector<double>{8, 14});
    }
    SECTION("mffd's bins pack: it is never padded") {
        hand_settings s = padded();
        s.bin_tokens = 15.0;
        hand_settings p;
        p.bin_tokens = 15.0;
        const auto run = run_by_hand("mffd", uneven, 2, 2, 2, s);
        CHECK(run.costs == run.useful);
        CHECK(run.costs == run_by_hand("mffd", uneven, 2, 2, 2, p).costs);
    }
}

TEST_CASE("sim: goodput through simulate()", "[sim][batching]") {
    bcl_sim::sim_config cfg;
    cfg.dist = bcl_sim::parse_dist("pareto:xm=50,alpha=1.3");
    cfg.ranks = 4;
    cfg.batch = 8;
    cfg.lookahead = 4;
    cfg.steps = 64;
    // Packed: every policy's goodput is its efficiency, exactly.
    const auto packed = bcl_sim::simulate(cfg);
    for (const auto& p : packed.policies) {
        INFO(p.name);
        CHECK(p.metrics.goodput == p.metrics.efficiency);
    }
    // Padded: a rank spends B times its costliest record, more than its records' sum unless they
    // all cost the same, so goodput < efficiency, and no policy's goodput rises (the same batches,
    // longer steps); mffd packs, so for it the two are equal.
    cfg.batching = batch_cost::padded;
    const auto pad = bcl_sim::simulate(cfg);
    REQUIRE(pad.policies.size() == packed.policies.size());
    for (std::size_t i = 0; i < pad.policies.size(); ++i) {
        const auto& p = pad.policies[i];
        INFO(p.name);
        CHECK(p.metrics.goodput <= p.metrics.efficiency + 1e-12);
        CHECK(p.metrics.goodput <= packed.policies[i].metrics.goodput + 1e-12);
        if (p.name == "mffd")
            CHECK(p.metrics.goodput == p.metrics.efficiency);
        else
            CHECK(p.metrics.goodput < p.metrics.efficiency);
        // The speedup is the ratio of goodputs (useful work per unit of time), and so of mean step
        // times for every policy that emits exactly none's records. Sliding holds some back and
        // emits later ones instead; length_grouped groups a synthetic stream in megabatches of
        // 50 * B = 400 records, and its 64 steps (2048 records) end inside one.
        const auto& none = pad.policies.front();
        REQUIRE(none.name == "none");
        CHECK(p.speedup_vs_none == Approx(p.metrics.goodput / none.metrics.goodput));
        if (p.name != "sliding" && p.name != "length_grouped")
            CHECK(p.speedup_vs_none ==
                  Approx(none.metrics.mean_step_time / p.metrics.mean_step_time));
    }
}

TEST_CASE("sim: --batching and --emission parse", "[sim][batching][input]") {
    CHECK(bcl_sim::parse_batching("packed") == batch_cost::packed);
    CHECK(bcl_sim::parse_batching("padded") == batch_cost::padded);
    CHECK_THROWS_AS(bcl_sim::parse_batching("pad"), bcl_sim::input_error);
    CHECK_THROWS_WITH(bcl_sim::parse_batching("Packed"),
                      Catch::Contains("expected one of packed, padded"));
    CHECK(bcl_sim::parse_emission("costliest_first") == bcl_sim::emission_order::costliest_first);
    CHECK(bcl_sim::parse_emission("shuffled") == bcl_sim::emission_order::shuffled);
    CHECK_THROWS_AS(bcl_sim::parse_emission("random"), bcl_sim::input_error);
    CHECK(std::string(bcl_sim::describe(batch_cost::padded)) == "padded");
    CHECK(std::string(bcl_sim::describe(bcl_sim::emission_order::costliest_first)) ==
          "costliest_first");
}
