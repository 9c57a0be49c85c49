// Stage mode's rank-local shape (--stages --shape local): its flags and refusals, every policy
// handing out every record exactly once with B a rank a step and only the rank's own records,
// none's order, the delay bounds, the figures against a recount of the placements, determinism,
// --sync step, and what bcl::stage_balancer is for: per stage, above the records as they came
// and above the tumbling balancer of the summed cost, its encoder levelled much further.

#include "stage_local.hpp"
#include "stage_settings.hpp"
#include "stage_simulate.hpp"
#include "workload.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace stages_local_test {

using Catch::Matchers::Contains;

/// A rank-local stage-mode config: R ranks, B, K, synthetic text lengths (no file needed), the
/// default modality mix.
bcl_sim::sim_config local_config(std::size_t ranks, std::size_t batch, std::size_t steps,
                                 std::size_t lookahead, std::uint64_t seed = 1) {
    bcl_sim::sim_config cfg;
    cfg.ranks = ranks;
    cfg.batch = batch;
    cfg.steps = steps;
    cfg.lookahead = lookahead;
    cfg.seed = seed;
    cfg.dist = bcl_sim::lognormal_spec{6.5, 1.0};
    cfg.stages.enabled = true;
    cfg.stages.shape = bcl_sim::stage_shape::local;
    cfg.stages.lookahead_given = true;
    return cfg;
}

const bcl_sim::stage_policy_result& result_of(const bcl_sim::stage_sim_result& res,
                                              const std::string& name) {
    for (const auto& p : res.policies)
        if (p.name == name) return p;
    FAIL("no policy " << name);
    return res.policies.front();
}

/// Where a run put every record: per policy, position -> (step, rank), each seen once.
using where_placed =
    std::map<std::string, std::map<std::uint64_t, std::pair<std::uint64_t, std::size_t>>>;

bcl_sim::stage_sim_result run_and_place(const bcl_sim::sim_config& cfg, where_placed& placed) {
    return bcl_sim::simulate_stages(cfg, [&](const std::string& name, std::uint64_t step,
                                             std::size_t rank, std::uint64_t position) {
        const bool fresh = placed[name].emplace(position, std::pair{step, rank}).second;
        REQUIRE(fresh); // a record handed out twice
    });
}

TEST_CASE("sim stages local: the shape's flags and refusals", "[sim][stages]") {
    CHECK(bcl_sim::parse_shape("local") == bcl_sim::stage_shape::local);
    CHECK(bcl_sim::describe(bcl_sim::stage_shape::local) == "local");
    CHECK_THROWS_WITH(bcl_sim::parse_shape("ragged"), Contains("or local (each rank its own"));
    const bcl_sim::sim_config cfg = local_config(4, 4, 8, 2);
    CHECK_NOTHROW(bcl_sim::validate_stages(cfg));
    CHECK(bcl_sim::requested_stage_policies(cfg) ==
          std::vector<std::string>{"none", "lm", "summed-tumbling", "summed-sliding",
                                   "stages-tumbling", "stages"});
    bcl_sim::sim_config c = cfg;
    c.policies = {"none", "omnibal"};
    CHECK_THROWS_WITH(
        bcl_sim::validate_stages(c),
        Contains(
            "--policy: 'omnibal' is not a policy of --stages --shape local "
            "(expected some of none,lm,summed-tumbling,summed-sliding,stages-tumbling,stages)"));
    c.policies = {"summed"};
    CHECK_THROWS_WITH(bcl_sim::validate_stages(c), Contains("'summed' is not a policy"));
    // The local names are not the other shapes' policies.
    c = cfg;
    c.stages.shape = bcl_sim::stage_shape::stream;
    c.policies = {"summed-tumbling"};
    CHECK_THROWS_WITH(bcl_sim::validate_stages(c),
                      Contains("'summed-tumbling' is not a policy of --stages (expected"));
    c = cfg;
    c.stages.micro_steps = 2;
    CHECK_THROWS_WITH(bcl_sim::validate_stages(c), Contains("--micro-steps is a flag of --shape "
                                                            "held"));
    c = cfg;
    c.batch = std::size_t{1} << 25;
    c.lookahead = 4;
    CHECK_THROWS_WITH(bcl_sim::validate_stages(c),
                      Contains("--batch and --lookahead do not fit a rank's balancer"));
    c = cfg;
    c.lookahead = 0;
    CHECK_THROWS_WITH(bcl_sim::validate_stages(c), Contains("--lookahead must be at least 1"));
}

TEST_CASE("sim stages local: every policy hands out every record once, B a rank a step, each "
          "rank its own",
          "[sim][stages]") {
    // R = 3, B = 4, K = 4 and 10 steps: the last window of the tumbling balancers is short, and
    // every balancer drains its last records after finish().
    const std::size_t r = 3;
    const std::size_t b = 4;
    const std::size_t k = 4;
    const std::size_t steps = 10;
    const bcl_sim::sim_config cfg = local_config(r, b, steps, k);
    where_placed placed;
    const bcl_sim::stage_sim_result res = run_and_place(cfg, placed);
    const std::uint64_t records = steps * r * b;
    REQUIRE(res.policies.size() == bcl_sim::local_stage_policy_table().size());
    for (const auto& e : bcl_sim::local_stage_policy_table()) {
        INFO("policy " << e.name);
        const auto& where = placed.at(e.name);
        REQUIRE(where.size() == records);
        CHECK(where.rbegin()->first == records - 1); // positions 0 .. records - 1, once each
        std::map<std::pair<std::uint64_t, std::size_t>, std::size_t> count;
        std::uint64_t delay = 0;
        for (const auto& [position, at] : where) {
            ++count[at];
            CHECK(position % r == at.second); // rank r trains only its own stream: r, r+R, ...
            const std::uint64_t arrived = position / r / b;
            if (at.first > arrived) delay = std::max<std::uint64_t>(delay, at.first - arrived);
        }
        CHECK(count.size() == steps * r);
        for (const auto& [at, n] : count) CHECK(n == b);
        const bcl_sim::stage_policy_result& p = result_of(res, e.name);
        CHECK(p.metrics.micro_steps == steps);
        CHECK(p.metrics.records == records);
        CHECK(p.max_delay_steps == delay);
        CHECK_FALSE(p.steps_restaged.has_value());
        // The library's delay bounds: K - 1 batches tumbling, (max_age + 1) * K - 1 sliding.
        if (e.name == "none")
            CHECK(delay == 0);
        else if (e.name == "stages-tumbling" || e.name == "summed-tumbling")
            CHECK(delay <= k - 1);
        else
            CHECK(delay <= 3 * k - 1);
    }
    // none: rank r's step t is its stream's records t*B .. t*B + B - 1, positions (t*B + j)*R + r.
    for (const auto& [position, at] : placed.at("none")) CHECK(position / r / b == at.first);
    // The balancers reorder: none's placement is not theirs.
    CHECK(placed.at("stages") != placed.at("none"));
    CHECK(placed.at("summed-sliding") != placed.at("none"));
}

TEST_CASE("sim stages local: the run's figures are a recount of its placements, and repeat",
          "[sim][stages]") {
    const bcl_sim::sim_config cfg = local_config(2, 3, 7, 3);
    where_placed placed;
    const bcl_sim::stage_sim_result res = run_and_place(cfg, placed);
    const bcl_sim::stage_source source = bcl_sim::make_stage_source(cfg);
    for (const auto& p : res.policies) {
        INFO("policy " << p.name);
        std::map<std::uint64_t, std::array<std::array<double, 2>, 2>> load; // [step][rank][stage]
        double work = 0.0;
        for (const auto& [position, at] : placed.at(p.name)) {
            const bcl_sim::stage_record x = source.at(position);
            for (std::size_t s = 0; s < 2; ++s) {
                load[at.first][at.second][s] += x.cost[s];
                work += x.cost[s];
            }
        }
        double stage_time = 0.0;
        double step_time = 0.0;
        for (const auto& [step, ranks] : load) {
            for (std::size_t s = 0; s < 2; ++s) stage_time += std::max(ranks[0][s], ranks[1][s]);
            step_time += std::max(ranks[0][0] + ranks[0][1], ranks[1][0] + ranks[1][1]);
        }
        CHECK(p.metrics.stage_sync() == Approx(work / (2 * stage_time)).epsilon(1e-12));
        CHECK(p.metrics.step_sync() == Approx(work / (2 * step_time)).epsilon(1e-12));
    }
    // The same seed gives the same run; --sync changes only which figure `efficiency` is.
    bcl_sim::sim_config step = cfg;
    step.stages.sync = bcl_sim::stage_sync::step;
    const bcl_sim::stage_sim_result again = bcl_sim::simulate_stages(step);
    for (std::size_t i = 0; i < res.policies.size(); ++i) {
        const bcl_sim::stage_metrics& m = res.policies[i].metrics;
        const bcl_sim::stage_metrics& n = again.policies[i].metrics;
        CHECK(m.slowest == n.slowest);
        CHECK(m.step_slowest == n.step_slowest);
        CHECK(bcl_sim::sync_efficiency(n, bcl_sim::stage_sync::step) == n.step_sync());
        CHECK(again.policies[i].speedup_vs_none ==
              Approx(n.step_sync() / again.policies.front().metrics.step_sync()));
    }
}

TEST_CASE("sim stages local: the stage balancer beats the records as they came and the summed "
          "cost's balancers per stage, sliding above tumbling",
          "[sim][stages]") {
    // R = 8, B = 16, K = 8, the default mix, 96 steps a seed (12 windows a rank). What the stage
    // balancer is for: every stage of every rank's batch near that stage's mean. Balancing the
    // summed cost lets the encoder's load follow the images; balancing both levels it further.
    for (const std::uint64_t seed : {1, 2, 3}) {
        INFO("seed " << seed);
        bcl_sim::sim_config cfg = local_config(8, 16, 96, 8, seed);
        cfg.policies = {"none", "summed-tumbling", "summed-sliding", "stages-tumbling", "stages"};
        const bcl_sim::stage_sim_result res = bcl_sim::simulate_stages(cfg);
        const bcl_sim::stage_metrics& none = result_of(res, "none").metrics;
        const bcl_sim::stage_metrics& summed = result_of(res, "summed-tumbling").metrics;
        const bcl_sim::stage_metrics& sliding = result_of(res, "summed-sliding").metrics;
        const bcl_sim::stage_metrics& window = result_of(res, "stages-tumbling").metrics;
        const bcl_sim::stage_metrics& stages = result_of(res, "stages").metrics;
        CHECK(window.stage_sync() >= none.stage_sync());
        CHECK(window.stage_sync() > summed.stage_sync());
        CHECK(window.of_stage(0) > summed.of_stage(0) + 0.05);
        CHECK(window.of_stage(1) > none.of_stage(1));
        CHECK(stages.stage_sync() > window.stage_sync());
        CHECK(stages.stage_sync() > sliding.stage_sync() + 0.03);
        CHECK(stages.of_stage(0) > sliding.of_stage(0) + 0.05);
        CHECK(stages.stage_sync() <= stages.stage_sync_bound());
    }
}

} // namespace stages_local_test
