// simulate() (simulate.hpp): every policy emits each record exactly once, results relate to
// none and repeat under a seed, the global plan's skip rule, and the memory budget by hand.
// Expected numbers are derived in the comments, never copied from the code's output. The
// command-line checks (exit code 2, JSON schema) are ctest entries in bench/sim/CMakeLists.txt.

#include "simulate.hpp"

#include "cost_and_cap.hpp"
#include "sim_test_support.hpp"
#include "workload.hpp"

#include <bcl/error.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

using Catch::Matchers::Contains;

using bcl_sim::sim_config;
using bcl_sim_test::hand_source;
using bcl_sim_test::two_ranks;

TEST_CASE("sim: every policy emits every record exactly once", "[sim][policy]") {
    // R = 3, B = 4, K = 5, 50 steps of a synthetic stream: 600 records, a whole number of windows
    // (10) and of length_grouped megabatches (50 * B = 200 records, three of them). Policies that
    // work window by window emit exactly records 0..599. Sliding keeps a buffer of 2 windows and
    // picks from it, so it may emit records up to one buffer (2*K*B per rank) past the end and
    // leave some of the last ones buffered; it still emits each at most once, R*B per step.
    sim_config cfg;
    cfg.dist = bcl_sim::parse_dist("lognormal:mu=5,sigma=1.2");
    cfg.ranks = 3;
    cfg.batch = 4;
    cfg.lookahead = 5;
    cfg.steps = 50;
    cfg.seed = 11;
    const std::uint64_t total = cfg.steps * cfg.ranks * cfg.batch;
    for (const auto& entry : bcl_sim::policy_table()) {
        DYNAMIC_SECTION(entry.name) {
            const bool buffered = entry.name.starts_with("sliding");
            cfg.policies = {std::string(entry.name)};
            std::map<std::uint64_t, int> seen;
            std::map<std::pair<std::size_t, std::size_t>, std::size_t> per_batch; // (step, rank)
            std::vector<std::size_t> per_step(cfg.steps, 0);
            bool stayed_on_rank = true;
            const auto res = bcl_sim::simulate(
                cfg, {}, [&](std::size_t step, std::size_t rank, std::uint64_t id) {
                    ++seen[id];
                    ++per_batch[{step, rank}];
                    ++per_step.at(step);
                    stayed_on_rank = stayed_on_rank && id % cfg.ranks == rank;
                });
            REQUIRE(res.policies.size() == 1);
            CHECK(seen.size() == total);
            CHECK(std::all_of(seen.begin(), seen.end(),
                              [](const auto& kv) { return kv.second == 1; }));
            if (buffered) {
                CHECK(seen.rbegin()->first < total + 2 * cfg.lookahead * cfg.batch * cfg.ranks);
            } else {
                CHECK(seen.begin()->first == 0);
                CHECK(seen.rbegin()->first == total - 1);
            }
            // Every step moves R*B records.
            CHECK(std::all_of(per_step.begin(), per_step.end(),
                              [&](std::size_t n) { return n == cfg.ranks * cfg.batch; }));
            if (entry.name != "mffd") { // packing gives ranks varying record counts
                CHECK(per_batch.size() == cfg.steps * cfg.ranks);
                CHECK(std::all_of(per_batch.begin(), per_batch.end(),
                                  [&](const auto& kv) { return kv.second == cfg.batch; }));
            }
            // Rank-local policies never move a record to another rank.
            if (entry.name == "none" || entry.name.find("tumbling") != std::string_view::npos ||
                buffered)
                CHECK(stayed_on_rank);
        }
    }
}

TEST_CASE("sim: simulate relates every policy to none and is deterministic", "[sim]") {
    sim_config cfg;
    cfg.dist = bcl_sim::parse_dist("pareto:xm=50,alpha=1.3");
    cfg.ranks = 8;
    cfg.batch = 8;
    cfg.lookahead = 4;
    cfg.steps = 64;
    cfg.seed = 3;
    const auto a = bcl_sim::simulate(cfg);
    const auto b = bcl_sim::simulate(cfg);
    const auto by_default =
        std::count_if(bcl_sim::policy_table().begin(), bcl_sim::policy_table().end(),
                      [](const auto& e) { return e.by_default; });
    REQUIRE(a.policies.size() == static_cast<std::size_t>(by_default));
    const auto& none = a.policies.front();
    CHECK(none.name == "none");
    CHECK(none.speedup_vs_none == 1.0);
    CHECK(none.cv_reduction == 0.0);
    for (std::size_t i = 0; i < a.policies.size(); ++i) {
        const auto& p = a.policies[i];
        CHECK(p.metrics.efficiency == b.policies[i].metrics.efficiency);
        CHECK(p.step_max == b.policies[i].step_max);
        CHECK(p.speedup_vs_none == Approx(p.metrics.efficiency / none.metrics.efficiency));
        CHECK(p.cv_reduction == Approx(1.0 - p.metrics.cv / none.metrics.cv));
        CHECK(p.metrics.efficiency <= 1.0 + 1e-12);
        CHECK(p.extras.capped == 0);
    }
    const auto find = [&](std::string_view name) {
        return *std::find_if(a.policies.begin(), a.policies.end(),
                             [&](const auto& p) { return p.name == name; });
    };
    // bcl's windows help on a heavy tail; the pooled global plan helps more.
    CHECK(find("tumbling").metrics.efficiency > none.metrics.efficiency);
    CHECK(find("global").metrics.efficiency >= find("tumbling").metrics.efficiency);
    CHECK(find("tumbling").extras.max_delay_batches < cfg.lookahead);

    cfg.seed = 4;
    const auto c = bcl_sim::simulate(cfg);
    CHECK(c.policies.front().step_max != none.step_max);
}

TEST_CASE("sim: global runs up to bcl::max_plan_records per window and is skipped above", "[sim]") {
    const bcl_sim::policy_entry* global = bcl_sim::find_policy("global");
    REQUIRE(global != nullptr);
    CHECK(global->by_default);
    sim_config cfg;
    // R = 8192, K = 8, B = 16: 2^20 records per window, a plan takes them.
    cfg.ranks = 8192;
    cfg.lookahead = 8;
    cfg.batch = 16;
    CHECK(!global->skip(cfg));
    // 2^30 records is the most a plan takes; 2^31 is skipped, with the reason.
    cfg.ranks = 1024;
    cfg.lookahead = 1024;
    cfg.batch = 1024;
    CHECK(!global->skip(cfg));
    cfg.lookahead = 2048;
    const std::optional<std::string> reason = global->skip(cfg);
    REQUIRE(reason);
    CHECK_THAT(*reason, Contains("R*K*B = 2147483648") && Contains("bcl::max_plan_records"));
}

TEST_CASE("sim: peak_batch_tokens, over_budget_batches, and a budget bcl keeps", "[sim][budget]") {
    // two_ranks again through simulate(), cost = length, 2 steps of B = 2, K = 2.
    sim_config cfg;
    cfg.cost = bcl_sim::cost_model{0.0, 1.0, 0.0, {}};
    cfg.ranks = 2;
    cfg.batch = 2;
    cfg.lookahead = 2;
    cfg.steps = 2;
    cfg.policies = {"none", "tumbling"};
    const auto source = [] {
        return std::make_unique<hand_source>(two_ranks, std::nullopt, std::nullopt);
    };
    const auto find = [](const bcl_sim::sim_result& res, std::string_view name) {
        return *std::find_if(res.policies.begin(), res.policies.end(),
                             [&](const auto& p) { return p.name == name; });
    };
    // No budget: none's batches hold 20, 10 | 2, 12 tokens; tumbling's 11 each. Nothing is
    // counted over a budget that is not there.
    const auto unbudgeted = bcl_sim::simulate(cfg, source);
    CHECK(find(unbudgeted, "none").peak_batch_tokens == 20.0);
    CHECK(find(unbudgeted, "tumbling").peak_batch_tokens == 11.0);
    CHECK(find(unbudgeted, "none").over_budget_batches == 0);

    // Budget 15: none's 20 is over it (one batch; none does not know the budget), tumbling's
    // batches all fit.
    cfg.memory_budget = 15.0;
    const auto b15 = bcl_sim::simulate(cfg, source);
    CHECK(find(b15, "none").over_budget_batches == 1);
    CHECK(find(b15, "tumbling").over_budget_batches == 0);
    CHECK(find(b15, "tumbling").metrics.efficiency == Approx(1.0));
    // Budget 11: exactly the balanced batches; none's 20 and 12 are over.
    cfg.memory_budget = 11.0;
    const auto b11 = bcl_sim::simulate(cfg, source);
    CHECK(find(b11, "none").over_budget_batches == 2);
    CHECK(find(b11, "tumbling").over_budget_batches == 0);

    // Budget 10.5: rank 0's window {10, 10, 1, 1} cannot be split into two batches of 2 within
    // it (each 10 needs a partner), a bcl::error naming the policy, rank and round.
    cfg.memory_budget = 10.5;
    CHECK_THROWS_AS(bcl_sim::simulate(cfg, source), bcl::error);
    CHECK_THROWS_WITH(bcl_sim::simulate(cfg, source),
                      Contains("policy tumbling, rank 0") && Contains("could not be split"));
    // Budget 9.5, and rank 1 reading 5, 3, 4, 2 (balanced as {5, 2} + {4, 3}, 7 each): rank 0's
    // 10 alone is over it.
    const auto source2 = [] {
        return std::make_unique<hand_source>(
            std::vector<std::vector<double>>{{10, 10, 1, 1}, {5, 3, 4, 2}}, std::nullopt,
            std::nullopt);
    };
    cfg.memory_budget = 9.5;
    CHECK_THROWS_WITH(bcl_sim::simulate(cfg, source2), Contains("alone needs memory 10"));
    // A truncating cap at 8 tokens resolves it: {8, 8, 1, 1} -> {8, 1} + {8, 1}, 9 <= 9.5. The
    // fixed cap is a length; cost = length here, so the cost cap is 8 too.
    cfg.cap = bcl_sim::parse_cap("8");
    cfg.cap_action = bcl::cap_action::truncate;
    const auto capped = bcl_sim::simulate(cfg, source2);
    CHECK(find(capped, "tumbling").over_budget_batches == 0);
    CHECK(find(capped, "tumbling").peak_batch_tokens == 9.0);
    CHECK(find(capped, "tumbling").extras.capped == 2);
    // none runs on the same truncated records: 8+8, 5+3 | 1+1, 4+2; only the 16 is over 9.5.
    CHECK(find(capped, "none").over_budget_batches == 1);
    CHECK(find(capped, "none").peak_batch_tokens == 16.0);
    CHECK(find(capped, "none").extras.capped == 2);
}

TEST_CASE("sim: with a memory budget no bcl batch exceeds it", "[sim][budget]") {
    // A heavy-tailed synthetic stream, budget 1.5x the mean batch tokens: the bcl policies never
    // emit a batch over it (bcl guarantees it or throws), and their peak agrees with the
    // library's own statistics.
    sim_config cfg;
    cfg.dist = bcl_sim::parse_dist("lognormal:mu=6,sigma=0.6");
    cfg.ranks = 4;
    cfg.batch = 16;
    cfg.lookahead = 8;
    cfg.steps = 200;
    cfg.policies = {"none", "tumbling", "sliding"};
    const auto free = bcl_sim::simulate(cfg);
    cfg.memory_budget = 1.5 * 16 * free.mean_length;
    const auto res = bcl_sim::simulate(cfg);
    for (const auto& p : res.policies) {
        INFO(p.name);
        if (p.name == "none") {
            CHECK(p.over_budget_batches > 0); // the point of showing it
            continue;
        }
        CHECK(p.over_budget_batches == 0);
        CHECK(p.peak_batch_tokens <= cfg.memory_budget);
        CHECK(p.peak_batch_tokens == p.extras.peak_batch_memory);
    }
}

TEST_CASE("sim: no policy beats its round bound, and tumbling reaches its own",
          "[sim][metrics][policy]") {
    // round_bound is an inequality on a policy's own costs, so it must hold for every policy,
    // distribution and cap. Tumbling's rounds are fixed windows of each rank's stream and bcl
    // partitions them to within 1e-4 of their lower bound, emitting the packs costliest first on
    // every rank: what is left below the bound is the within-round imbalance alone.
    for (const char* dist : {"lognormal:mu=6,sigma=1", "pareto:xm=100,alpha=1.5",
                             "bimodal:short=512,long=4096,p=0.25,sigma=0.3", "uniform:lo=1,hi=1"}) {
        for (const char* cap : {"none", "p99"}) {
            DYNAMIC_SECTION(dist << " cap " << cap) {
                sim_config cfg;
                cfg.dist = bcl_sim::parse_dist(dist);
                cfg.ranks = 4;
                cfg.batch = 8;
                cfg.lookahead = 4;
                cfg.steps = 203; // the last round cut short
                cfg.seed = 5;
                cfg.cap = bcl_sim::parse_cap(cap);
                cfg.cap_action = bcl::cap_action::truncate;
                // mffd at a 4096-token context: at its default (the context that just holds the
                // longest record) records of one equal length each fill a bin of their own, and
                // NeMo-RL's packer then raises (one bin more than records, rounded up to R).
                cfg.bin_tokens = 4096;
                const auto res = bcl_sim::simulate(cfg);
                for (const auto& p : res.policies) {
                    INFO(p.name);
                    CHECK(p.metrics.efficiency <= p.metrics.round_bound + 1e-12);
                    CHECK(p.metrics.round_bound <= 1.0 + 1e-12);
                    if (p.name == "tumbling")
                        CHECK(p.metrics.efficiency >= p.metrics.round_bound - 0.01);
                }
            }
        }
    }
}

TEST_CASE("sim: --buffer-windows and --max-age set the sliding buffer and its delay bound",
          "[sim][policy][input]") {
    // A record of the sliding policy leaves at most (max_age + 1) * K - 1 batches late, and a
    // longer buffer and bound let the rounds hold heavy records back longer, so the largest delay
    // grows with them on a heavy tail. Options the library refuses are bad input, with its
    // message.
    sim_config cfg;
    cfg.dist = bcl_sim::parse_dist("pareto:xm=100,alpha=1.3");
    cfg.ranks = 2;
    cfg.batch = 4;
    cfg.lookahead = 3;
    cfg.steps = 300;
    cfg.policies = {"sliding"};
    std::vector<std::uint64_t> delays;
    for (const auto& [windows, age] : {std::pair<std::size_t, std::size_t>{1, 0}, {2, 2}, {3, 5}}) {
        cfg.buffer_windows = windows;
        cfg.max_age = age;
        const auto res = bcl_sim::simulate(cfg);
        REQUIRE(res.policies.size() == 1);
        delays.push_back(res.policies[0].extras.max_delay_batches);
        CHECK(delays.back() <= (age + 1) * cfg.lookahead - 1);
    }
    CHECK(delays[0] < delays[1]);
    CHECK(delays[1] < delays[2]);
    cfg.buffer_windows = 3;
    cfg.max_age = 1; // a full buffer of 3 windows needs 2 rounds to empty
    CHECK_THROWS_WITH(bcl_sim::simulate(cfg), Contains("max_age must be at least"));
}
