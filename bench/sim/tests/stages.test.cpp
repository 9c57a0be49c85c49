// Stage mode (--stages): its flags and errors, the metrics by hand, every policy's plan placing
// every record once with B a rank in every micro-step, the run's figures against a brute-force
// recount of the placements it reports, verl's rule on the language model's tokens by hand, and
// what bcl's stage plan promises: never below the plan of the summed cost.

#include "simulate.hpp"
#include "stage_metrics.hpp"
#include "stage_policies.hpp"
#include "stage_settings.hpp"
#include "stage_simulate.hpp"
#include "stage_workload.hpp"
#include "token_simulate.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace {

using Catch::Matchers::Contains;

/// A stage-mode config: R ranks, B, synthetic text lengths (no file needed), cost = the mode's.
bcl_sim::sim_config stage_config(std::size_t ranks, std::size_t batch, std::size_t steps, bool held,
                                 std::size_t unit_steps) {
    bcl_sim::sim_config cfg;
    cfg.ranks = ranks;
    cfg.batch = batch;
    cfg.steps = steps;
    cfg.dist = bcl_sim::lognormal_spec{6.5, 1.0};
    cfg.stages.enabled = true;
    if (held) {
        cfg.stages.shape = bcl_sim::stage_shape::held;
        cfg.stages.micro_steps = unit_steps;
    } else {
        cfg.lookahead = unit_steps;
    }
    return cfg;
}

const bcl_sim::stage_policy_result& policy(const bcl_sim::stage_sim_result& res,
                                           const std::string& name) {
    for (const auto& p : res.policies)
        if (p.name == name) return p;
    FAIL("no policy " << name);
    return res.policies.front();
}

/// Where a run put every record: per policy, position -> (micro-step, rank), each seen once.
using placements =
    std::map<std::string, std::map<std::uint64_t, std::pair<std::uint64_t, std::size_t>>>;

bcl_sim::stage_sim_result run_placed(const bcl_sim::sim_config& cfg, placements& placed) {
    return bcl_sim::simulate_stages(cfg, [&](const std::string& name, std::uint64_t step,
                                             std::size_t rank, std::uint64_t position) {
        const bool fresh = placed[name].emplace(position, std::pair{step, rank}).second;
        REQUIRE(fresh); // a record placed twice
    });
}

} // namespace

TEST_CASE("sim stages: the mode's flags and errors", "[sim][stages]") {
    const bcl_sim::sim_config cfg = stage_config(4, 4, 8, false, 2);
    CHECK_NOTHROW(bcl_sim::validate_stages(cfg));
    const auto refused = [](const bcl_sim::sim_config& c, const std::string& why) {
        CHECK_THROWS_WITH(bcl_sim::validate_stages(c), Contains(why));
    };
    SECTION("--sync, --shape and --modality-mix parse their values and refuse others") {
        CHECK(bcl_sim::parse_sync("stage") == bcl_sim::stage_sync::stage);
        CHECK(bcl_sim::parse_sync("step") == bcl_sim::stage_sync::step);
        CHECK_THROWS_WITH(bcl_sim::parse_sync("foo"), Contains("--sync foo: expected stage"));
        CHECK(bcl_sim::parse_shape("held") == bcl_sim::stage_shape::held);
        CHECK_THROWS_WITH(bcl_sim::parse_shape("ragged"), Contains("--shape ragged"));
        const bcl_sim::modality_mix m = bcl_sim::parse_mix("text=0.5,image=0.5,multi=0");
        CHECK(m.text == 0.5);
        CHECK(m.image == 0.5);
        CHECK(m.multi == 0.0);
        CHECK_THROWS_WITH(bcl_sim::parse_mix("text=0.5"), Contains("must sum to 1"));
        CHECK_THROWS_WITH(bcl_sim::parse_mix("text=-0.1,image=0.95,multi=0.15"),
                          Contains("must be >= 0"));
        CHECK_THROWS_WITH(bcl_sim::parse_mix("audio=1"), Contains("unknown parameter 'audio'"));
    }
    SECTION("a flag of another mode, or of the other shape, is refused") {
        bcl_sim::sim_config c = cfg;
        c.tokens.max_tokens = 4096;
        refused(c, "--max-tokens");
        c = cfg;
        c.cost = bcl_sim::parse_cost("affine:a=1");
        refused(c, "--cost (a record's stage costs are stage mode's own");
        c = cfg;
        c.cap = bcl_sim::parse_cap("p99");
        refused(c, "--cap does not apply with --stages");
        c = cfg;
        c.batching = bcl_sim::batch_cost::padded;
        refused(c, "--batching padded does not apply with --stages");
        c = cfg;
        c.stages.micro_steps = 2;
        refused(c, "--micro-steps is a flag of --shape held");
        c = stage_config(4, 4, 8, true, 2);
        c.stages.lookahead_given = true;
        refused(c, "--lookahead is a flag of --shape stream");
        c.stages.lookahead_given = false;
        c.stages.micro_steps = 0;
        refused(c, "--micro-steps must be at least 1");
    }
    SECTION("counts of 0, a unit too large for a plan, and an unknown policy") {
        bcl_sim::sim_config c = cfg;
        c.ranks = 0;
        refused(c, "--ranks must be at least 1");
        c = cfg;
        c.ranks = 1024;
        c.batch = 1024;
        c.lookahead = 1025;
        refused(c, "above the 2^30 records a plan may hold");
        c = cfg;
        c.policies = {"none", "verl_kk"};
        refused(c, "--policy: 'verl_kk' is not a policy of --stages");
    }
    SECTION("the mode's flags need --stages, and each mode runs only its own configurations") {
        bcl_sim::sim_config c;
        c.stages.sync = bcl_sim::stage_sync::step;
        CHECK_THROWS_WITH(bcl_sim::validate(c), Contains("--sync is a flag of --stages"));
        c.tokens.max_tokens = 4096;
        c.tokens.step_records = 4;
        CHECK_THROWS_WITH(bcl_sim::validate_tokens(c), Contains("--sync is a flag of --stages"));
        CHECK_THROWS_AS(bcl_sim::validate(cfg), std::invalid_argument);
        CHECK_THROWS_AS(bcl_sim::validate_stages(bcl_sim::sim_config{}), std::invalid_argument);
    }
}

TEST_CASE("sim stages: the records' costs and the metrics by hand", "[sim][stages]") {
    SECTION("a record's stage costs") {
        // 2048 patches: 0.09 * (2048 + 2048^2 / 8192) = 0.09 * 2560 = 230.4; the language
        // model's 1000 + 2048 / 4 = 1512 tokens cost 1512 + 1512^2 / 24576 = 1605.0234375.
        const bcl_sim::stage_record r = bcl_sim::make_stage_record(1000, 2048);
        CHECK(r.cost[0] == Approx(230.4));
        CHECK(r.tokens() == 1512.0);
        CHECK(r.cost[1] == Approx(1605.0234375));
        CHECK(bcl_sim::make_stage_record(300, 0).cost[0] == 0.0);
    }
    SECTION("two ranks, one record each, each heavy in a stage") {
        // (vision, language): rank 0 holds (4, 1), rank 1 holds (1, 4). Meeting in every stage
        // the micro-step lasts 4 + 4 = 8 for work 10: 10 / (2 * 8) = 0.625; meeting once it
        // lasts max(5, 5) = 5: 10 / (2 * 5) = 1. Each stage alone: 5 / (2 * 4) = 0.625. The
        // bound is max(2.5, 4) per stage, 8 in all: 0.625; per step max(5, 5): 1.
        const std::vector<bcl_sim::stage_record> records{{0, 0, {4.0, 1.0}}, {0, 0, {1.0, 4.0}}};
        const std::vector<bcl::plan_slot> slots{{0, 0}, {0, 1}};
        bcl_sim::stage_metrics_accumulator acc(2, 1);
        acc.add_unit(records, slots, 1, "hand");
        const bcl_sim::stage_metrics& m = acc.result();
        CHECK(m.stage_sync() == 0.625);
        CHECK(m.step_sync() == 1.0);
        CHECK(m.of_stage(0) == 0.625);
        CHECK(m.of_stage(1) == 0.625);
        CHECK(m.stage_sync_bound() == 0.625);
        CHECK(m.step_sync_bound() == 1.0);
        CHECK(m.micro_steps == 1);
        // Swapped so that one rank holds both: stage sync 5 + 5 = 10 against 10 / 2 = 5 of
        // work a rank, but B = 1 a rank refuses a rank of two.
        const std::vector<bcl::plan_slot> both{{0, 0}, {0, 0}};
        bcl_sim::stage_metrics_accumulator bad(2, 1);
        CHECK_THROWS_WITH(bad.add_unit(records, both, 1, "lopsided"),
                          Contains("policy lopsided gave rank 0 2 records"));
    }
}

TEST_CASE("sim stages: lm is verl's Karmarkar-Karp on the language model's tokens, by hand",
          "[sim][stages]") {
    // Text-only records of 100, 200, 300 and 400 tokens on 2 ranks of B = 2. verl's workload
    // 24576 T + T^2 grows with T, so its order is the tokens'. Karmarkar-Karp with equal sizes:
    // runs of 2 by rising workload, {100, 200} and {300, 400}; merging the two states pairs the
    // heaviest set of one with the lightest of the other: {400, 100} and {300, 200}.
    const std::vector<bcl_sim::stage_record> records{
        bcl_sim::make_stage_record(300, 0), bcl_sim::make_stage_record(100, 0),
        bcl_sim::make_stage_record(400, 0), bcl_sim::make_stage_record(200, 0)};
    bcl_sim::lm_stage_runner lm;
    std::vector<bcl::plan_slot> out(4);
    lm.plan({records, 2, 1, 2, true, 0}, out);
    CHECK(out[1].rank == out[2].rank); // 100 with 400
    CHECK(out[0].rank == out[3].rank); // 300 with 200
    CHECK(out[0].rank != out[1].rank);
    for (const bcl::plan_slot& s : out) CHECK(s.step == 0);
}

TEST_CASE("sim stages: every policy places every record once, B a rank in every micro-step",
          "[sim][stages]") {
    const auto check = [](const bcl_sim::sim_config& cfg, std::uint64_t micro_steps) {
        placements placed;
        const bcl_sim::stage_sim_result res = run_placed(cfg, placed);
        const std::uint64_t records = micro_steps * cfg.ranks * cfg.batch;
        REQUIRE(res.policies.size() == bcl_sim::stage_policy_table().size());
        for (const auto& e : bcl_sim::stage_policy_table()) {
            INFO("policy " << e.name);
            const auto& where = placed.at(e.name);
            REQUIRE(where.size() == records);
            CHECK(where.rbegin()->first == records - 1); // positions 0 .. records - 1, once each
            std::map<std::pair<std::uint64_t, std::size_t>, std::size_t> count;
            for (const auto& [position, at] : where) ++count[at];
            CHECK(count.size() == micro_steps * cfg.ranks);
            for (const auto& [at, n] : count) CHECK(n == cfg.batch);
            CHECK(policy(res, e.name).metrics.micro_steps == micro_steps);
            CHECK(policy(res, e.name).metrics.records == records);
        }
    };
    SECTION("held batches of one micro-step and of three") {
        check(stage_config(3, 4, 5, true, 1), 5);
        check(stage_config(3, 4, 5, true, 3), 15);
    }
    SECTION("a stream, its last window shorter") {
        check(stage_config(3, 4, 10, false, 4), 10);
    }
}

TEST_CASE("sim stages: the run's figures are a brute-force recount of its placements",
          "[sim][stages]") {
    for (const bool held : {true, false}) {
        const bcl_sim::sim_config cfg = stage_config(2, 2, 6, held, held ? 2 : 3);
        INFO((held ? "held" : "stream"));
        placements placed;
        const bcl_sim::stage_sim_result res = run_placed(cfg, placed);
        const bcl_sim::stage_source source = bcl_sim::make_stage_source(cfg);
        for (const auto& p : res.policies) {
            INFO("policy " << p.name);
            // load[micro-step][rank][stage], then the slowest rank of each stage and of the sum.
            std::map<std::uint64_t, std::array<std::array<double, 2>, 2>> load;
            double work = 0.0;
            for (const auto& [position, at] : placed.at(p.name)) {
                const bcl_sim::stage_record r = source.at(position);
                for (std::size_t s = 0; s < 2; ++s) {
                    load[at.first][at.second][s] += r.cost[s];
                    work += r.cost[s];
                }
            }
            double stage_time = 0.0;
            double step_time = 0.0;
            for (const auto& [step, ranks] : load) {
                for (std::size_t s = 0; s < 2; ++s)
                    stage_time += std::max(ranks[0][s], ranks[1][s]);
                step_time += std::max(ranks[0][0] + ranks[0][1], ranks[1][0] + ranks[1][1]);
            }
            CHECK(p.metrics.stage_sync() == Approx(work / (2 * stage_time)).epsilon(1e-12));
            CHECK(p.metrics.step_sync() == Approx(work / (2 * step_time)).epsilon(1e-12));
        }
    }
}

TEST_CASE("sim stages: bcl's stage plan is never below its plan of the summed cost",
          "[sim][stages]") {
    for (const std::uint64_t seed : {1, 2, 3})
        for (const bool held : {true, false}) {
            bcl_sim::sim_config cfg = stage_config(4, 8, 24, held, held ? 1 : 8);
            cfg.seed = seed;
            cfg.policies = {"summed", "stages"};
            const bcl_sim::stage_sim_result res = bcl_sim::simulate_stages(cfg);
            INFO("seed " << seed << (held ? " held" : " stream"));
            // The plans compare in fixed point (one unit 2^-27 of the dearest cost); in doubles
            // a tie may differ in the last bits.
            CHECK(policy(res, "stages").metrics.stage_sync() >=
                  policy(res, "summed").metrics.stage_sync() * (1.0 - 1e-9));
            CHECK(policy(res, "stages").steps_restaged.has_value());
            CHECK_FALSE(policy(res, "summed").steps_restaged.has_value());
        }
}

TEST_CASE("sim stages: omnibal's groups lower OmniBal's own dist ratios", "[sim][stages]") {
    // OmniBal scores a deal by, per micro-step, the sum over ranks of (max - x) / (R * max) of
    // its two numbers (patches, language tokens). Its groups must score below the records as
    // they came, and place every record in a group of B.
    const bcl_sim::sim_config cfg = stage_config(8, 16, 1, true, 1);
    const bcl_sim::stage_source source = bcl_sim::make_stage_source(cfg);
    const auto dist_ratio = [](const std::vector<double>& value,
                               const std::vector<bcl::plan_slot>& slots) {
        std::array<double, 8> sum{};
        for (std::size_t i = 0; i < slots.size(); ++i) sum[slots[i].rank] += value[i];
        const double top = *std::max_element(sum.begin(), sum.end());
        double waste = 0.0;
        for (const double s : sum) waste += top - s;
        return waste / (8 * top);
    };
    double none_score = 0.0;
    double omnibal_score = 0.0;
    for (std::uint64_t unit = 0; unit < 10; ++unit) {
        std::vector<double> vision(128);
        std::vector<double> tokens(128);
        std::vector<bcl::plan_slot> none(128);
        for (std::size_t i = 0; i < 128; ++i) {
            const bcl_sim::stage_record r = source.at(unit * 128 + i);
            vision[i] = r.patches;
            tokens[i] = r.tokens();
            none[i] = {0, static_cast<std::uint32_t>(i / 16)};
        }
        bcl_sim::omnibal_grouper grouper;
        std::vector<bcl::plan_slot> grouped(128);
        grouper.plan(vision, tokens, 8, 1, 16, unit, grouped);
        std::array<std::size_t, 8> count{};
        for (const bcl::plan_slot& s : grouped) ++count[s.rank];
        for (const std::size_t n : count) CHECK(n == 16);
        none_score += dist_ratio(vision, none) + dist_ratio(tokens, none);
        omnibal_score += dist_ratio(vision, grouped) + dist_ratio(tokens, grouped);
    }
    CHECK(omnibal_score < 0.75 * none_score);
}
