// bcl::stage_balancer (stage_balancer.hpp), as a specification: the rank-local balancer of records
// with D stage costs keeps bcl::balancer's contract under either policy (exactly B records a batch
// but the last, ceil(N/B) batches or floor with drop_last, every record once, within its delay
// bound, the same batches for the same input), splits each round as bcl::held_stage_planner plans
// it as one micro-step of K ranks, never above the round's plan of the summed cost and near the
// best split on small windows, levels each stage on a vision-language mix (sliding toward each
// stage's long-run mean better than tumbling), refuses bad costs and the options it does not apply
// by name, and saves a state that continues exactly and that is checked when restored; whatever
// throws leaves the balancer as it was.

#include "support/case_count.hpp"
#include "support/distributions.hpp"

#include <bcl/error.hpp>
#include <bcl/stage_balancer.hpp>
#include <bcl/stage_plan.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

namespace {

using Catch::Matchers::Contains;

template <std::size_t D>
struct staged_row {
    std::uint64_t id = 0;
    std::array<double, D> cost{};
};

template <std::size_t D>
struct staged_row_cost {
    std::array<double, D> operator()(const staged_row<D>& r) const { return r.cost; }
};

template <std::size_t D>
using stage_balancer_of = bcl::stage_balancer<staged_row<D>, staged_row_cost<D>>;

using stage_batch_ids = std::vector<std::vector<std::uint64_t>>;

bcl::options tumbling_options(std::size_t b, std::size_t k, bool drop_last = false,
                              std::uint64_t seed = 0) {
    return {.batch_size = b,
            .lookahead = k,
            .drop_last = drop_last,
            .seed = seed,
            .policy = bcl::lookahead_policy::tumbling};
}

bcl::options sliding_options(std::size_t b, std::size_t k, bool drop_last = false,
                             std::uint64_t seed = 0) {
    bcl::options opt = tumbling_options(b, k, drop_last, seed);
    opt.policy = bcl::lookahead_policy::sliding;
    return opt;
}

const char* policy_name(bcl::lookahead_policy p) {
    return p == bcl::lookahead_policy::sliding ? "sliding" : "tumbling";
}

// n records of D stages, each stage's costs from one of the test distributions (the adversarial
// ones among them: all equal, zeros, one giant outlier, huge finite values, sorted).
template <std::size_t D>
std::vector<staged_row<D>> stage_rows_of(std::size_t n, std::uint64_t seed) {
    std::vector<staged_row<D>> out(n);
    for (std::size_t s = 0; s < D; ++s) {
        const std::vector<double> column = bcl_test::costs_of_seed(n, seed * 7 + s);
        for (std::size_t i = 0; i < n; ++i) {
            out[i].id = i;
            out[i].cost[s] = column[i];
        }
    }
    return out;
}

// A vision-language mix: 30% text only, 55% one image, 15% several; the encoder's cost in its
// patches, the language model's in the text and the image tokens.
std::vector<staged_row<2>> vision_language_rows(std::size_t n, std::uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::lognormal_distribution<double> text(6.0, 0.9), one(std::log(1000.0), 0.8),
        many(std::log(4000.0), 0.9);
    std::uniform_real_distribution<double> kind(0.0, 1.0);
    std::vector<staged_row<2>> out(n);
    for (std::size_t i = 0; i < n; ++i) {
        const double u = kind(rng);
        const double p = u < 0.3 ? 0.0 : u < 0.85 ? one(rng) : many(rng);
        const double t = text(rng) + p / 4.0;
        out[i] = {i, {0.09 * (p + p * p / 8192.0), t + t * t / 24576.0}};
    }
    return out;
}

template <std::size_t D>
std::vector<std::uint64_t> stage_ids_of(std::span<staged_row<D>> batch) {
    std::vector<std::uint64_t> ids;
    for (const auto& r : batch) ids.push_back(r.id);
    return ids;
}

// Pushes every record, popping what is ready after each push (or only when the balancer cannot
// take more, `lazily`), then finishes and drains.
template <std::size_t D>
stage_batch_ids run_stage_balancer(stage_balancer_of<D>& b, const std::vector<staged_row<D>>& input,
                                   bool lazily = false) {
    stage_batch_ids out;
    for (const auto& r : input) {
        if (lazily && !b.can_push())
            while (auto batch = b.pop()) out.push_back(stage_ids_of<D>(*batch));
        b.push(r);
        if (!lazily)
            while (auto batch = b.pop()) out.push_back(stage_ids_of<D>(*batch));
    }
    b.finish();
    while (auto batch = b.pop()) out.push_back(stage_ids_of<D>(*batch));
    return out;
}

// The sum over stages of each batch's cost, of a set of batches (each a list of ids).
template <std::size_t D>
std::array<double, D> batch_stage_sums(const std::vector<std::uint64_t>& ids,
                                       const std::vector<staged_row<D>>& input) {
    std::array<double, D> sum{};
    for (const std::uint64_t id : ids)
        for (std::size_t s = 0; s < D; ++s) sum[s] += input[id].cost[s];
    return sum;
}

// The sum over stages of the dearest batch in that stage: what a window's split is judged by.
template <std::size_t D>
double split_objective(const stage_batch_ids& batches, const std::vector<staged_row<D>>& input) {
    std::array<double, D> dearest{};
    for (const auto& batch : batches) {
        const auto sums = batch_stage_sums<D>(batch, input);
        for (std::size_t s = 0; s < D; ++s) dearest[s] = std::max(dearest[s], sums[s]);
    }
    double total = 0.0;
    for (const double x : dearest) total += x;
    return total;
}

// Calls visit(pack_of) for every way to put n items into `packs` packs of exactly `size` each
// (labelled packs: each split is seen packs! times, which a minimum does not mind).
template <class Visit>
void for_each_even_split(std::size_t n, std::size_t packs, std::size_t size, Visit&& visit) {
    std::vector<std::size_t> pack_of(n, 0);
    std::vector<std::size_t> fill(packs, 0);
    const auto place = [&](const auto& self, std::size_t i) -> void {
        if (i == n) {
            visit(pack_of);
            return;
        }
        for (std::size_t p = 0; p < packs; ++p)
            if (fill[p] < size) {
                ++fill[p];
                pack_of[i] = p;
                self(self, i + 1);
                --fill[p];
            }
    };
    place(place, 0);
}

// Tumbling: record i leaves within its own window's K batches; sliding: at most
// max_delay_bound(options) batches after batch i / B.
template <std::size_t D>
std::string check_stage_contract(const stage_batch_ids& batches, std::size_t n,
                                 const bcl::options& opt) {
    const std::size_t b = opt.batch_size;
    const std::size_t k = opt.lookahead;
    const bool drop_last = opt.drop_last;
    const bool tumbling_rounds = opt.policy == bcl::lookahead_policy::tumbling;
    const std::size_t bound = bcl::max_delay_bound(opt);
    const std::size_t count = drop_last ? n / b : (n + b - 1) / b;
    if (batches.size() != count)
        return std::to_string(batches.size()) + " batches, not " + std::to_string(count);
    const std::size_t kept = drop_last ? n - n % b : n;
    std::vector<int> seen(kept, 0);
    for (std::size_t j = 0; j < batches.size(); ++j) {
        const bool short_last = j + 1 == count && n % b != 0 && !drop_last;
        if (batches[j].size() != (short_last ? n % b : b))
            return "batch " + std::to_string(j) + " has " + std::to_string(batches[j].size()) +
                   " records";
        for (const std::uint64_t id : batches[j]) {
            if (id >= kept || seen[id]++ > 0)
                return "record " + std::to_string(id) + " came out twice or should not have";
            const std::size_t window = id / (k * b);
            const bool late =
                tumbling_rounds ? j < window * k || j >= window * k + k : j > id / b + bound;
            if (late)
                return "record " + std::to_string(id) + " left in batch " + std::to_string(j) +
                       ", beyond its delay bound";
        }
    }
    for (std::size_t id = 0; id < kept; ++id)
        if (seen[id] == 0) return "record " + std::to_string(id) + " never came out";
    return {};
}

template <std::size_t D>
void check_stage_contract_over_seeds(bcl::lookahead_policy policy) {
    const std::pair<std::size_t, std::size_t> shapes[] = {{1, 1}, {1, 5}, {4, 1},
                                                          {3, 2}, {4, 8}, {16, 8}};
    std::uint64_t seed = 0;
    for (const auto& [b, k] : shapes)
        for (std::size_t c = 0; c < bcl_test::random_cases(24); ++c) {
            ++seed;
            std::mt19937_64 gen(bcl_test::case_seed(seed));
            const std::size_t edges[] = {0, 1, b - 1, b, b + 1, k * b - 1, k * b, k * b + 1};
            const std::size_t n =
                c < std::size(edges)
                    ? edges[c]
                    : static_cast<std::size_t>(bcl_test::uniform_integer(gen, 0, 40 * k * b));
            const bool drop_last = c % 2 == 1;
            const bool lazily = c % 3 == 0;
            const auto input = stage_rows_of<D>(n, seed);
            bcl::options opt = tumbling_options(b, k, drop_last, seed);
            opt.policy = policy;
            if (c % 4 == 2) opt.emission = bcl::emission_order::shuffled;
            if (c % 5 == 3) opt.largest_first = true;
            if (c % 6 == 4) { // a larger buffer, more slack
                opt.buffer_windows = 3;
                opt.max_age = 4;
            }
            INFO("D=" << D << " " << policy_name(policy) << " B=" << b << " K=" << k << " N=" << n
                      << " seed=" << seed << " drop_last=" << drop_last << " lazily=" << lazily);
            stage_balancer_of<D> balancer(staged_row_cost<D>{}, opt);
            const stage_batch_ids batches = run_stage_balancer<D>(balancer, input, lazily);
            REQUIRE(check_stage_contract<D>(batches, n, opt).empty());
            CHECK(balancer.stats().records_out + balancer.stats().records_dropped == n);
            CHECK(balancer.buffered() == 0);
            stage_balancer_of<D> again(staged_row_cost<D>{}, opt);
            // The same batches; under tumbling however it is driven (under sliding, a round run
            // before finish() aims at the long-run means, one run after it at what is held).
            const bool either_way = policy == bcl::lookahead_policy::tumbling;
            CHECK(run_stage_balancer<D>(again, input, either_way ? !lazily : lazily) == batches);
        }
}

} // namespace

TEST_CASE("Every batch has B records but the last, ceil(N/B) of them (floor with drop_last), "
          "every record once within its delay bound, the same batches for the same calls (under "
          "tumbling however it is driven), under either policy",
          "[stage_balancer]") {
    for (const auto policy : {bcl::lookahead_policy::tumbling, bcl::lookahead_policy::sliding}) {
        check_stage_contract_over_seeds<1>(policy);
        check_stage_contract_over_seeds<2>(policy);
        check_stage_contract_over_seeds<3>(policy);
    }
}

TEST_CASE("Each window is held_stage_planner's plan of it as one micro-step of K ranks; its "
          "batches leave costliest first by their summed cost, the short batch last",
          "[stage_balancer]") {
    constexpr std::size_t b = 4;
    constexpr std::size_t k = 5;
    for (std::uint64_t seed = 1; seed <= bcl_test::random_cases(30); ++seed) {
        const std::size_t n = 3 * k * b + 7; // three whole windows and a final round of 7
        const auto input = stage_rows_of<2>(n, seed);
        stage_balancer_of<2> balancer(staged_row_cost<2>{}, tumbling_options(b, k));
        const stage_batch_ids batches = run_stage_balancer<2>(balancer, input);
        INFO("seed " << seed);
        for (std::size_t w = 0; w * k * b < n; ++w) {
            const std::size_t first = w * k * b;
            const std::size_t size = std::min(k * b, n - first);
            const std::size_t packs = size / b;
            std::vector<double> costs;
            for (std::size_t i = first; i < first + packs * b; ++i)
                costs.insert(costs.end(), input[i].cost.begin(), input[i].cost.end());
            std::vector<bcl::plan_slot> slots(packs * b);
            bcl::held_stage_planner planner;
            planner.plan(costs, 2, packs, b, bcl::plan_options{}, slots);
            // The planned batches as sets of ids, by rank; the rest the short batch.
            stage_batch_ids planned(packs);
            for (std::size_t i = 0; i < slots.size(); ++i)
                planned[slots[i].rank].push_back(first + i);
            stage_batch_ids emitted(batches.begin() + static_cast<std::ptrdiff_t>(w * k),
                                    batches.begin() + static_cast<std::ptrdiff_t>(w * k) +
                                        static_cast<std::ptrdiff_t>((size + b - 1) / b));
            for (std::size_t j = 0; j + 1 < emitted.size(); ++j) {
                const auto a = batch_stage_sums<2>(emitted[j], input);
                const auto c = batch_stage_sums<2>(emitted[j + 1], input);
                if (emitted[j + 1].size() == b) CHECK(a[0] + a[1] >= c[0] + c[1]);
            }
            if (size % b != 0) {
                std::vector<std::uint64_t> rest;
                for (std::size_t i = first + packs * b; i < first + size; ++i) rest.push_back(i);
                CHECK(emitted.back() == rest); // the newest N mod B, last
                emitted.pop_back();
            }
            for (auto& batch : emitted) std::sort(batch.begin(), batch.end());
            std::sort(emitted.begin(), emitted.end());
            std::sort(planned.begin(), planned.end());
            CHECK(emitted == planned);
        }
    }
}

TEST_CASE("A window's sum over stages of its dearest batch is never above that of the one-cost "
          "plan of its summed costs, never below the bound, and near the best split of small "
          "windows",
          "[stage_balancer]") {
    // Small windows against every split (support/brute_force.hpp enumerates them): K packs of B.
    const std::pair<std::size_t, std::size_t> shapes[] = {{2, 3}, {3, 2}, {2, 4}};
    double worst = 1.0;
    double mean = 0.0;
    std::size_t cases = 0;
    std::size_t optimal = 0;
    for (const auto& [b, k] : shapes)
        for (std::uint64_t seed = 1; seed <= bcl_test::random_cases(60); ++seed) {
            const auto input = stage_rows_of<2>(k * b, seed + 1000 * b);
            stage_balancer_of<2> balancer(staged_row_cost<2>{}, tumbling_options(b, k));
            const double got = split_objective<2>(run_stage_balancer<2>(balancer, input), input);
            double best = std::numeric_limits<double>::infinity();
            for_each_even_split(k * b, k, b, [&](const std::vector<std::size_t>& pack_of) {
                stage_batch_ids split(k);
                for (std::size_t i = 0; i < pack_of.size(); ++i) split[pack_of[i]].push_back(i);
                best = std::min(best, split_objective<2>(split, input));
            });
            // The one-cost plan of the summed costs (bcl::held_batch_planner), judged by stage.
            std::vector<double> summed;
            for (const auto& r : input) summed.push_back(r.cost[0] + r.cost[1]);
            std::vector<bcl::plan_slot> slots(k * b);
            bcl::held_batch_planner().plan(summed, k, b, bcl::plan_options{}, slots);
            stage_batch_ids summed_split(k);
            for (std::size_t i = 0; i < slots.size(); ++i) summed_split[slots[i].rank].push_back(i);
            // The planner compares the stage table's integers: a unit of 2^-27 of the dearest
            // cost, half a unit a record off at most.
            double dearest = 0.0;
            for (const auto& r : input) dearest = std::max({dearest, r.cost[0], r.cost[1]});
            const double rounding = static_cast<double>(2 * b) * std::ldexp(dearest, -27);
            INFO("B=" << b << " K=" << k << " seed " << seed);
            CHECK(got >= best * (1 - 1e-12));
            CHECK(got <= split_objective<2>(summed_split, input) + rounding);
            const double ratio = got > 0 ? best / got : 1.0;
            worst = std::min(worst, ratio);
            mean += ratio;
            ++cases;
            if (ratio > 1 - 1e-9) ++optimal;
        }
    mean /= static_cast<double>(cases);
    INFO("best / found: mean " << mean << ", worst " << worst << ", optimal in " << optimal
                               << " of " << cases);
    CHECK(mean >= 0.995);
    CHECK(worst >= 0.95);
    CHECK(optimal * 5 >= cases * 4);
}

TEST_CASE("On a vision-language mix every stage's batches vary less than in the stream's order "
          "(under the sliding policy less than under tumbling), and a window's stages sit nearer "
          "their bound than "
          "the one-cost plan of the summed cost puts them",
          "[stage_balancer]") {
    constexpr std::size_t b = 16;
    constexpr std::size_t k = 8;
    constexpr std::size_t windows = 200;
    const auto input = vision_language_rows(windows * k * b, 7);
    // The stream's order, B at a time.
    std::array<bcl::running_stats, 2> unbalanced;
    for (std::size_t j = 0; j * b < input.size(); ++j) {
        std::vector<std::uint64_t> ids;
        for (std::size_t i = j * b; i < (j + 1) * b; ++i) ids.push_back(i);
        const auto sums = batch_stage_sums<2>(ids, input);
        for (std::size_t s = 0; s < 2; ++s) unbalanced[s].add(sums[s]);
    }
    std::array<double, 2> tumbling_cv{};
    for (const auto policy : {bcl::lookahead_policy::tumbling, bcl::lookahead_policy::sliding}) {
        bcl::options opt = tumbling_options(b, k);
        opt.policy = policy;
        stage_balancer_of<2> balancer(staged_row_cost<2>{}, opt);
        const stage_batch_ids batches = run_stage_balancer<2>(balancer, input);
        const auto& stats = balancer.stats();
        // Sliding aims each stage at its long-run mean, which tumbling windows cannot.
        // The encoder's batches are mostly as dear as their dearest video, which no split can
        // spread; the language model's levels.
        const std::array<double, 2> share = {0.9, 0.6};
        for (std::size_t s = 0; s < 2; ++s) {
            INFO(policy_name(policy)
                 << ", stage " << s << ": cv " << stats.stage_batch_cost[s].cv() << " against "
                 << unbalanced[s].cv() << " in the stream's order");
            CHECK(stats.stage_batch_cost[s].count() == batches.size());
            CHECK(stats.stage_batch_cost[s].cv() < share[s] * unbalanced[s].cv());
            if (policy == bcl::lookahead_policy::sliding) // it aims at the long-run mean
                CHECK(stats.stage_batch_cost[s].cv() <= tumbling_cv[s]);
            tumbling_cv[s] = stats.stage_batch_cost[s].cv();
        }
        if (policy == bcl::lookahead_policy::sliding) continue;
        // Window by window, against the plan of the summed cost.
        double stages_sum = 0.0;
        double summed_sum = 0.0;
        for (std::size_t w = 0; w < windows; ++w) {
            const stage_batch_ids window(batches.begin() + static_cast<std::ptrdiff_t>(w * k),
                                         batches.begin() +
                                             static_cast<std::ptrdiff_t>((w + 1) * k));
            stages_sum += split_objective<2>(window, input);
            std::vector<double> summed;
            for (std::size_t i = w * k * b; i < (w + 1) * k * b; ++i)
                summed.push_back(input[i].cost[0] + input[i].cost[1]);
            std::vector<bcl::plan_slot> slots(k * b);
            bcl::held_batch_planner().plan(summed, k, b, bcl::plan_options{}, slots);
            stage_batch_ids split(k);
            for (std::size_t i = 0; i < slots.size(); ++i)
                split[slots[i].rank].push_back(w * k * b + i);
            summed_sum += split_objective<2>(split, input);
        }
        INFO("sum over windows of the stage objective: " << stages_sum << " against " << summed_sum
                                                         << " planned on the summed cost");
        CHECK(stages_sum < 0.95 * summed_sum);
        CHECK(stats.window_efficiency.count() == windows);
    }
}

TEST_CASE("A cost that is NaN, negative, infinite or above max_estimate in any stage is an error "
          "naming the record and the stage; the balancer and the record are as they were",
          "[stage_balancer]") {
    const double bad[] = {std::nan(""), -1.0, std::numeric_limits<double>::infinity(),
                          bcl::max_estimate * 2};
    for (const double value : bad)
        for (std::size_t stage = 0; stage < 3; ++stage) {
            stage_balancer_of<3> balancer(staged_row_cost<3>{}, tumbling_options(2, 3));
            const auto input = stage_rows_of<3>(9, 5);
            for (std::size_t i = 0; i < 7; ++i) balancer.push(input[i]);
            const auto before = balancer.save();
            staged_row<3> r{99, {1.0, 2.0, 3.0}};
            r.cost[stage] = value;
            INFO("stage " << stage << " value " << value);
            REQUIRE_THROWS_WITH(balancer.push(staged_row<3>(r)),
                                Contains("record 7 has stage " + std::to_string(stage)));
            const auto after = balancer.save();
            CHECK(after.records_in == before.records_in);
            CHECK(after.buffered.size() == before.buffered.size());
            CHECK(after.sizes == before.sizes);
            // It goes on as if the bad record had never been offered.
            balancer.push(input[7]);
            balancer.push(input[8]);
            stage_balancer_of<3> clean(staged_row_cost<3>{}, tumbling_options(2, 3));
            stage_batch_ids from_clean = run_stage_balancer<3>(clean, input);
            stage_batch_ids from_balancer;
            while (auto batch = balancer.pop()) from_balancer.push_back(stage_ids_of<3>(*batch));
            balancer.finish();
            while (auto batch = balancer.pop()) from_balancer.push_back(stage_ids_of<3>(*batch));
            CHECK(from_balancer == from_clean);
        }
}

TEST_CASE("An estimator that throws leaves the balancer as it was and the record the caller's",
          "[stage_balancer]") {
    struct picky {
        std::array<double, 2> operator()(const staged_row<2>& r) const {
            if (r.id == 5) throw std::runtime_error("cannot price record 5");
            return r.cost;
        }
    };
    bcl::stage_balancer<staged_row<2>, picky> balancer(picky{}, tumbling_options(2, 2));
    const auto input = stage_rows_of<2>(8, 3);
    for (std::size_t i = 0; i < 5; ++i) balancer.push(input[i]);
    staged_row<2> kept = input[5];
    CHECK_THROWS_WITH(balancer.push(std::move(kept)), "cannot price record 5");
    CHECK(kept.id == 5); // not moved from
    CHECK(balancer.stats().records_in == 5);
    CHECK(balancer.buffered() == 5);
}

TEST_CASE("The options a stage balancer does not apply are refused by name, as are the ones "
          "bcl::validate refuses, and a stage's mean that is not a cost",
          "[stage_balancer]") {
    const auto refused = [](bcl::options opt, const std::string& what) {
        INFO(what);
        CHECK_THROWS_WITH((stage_balancer_of<2>(staged_row_cost<2>{}, opt)), Contains(what));
    };
    bcl::options capped = sliding_options(4, 2);
    capped.cap = {.kind = bcl::cap_kind::fixed, .value = 10.0};
    refused(capped, "options::cap must be none");
    bcl::options budget = sliding_options(4, 2);
    budget.memory_budget = 100.0;
    refused(budget, "options::memory_budget must be 0");
    bcl::options padded = tumbling_options(4, 2);
    padded.batching = bcl::batch_cost::padded;
    refused(padded, "options::batching must be packed");
    bcl::options one_mean = sliding_options(4, 2);
    one_mean.mean_cost = 3.0;
    refused(one_mean, "options::mean_cost must be 0");
    refused(tumbling_options(0, 2), "batch_size must be at least 1");
    refused(tumbling_options(4, 0), "lookahead must be at least 1");
    bcl::options no_slack = sliding_options(4, 2);
    no_slack.max_age = 0;
    refused(no_slack, "max_age must be at least buffer_windows - 1");
    CHECK_THROWS_WITH((stage_balancer_of<2>(staged_row_cost<2>{}, sliding_options(4, 2),
                                            stage_balancer_of<2>::stage_costs{1.0, std::nan("")})),
                      Contains("stage 1's mean is nan"));
    stage_balancer_of<2> drained(staged_row_cost<2>{}, sliding_options(4, 2),
                                 stage_balancer_of<2>::stage_costs{1.0, 2.0});
    CHECK(drained.stage_means() == std::array<double, 2>{1.0, 2.0});
    CHECK_THROWS_WITH(drained.next_epoch({-1.0, 2.0}), Contains("stage 0's mean is -1"));
    CHECK(drained.stage_means() == std::array<double, 2>{1.0, 2.0});
    drained.next_epoch({3.0, 4.0});
    CHECK(drained.stage_means() == std::array<double, 2>{3.0, 4.0});
}

TEST_CASE("Pushing after finish, or into a full buffer while batches wait, and a next epoch "
          "mid-epoch are errors that change nothing; a drained balancer starts the next epoch",
          "[stage_balancer]") {
    stage_balancer_of<2> balancer(staged_row_cost<2>{}, tumbling_options(2, 2));
    const auto input = stage_rows_of<2>(13, 4);
    for (std::size_t i = 0; i < 5; ++i) balancer.push(input[i]); // a round ran at the fifth
    CHECK(balancer.can_push());
    for (std::size_t i = 5; i < 8; ++i) balancer.push(input[i]); // the buffer full again
    CHECK_FALSE(balancer.can_push());
    CHECK_THROWS_WITH(balancer.push(input[8]),
                      Contains("bcl::stage_balancer::push: the buffer is full (4 records) and 2 "
                               "batches are still waiting"));
    CHECK_THROWS_WITH(balancer.next_epoch(),
                      Contains("bcl::stage_balancer::next_epoch: the epoch is under way"));
    CHECK(balancer.buffered() == 8);
    CHECK(balancer.stats().records_in == 8);
    REQUIRE(balancer.pop());
    REQUIRE(balancer.pop()); // the first round handed out; the full buffer's round not yet run
    CHECK(balancer.can_push());
    balancer.finish();
    CHECK_THROWS_WITH(balancer.push(input[8]), Contains("called after finish() (record 8)"));
    std::size_t drained = 0;
    while (auto batch = balancer.pop()) drained += batch->size();
    CHECK(drained == 4);
    balancer.next_epoch();
    CHECK(balancer.stats().records_in == 0);
    CHECK_FALSE(balancer.finished());
    CHECK(run_stage_balancer<2>(balancer, input).size() == 7);
}

TEST_CASE("A saved state continues exactly where the balancer was, from any point, copied or "
          "moved out",
          "[stage_balancer]") {
    for (std::uint64_t seed = 1; seed <= bcl_test::random_cases(40); ++seed) {
        std::mt19937_64 gen(bcl_test::case_seed(seed));
        const std::size_t b = 1 + bcl_test::uniform_integer(gen, 0, 4);
        const std::size_t k = 1 + bcl_test::uniform_integer(gen, 0, 4);
        const std::size_t n = bcl_test::uniform_integer(gen, 0, 6 * k * b);
        const bool drop_last = seed % 2 == 0;
        bcl::options opt = tumbling_options(b, k, drop_last, seed);
        if (seed % 3 == 0) opt.emission = bcl::emission_order::shuffled;
        if (seed % 4 < 2) opt.policy = bcl::lookahead_policy::sliding;
        const auto input = stage_rows_of<2>(n, seed);
        stage_balancer_of<2> whole(staged_row_cost<2>{}, opt);
        const stage_batch_ids expected = run_stage_balancer<2>(whole, input);
        // Cut at every step of the same run: after each push and after each pop.
        for (std::size_t cut = 0; cut <= 2 * n + 2; ++cut) {
            INFO("seed " << seed << " B=" << b << " K=" << k << " N=" << n << " cut " << cut << " "
                         << policy_name(opt.policy));
            stage_balancer_of<2> first(staged_row_cost<2>{}, opt);
            stage_batch_ids got;
            std::size_t step = 0;
            std::size_t pushed = 0;
            bool finished = false;
            const auto advance = [&](stage_balancer_of<2>& bal) { // one push, or one pop, or finish
                if (pushed < n && bal.can_push()) {
                    bal.push(input[pushed++]);
                } else if (auto batch = bal.pop()) {
                    got.push_back(stage_ids_of<2>(*batch));
                } else if (!finished) {
                    bal.finish();
                    finished = true;
                } else {
                    return false;
                }
                return true;
            };
            while (step < cut && advance(first)) ++step;
            auto saved = cut % 2 == 0 ? first.save() : std::move(first).take_state();
            stage_balancer_of<2> second(staged_row_cost<2>{}, opt, std::move(saved));
            while (advance(second)) {
            }
            REQUIRE(got == expected);
        }
    }
}

TEST_CASE("A state that contradicts itself, its options or its estimator is refused naming what "
          "is wrong",
          "[stage_balancer]") {
    const bcl::options opt = tumbling_options(3, 2);
    stage_balancer_of<2> balancer(staged_row_cost<2>{}, opt);
    const auto input = stage_rows_of<2>(9, 8);
    for (std::size_t i = 0; i < 8; ++i) balancer.push(input[i]);
    (void)balancer.pop(); // one batch of the first round handed out, one waits, 2 buffered
    const auto good = balancer.save();
    REQUIRE(good.sizes.size() == 1);
    REQUIRE(good.buffered.size() == 2);
    CHECK_NOTHROW(stage_balancer_of<2>(staged_row_cost<2>{}, opt, good));

    const auto refused = [&](auto mutate, const std::string& what) {
        auto bad = good;
        mutate(bad);
        INFO(what);
        CHECK_THROWS_WITH((stage_balancer_of<2>(staged_row_cost<2>{}, opt, bad)), Contains(what));
    };
    refused([](auto& s) { s.records_in += 1; }, "records in");
    refused([](auto& s) { s.records_out += 3; }, "records in");
    refused([](auto& s) { s.batches += 1; }, "batches handed out");
    refused([](auto& s) { s.windows += 1; }, "rounds for");
    refused([](auto& s) { s.records_dropped = 1; }, "dropped records");
    refused([](auto& s) { s.sizes[0] = 2; }, "waiting batch of 2 records");
    refused([](auto& s) { s.sizes.push_back(3); }, "waiting records");
    refused([](auto& s) { s.waiting.pop_back(); }, "waiting records");
    refused(
        [&](auto& s) {
            s.buffered.insert(s.buffered.end(), input.begin(), input.begin() + 5);
            for (std::uint64_t a = 8; a < 13; ++a) s.arrivals.push_back(a);
            s.records_in += 5;
        },
        "buffered records, more than the buffer's 6");
    refused([](auto& s) { s.arrivals.pop_back(); }, "1 arrivals for 2 buffered records");
    refused([](auto& s) { s.arrivals[1] = 5; }, "buffered record 1 of arrival 5");
    refused([](auto& s) { s.stream_records = 3; }, "records over the stream");
    refused([](auto& s) { s.stream_sums[1] = std::numeric_limits<double>::infinity(); },
            "stage 1's sum over the stream inf");
    refused([](auto& s) { s.means = std::array<double, 2>{1.0, -1.0}; }, "stage 1's mean is -1");
    refused([](auto& s) { s.buffered[1].cost[1] = -2.0; },
            "buffered record 7 has stage 1 cost estimate -2");
    refused([](auto& s) { s.waiting[0].cost[0] = std::nan(""); },
            "waiting batch 0 has a record whose stage 0");
    refused([](auto& s) { s.settings.lookahead = 3; }, "saved with options::lookahead = 3, not 2");
    refused([](auto& s) { s.records_in = std::uint64_t{1} << 63; }, "more than any stream");
}

TEST_CASE("A sliding state whose buffered record is past its deadline is refused",
          "[stage_balancer]") {
    const bcl::options opt =
        sliding_options(2, 2); // a buffer of 8, a record leaves by round first + 2
    stage_balancer_of<2> balancer(staged_row_cost<2>{}, opt);
    const auto input = stage_rows_of<2>(40, 9);
    for (std::size_t i = 0; i < 30; ++i) {
        balancer.push(input[i]);
        while (balancer.pop()) {
        }
    }
    auto saved = balancer.save();
    REQUIRE(saved.windows >= 5);
    CHECK_NOTHROW(stage_balancer_of<2>(staged_row_cost<2>{}, opt, saved));
    saved.arrivals[0] = 0; // first in the buffer at round 0: due by round 2
    CHECK_THROWS_WITH((stage_balancer_of<2>(staged_row_cost<2>{}, opt, saved)),
                      Contains("buffered record 0 of arrival 0, out of order or past its "
                               "deadline"));
}
