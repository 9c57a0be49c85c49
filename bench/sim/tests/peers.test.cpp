// The peers as their own code runs them: verl's balance_batch (karmarkar_karp_equal, verl_kk) and
// NeMo-RL's packer (mffd_pack's last phase, adjust_bin_count, the mffd policy). Expected
// partitions and bins are worked out by hand from the peers' rules in the comments, never copied
// from the code's output.

#include "metrics.hpp"
#include "mffd.hpp"
#include "sim_test_support.hpp"
#include "verl_kk.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <vector>

using bcl_sim_test::run_by_hand;
using groups = std::vector<std::vector<std::uint32_t>>;

TEST_CASE("sim: karmarkar_karp_equal on worked examples", "[sim][verl_kk]") {
    SECTION("two groups of three") {
        // Values 8 7 6 5 4 3 (indices 0-5). Sorted by (value, index): 3(5) 4(4) 5(3) 6(2) 7(1)
        // 8(0), cut into runs of k = 2, each a state of two one-item sets, heaviest first:
        //   S1 = [{4}, {3}] spread 1, S2 = [{6}, {5}] spread 1, S3 = [{8}, {7}] spread 1.
        // The heap pops the largest spread first and, at equal spreads, the state with the
        // heavier top set: S3, then S2. Merging pairs S3's heaviest with S2's lightest:
        // {8, 5} = 13 and {7, 6} = 13; equal sums and counts compare by their first item's index,
        // so {7, 6} (index 1) is the heavier: M = [{7, 6}, {8, 5}], spread 0. S1 (spread 1) now
        // pops before M: S1 + M = [{4} + {8, 5}, {3} + {7, 6}] = [{4, 8, 5} = 17, {3, 7, 6} = 16].
        // Groups heaviest first, indices sorted: {0, 3, 4} (8 + 5 + 4) and {1, 2, 5} (7 + 6 + 3).
        const std::vector<double> values{8, 7, 6, 5, 4, 3};
        CHECK(bcl_sim::karmarkar_karp_equal(values, 2) == groups{{0, 3, 4}, {1, 2, 5}});
    }
    SECTION("three groups of two") {
        // Values 1 2 3 4 5 9: runs [{3}, {2}, {1}] spread 2 and [{9}, {5}, {4}] spread 5. The
        // larger spread pops first and takes the other's sets lightest first: {9, 1} = 10,
        // {5, 2} = 7, {4, 3} = 7; of the two 7s, {4, 3} starts with index 3 < 4, so it is the
        // lighter. Groups: {0, 5}, {1, 4}, {2, 3}. 10 is optimal: 9 must share with something.
        const std::vector<double> values{1, 2, 3, 4, 5, 9};
        CHECK(bcl_sim::karmarkar_karp_equal(values, 3) == groups{{0, 5}, {1, 4}, {2, 3}});
    }
    SECTION("equal values: ties broken by index as verl breaks them") {
        // 5 5 5 5 into 2: runs [{1}, {0}] and [{3}, {2}] (equal sums and counts: the higher
        // index is the greater set). Both spreads are 0; [{3}, {2}]'s top set {3} is the greater,
        // so it pops first and takes {0} beside {3} and {1} beside {2}: {3, 0} and {2, 1}, equal
        // sums; {2, 1} starts with the lower index, so {3, 0} is the heavier and comes first.
        const std::vector<double> values{5, 5, 5, 5};
        CHECK(bcl_sim::karmarkar_karp_equal(values, 2) == groups{{0, 3}, {1, 2}});
    }
    SECTION("equal sizes: every group holds exactly n / k items") {
        std::vector<double> values;
        for (int i = 0; i < 48; ++i) values.push_back(static_cast<double>((i * 37) % 101 + 1));
        for (const std::size_t k : {1U, 2U, 3U, 4U, 6U, 8U, 12U, 48U}) {
            const groups g = bcl_sim::karmarkar_karp_equal(values, k);
            REQUIRE(g.size() == k);
            std::vector<int> seen(values.size(), 0);
            for (const auto& group : g) {
                CHECK(group.size() == values.size() / k);
                for (const std::uint32_t i : group) ++seen[i];
            }
            CHECK(std::all_of(seen.begin(), seen.end(), [](int n) { return n == 1; }));
        }
    }
    SECTION("bad shapes are refused") {
        const std::vector<double> five{1, 2, 3, 4, 5};
        CHECK_THROWS_AS(bcl_sim::karmarkar_karp_equal(five, 2), std::invalid_argument);
        CHECK_THROWS_AS(bcl_sim::karmarkar_karp_equal(five, 0), std::invalid_argument);
        CHECK_THROWS_AS(bcl_sim::karmarkar_karp_equal(std::vector<double>{}, 1),
                        std::invalid_argument);
    }
}

TEST_CASE("sim: verl_kk splits each step's global batch into equal groups", "[sim][verl_kk]") {
    // two_ranks: rank 0 reads 10, 10, 1, 1; rank 1 reads 5, 5, 6, 6. B = 2, cost = length.
    // Step 0's global batch is 10, 5, 10, 5 (positions 0-3). Runs of 2 over the sorted values:
    // [{3}, {1}] (5s) and [{2}, {0}] (10s), both spread 0; the 10s' top set is the greater, so
    // they pop first: {2} + {1} = 15 and {0} + {3} = 15; {0, 3} starts with the lower index, so
    // group 0 (rank 0) is positions {1, 2} = 15 and group 1 (rank 1) positions {0, 3} = 15.
    // Step 1: 1, 6, 1, 6 likewise gives 7 and 7. Records stay in their step: no delay.
    const auto run = run_by_hand("verl_kk", bcl_sim_test::two_ranks, 2, 2, 2);
    CHECK(run.costs == std::vector<double>{15, 15, 7, 7});
    CHECK(bcl_sim::compute_metrics(run.costs, 2).efficiency == Approx(1.0));
    CHECK(run.extras.max_delay_batches == 0);
    CHECK(!run.extras.mean_gap_to_lb);

    // Where one step alone cannot balance: rank 0 reads 9, 9 then 1, 1, rank 1 reads 9, 9 then
    // 1, 1. Step 0 holds four 9s (18 each), step 1 four 1s (2 each): per step the groups are
    // equal, so every step is balanced, but nothing crosses steps (the global plan would mix them).
    const auto steps = run_by_hand("verl_kk", {{9, 9, 1, 1}, {9, 9, 1, 1}}, 2, 2, 2);
    CHECK(steps.costs == std::vector<double>{18, 18, 2, 2});
}

TEST_CASE("sim: mffd_pack's last phase tries only the least full open bin", "[sim][mffd]") {
    // Capacity 10, items 5 4 4 2 1: nothing above 5, so phases 1-4 do nothing and all go to
    // phase 5, longest first. 5 opens the empty starting bin (5); 4 fits it (9); the second 4
    // does not fit the least full bin (9), so it opens a new one (4), now the least full; 2 goes
    // there (6); 1 too (7), not into the fuller first bin as first fit would put it. Bins come
    // least full first: {4, 2, 1} (indices 2, 3, 4) = 7, then {5, 4} (0, 1) = 9. First-fit
    // decreasing would give {5, 4, 1} = 10 and {4, 2} = 6.
    const std::vector<double> items{5, 4, 4, 2, 1};
    CHECK(bcl_sim::mffd_pack(items, 10) == groups{{2, 3, 4}, {0, 1}});

    // A bin whose load equals another's goes after it (NeMo-RL's bisect): 4 4 3 3 2 2 into 10.
    // 4, 4 -> {0, 1} = 8; 3 does not fit, opens {2} = 3; 3 -> {2, 3} = 6; 2 -> {2, 3, 4} = 8,
    // placed after {0, 1} (also 8); the last 2 goes to the first least full bin, {0, 1} -> 10.
    const std::vector<double> ties{4, 4, 3, 3, 2, 2};
    CHECK(bcl_sim::mffd_pack(ties, 10) == groups{{2, 3, 4}, {0, 1, 5}});
}

TEST_CASE("sim: adjust_bin_count empties one bin before the next", "[sim][mffd]") {
    // Two bins of three items, five wanted (min 5, multiple 5). Ranked by item count, ties to the
    // highest index: bin 1 first. It gives its last items, 5 then 4, until it holds one (3); then
    // bin 0 gives its last, 2. New bins are appended in that order.
    groups bins{{0, 1, 2}, {3, 4, 5}};
    bcl_sim::adjust_bin_count(bins, 5, 5);
    CHECK(bins == groups{{0, 1}, {3}, {5}, {4}, {2}});

    // One bin, at least 2 wanted and a multiple of 2: the one bin gives its last item.
    groups one{{1, 3, 0, 2}};
    bcl_sim::adjust_bin_count(one, 2, 2);
    CHECK(one == groups{{1, 3, 0}, {2}});

    // Already a multiple: nothing moves, an empty bin included (NeMo-RL keeps it too).
    groups even{{0, 1}, {}};
    bcl_sim::adjust_bin_count(even, 2, 2);
    CHECK(even == groups{{0, 1}, {}});

    // Fewer items than bins wanted: NeMo-RL raises, the simulator reports bad input.
    groups few{{0, 1, 2}};
    CHECK_THROWS_AS(bcl_sim::adjust_bin_count(few, 4, 2), bcl_sim::input_error);
}

TEST_CASE("sim: mffd matches NeMo-RL's packer on hand-worked steps", "[sim][mffd][policy]") {
    // Efficiencies within 0.003 of what NeMo-RL's own algorithm gives, worked out by hand (the
    // per-rank costs must match exactly). Cost = length, capacity 10, one step each.
    SECTION("the last phase") {
        // R = 2, B = 3: rank 0 reads 5, 4, 1 and rank 1 reads 4, 2, 1, so the global batch is
        // 5 4 4 2 1 1 (medium 5 4 4, small 2, tiny 1 1; nothing large). Phase 5: 5 and 4 fill the
        // starting bin to 9; the second 4 opens a bin (4); 2, 1 and 1 each go to that less full
        // bin: {4, 2, 1, 1} = 8, then {5, 4} = 9. Two bins, one per rank: rank 0 gets 8, rank 1
        // gets 9. Efficiency = mean 8.5 / max 9 = 0.9444 (first fit would give 10 and 7: 0.85).
        const auto run = run_by_hand("mffd", {{5, 4, 1}, {4, 2, 1}}, 3, 1, 1, 10.0);
        CHECK(run.costs == std::vector<double>{8, 9});
        CHECK(bcl_sim::compute_metrics(run.costs, 2).efficiency == Approx(8.5 / 9.0).margin(0.003));
    }
    SECTION("the bin-count adjustment") {
        // R = 3, B = 2: ranks read (4, 3), (4, 2), (3, 2); global batch 4 4 3 3 2 2, packed as
        // above into {3, 3, 2} = 8 and {4, 4, 2} = 10. Three bins are needed: bin 1 (ties to the
        // highest index) gives its last item, a 2: {3, 3, 2} = 8, {4, 4} = 8, {2} = 2, one bin
        // per rank. Efficiency = mean 6 / max 8 = 0.75. (Taking the item from bin 0 instead would
        // leave 6, 10, 2: 0.6.)
        const auto run = run_by_hand("mffd", {{4, 3}, {4, 2}, {3, 2}}, 2, 1, 1, 10.0);
        CHECK(run.costs == std::vector<double>{8, 8, 2});
        CHECK(bcl_sim::compute_metrics(run.costs, 3).efficiency == Approx(0.75).margin(0.003));
    }
}
