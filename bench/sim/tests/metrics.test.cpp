// bcl-sim's metrics (metrics.hpp) on cost matrices small enough to work out by hand.
// Expected numbers are derived in the comments, never copied from the code's output.

#include "metrics.hpp"

#include <catch2/catch.hpp>

#include <cstddef>
#include <vector>

TEST_CASE("sim: metrics of a two-rank, two-step cost matrix", "[sim][metrics]") {
    // Step 0: ranks cost 1 and 3; step 1: 2 and 2.
    //   mean rank cost = (1+3+2+2)/4 = 2; step times (max) = 3, 2, mean 2.5
    //   efficiency = 2 / 2.5 = 0.8
    //   cv: deviations -1, 1, 0, 0 -> population variance 2/4 = 0.5 -> sqrt(0.5)/2 = 0.353553...
    //   p99 step time, nearest rank: ceil(0.99 * 2) = 2nd smallest of {2, 3} = 3 -> 3 / 2 = 1.5
    const std::vector<double> costs{1, 3, 2, 2};
    const auto m = bcl_sim::compute_metrics(costs, 2);
    CHECK(m.steps == 2);
    CHECK(m.mean_rank_cost == Approx(2.0));
    CHECK(m.mean_step_time == Approx(2.5));
    CHECK(m.efficiency == Approx(0.8));
    CHECK(m.cv == Approx(0.3535533906));
    CHECK(m.p99_step_ratio == Approx(1.5));

    // Against a reference with cv 0.4 and efficiency 0.5: 1 - 0.353553/0.4 = 0.116117, 0.8/0.5
    // = 1.6
    CHECK(bcl_sim::cv_reduction(m.cv, 0.4) == Approx(0.1161165235));
    CHECK(bcl_sim::speedup(m.efficiency, 0.5) == Approx(1.6));
    CHECK(bcl_sim::cv_reduction(0.3, 0.0) == 0.0); // nothing to reduce
}

TEST_CASE("sim: perfectly balanced and all-zero steps", "[sim][metrics]") {
    const std::vector<double> even{5, 5, 5, 7, 7, 7};
    const auto m = bcl_sim::compute_metrics(even, 3);
    // Mean rank cost 6, step times 5 and 7 (mean 6): efficiency 1; p99 step 7 / 6.
    CHECK(m.efficiency == Approx(1.0));
    CHECK(m.p99_step_ratio == Approx(7.0 / 6.0));
    // cv: deviations +-1 everywhere -> 1/6.
    CHECK(m.cv == Approx(1.0 / 6.0));

    const std::vector<double> zero(4, 0.0);
    const auto z = bcl_sim::compute_metrics(zero, 2);
    CHECK(z.efficiency == 1.0); // nothing to wait for
    CHECK(z.cv == 0.0);
}

TEST_CASE("sim: p99 uses the nearest rank over steps", "[sim][metrics]") {
    // 200 steps of one rank: step s costs s+1. Nearest-rank p99 = value at rank ceil(198) = 198.
    // Mean rank cost = 100.5.
    std::vector<double> costs(200);
    for (std::size_t s = 0; s < costs.size(); ++s) costs[s] = static_cast<double>(s + 1);
    const auto m = bcl_sim::compute_metrics(costs, 1);
    CHECK(m.p99_step_ratio == Approx(198.0 / 100.5));
    CHECK(m.efficiency == Approx(1.0)); // one rank never waits
}

TEST_CASE("sim: round_bound charges each round its costliest rank's total", "[sim][metrics]") {
    // Two ranks, rounds of two steps, five steps (the last round cut short):
    //   step:    0  1 | 2  3 | 4
    //   rank 0:  4  0 | 1  1 | 2
    //   rank 1:  0  4 | 3  3 | 0
    // Step maxima 4, 4, 3, 3, 2 (sum 16); rank costs sum to 18, so efficiency 18 / 2 / 16 =
    // 0.5625. Round totals: round 0 both ranks 4 (max 4), round 1 ranks 2 and 6 (max 6), the open
    // round ranks 2 and 0 (max 2): 12, so round_bound = 9 / 12 = 0.75. Round 0's two ranks would
    // be even if each spread its 4 over both steps; round 1's rank 1 needs 6 whatever the order.
    const std::vector<double> costs{4, 0, 0, 4, 1, 3, 1, 3, 2, 0};
    const auto m = bcl_sim::compute_metrics(costs, 2, 2);
    CHECK(m.efficiency == Approx(0.5625));
    CHECK(m.round_bound == Approx(0.75));
    // Without rounds nothing is bounded; one step per round is the efficiency itself.
    CHECK(bcl_sim::compute_metrics(costs, 2).round_bound == 1.0);
    CHECK(bcl_sim::compute_metrics(costs, 2, 1).round_bound == Approx(m.efficiency));
    // Rounds as long as the run: only the ranks' whole totals count (9 against 10).
    CHECK(bcl_sim::compute_metrics(costs, 2, 5).round_bound == Approx(0.9));
}

TEST_CASE("sim: epoch_bound charges each epoch its costliest rank's total", "[sim][metrics]") {
    // Two ranks, epochs of two steps, four steps, the costs of
    //   step:    0  1 | 2  3
    //   rank 0:  1  3 | 2  2
    //   rank 1:  2  2 | 5  1
    // Step maxima 2, 3, 5, 2 (sum 12); rank costs sum to 18, so efficiency 18 / 2 / 12 = 0.75.
    // Epoch totals: epoch 0 both ranks 4 (max 4), epoch 1 ranks 4 and 6 (max 6): 10, so
    // epoch_bound = 9 / 10 = 0.9. A policy that must hand out each rank's epoch within its two
    // steps needs at least 4 + 6 = 10, whatever it does inside the epochs.
    const std::vector<double> costs{1, 2, 3, 2, 2, 5, 2, 1};
    const auto m = bcl_sim::compute_metrics(costs, 2, 1, 2);
    CHECK(m.efficiency == Approx(0.75));
    CHECK(m.epoch_bound == Approx(0.9));
    // It is round_bound's formula over epochs: the same with rounds of two steps.
    CHECK(bcl_sim::compute_metrics(costs, 2, 2).round_bound == Approx(0.9));
    // Without epochs nothing is bounded; one step per epoch is the efficiency itself.
    CHECK(bcl_sim::compute_metrics(costs, 2, 1).epoch_bound == 1.0);
    CHECK(bcl_sim::compute_metrics(costs, 2, 0, 1).epoch_bound == Approx(m.efficiency));
    // An epoch of three steps: 6 and 9 over steps 0-2, the open epoch 2 and 1: 11, 9 / 11.
    CHECK(bcl_sim::compute_metrics(costs, 2, 0, 3).epoch_bound == Approx(9.0 / 11.0));
}
