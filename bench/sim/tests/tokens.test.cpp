// Micro-batch mode (--max-tokens): its flags and errors, the peers' micro-batching on cases worked
// out by hand from their own code's rules (never copied from the simulator's output), the
// metrics by hand, and what bcl's token plan promises on every run: no micro-batch above T and as
// many on every rank.

#include "run_inputs.hpp"
#include "simulate.hpp"
#include "token_global_runner.hpp"
#include "token_metrics.hpp"
#include "token_peers.hpp"
#include "token_policies.hpp"
#include "token_simulate.hpp"

#include <bcl/detail/tokens/stream_window.hpp>
#include <bcl/epoch_plan.hpp>
#include <bcl/token_budget.hpp>
#include <bcl/token_epoch_plan.hpp>
#include <bcl/token_plan.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace {

using bcl_sim::piece;
using micro = std::vector<piece>;
using Catch::Matchers::Contains;

/// Whole records as pieces: {item, length} for each index.
micro whole(std::initializer_list<std::uint32_t> items, const std::vector<double>& lengths) {
    micro out;
    for (const std::uint32_t i : items) out.push_back({i, lengths[i]});
    return out;
}

/// A micro-batch-mode config: R ranks, T, held batches of `records` a rank (or a stream of
/// `micro_batches` micro-batches), cost = length.
bcl_sim::sim_config token_config(std::size_t ranks, std::uint64_t max_tokens,
                                 std::optional<std::size_t> records,
                                 std::optional<std::size_t> micro_batches, std::size_t steps,
                                 std::size_t lookahead) {
    bcl_sim::sim_config cfg;
    cfg.ranks = ranks;
    cfg.steps = steps;
    cfg.lookahead = lookahead;
    cfg.cost = bcl_sim::cost_model{0.0, 1.0, 0.0, {}};
    cfg.tokens.max_tokens = max_tokens;
    cfg.tokens.step_records = records;
    cfg.tokens.micro_batches = micro_batches;
    return cfg;
}

/// simulate_tokens() on hand-made per-rank streams.
bcl_sim::token_sim_result run_streams(const bcl_sim::sim_config& cfg,
                                      const std::vector<std::vector<double>>& streams) {
    return bcl_sim::simulate_tokens(cfg, [&]() -> std::unique_ptr<bcl_sim::record_source> {
        return std::make_unique<bcl_sim::table_source>(streams);
    });
}

const bcl_sim::token_policy_result& policy(const bcl_sim::token_sim_result& res,
                                           const std::string& name) {
    for (const auto& p : res.policies)
        if (p.name == name) return p;
    FAIL("no policy " << name);
    return res.policies.front();
}

} // namespace

TEST_CASE("sim tokens: micro-batch mode's flags and errors", "[sim][tokens]") {
    bcl_sim::sim_config cfg = token_config(8, 16384, 64, {}, 10, 1);
    CHECK_NOTHROW(bcl_sim::validate_tokens(cfg));
    const auto refused = [](bcl_sim::sim_config c, const std::string& why) {
        CHECK_THROWS_WITH(bcl_sim::validate_tokens(c), Contains(why));
    };
    SECTION("a shape: held batches or a stream, one of them") {
        bcl_sim::sim_config both = cfg;
        both.tokens.micro_batches = 2;
        refused(both, "not both");
        bcl_sim::sim_config neither = cfg;
        neither.tokens.step_records.reset();
        refused(neither, "--max-tokens needs --step-records N");
    }
    SECTION("counts of 0") {
        bcl_sim::sim_config c = cfg;
        c.tokens.max_tokens = 0;
        refused(c, "--max-tokens must be at least 1");
        c = cfg;
        c.tokens.step_records = 0;
        refused(c, "--step-records must be at least 1");
        c = token_config(8, 16384, {}, 0, 10, 8);
        refused(c, "--micro-batches must be at least 1");
        c = cfg;
        c.tokens.multiple_of = 0;
        refused(c, "--multiple-of must be at least 1");
    }
    SECTION("a stream's M is a multiple of m; T at most 2^31") {
        bcl_sim::sim_config c = token_config(8, 16384, {}, 3, 10, 8);
        c.tokens.multiple_of = 2;
        refused(c, "--micro-batches 3 must be a multiple of --multiple-of 2");
        c = cfg;
        c.tokens.max_tokens = (std::uint64_t{1} << 31) + 1;
        refused(c, "above 2^31");
    }
    SECTION("the mode's flags need --max-tokens: a run of fixed-size batches refuses them") {
        bcl_sim::sim_config c;
        c.tokens.step_records = 4;
        CHECK_THROWS_WITH(bcl_sim::validate(c),
                          Contains("--step-records is a flag of micro-batch mode"));
        c = bcl_sim::sim_config{};
        c.tokens.oversized_alone = true;
        CHECK_THROWS_WITH(bcl_sim::validate(c),
                          Contains("--oversized is a flag of micro-batch mode"));
    }
    SECTION("each mode runs only its own configurations") {
        CHECK_THROWS_AS(bcl_sim::validate(cfg), std::invalid_argument);
        CHECK_THROWS_AS(bcl_sim::simulate(cfg), std::invalid_argument);
        CHECK_THROWS_AS(bcl_sim::validate_tokens(bcl_sim::sim_config{}), std::invalid_argument);
    }
    SECTION("what the mode does not model is refused, not ignored") {
        bcl_sim::sim_config c = cfg;
        c.cap = bcl_sim::parse_cap("32768");
        refused(c, "--cap does not apply in micro-batch mode");
        c = cfg;
        c.batching = bcl_sim::batch_cost::padded;
        refused(c, "--batching padded does not apply");
        c = cfg;
        c.epoch_steps = 5;
        refused(c, "--epoch-steps does not apply");
    }
    SECTION("the mode's policies, and only those") {
        bcl_sim::sim_config c = cfg;
        c.policies = {"global", "tumbling"};
        refused(c, "'tumbling' is not a policy of micro-batch mode");
        c.policies = {"global",       "verl_dynamic", "skyrl", "nemo_rl",
                      "fixed_length", "global_fixed", "none"};
        CHECK_NOTHROW(bcl_sim::validate_tokens(c));
    }
    SECTION("records above T: how many, and what to do") {
        const std::vector<double> lengths{5, 20, 30, 10};
        bcl_sim::token_settings t;
        t.max_tokens = 10;
        CHECK_THROWS_WITH(bcl_sim::check_oversized(t, lengths),
                          Contains("2 of the workload's 4 lengths are above --max-tokens 10 (the "
                                   "longest is 30); pass --oversized alone"));
        t.oversized_alone = true;
        CHECK_NOTHROW(bcl_sim::check_oversized(t, lengths));
        // A stream's record above T (no file to count beforehand) names the record.
        CHECK_THROWS_WITH(run_streams(token_config(2, 10, 2, {}, 1, 1), {{4, 11}, {3, 3}}),
                          Contains("record 1 of rank 0 has 11 tokens, above --max-tokens 10; "
                                   "pass --oversized alone"));
    }
}

TEST_CASE("sim tokens: the sequential and fixed-length packers by hand", "[sim][tokens]") {
    const std::vector<double> lengths{3, 4, 2, 5, 7};
    SECTION("sequential: a micro-batch closes when the next record would pass T") {
        // T = 6: 3 opens; 3 + 4 > 6, so 4 opens the next; 4 + 2 = 6 fits; 6 + 5 > 6; 5 + 7 > 6;
        // 7 alone is above T (a record alone).
        const std::vector<std::uint32_t> all{0, 1, 2, 3, 4};
        CHECK(bcl_sim::sequential_pack(all, lengths, 6) ==
              bcl_sim::micro_batches{whole({0}, lengths), whole({1, 2}, lengths),
                                     whole({3}, lengths), whole({4}, lengths)});
    }
    SECTION("none: each rank's strided share, padded to the most any rank needs") {
        // Two ranks, T = 7: rank 0 takes records 0, 2, 4 (3, 2, 7): [3, 2], [7]; rank 1 takes
        // 1, 3 (4, 5): [4], [5]. Both need 2. With a multiple of 3, both get an empty third.
        const bcl_sim::rank_micro_batches plan = bcl_sim::none_plan(lengths, 2, 7, 1);
        CHECK(plan == bcl_sim::rank_micro_batches{{whole({0, 2}, lengths), whole({4}, lengths)},
                                                  {whole({1}, lengths), whole({3}, lengths)}});
        const bcl_sim::rank_micro_batches three = bcl_sim::none_plan(lengths, 2, 7, 3);
        CHECK(three[0].size() == 3);
        CHECK(three[1].size() == 3);
        CHECK(three[0][2].empty());
    }
    SECTION("fixed length: concatenated and cut at every T tokens, records split") {
        // 3 + 4 + 2 = 9 tokens cut at 4: [3 of record 0, 1 of record 1], [3 of record 1, 1 of
        // record 2], [1 of record 2].
        const std::vector<std::uint32_t> three{0, 1, 2};
        CHECK(bcl_sim::fixed_length_cut(three, lengths, 4) ==
              bcl_sim::micro_batches{micro{{0, 3}, {1, 1}}, micro{{1, 3}, {2, 1}}, micro{{2, 1}}});
        // Two ranks, T = 8: rank 0's 3, 2, 7 (12 tokens) in two, [3, 2, 3 of 7] and [4 of 7];
        // rank 1's 4, 5 (9 tokens) in two, [4, 4 of 5] and [1 of 5].
        const bcl_sim::rank_micro_batches plan = bcl_sim::fixed_length_plan(lengths, 2, 8, 1);
        CHECK(plan == bcl_sim::rank_micro_batches{{micro{{0, 3}, {2, 2}, {4, 3}}, micro{{4, 4}}},
                                                  {micro{{1, 4}, {3, 4}}, micro{{3, 1}}}});
    }
}

TEST_CASE("sim tokens: SkyRL's balanced packing by hand", "[sim][tokens][skyrl]") {
    // Capacity 7, lengths 5 3 4 2 2. Longest first, ties in order: 5(0) 4(2) 3(1) 2(3) 2(4).
    // 5 opens bin 0. 4: the least-loaded bin, 0 (5), has no room (9) -> bin 1. 3: least loaded is
    // bin 1 (4), 7 fits -> [2, 1]. 2(3): least loaded is bin 0 (5), 7 fits -> [0, 3]. 2(4): bins
    // 0 and 1 both hold 7, the heap's tie goes to bin 0, 9 does not fit -> bin 2.
    const std::vector<double> lengths{5, 3, 4, 2, 2};
    const std::vector<std::uint32_t> all{0, 1, 2, 3, 4};
    CHECK(bcl_sim::skyrl_balanced_pack(all, lengths, 7) ==
          bcl_sim::micro_batches{whole({0, 3}, lengths), whole({2, 1}, lengths),
                                 whole({4}, lengths)});
    SECTION("a record above the capacity gets a bin of its own (the soft cap)") {
        const std::vector<double> big{9, 2, 2};
        const std::vector<std::uint32_t> items{0, 1, 2};
        CHECK(bcl_sim::skyrl_balanced_pack(items, big, 7) ==
              bcl_sim::micro_batches{whole({0}, big), whole({1, 2}, big)});
    }
    SECTION("workers take contiguous chunks; counts padded to the most") {
        // Two workers, T = 10, global batch 9 2 1 2 | 1 2 1 2. Worker 0: 9(0), 2(1), 2(3), 1(2):
        // 9 opens bin 0; 2 does not fit it (11) -> bin 1; 2(3) and 1(2) join bin 1 (the least
        // loaded). Worker 1: 2(5) 2(7) 1(4) 1(6) all fit one bin (6). Worker 1 pads to 2.
        const std::vector<double> step{9, 2, 1, 2, 1, 2, 1, 2};
        CHECK(bcl_sim::skyrl_plan(step, 2, 10) ==
              bcl_sim::rank_micro_batches{{whole({0}, step), whole({1, 3, 2}, step)},
                                          {whole({5, 7, 4, 6}, step), micro{}}});
    }
}

TEST_CASE("sim tokens: NeMo-RL's packing by hand", "[sim][tokens][nemo_rl]") {
    // T = 8, R = 2, lengths 6 5 2 1. MFFD: large (> 4) 6(0) and 5(1) each open a bin; no medium
    // item; one small item (2), so phase 3 has no pair; phase 4 fills bin 0 (room 2) with 2 and
    // bin 1 (room 3) with 1; phase 5 has nothing, and its empty starting bin is dropped: [0, 2],
    // [1, 3], a multiple of 2 already. Dealt round-robin: one bin a rank.
    const std::vector<double> lengths{6, 5, 2, 1};
    CHECK(bcl_sim::nemo_rl_plan(lengths, 2, 8) ==
          bcl_sim::rank_micro_batches{{whole({0, 2}, lengths)}, {whole({1, 3}, lengths)}});
    SECTION("the count adjusted to a multiple of R") {
        // R = 3, the same four records: two bins, three wanted; the new bin takes the last item
        // of the first bin ranked by item count (two each: ties to the higher index, bin 1):
        // [0, 2], [1], [3], one a rank.
        CHECK(bcl_sim::nemo_rl_plan(lengths, 3, 8) ==
              bcl_sim::rank_micro_batches{
                  {whole({0, 2}, lengths)}, {whole({1}, lengths)}, {whole({3}, lengths)}});
    }
    SECTION("NeMo-RL raises for a length above its bin capacity") {
        const std::vector<double> big{9, 2};
        CHECK_THROWS_AS(bcl_sim::nemo_rl_plan(big, 2, 8), bcl_sim::peer_refuses);
    }
}

TEST_CASE("sim tokens: verl's dynamic batch size by hand", "[sim][tokens][verl]") {
    SECTION("Karmarkar-Karp without equal sizes") {
        // Values 1 2 3 into 2: one state per item, [{v}, {}], spreads 1, 2, 3. The two largest
        // spreads merge: [{3} + {}, {} + {2}] = [{3}, {2}], spread 1. It ties with [{1}, {}];
        // verl pops the state with the heavier top set first, {3}: [{3} + {}, {2} + {1}] =
        // [{3}, {2, 1}]; equal sums, and the set of fewer items is the lighter, so {2, 1} comes
        // first. Groups: {0, 1} and {2}.
        const std::vector<double> values{1, 2, 3};
        CHECK(bcl_sim::karmarkar_karp(values, 2, false) ==
              std::vector<std::vector<std::uint32_t>>{{0, 1}, {2}});
    }
    SECTION("the order of a rank's micro-batches: lightest at both ends") {
        // Workloads 5, 1, 9, 3 (one record each): sorted largest first 9(2) 5(0) 3(3) 1(1); the
        // even positions reversed, [3, 2], then the odd ones, [0, 1].
        const std::vector<double> work{5, 1, 9, 3};
        const auto order = bcl_sim::verl_order_micro_batches({{0}, {1}, {2}, {3}}, work);
        CHECK(order == std::vector<std::vector<std::uint32_t>>{{3}, {2}, {0}, {1}});
    }
    SECTION("the strict budget: one more micro-batch until all fit (verl's example)") {
        // Eight records of 7 tokens, T = 8: ceil(56 / 8) = 7 micro-batches must put two records
        // (14 tokens) in one, so the count grows to 8, one record each.
        const std::vector<double> lengths(8, 7.0);
        const auto plan = bcl_sim::verl_rearrange({{0, 1, 2, 3, 4, 5, 6, 7}}, lengths,
                                                  bcl_sim::verl_workloads(lengths), 8, 1);
        REQUIRE(plan.size() == 1);
        CHECK(plan[0].size() == 8);
        for (const micro& mb : plan[0]) CHECK(mb.size() == 1);
    }
    SECTION("a step: balance_batch, the all-reduced count, each rank's split and order") {
        // Two ranks, T = 10, global batch 9 2 1 2 1 2 1 2, workloads w(L) = 24576 L + L^2
        // (w1 = 24577, w2 = 49156, w9 = 221265). balance_batch, runs of 2 over (w, index):
        // A = [{4}, {2}] (ones, spread 0), B = [{1}, {6}] (spread w2 - w1), C = [{5}, {3}]
        // (spread 0), D = [{0}, {7}] (spread w9 - w2). D and B merge: [{0, 6}, {7, 1}]; then
        // with C (of A and C, both spread 0, C's top set is the heavier): [{0, 6, 3}, {7, 1, 5}];
        // then with A: [{0, 6, 3, 2}, {7, 1, 5, 4}]. Rank 0 holds 9 1 2 1 (13 tokens), laid out
        // by (w, index) as 2 6 3 0, then evens + odds reversed: 2 3 0 6; rank 1 holds 2 1 2 2
        // (7 tokens): 4 1 5 7 -> 4 5 7 1.
        const std::vector<double> step{9, 2, 1, 2, 1, 2, 1, 2};
        const auto shares = bcl_sim::verl_balance_batch(bcl_sim::verl_workloads(step), 2);
        CHECK(shares == std::vector<std::vector<std::uint32_t>>{{2, 3, 0, 6}, {4, 5, 7, 1}});
        // Counts: rank 0 ceil(13 / 10) = 2, rank 1 ceil(7 / 10) = 1; all-reduced: 2. Rank 0's
        // records (local 0-3: 1 2 9 1) by Karmarkar-Karp into 2: the 9 alone, the rest (4
        // tokens) together: [[local 2], [local 0, 1, 3]], heaviest first, already in verl's order
        // ([0] reversed, then [1]): records [0] and [2, 3, 6]. Rank 1's (local 0-3: 1 2 2 2):
        // [{1, 2}, {0, 3}] (4 and 3 tokens): records [5, 7] and [4, 1].
        const auto plan = bcl_sim::verl_dynamic_plan(step, 2, 10, 1);
        CHECK(plan == bcl_sim::rank_micro_batches{{whole({0}, step), whole({2, 3, 6}, step)},
                                                  {whole({5, 7}, step), whole({4, 1}, step)}});
    }
}

TEST_CASE("sim tokens: the metrics of a step, and the counts every step must keep",
          "[sim][tokens][metrics]") {
    // Two ranks, T = 10. Rank 0 runs micro-batches of cost 10 and 2, rank 1 of 8 and a padding
    // one. Micro-steps: mean 9, slowest 10; mean 1, slowest 2. Efficiency (9 + 1) / (10 + 2);
    // imbalance (10/9 + 2/1) / 2. The step's 20 tokens need ceil(20 / 20) = 1 micro-step; 2 is
    // within one of it.
    bcl_sim::token_step step;
    step.ranks = {{{10, 10, 2}, {2, 2, 2}}, {{8, 8, 4}, {0, 0, 0}}};
    bcl_sim::token_metrics_accumulator acc("none", 2, 10, true);
    acc.add(step, 0);
    acc.add_bound(1);
    const bcl_sim::token_metrics m = acc.result();
    CHECK(m.efficiency == Approx(10.0 / 12.0));
    CHECK(m.imbalance == Approx((10.0 / 9.0 + 2.0) / 2.0));
    CHECK(m.micro_steps == 2);
    CHECK(m.micro_steps_bound == 1);
    CHECK(m.steps_within_one_of_bound == 1.0);
    CHECK(m.padding == 1);
    CHECK(m.over_budget == 0);
    SECTION("a micro-batch above T is over budget") {
        bcl_sim::token_step over;
        over.ranks = {{{11, 11, 1}}, {{9, 9, 1}}};
        bcl_sim::token_metrics_accumulator a("x", 2, 10, false);
        a.add(over, 0);
        CHECK(a.result().over_budget == 1);
    }
    SECTION("unequal counts are a bug, never a result") {
        bcl_sim::token_step uneven;
        uneven.ranks = {{{5, 5, 1}, {5, 5, 1}}, {{5, 5, 1}}};
        bcl_sim::token_metrics_accumulator a("global", 2, 10, true);
        CHECK_THROWS_WITH(a.add(uneven, 3), Contains("step 3: rank 0 runs 2 micro-batches and "
                                                     "rank 1 runs 1"));
    }
    SECTION("an empty micro-batch where the policy promises none is a bug") {
        bcl_sim::token_metrics_accumulator a("global", 2, 10, false);
        CHECK_THROWS_WITH(a.add(step, 0), Contains("rank 1 has an empty micro-batch"));
    }
}

TEST_CASE("sim tokens: how fair a sample of its window each step is, over full windows of K",
          "[sim][tokens][metrics]") {
    // One rank, T = 10, windows of K = 2 steps. Window 1: 4 records (2 above T/2, in the first
    // step) and 2 records; window 2: 3 and 3 records, no heavy one; a fifth step starts a window
    // that never fills and counts for nothing.
    const auto step_of = [](std::vector<bcl_sim::micro_load> mbs) {
        bcl_sim::token_step s;
        s.ranks = {std::move(mbs)};
        return s;
    };
    bcl_sim::token_metrics_accumulator acc("global", 1, 10, false, 2);
    acc.add(step_of({{10, 20, 2, 2}, {4, 4, 2, 0}}), 0); // 4 records, 2 heavy, cost 24
    acc.add(step_of({{6, 6, 2, 0}}), 1);                 // 2 records, cost 6
    acc.add(step_of({{9, 9, 3, 0}}), 2);                 // 3 records, cost 9
    acc.add(step_of({{3, 3, 1, 0}, {6, 6, 2, 0}}), 3);   // 3 records, cost 9
    acc.add(step_of({{10, 10, 1, 1}}), 4);               // an unfinished window
    const bcl_sim::token_metrics m = acc.result();
    CHECK(m.windows == 2);
    CHECK(m.step_records_spread == Approx((4.0 / 2.0 + 1.0) / 2.0));
    // Window 1: h = 2, even share ceil(2/2) = 1, its fullest step holds 2: 1 above.
    CHECK(m.step_heavy_excess == Approx((1.0 + 0.0) / 2.0));
    CHECK(m.step_cost_spread == Approx((24.0 / 6.0 + 1.0) / 2.0));
    // Window 1's steps hold 14 and 6 tokens (mean 10: 40% off); window 2's 9 and 9.
    CHECK(m.step_tokens_gap == Approx((0.4 + 0.0) / 2.0));
}

TEST_CASE("sim tokens: one held batch by hand through simulate", "[sim][tokens]") {
    // Two ranks draw 4 records each: rank 0 9 1 1 1, rank 1 2 2 2 2; T = 10, cost = length. The
    // step's global batch (position i*R + r) is 9 2 1 2 1 2 1 2: 20 tokens, bound 1.
    const std::vector<std::vector<double>> streams{{9, 1, 1, 1}, {2, 2, 2, 2}};
    bcl_sim::sim_config cfg = token_config(2, 10, 4, {}, 1, 1);
    cfg.tokens.fixed_batch = 2;
    const bcl_sim::token_sim_result res = run_streams(cfg, streams);
    // global: one micro-step holds all 20 tokens only as two micro-batches of exactly 10.
    const bcl_sim::token_metrics& g = policy(res, "global").metrics;
    CHECK(g.micro_steps == 1);
    CHECK(g.micro_steps_bound == 1);
    CHECK(g.efficiency == Approx(1.0));
    CHECK(g.over_budget == 0);
    CHECK(g.records == 8);
    // none: rank 0 [9, 1], [1, 1]; rank 1 [2, 2, 2, 2] and a padding one: as the metrics test.
    const bcl_sim::token_metrics& none = policy(res, "none").metrics;
    CHECK(none.micro_steps == 2);
    CHECK(none.efficiency == Approx(10.0 / 12.0));
    CHECK(none.imbalance == Approx((10.0 / 9.0 + 2.0) / 2.0));
    // verl_dynamic (its test above): micro-steps 9 | 4 and 4 | 3.
    const bcl_sim::token_metrics& verl = policy(res, "verl_dynamic").metrics;
    CHECK(verl.micro_steps == 2);
    CHECK(verl.efficiency == Approx((6.5 + 3.5) / (9.0 + 4.0)));
    // skyrl (its test above): 9 | 6, then 5 | padding.
    const bcl_sim::token_metrics& sky = policy(res, "skyrl").metrics;
    CHECK(sky.efficiency == Approx((7.5 + 2.5) / (9.0 + 5.0)));
    CHECK(sky.imbalance == Approx((9.0 / 7.5 + 5.0 / 2.5) / 2.0));
    // nemo_rl: the 9 opens the one large bin, phase 4 adds a 1 (10); phase 5 puts the other six
    // (2 2 2 2 1 1) in one bin of 10. Two bins, one a rank: efficiency 1.
    const bcl_sim::token_metrics& nemo = policy(res, "nemo_rl").metrics;
    CHECK(nemo.micro_steps == 1);
    CHECK(nemo.efficiency == Approx(1.0));
    // fixed_length: rank 0's 12 tokens cut at 10 ([9, 1], [1, 1]), rank 1's 8 in one: as none.
    CHECK(policy(res, "fixed_length").metrics.efficiency == Approx(10.0 / 12.0));
    // global_fixed with B = 2: 4 records a rank in two micro-steps of 2 records.
    const bcl_sim::token_metrics& fixed = policy(res, "global_fixed").metrics;
    CHECK(fixed.micro_steps == 2);
    CHECK(res.fixed_batch == 2);
    // Every policy's speedup is its efficiency over none's.
    for (const auto& p : res.policies)
        CHECK(p.speedup_vs_none == Approx(p.metrics.efficiency / none.efficiency));
}

TEST_CASE("sim tokens: bcl's plans keep the budget and equal counts on every run",
          "[sim][tokens][property]") {
    struct workload {
        const char* dist;
        std::uint64_t max_tokens;
    };
    // Lengths that stay within T (records above it are refused, not planned).
    const workload workloads[] = {{"uniform:lo=1,hi=4096", 4096},
                                  {"bimodal:short=512,long=4096,p=0.25,sigma=0.3", 32768},
                                  {"lognormal:mu=6,sigma=1", 65536},
                                  {"uniform:lo=1000,hi=9000", 16384}};
    for (const workload& w : workloads)
        for (const std::size_t ranks : {2U, 8U})
            for (std::uint64_t seed = 1; seed <= 3; ++seed)
                for (int shape = 0; shape < 4; ++shape) {
                    // Held one at a time, held two pooled, a stream of 2 (K = 4), of 3 with m 3.
                    bcl_sim::sim_config cfg =
                        shape < 2 ? token_config(ranks, w.max_tokens, 24, {}, 9, shape == 0 ? 1 : 2)
                                  : token_config(ranks, w.max_tokens, {}, shape == 2 ? 2 : 3, 9, 4);
                    if (shape == 3) cfg.tokens.multiple_of = 3;
                    cfg.dist = bcl_sim::parse_dist(w.dist);
                    cfg.seed = seed;
                    cfg.cost = bcl_sim::default_cost();
                    cfg.policies = {"global"};
                    std::map<std::uint64_t, int> seen;
                    const bcl_sim::token_sim_result res = bcl_sim::simulate_tokens(
                        cfg, {}, [&](std::size_t, std::size_t, std::uint64_t id) { ++seen[id]; });
                    INFO(w.dist << " R=" << ranks << " seed " << seed << " shape " << shape);
                    const bcl_sim::token_metrics& m = policy(res, "global").metrics;
                    // Equal counts and no empty micro-batch were checked on every step (a
                    // violation throws); what is left to see is the budget and the count.
                    CHECK(m.over_budget == 0);
                    CHECK(m.padding == 0);
                    CHECK(m.peak_micro_tokens <= static_cast<double>(w.max_tokens));
                    CHECK(m.steps == 9);
                    CHECK(m.micro_steps >= m.micro_steps_bound);
                    if (shape >= 2) CHECK(m.micro_steps == 9 * *cfg.tokens.micro_batches);
                    if (shape == 0) CHECK(res.policies.front().extras.max_delay_steps == 0);
                    if (shape == 1) CHECK(res.policies.front().extras.max_delay_steps <= 1);
                    if (shape >= 2) CHECK(res.policies.front().extras.max_delay_steps <= 3);
                    CHECK(m.records == seen.size());
                    for (const auto& [id, n] : seen) CHECK(n == 1);
                    if (shape < 2) CHECK(m.records == 9 * 24 * ranks);
                }
}

TEST_CASE("sim tokens: every policy trains each record once, as many micro-batches per rank",
          "[sim][tokens]") {
    for (const bool held : {true, false}) {
        bcl_sim::sim_config cfg =
            held ? token_config(4, 32768, 16, {}, 6, 2) : token_config(4, 32768, {}, 2, 6, 3);
        cfg.dist = bcl_sim::parse_dist("bimodal:short=300,long=3000,p=0.3,sigma=0.4");
        cfg.cost = bcl_sim::default_cost();
        for (const bcl_sim::token_policy_entry& e : bcl_sim::token_policy_table()) {
            cfg.policies = {e.name};
            std::map<std::uint64_t, int> seen;
            const bcl_sim::token_sim_result res = bcl_sim::simulate_tokens(
                cfg, {}, [&](std::size_t, std::size_t, std::uint64_t id) { ++seen[id]; });
            INFO(e.name << (held ? " held" : " stream"));
            REQUIRE(res.policies.size() == 1);
            const bcl_sim::token_metrics& m = res.policies.front().metrics;
            CHECK(m.steps == 6);
            CHECK(m.records == seen.size());
            for (const auto& [id, n] : seen) CHECK(n == 1);
            // The peers run each step's records in that step.
            if (e.name != "global" && e.name != "global_fixed")
                CHECK(res.policies.front().extras.max_delay_steps == 0);
        }
    }
}

TEST_CASE("sim tokens: global on a stream is the plan bcl::token_epoch_planner walks",
          "[sim][tokens]") {
    // R = 3, T = 5000, M = 2, K = 2, 8 steps: four full windows. The epoch planner, given the
    // same global order (with more after it, so that none of these windows is its last), must
    // put every record in the same step and on the same rank.
    bcl_sim::sim_config cfg = token_config(3, 5000, {}, 2, 8, 2);
    cfg.dist = bcl_sim::parse_dist("uniform:lo=100,hi=3000");
    cfg.cost = bcl_sim::default_cost();
    cfg.policies = {"global"};
    std::map<std::pair<std::size_t, std::size_t>, std::set<std::uint64_t>> sim;
    const bcl_sim::token_sim_result res = bcl_sim::simulate_tokens(
        cfg, {}, [&](std::size_t step, std::size_t rank, std::uint64_t id) {
            sim[{step, rank}].insert(id);
        });
    std::size_t planned = 0;
    for (const auto& [key, ids] : sim) planned += ids.size();

    bcl_sim::synthetic_source source(cfg.dist, cfg.ranks, cfg.seed);
    const std::size_t n = planned * 2;
    std::vector<std::uint64_t> tokens(n);
    std::vector<double> costs(n);
    std::vector<std::uint64_t> order(n);
    for (std::size_t p = 0; p < n; ++p) {
        const double l = source.length(p % cfg.ranks, p / cfg.ranks);
        tokens[p] = static_cast<std::uint64_t>(l);
        costs[p] = cfg.cost(l);
        order[p] = p;
    }
    bcl::token_epoch_planner planner;
    const bcl::token_budget budget{cfg.ranks, *cfg.tokens.max_tokens, 1};
    for (std::size_t rank = 0; rank < cfg.ranks; ++rank) {
        bcl::token_epoch_share<std::uint64_t> share;
        planner.share(std::span<const std::uint64_t>(tokens), std::span<const double>(costs),
                      std::span<const std::uint64_t>(order), budget, 2, 2, rank, {}, share);
        for (std::size_t step = 0; step < cfg.steps; ++step) {
            std::set<std::uint64_t> mine;
            for (std::size_t mb = share.steps[step]; mb < share.steps[step + 1]; ++mb)
                for (const std::uint64_t p : share.micro_batch(mb)) mine.insert(p);
            INFO("step " << step << " rank " << rank);
            CHECK(mine == sim[{step, rank}]);
        }
    }
    CHECK(res.policies.front().metrics.micro_steps == 16);
}

TEST_CASE("sim tokens: global on pooled held batches is bcl::token_planner::plan_held's plan, "
          "each step with its own count",
          "[sim][tokens]") {
    // R = 2, T = 4096, K = 2 held batches of 24 records a rank in one pool. The library's plan
    // of the pool's 96 records (positions 0-95 of the global order), made here from the same
    // lengths, must be the simulator's: every record in the same step and on the same rank, and
    // each step with the count the plan gives it (micro_batches_in), the two counts different.
    bcl_sim::sim_config cfg = token_config(2, 4096, 24, {}, 2, 2);
    cfg.dist = bcl_sim::parse_dist("uniform:lo=1,hi=4096");
    cfg.cost = bcl_sim::default_cost();
    cfg.policies = {"global"};
    bcl_sim::synthetic_source source(cfg.dist, cfg.ranks, cfg.seed);
    const std::size_t n = 2 * 24 * cfg.ranks;
    std::vector<std::uint64_t> tokens(n);
    std::vector<double> costs(n);
    for (std::size_t p = 0; p < n; ++p) {
        const double l = source.length(p % cfg.ranks, p / cfg.ranks);
        tokens[p] = static_cast<std::uint64_t>(l);
        costs[p] = cfg.cost(l);
    }
    bcl::token_planner planner;
    std::vector<bcl::micro_slot> slots(n);
    const bcl::token_plan_summary s = planner.plan_held(
        tokens, costs, {}, bcl::token_budget{cfg.ranks, *cfg.tokens.max_tokens, 1}, 2, {}, slots);
    REQUIRE(s.micro_batches_in(0) != s.micro_batches_in(1)); // what this case is about
    std::map<std::pair<std::size_t, std::size_t>, std::set<std::uint64_t>> plan;
    for (std::size_t p = 0; p < n; ++p) plan[{slots[p].step, slots[p].rank}].insert(p);

    std::map<std::pair<std::size_t, std::size_t>, std::set<std::uint64_t>> sim;
    const bcl_sim::token_sim_result res = bcl_sim::simulate_tokens(
        cfg, {}, [&](std::size_t step, std::size_t rank, std::uint64_t id) {
            sim[{step, rank}].insert(id);
        });
    CHECK(sim == plan);
    CHECK(policy(res, "global").metrics.micro_steps == s.micro_steps);

    // The steps the runner gives: each rank runs micro_batches_in(k) micro-batches in step k.
    const bcl_sim::resolved_run run = bcl_sim::resolve_run(cfg, {});
    const std::unique_ptr<bcl_sim::record_source> fresh = run.make_source();
    bcl_sim::token_global_runner runner(bcl_sim::policy_context(cfg, run.inputs, fresh.get(), {}));
    const bcl_sim::token_block block = runner.run(0, 2);
    REQUIRE(block.steps.size() == 2);
    for (std::size_t k = 0; k < 2; ++k)
        for (const auto& one_rank : block.steps[k].ranks)
            CHECK(one_rank.size() == s.micro_batches_in(k));
}

TEST_CASE("sim tokens: a stream's steps are the library's window rule, R records at a time",
          "[sim][tokens]") {
    // A peer's step of a stream (step_cursor) takes the next records R at a time (every rank as
    // many) while the library's rule of a window of one step of M micro-batches takes them all,
    // and the first R whatever their tokens. Worked out here with bcl's window_rule over the
    // same lengths: the records it takes from the step's first, taken / R whole groups (at
    // least one).
    struct shape {
        const char* dist;
        std::uint64_t max_tokens;
        bool oversized_alone;
    };
    for (const shape& sh : {shape{"uniform:lo=100,hi=3000", 5000, false},
                            shape{"lognormal:mu=7,sigma=1", 2048, true}}) {
        bcl_sim::sim_config cfg = token_config(3, sh.max_tokens, {}, 2, 12, 2);
        cfg.dist = bcl_sim::parse_dist(sh.dist);
        cfg.cost = bcl_sim::default_cost();
        cfg.tokens.oversized_alone = sh.oversized_alone;
        cfg.policies = {"none"};
        std::map<std::size_t, std::set<std::uint64_t>> steps;
        (void)bcl_sim::simulate_tokens(
            cfg, {},
            [&](std::size_t step, std::size_t, std::uint64_t id) { steps[step].insert(id); });
        bcl_sim::synthetic_source source(cfg.dist, cfg.ranks, cfg.seed);
        const auto tokens_at = [&](std::uint64_t p) {
            return static_cast<std::uint64_t>(source.length(p % cfg.ranks, p / cfg.ranks));
        };
        const bcl::detail::tokens::window_rule rule(bcl::token_budget{cfg.ranks, sh.max_tokens, 1},
                                                    *cfg.tokens.micro_batches, 1, 1);
        std::uint64_t begin = 0;
        REQUIRE(steps.size() == cfg.steps);
        for (const auto& [step, ids] : steps) {
            const std::size_t taken = rule.records(
                std::size_t{1} << 20, [&](std::size_t i) { return tokens_at(begin + i); });
            const std::size_t whole_groups = std::max<std::size_t>(taken / cfg.ranks, 1);
            std::set<std::uint64_t> expected;
            for (std::uint64_t p = begin; p < begin + whole_groups * cfg.ranks; ++p)
                expected.insert(p);
            INFO(sh.dist << ", step " << step);
            CHECK(ids == expected);
            begin += whole_groups * cfg.ranks;
        }
    }
}
