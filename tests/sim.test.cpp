// bcl-sim's engine (bench/sim/simulator.hpp): the metrics on cases small enough to work out by
// hand, every policy on hand-made streams, that every policy emits each record exactly once, the
// streams (file sampling, synthetic draws), MFFD packing, and bad input. Expected numbers are
// derived in the comments, never copied from the code's output. The command-line checks (exit
// code 2, JSON schema) are ctest entries in bench/sim/CMakeLists.txt.

#include "../bench/sim/simulator.hpp"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

using Catch::Matchers::Contains;

namespace {

using bcl_sim::sim_config;

/// Per-rank streams with an optional data-set size and epoch, so length_grouped can be worked out.
class hand_source final : public bcl_sim::record_source {
public:
    hand_source(std::vector<std::vector<double>> per_rank, std::optional<std::uint64_t> dataset,
                std::optional<std::uint64_t> epoch)
        : m_table(std::move(per_rank)), m_dataset(dataset), m_epoch(epoch) {}
    [[nodiscard]] double length(std::size_t rank, std::uint64_t index) override {
        return m_table.length(rank, index);
    }
    [[nodiscard]] std::optional<std::uint64_t> global_epoch() const override { return m_epoch; }
    [[nodiscard]] std::optional<std::uint64_t> dataset_size() const override { return m_dataset; }

private:
    bcl_sim::table_source m_table;
    std::optional<std::uint64_t> m_dataset;
    std::optional<std::uint64_t> m_epoch;
};

/// Costs and tokens of one policy on a hand-made stream, step-major: costs[s * R + r].
struct hand_run {
    std::vector<double> costs;
    std::vector<double> tokens;
    bcl_sim::policy_extras extras;
};

/// Settings of a hand run beyond the stream and B, K, steps.
struct hand_settings {
    double bin_tokens = 0.0;
    std::optional<std::uint64_t> dataset;
    std::optional<std::uint64_t> epoch;
    bcl_sim::cost_model cost{0.0, 1.0, 0.0, {}}; // cost = length
    bcl::cap_options cap{};
    double memory_budget = 0.0;
};

hand_run run_by_hand(std::string_view policy, const std::vector<std::vector<double>>& streams,
                     std::size_t batch, std::size_t lookahead, std::size_t steps,
                     const hand_settings& settings) {
    hand_source source(streams, settings.dataset, settings.epoch);
    bcl_sim::sim_context ctx;
    ctx.ranks = streams.size();
    ctx.batch = batch;
    ctx.lookahead = lookahead;
    ctx.seed = 7;
    ctx.cost = settings.cost;
    ctx.source = &source;
    ctx.bin_tokens = settings.bin_tokens;
    ctx.cap = settings.cap;
    ctx.memory_budget = settings.memory_budget;
    const bcl_sim::policy_entry* entry = bcl_sim::find_policy(policy);
    REQUIRE(entry != nullptr);
    auto runner = entry->make(ctx);
    hand_run out;
    out.costs.assign(steps * ctx.ranks, 0.0);
    out.tokens.assign(steps * ctx.ranks, 0.0);
    for (std::size_t first = 0; first < steps; first += lookahead) {
        const std::size_t count = std::min(lookahead, steps - first);
        const std::size_t at = first * ctx.ranks;
        const std::size_t n = count * ctx.ranks;
        runner->run(first, count,
                    bcl_sim::step_block{std::span<double>(out.costs).subspan(at, n),
                                        std::span<double>(out.tokens).subspan(at, n)});
    }
    out.extras = runner->extras();
    return out;
}

hand_run run_by_hand(std::string_view policy, const std::vector<std::vector<double>>& streams,
                     std::size_t batch, std::size_t lookahead, std::size_t steps,
                     double bin_tokens = 0.0, std::optional<std::uint64_t> dataset = {},
                     std::optional<std::uint64_t> epoch = {}) {
    hand_settings settings;
    settings.bin_tokens = bin_tokens;
    settings.dataset = dataset;
    settings.epoch = epoch;
    return run_by_hand(policy, streams, batch, lookahead, steps, settings);
}

std::filesystem::path write_temp(const std::string& name, const std::string& text) {
    const auto path = std::filesystem::temp_directory_path() / fmt::format("bcl_sim_test_{}", name);
    std::ofstream(path) << text;
    return path;
}

} // namespace

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
    for (std::size_t s = 0; s < costs.size(); ++s)
        costs[s] = static_cast<double>(s + 1);
    const auto m = bcl_sim::compute_metrics(costs, 1);
    CHECK(m.p99_step_ratio == Approx(198.0 / 100.5));
    CHECK(m.efficiency == Approx(1.0)); // one rank never waits
}

// Two ranks, B = 2, K = 2, cost = length. rank 0 reads 10, 10, 1, 1; rank 1 reads 5, 5, 6, 6.
// Global order (index * R + rank): 10, 5, 10, 5, 1, 6, 1, 6.
static const std::vector<std::vector<double>> two_ranks{{10, 10, 1, 1}, {5, 5, 6, 6}};

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

TEST_CASE("sim: oracle partitions all ranks' windows together", "[sim][policy]") {
    // All eight records (total 44) into R*K = 4 packs of 2: {10,1} {10,1} {6,5} {6,5}, 11 each.
    const auto run = run_by_hand("oracle", {{10, 10, 1, 1}, {5, 5, 6, 6}}, 2, 2, 2);
    CHECK(run.costs == std::vector<double>{11, 11, 11, 11});
    REQUIRE(run.extras.mean_gap_to_lb);
    CHECK(*run.extras.mean_gap_to_lb == Approx(0.0).margin(1e-12));
    CHECK(run.extras.max_delay_batches <= 1);

    // Where ranks cannot balance alone: rank 0 reads only 9s, rank 1 only 1s. Alone each rank's
    // steps cost 18 and 2; pooled, every pack is {9, 1} = 10.
    const auto pooled = run_by_hand("oracle", {{9, 9, 9, 9}, {1, 1, 1, 1}}, 2, 2, 2);
    CHECK(pooled.costs == std::vector<double>{10, 10, 10, 10});
    const auto alone = run_by_hand("tumbling", {{9, 9, 9, 9}, {1, 1, 1, 1}}, 2, 2, 2);
    CHECK(alone.costs == std::vector<double>{18, 2, 18, 2});
}

TEST_CASE("sim: mffd packs each step's records into token bins", "[sim][policy]") {
    // Capacity 15. Step 0 holds 10, 10 (rank 0) and 5, 5 (rank 1). 10 > 15/2 is large: two bins
    // {10}, {10}. 5 is small (15/6 < 5 <= 15/3); there is no medium item. Phase 3: the two
    // smallest smalls (5 + 5 = 10) do not fit beside 10 (room 5). Phase 4: the longest item that
    // fits in room 5 is a 5, for each bin: {10, 5}, {10, 5}. Two bins for two ranks: 15 and 15.
    // Step 1 holds 1, 1, 6, 6: nothing large, so first-fit decreasing: 6, 6, 1, 1 all fit one bin
    // (14). One bin rounds up to two: the new bin takes the last item added, a 1 -> 13 and 1.
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

TEST_CASE("sim: the file stream is DistributedSampler's", "[sim][source]") {
    // 10 distinct lengths over R = 4 ranks: ceil(10/4) = 3 records per rank per epoch, 12 in all,
    // so each epoch reads every length once plus two of them a second time (the padding).
    auto lengths = std::make_shared<const std::vector<double>>(
        std::vector<double>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9});
    bcl_sim::file_source src(lengths, 4, 5);
    REQUIRE(src.global_epoch() == std::uint64_t{12});
    REQUIRE(src.dataset_size() == std::uint64_t{10});
    std::vector<std::vector<double>> epochs(3);
    for (std::uint64_t e = 0; e < 3; ++e) {
        std::map<double, int> count;
        // Global order: position g is rank g % 4, index e*3 + g / 4.
        for (std::uint64_t g = 0; g < 12; ++g) {
            const double x = src.length(g % 4, e * 3 + g / 4);
            ++count[x];
            epochs[e].push_back(x);
        }
        CHECK(count.size() == 10);
        int twice = 0;
        for (const auto& [x, n] : count)
            twice += n == 2 ? 1 : 0;
        CHECK(twice == 2);
        // The padding repeats the start of the epoch's order.
        CHECK(epochs[e][10] == epochs[e][0]);
        CHECK(epochs[e][11] == epochs[e][1]);
    }
    CHECK(epochs[0] != epochs[1]); // reshuffled each epoch
    // Same seed, same stream; random access gives what sequential reading gave.
    bcl_sim::file_source again(lengths, 4, 5, 1);
    CHECK(again.length(3, 7) == epochs[2][(7 - 6) * 4 + 3]);
    CHECK(again.length(0, 0) == epochs[0][0]);
}

TEST_CASE("sim: the random streams are fully specified", "[sim][source]") {
    // SplitMix64 seeded with 0 (Steele, Lea, Flood 2014; the reference seeding generator of the
    // xoshiro family): its first outputs are published constants.
    bcl_sim::splitmix rng(0);
    CHECK(rng.next() == 0xe220a8397b1dcdafULL);
    CHECK(rng.next() == 0x6e789e6aa1b965f4ULL);
    CHECK(rng.next() == 0x06c45d188009454fULL);
    // The counter form is the same sequence, at random access.
    CHECK(bcl_sim::stream_word(0, 2) == 0x06c45d188009454fULL);
    CHECK(bcl_sim::unit_interval(0) == 0.0);
    CHECK(bcl_sim::unit_interval(~std::uint64_t{0}) < 1.0);
    CHECK(bcl_sim::unit_interval_open0(0) > 0.0);
    CHECK(bcl_sim::unit_interval_open0(~std::uint64_t{0}) == 1.0);
}

TEST_CASE("sim: synthetic distributions draw what they say", "[sim][source]") {
    const std::uint64_t key = bcl_sim::stream_key(3, bcl_sim::domain::synthetic, 0);
    constexpr std::size_t n = 20000;
    const auto draws = [&](std::string_view spec) {
        const auto d = bcl_sim::parse_dist(spec);
        std::vector<double> v(n);
        for (std::size_t i = 0; i < n; ++i)
            v[i] = bcl_sim::draw_length(d, key, i);
        return v;
    };
    {
        const auto v = draws("uniform:lo=3,hi=5");
        const std::set<double> values(v.begin(), v.end());
        CHECK(values == std::set<double>{3, 4, 5});
    }
    {
        // Median of a lognormal is exp(mu): exp(6) = 403.4; lengths are rounded up.
        const auto v = draws("lognormal:mu=6,sigma=1");
        CHECK(bcl_sim::nearest_rank(v, 0.5) == Approx(403.4).epsilon(0.05));
    }
    {
        // Pareto: never below xm; P(L > 2 xm) = 2^-alpha = 2^-1.5 = 0.354.
        const auto v = draws("pareto:xm=100,alpha=1.5");
        CHECK(*std::min_element(v.begin(), v.end()) >= 100.0);
        const auto above = std::count_if(v.begin(), v.end(), [](double x) { return x > 200.0; });
        CHECK(static_cast<double>(above) / static_cast<double>(n) == Approx(0.354).margin(0.015));
    }
    {
        // Bimodal with p = 0.25 of the long mode (median 4096) and a short mode of median 512:
        // with sigma 0.1 the modes do not overlap, so the share above 1500 is about 0.25.
        const auto v = draws("bimodal:short=512,long=4096,p=0.25,sigma=0.1");
        const auto longs = std::count_if(v.begin(), v.end(), [](double x) { return x > 1500.0; });
        CHECK(static_cast<double>(longs) / static_cast<double>(n) == Approx(0.25).margin(0.015));
    }
    // Each rank draws its own stream.
    bcl_sim::synthetic_source src(bcl_sim::parse_dist("lognormal"), 2, 1);
    int same = 0;
    for (std::uint64_t i = 0; i < 100; ++i)
        same += src.length(0, i) == src.length(1, i) ? 1 : 0;
    CHECK(same < 10);
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
    bcl_sim::splitmix rng(42);
    for (const double capacity : {50.0, 300.0, 5000.0}) {
        std::vector<double> items(500);
        for (double& x : items)
            x = static_cast<double>(1 + rng.below(200));
        auto bins = bcl_sim::mffd_pack(items, capacity);
        std::vector<int> seen(items.size(), 0);
        for (const auto& bin : bins) {
            double load = 0.0;
            for (const std::uint32_t i : bin) {
                ++seen[i];
                load += items[i];
            }
            CHECK((load <= capacity || bin.size() == 1));
        }
        CHECK(std::all_of(seen.begin(), seen.end(), [](int n) { return n == 1; }));
        const std::size_t before = bins.size();
        bcl_sim::round_bins_up(bins, 7);
        CHECK(bins.size() % 7 == 0);
        CHECK(bins.size() - before < 7);
        std::size_t total = 0;
        for (const auto& bin : bins) {
            CHECK(!bin.empty());
            total += bin.size();
        }
        CHECK(total == items.size());
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
    REQUIRE(a.policies.size() == bcl_sim::policy_table().size());
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
    // bcl's windows help on a heavy tail; the pooled oracle helps more.
    CHECK(find("tumbling").metrics.efficiency > none.metrics.efficiency);
    CHECK(find("oracle").metrics.efficiency >= find("tumbling").metrics.efficiency);
    CHECK(find("tumbling").extras.max_delay_batches < cfg.lookahead);

    cfg.seed = 4;
    const auto c = bcl_sim::simulate(cfg);
    CHECK(c.policies.front().step_max != none.step_max);
}

TEST_CASE("sim: the oracle is skipped above --oracle-max-ranks", "[sim]") {
    sim_config cfg;
    cfg.dist = bcl_sim::parse_dist("uniform:lo=1,hi=100");
    cfg.ranks = 4;
    cfg.steps = 8;
    cfg.oracle_max_ranks = 2;
    cfg.policies = {"oracle", "tumbling"};
    const auto res = bcl_sim::simulate(cfg);
    REQUIRE(res.skipped.size() == 1);
    CHECK(res.skipped[0].name == "oracle");
    CHECK_THAT(res.skipped[0].reason, Contains("--oracle-max-ranks"));
    REQUIRE(res.policies.size() == 1);
    CHECK(res.policies[0].name == "tumbling");
}

TEST_CASE("sim: specs parse with defaults and reject bad input", "[sim][input]") {
    const auto ln = std::get<bcl_sim::lognormal_spec>(bcl_sim::parse_dist("lognormal:mu=5"));
    CHECK(ln.mu == 5.0);
    CHECK(ln.sigma == 1.0);
    const auto f = std::get<bcl_sim::file_spec>(bcl_sim::parse_dist("file:a,b=c.txt"));
    CHECK(f.path == "a,b=c.txt");
    const auto cost = bcl_sim::parse_cost("affine");
    CHECK(cost.c == 1.0 / 24576.0);
    CHECK(bcl_sim::parse_cost("affine:c=0").c == 0.0);

    using bcl_sim::input_error;
    CHECK_THROWS_WITH(bcl_sim::parse_dist("weibull:k=2"),
                      Contains("unknown distribution 'weibull'"));
    CHECK_THROWS_WITH(bcl_sim::parse_dist("lognormal:mu=x"),
                      Contains("mu = 'x' is not a finite number"));
    CHECK_THROWS_WITH(bcl_sim::parse_dist("lognormal:nu=1"), Contains("unknown parameter 'nu'"));
    CHECK_THROWS_AS(bcl_sim::parse_dist("pareto:alpha=0"), input_error);
    CHECK_THROWS_AS(bcl_sim::parse_dist("uniform:lo=5,hi=4"), input_error);
    CHECK_THROWS_AS(bcl_sim::parse_dist("uniform:lo=0.5"), input_error);
    CHECK_THROWS_AS(bcl_sim::parse_dist("bimodal:p=2"), input_error);
    CHECK_THROWS_AS(bcl_sim::parse_dist("file:"), input_error);
    CHECK_THROWS_AS(bcl_sim::parse_dist("lognormal:mu"), input_error);
    CHECK_THROWS_WITH(bcl_sim::parse_cost("affine:a=-1"), Contains("must be >= 0"));
    CHECK_THROWS_WITH(bcl_sim::parse_cost("cubic"), Contains("unknown cost model"));

    sim_config cfg;
    cfg.ranks = 0;
    CHECK_THROWS_WITH(bcl_sim::validate(cfg), Contains("--ranks"));
    cfg.ranks = 2;
    cfg.policies = {"none", "sorted"};
    CHECK_THROWS_WITH(bcl_sim::validate(cfg), Contains("unknown policy 'sorted'"));
}

TEST_CASE("sim: workload files are checked line by line", "[sim][input]") {
    const auto good = write_temp("good.txt", "12\n 7 \n\n0\n3\n");
    CHECK(bcl_sim::load_lengths(good.string()) == std::vector<double>{12, 7, 0, 3});
    const auto fraction = write_temp("fraction.txt", "12\n3.5\n");
    CHECK_THROWS_WITH(bcl_sim::load_lengths(fraction.string()),
                      Contains(":2: length 3.5 is not a whole number"));
    const auto huge = write_temp("huge.txt", "1e23\n");
    CHECK_THROWS_WITH(bcl_sim::load_lengths(huge.string()), Contains(":1: length 1e23 is above 2^31"));

    CHECK_THROWS_WITH(bcl_sim::load_lengths("/nonexistent/bcl_sim_lengths.txt"),
                      Contains("cannot open"));
    const auto text = write_temp("text.txt", "12\n7\nseven\n");
    CHECK_THROWS_WITH(bcl_sim::load_lengths(text.string()),
                      Contains(":3: 'seven' is not a number"));
    const auto partial = write_temp("partial.txt", "12\n7x\n");
    CHECK_THROWS_WITH(bcl_sim::load_lengths(partial.string()), Contains(":2: '7x'"));
    const auto negative = write_temp("negative.txt", "12\n-4\n");
    CHECK_THROWS_WITH(bcl_sim::load_lengths(negative.string()), Contains(":2: negative length -4"));
    const auto inf = write_temp("inf.txt", "inf\n");
    CHECK_THROWS_AS(bcl_sim::load_lengths(inf.string()), bcl_sim::input_error);
    const auto empty = write_temp("empty.txt", "\n \n");
    CHECK_THROWS_WITH(bcl_sim::load_lengths(empty.string()), Contains("no lengths"));

    sim_config cfg;
    cfg.dist = bcl_sim::parse_dist(fmt::format("file:{}", negative.string()));
    CHECK_THROWS_AS(bcl_sim::simulate(cfg), bcl_sim::input_error);

    for (const auto& p : {good, text, partial, negative, inf, empty})
        std::filesystem::remove(p);
}

// ---------------------------------------------------------------------------------------------
// The outlier cap (--cap, --cap-action) and the memory budget (--memory-budget).
// ---------------------------------------------------------------------------------------------

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
    for (const char* policy : {"oracle", "mffd", "length_grouped"}) {
        hand_settings s = truncate;
        s.bin_tokens = 15.0;
        s.dataset = 16;
        s.epoch = 8;
        const auto run = run_by_hand(policy, two_ranks, 2, 2, 2, s);
        INFO(policy);
        CHECK(run.extras.capped == 2);
        double total = 0.0;
        for (const double t : run.tokens)
            total += t;
        CHECK(total == 8 + 8 + 1 + 1 + 5 + 5 + 6 + 6);
        CHECK(run.tokens == run.costs);
    }
    // The oracle pairs {8, 8, 6, 6, 5, 5, 1, 1} into 4 packs of 2: each 8 needs a 1 to stay at
    // or under 11, which leaves {6, 5} twice: heaviest 11.
    const auto oracle = run_by_hand("oracle", two_ranks, 2, 2, 2, truncate);
    CHECK(*std::max_element(oracle.costs.begin(), oracle.costs.end()) == 11.0);
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
        for (const double x : stream)
            uncapped += x;
    for (const double t : none.tokens)
        capped += t;
    CHECK(capped < uncapped);
    // The other baselines read the same capped stream (whole windows and megabatches here).
    for (const char* policy : {"oracle", "mffd", "length_grouped"}) {
        const auto run = run_by_hand(policy, streams, B, K, steps, s);
        INFO(policy);
        CHECK(run.extras.capped == none.extras.capped);
        double total = 0.0;
        for (const double t : run.tokens)
            total += t;
        CHECK(total == Approx(capped).epsilon(1e-12));
    }
    // Clip leaves the baselines' records alone; bcl still counts what it clipped, the same
    // records (the quantile sketch sees uncapped costs either way).
    s.cap.action = bcl::cap_action::clip;
    CHECK(run_by_hand("none", streams, B, K, steps, s).extras.capped == 0);
    CHECK(run_by_hand("tumbling", streams, B, K, steps, s).extras.capped == none.extras.capped);
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
