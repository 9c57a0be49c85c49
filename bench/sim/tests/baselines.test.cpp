// The baselines (baselines.hpp, mffd.hpp) on two-rank streams worked out by hand, with bcl's
// tumbling beside them, and MFFD packing (mffd_pack, adjust_bin_count) on its own. verl_kk and the
// rules that make mffd NeMo-RL's own packer are in peers.test.cpp.
// Expected numbers are derived in the comments, never copied from the code's output.

#include "metrics.hpp"
#include "mffd.hpp"
#include "random.hpp"
#include "sim_test_support.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

using bcl_sim_test::run_by_hand;
using bcl_sim_test::two_ranks;

TEST_CASE("sim: none batches each rank's stream in order", "[sim][policy]") {
    // Step 0: rank 0 = 10+10 = 20, rank 1 = 5+5 = 10; step 1: 1+1 = 2, 6+6 = 12.
    // Mean 44/4 = 11, step times 20 and 12 (mean 16): efficiency 11/16 = 0.6875.
    const auto run = run_by_hand("none", two_ranks, 2, 2, 2);
    CHECK(run.costs == std::vector<double>{20, 10, 2, 12});
    CHECK(bcl_sim::compute_metrics(run.costs, 2).efficiency == Approx(0.6875));
    CHECK(!run.extras.mean_gap_to_lb);
    CHECK(run.extras.max_delay_batches == 0);
}

TEST_CASE("sim: tumbling balances each rank's window through bcl", "[sim][policy]") {
    // Rank 0's window {10, 10, 1, 1} in 2 packs of 2: only {10, 1} + {10, 1} avoids a pack of 20,
    // so both batches cost 11. Rank 1's {5, 5, 6, 6}: {6, 5} + {6, 5}, 11 each. Every step is 11
    // on both ranks: efficiency 1, cv 0. The lower bound is total/K = 11 = the heaviest pack, so
    // the gap is 0. A record waits at most K-1 = 1 batch.
    const auto run = run_by_hand("tumbling", two_ranks, 2, 2, 2);
    CHECK(run.costs == std::vector<double>{11, 11, 11, 11});
    const auto m = bcl_sim::compute_metrics(run.costs, 2);
    CHECK(m.efficiency == Approx(1.0));
    CHECK(m.cv == Approx(0.0).margin(1e-12));
    REQUIRE(run.extras.mean_gap_to_lb);
    CHECK(*run.extras.mean_gap_to_lb == Approx(0.0).margin(1e-12));
    CHECK(run.extras.max_delay_batches <= 1);
}

TEST_CASE("sim: global plans all ranks' windows together", "[sim][policy]") {
    // All eight records (total 44) into R*K = 4 packs of 2: {10,1} {10,1} {6,5} {6,5}, 11 each.
    // The plan's lower bound is total / R = 22 per window, its objective 11 + 11: gap 0.
    const auto run = run_by_hand("global", {{10, 10, 1, 1}, {5, 5, 6, 6}}, 2, 2, 2);
    CHECK(run.costs == std::vector<double>{11, 11, 11, 11});
    REQUIRE(run.extras.mean_gap_to_lb);
    CHECK(*run.extras.mean_gap_to_lb == Approx(0.0).margin(1e-12));
    CHECK(run.extras.max_delay_batches <= 1);

    // Where ranks cannot balance alone: rank 0 reads only 9s, rank 1 only 1s. Alone each rank's
    // steps cost 18 and 2; pooled, every pack is {9, 1} = 10.
    const auto pooled = run_by_hand("global", {{9, 9, 9, 9}, {1, 1, 1, 1}}, 2, 2, 2);
    CHECK(pooled.costs == std::vector<double>{10, 10, 10, 10});
    const auto alone = run_by_hand("tumbling", {{9, 9, 9, 9}, {1, 1, 1, 1}}, 2, 2, 2);
    CHECK(alone.costs == std::vector<double>{18, 2, 18, 2});
}

TEST_CASE("sim: mffd packs each step's records into token bins", "[sim][policy]") {
    // Capacity 15. Step 0 holds, in global order, 10, 5, 10, 5. 10 > 15/2 is large: two bins
    // {10}, {10}. 5 is small (15/6 < 5 <= 15/3); there is no medium item. Phase 3: the two
    // smallest smalls (5 + 5 = 10) do not fit beside 10 (room 5). Phase 4: the longest item that
    // fits in room 5 is a 5, for each bin: {10, 5}, {10, 5}. Nothing is left for phase 5, whose
    // empty starting bin NeMo-RL drops: two bins, already a multiple of R. Bin 0 goes to rank 0
    // (15), bin 1 to rank 1 (15).
    // Step 1 holds 1, 6, 1, 6: nothing large; the 6s are medium, the 1s tiny. Phase 5 puts each,
    // longest first, in the least full open bin if it fits: 6, 6, 1, 1 all fit one bin (14). One
    // bin is adjusted to two: the new bin takes its last item, a 1 -> 13 and 1.
    const auto run = run_by_hand("mffd", two_ranks, 2, 2, 2, 15.0);
    CHECK(run.costs == std::vector<double>{15, 15, 13, 1});
    CHECK(run.extras.max_delay_batches == 0);
    CHECK(!run.extras.mean_gap_to_lb);
}

TEST_CASE("sim: length_grouped sorts megabatches and swaps the longest record first",
          "[sim][policy]") {
    // R = 2, B = 2, a data set of 16 records: megabatch multiple min(16 / (4*2), 50) = 2, so
    // megabatches of 4 records; one epoch = the 8 records below.
    // rank 0 reads 1, 2, 9, 3; rank 1 reads 4, 1, 2, 2. Global order: 1, 4, 2, 1 | 9, 2, 3, 2.
    // Sorted longest first (stable): 4, 2, 1, 1 | 9, 3, 2, 2. The epoch's longest (9) heads the
    // second megabatch, so it swaps with the first megabatch's head: 9, 2, 1, 1 | 4, 3, 2, 2.
    // Batches of 2 go round-robin: step 0 rank 0 = 9+2 = 11, rank 1 = 1+1 = 2;
    // step 1 rank 0 = 4+3 = 7, rank 1 = 2+2 = 4. The 4 arrived on rank 1 in step 0 and leaves in
    // step 1: a delay of 1.
    const auto run = run_by_hand("length_grouped", {{1, 2, 9, 3}, {4, 1, 2, 2}}, 2, 2, 2, 0.0,
                                 std::uint64_t{16}, std::uint64_t{8});
    CHECK(run.costs == std::vector<double>{11, 2, 7, 4});
    // Mean 24/4 = 6, step times 11 and 7 (mean 9): efficiency 2/3.
    CHECK(bcl_sim::compute_metrics(run.costs, 2).efficiency == Approx(2.0 / 3.0));
    CHECK(run.extras.max_delay_batches == 1);

    // Without epochs (an endless stream) there is no swap: 4+2 = 6, 1+1 = 2, 9+3 = 12, 2+2 = 4.
    const auto endless = run_by_hand("length_grouped", {{1, 2, 9, 3}, {4, 1, 2, 2}}, 2, 2, 2, 0.0,
                                     std::uint64_t{16}, std::nullopt);
    CHECK(endless.costs == std::vector<double>{6, 2, 12, 4});
}

TEST_CASE("sim: mffd_pack follows Johnson and Garey's phases", "[sim][mffd]") {
    // Capacity 100; items 60 (large), 45 (medium), 30, 20, 20 (small), 10 (tiny).
    // Phase 1: {60}. Phase 2: room 40, the medium 45 does not fit. Phase 3: the two smallest
    // smalls 20 + 20 = 40 fit: {60, 20, 20}, full. Phase 4: no room left. Phase 5: FFD of
    // 45, 30, 10 into one new bin {45, 30, 10}.
    const std::vector<double> items{60, 45, 30, 20, 20, 10};
    const auto bins = bcl_sim::mffd_pack(items, 100);
    REQUIRE(bins.size() == 2);
    CHECK(bins[0] == std::vector<std::uint32_t>{0, 3, 4});
    CHECK(bins[1] == std::vector<std::uint32_t>{1, 2, 5});

    // Phase 2 takes the longest medium (both 46 and 40 are in (100/3, 50]) that fits beside 55:
    // room 45, so 40; then FFD puts 46 in a new bin.
    const auto b2 = bcl_sim::mffd_pack(std::vector<double>{55, 46, 40}, 100);
    REQUIRE(b2.size() == 2);
    CHECK(b2[0] == std::vector<std::uint32_t>{0, 2});
    CHECK(b2[1] == std::vector<std::uint32_t>{1});

    // An item longer than the capacity gets a bin of its own.
    const auto b3 = bcl_sim::mffd_pack(std::vector<double>{250, 10, 10}, 100);
    REQUIRE(b3.size() == 2);
    CHECK(b3[0] == std::vector<std::uint32_t>{0});
    CHECK(b3[1] == std::vector<std::uint32_t>{1, 2});
}

TEST_CASE("sim: mffd_pack keeps every item exactly once and within capacity", "[sim][mffd]") {
    // No bin is empty: NeMo-RL drops phase 5's starting bin when phases 1-4 placed everything.
    bcl_sim::splitmix rng(42);
    for (const double capacity : {50.0, 300.0, 5000.0}) {
        std::vector<double> items(500);
        for (double& x : items) x = static_cast<double>(1 + rng.below(200));
        auto bins = bcl_sim::mffd_pack(items, capacity);
        std::vector<int> seen(items.size(), 0);
        std::size_t empty = 0;
        for (const auto& bin : bins) {
            empty += bin.empty() ? 1 : 0;
            double load = 0.0;
            for (const std::uint32_t i : bin) {
                ++seen[i];
                load += items[i];
            }
            CHECK((load <= capacity || bin.size() == 1));
        }
        CHECK(std::all_of(seen.begin(), seen.end(), [](int n) { return n == 1; }));
        CHECK(empty == 0);
        const std::size_t before = bins.size();
        bcl_sim::adjust_bin_count(bins, 7, 7);
        CHECK(bins.size() % 7 == 0);
        CHECK(bins.size() - before < 7);
        std::size_t total = 0;
        std::size_t empty_after = 0;
        for (const auto& bin : bins) {
            empty_after += bin.empty() ? 1 : 0;
            total += bin.size();
        }
        CHECK(empty_after == empty);
        CHECK(total == items.size());
    }
}

TEST_CASE("sim: mffd's default bin is the context length that holds the longest record",
          "[sim][mffd]") {
    // NeMo-RL sizes its bins as the context length (times a micro-batch of one): the smallest
    // power of two at or above the longest record.
    CHECK(bcl_sim::context_length(8000) == 8192);
    CHECK(bcl_sim::context_length(8192) == 8192);
    CHECK(bcl_sim::context_length(8192.5) == 16384);
    CHECK(bcl_sim::context_length(3) == 4);
    CHECK(bcl_sim::context_length(0) == 1);       // all lengths 0: any capacity holds them
    CHECK(bcl_sim::context_length(0.5) == 1);     // below one token
    CHECK(bcl_sim::context_length(1e30) == 1e30); // beyond any power of two it can name

    bcl_sim::sim_config cfg;
    cfg.dist = bcl_sim::parse_dist("lognormal:mu=6,sigma=0.6");
    cfg.ranks = 2;
    cfg.steps = 20;
    cfg.policies = {"mffd"};
    const auto res = bcl_sim::simulate(cfg);
    REQUIRE(res.max_length >= res.p99_length);
    CHECK(res.bin_tokens == bcl_sim::context_length(res.max_length));
    CHECK(res.bin_tokens >= res.max_length);
    CHECK(res.bin_tokens < 2 * res.max_length);

    cfg.bin_tokens = 777; // given: used as it is
    CHECK(bcl_sim::simulate(cfg).bin_tokens == 777);
}
