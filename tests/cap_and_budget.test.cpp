// The outlier cap (fixed or streaming quantile; clip or truncate) and the per-batch memory budget:
// neither ever drops a record or changes the batch count, the cap bounds what balancing sees, and
// no emitted batch exceeds the budget.

#include "support/contract_checks.hpp"
#include "support/distributions.hpp"

#include <bcl/balancer.hpp>
#include <bcl/detail/caps/quantile_sketch.hpp>
#include <bcl/error.hpp>
#include <bcl/options.hpp>
#include <bcl/partition/lower_bound.hpp>
#include <bcl/record_model.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <random>
#include <string>
#include <utility>
#include <vector>

using namespace bcl_test;

namespace {

// A record whose cost and memory are its length; truncation cuts it to the cap.
struct seq {
    std::uint64_t id = 0;
    double length = 0.0;
    double aux = 0.0; // a second, independent size, for tests where memory is not the length
};

double length_of(const seq& s) {
    return s.length;
}

auto cost_memory_truncate() {
    return bcl::with_truncation(bcl::with_memory(&length_of, &length_of),
                                [](seq& s, double cap) { s.length = std::min(s.length, cap); });
}

template <class Estimator>
struct seq_outcome {
    std::vector<std::vector<seq>> batches;
    bcl::statistics stats;
};

template <class Estimator>
seq_outcome<Estimator> run_seqs(const cost_list& lengths, Estimator e, const bcl::options& opt) {
    seq_outcome<Estimator> out;
    bcl::balancer<seq, Estimator> b{e, opt};
    const auto take = [&](std::span<seq> batch) {
        out.batches.emplace_back(batch.begin(), batch.end());
    };
    for (std::size_t i = 0; i < lengths.size(); ++i) {
        b.push(seq{i, lengths[i]});
        while (auto batch = b.pop()) take(*batch);
    }
    b.finish();
    while (auto batch = b.pop()) take(*batch);
    out.stats = b.stats();
    return out;
}

batch_ids ids_by_batch(const std::vector<std::vector<seq>>& batches) {
    batch_ids out;
    for (const auto& batch : batches) {
        auto& row = out.emplace_back();
        for (const seq& s : batch) row.push_back(s.id);
    }
    return out;
}

} // namespace

TEST_CASE("A fixed clip cap bounds the estimates balancing sees and leaves the records untouched",
          "[cap]") {
    for (const distribution& dist : all_distributions())
        for (std::uint64_t seed = 0; seed < 5; ++seed) {
            const cost_list lengths = dist.generate(700, case_seed(seed));
            const double cap = 500.0;
            bcl::options opt{.batch_size = 8, .lookahead = 4, .seed = seed};
            opt.cap = {.kind = bcl::cap_kind::fixed, .value = cap};
            const auto out = run_seqs(lengths, bcl::with_memory(&length_of, &length_of), opt);
            INFO(dist.name << " seed " << seed);
            REQUIRE(check_cardinality(ids_by_batch(out.batches), lengths.size(), 8, false).empty());
            REQUIRE(
                check_exactly_once(ids_by_batch(out.batches), lengths.size(), 8, false).empty());
            const auto over = static_cast<std::uint64_t>(
                std::count_if(lengths.begin(), lengths.end(), [&](double l) { return l > cap; }));
            REQUIRE(out.stats.records_capped == over);
            for (const auto& batch : out.batches)
                for (const seq& s : batch) REQUIRE(s.length == lengths[s.id]); // untouched
            // The batch costs the balancer reports are sums of clipped estimates.
            double clipped_total = 0;
            for (const double l : lengths) clipped_total += std::min(l, cap);
            const auto full = lengths.size() / 8 * 8;
            double full_batches_total = 0;
            for (std::size_t i = 0; i < out.batches.size(); ++i)
                if (out.batches[i].size() == 8)
                    for (const seq& s : out.batches[i])
                        full_batches_total += std::min(s.length, cap);
            REQUIRE(out.stats.batch_cost.mean() * static_cast<double>(full / 8) ==
                    Approx(full_batches_total).epsilon(1e-9).margin(1e-9));
            REQUIRE(full_batches_total <= clipped_total + 1e-9);
        }
}

TEST_CASE("A truncating cap shrinks exactly the records above it, then re-estimates them",
          "[cap]") {
    const cost_list lengths = pareto_costs(3000, 17);
    bcl::options opt{.batch_size = 16, .lookahead = 8};
    opt.cap = {.kind = bcl::cap_kind::fixed, .value = 800.0, .action = bcl::cap_action::truncate};
    const auto out = run_seqs(lengths, cost_memory_truncate(), opt);
    REQUIRE(check_exactly_once(ids_by_batch(out.batches), lengths.size(), 16, false).empty());
    std::uint64_t over = 0;
    for (const auto& batch : out.batches)
        for (const seq& s : batch) {
            REQUIRE(s.length <= 800.0);
            REQUIRE(s.length == std::min(lengths[s.id], 800.0));
            over += lengths[s.id] > 800.0 ? 1 : 0;
        }
    REQUIRE(over > 0);
    REQUIRE(out.stats.records_capped == over);
}

TEST_CASE("A quantile cap waits for its warm-up, then caps about 1 - q of the records", "[cap]") {
    for (const double q : {0.99, 0.95}) {
        const cost_list lengths = lognormal_costs(60000, 23);
        bcl::options opt{.batch_size = 16, .lookahead = 8};
        opt.cap = {
            .kind = bcl::cap_kind::quantile, .quantile = q, .action = bcl::cap_action::truncate};
        const auto out = run_seqs(lengths, cost_memory_truncate(), opt);
        const std::size_t warmup = bcl::cap_warmup(opt.cap);
        REQUIRE(warmup == static_cast<std::size_t>(std::ceil(10.0 / (1.0 - q) - 1e-9)));
        std::uint64_t capped = 0;
        for (const auto& batch : out.batches)
            for (const seq& s : batch) {
                if (s.id < warmup) REQUIRE(s.length == lengths[s.id]); // never capped in warm-up
                capped += s.length != lengths[s.id] ? 1 : 0;
            }
        REQUIRE(capped == out.stats.records_capped);
        const double fraction =
            static_cast<double>(capped) / static_cast<double>(lengths.size() - warmup);
        INFO("q " << q << ": capped fraction " << fraction);
        REQUIRE(fraction > 0.6 * (1.0 - q));
        REQUIRE(fraction < 1.5 * (1.0 - q));
    }
}

TEST_CASE("The quantile sketch is within 1% of the exact quantile", "[cap][sketch]") {
    std::mt19937_64 gen(5);
    for (const distribution& dist : all_distributions()) {
        const cost_list values = dist.generate(20000, gen());
        bcl::detail::quantile_sketch sketch;
        for (const double v : values) sketch.add(v);
        std::vector<double> sorted = values;
        std::sort(sorted.begin(), sorted.end());
        REQUIRE(sketch.count() == values.size());
        for (const double q : {0.0, 0.1, 0.5, 0.9, 0.99, 0.999, 1.0}) {
            const auto rank = static_cast<std::size_t>(q * static_cast<double>(values.size() - 1));
            const double exact = sorted[rank];
            INFO(dist.name << " q " << q << " exact " << exact << " sketch " << sketch.quantile(q));
            REQUIRE(std::abs(sketch.quantile(q) - exact) <= 0.01 * exact + 1e-12);
        }
    }
    REQUIRE(bcl::detail::quantile_sketch{}.quantile(0.5) == 0.0);
}

TEST_CASE("With a memory budget no emitted batch ever exceeds it, and the contract holds",
          "[budget][contract]") {
    // The budget is 1.25x the largest lower bound (bcl::detail::pack_lower_bound over the memory
    // values) of any tumbling window: no split can beat that bound, and 25% above it a split exists
    // in every case here. Under sliding the rounds are different sets of records, so a round may be
    // infeasible: then the balancer must say so with a bcl::error, never emit an oversized batch.
    std::size_t sliding_errors = 0;
    std::size_t sliding_runs = 0;
    for (const bool sliding : {false, true})
        for (const distribution& dist : all_distributions())
            for (std::uint64_t seed = 0; seed < 8; ++seed) {
                const cost_list lengths = dist.generate(1000 + 37 * seed, case_seed(seed + 100));
                double largest_bound = 0;
                for (std::size_t first = 0; first < lengths.size(); first += 32) {
                    const std::size_t last = std::min(first + 32, lengths.size());
                    const std::vector<double> window(
                        lengths.begin() + static_cast<std::ptrdiff_t>(first),
                        lengths.begin() + static_cast<std::ptrdiff_t>(last));
                    const std::size_t packs = (window.size() + 7) / 8;
                    largest_bound =
                        std::max(largest_bound, bcl::detail::pack_lower_bound(window, {packs, 8}));
                }
                bcl::options opt{.batch_size = 8, .lookahead = 4, .seed = seed};
                if (sliding) opt.policy = bcl::lookahead_policy::sliding;
                opt.memory_budget = std::max(1.25 * largest_bound, 1e-9);
                INFO(dist.name << " seed " << seed << (sliding ? " sliding" : " tumbling"));
                seq_outcome<decltype(bcl::with_memory(&length_of, &length_of))> out;
                try {
                    out = run_seqs(lengths, bcl::with_memory(&length_of, &length_of), opt);
                } catch (const bcl::error& e) {
                    REQUIRE(sliding);
                    REQUIRE_THAT(e.what(), Catch::Contains("memory_budget"));
                    ++sliding_errors;
                    continue;
                }
                sliding_runs += sliding ? 1 : 0;
                REQUIRE(
                    check_cardinality(ids_by_batch(out.batches), lengths.size(), 8, false).empty());
                REQUIRE(check_exactly_once(ids_by_batch(out.batches), lengths.size(), 8, false)
                            .empty());
                double peak = 0;
                for (const auto& batch : out.batches) {
                    double memory = 0;
                    for (const seq& s : batch) memory += s.length;
                    REQUIRE(memory <= opt.memory_budget * (1 + 1e-12));
                    peak = std::max(peak, memory);
                }
                REQUIRE(out.stats.peak_batch_memory == Approx(peak));
            }
    INFO(sliding_errors << " sliding runs stopped on an infeasible round, " << sliding_runs
                        << " completed");
    CHECK(sliding_runs > 0);
}

TEST_CASE("A tight memory budget is met by repartitioning where the cost balance alone would not",
          "[budget]") {
    // Costs and memory are independent (memory is `aux`), so balancing cost leaves memory to
    // chance and some batches over the budget.
    struct independent_memory {
        double operator()(const seq& s) const { return s.length; }
        double memory(const seq& s) const { return s.aux; }
    };
    const cost_list lengths = uniform_costs(16 * 8 * 20, 3);
    const cost_list memories = uniform_costs(lengths.size(), 4);
    const auto run_with = [&](const bcl::options& o) {
        std::vector<std::vector<seq>> batches;
        bcl::balancer<seq, independent_memory> b{independent_memory{}, o};
        const auto take = [&](std::span<seq> batch) {
            batches.emplace_back(batch.begin(), batch.end());
        };
        for (std::size_t i = 0; i < lengths.size(); ++i) {
            b.push(seq{i, lengths[i], memories[i]});
            while (auto batch = b.pop()) take(*batch);
        }
        b.finish();
        while (auto batch = b.pop()) take(*batch);
        return batches;
    };
    const auto peak_memory = [](const std::vector<std::vector<seq>>& batches) {
        double peak = 0;
        for (const auto& batch : batches) {
            double memory = 0;
            for (const seq& s : batch) memory += s.aux;
            peak = std::max(peak, memory);
        }
        return peak;
    };
    // The budget is 3% above the mean batch memory of the heaviest window, which no split of
    // that window can go below.
    bcl::options opt{.batch_size = 16, .lookahead = 8};
    double heaviest_window = 0;
    for (std::size_t first = 0; first < lengths.size(); first += 128) {
        double memory = 0;
        for (std::size_t i = first; i < first + 128; ++i) memory += memories[i];
        heaviest_window = std::max(heaviest_window, memory);
    }
    opt.memory_budget = heaviest_window / 8 * 1.03;
    bcl::options unconstrained = opt;
    unconstrained.memory_budget = 0;
    const double unconstrained_peak = peak_memory(run_with(unconstrained));
    REQUIRE(unconstrained_peak > opt.memory_budget); // the repair has work to do
    const auto batches = run_with(opt);
    REQUIRE(check_exactly_once(ids_by_batch(batches), lengths.size(), 16, false).empty());
    REQUIRE(peak_memory(batches) <= opt.memory_budget * (1 + 1e-12));
}

TEST_CASE("A record alone over the memory budget is an error naming it; the caller keeps it",
          "[budget][errors]") {
    bcl::options opt{.batch_size = 4, .lookahead = 2, .memory_budget = 100.0};
    bcl::balancer<seq, decltype(bcl::with_memory(&length_of, &length_of))> b{
        bcl::with_memory(&length_of, &length_of), opt};
    b.push(seq{0, 10});
    seq big{1, 250};
    REQUIRE_THROWS_WITH(b.push(std::move(big)), Catch::Contains("record 1") &&
                                                    Catch::Contains("250") &&
                                                    Catch::Contains("100"));
    REQUIRE(big.length == 250);
    b.finish();
    auto batch = b.pop();
    REQUIRE(batch);
    REQUIRE(batch->size() == 1);
    REQUIRE((*batch)[0].id == 0);
}

TEST_CASE("A round that cannot be split within the budget is an error, and its records are kept",
          "[budget][errors]") {
    // Four records of 60 in packs of 2 with a budget of 100: each record fits alone, no pair does.
    bcl::options opt{.batch_size = 2, .lookahead = 2, .memory_budget = 100.0};
    opt.policy = bcl::lookahead_policy::tumbling; // the round runs on the fourth record
    using estimator = decltype(bcl::with_memory(&length_of, &length_of));
    bcl::balancer<seq, estimator> b{bcl::with_memory(&length_of, &length_of), opt};
    for (std::uint64_t i = 0; i < 4; ++i) b.push(seq{i, 60});
    // 240 in 2 batches is 120 per batch on average: no split can fit, and the message says so.
    REQUIRE_THROWS_WITH(b.pop(), Catch::Contains("memory_budget") && Catch::Contains("120") &&
                                     Catch::Contains("no split can fit"));
    auto st = std::move(b).take_state();
    REQUIRE(st.pending.size() == 4);
}

TEST_CASE("A round whose average fits the budget but whose records cannot be split is an error "
          "that does not claim it is impossible on average",
          "[budget][errors]") {
    // 60, 60, 60, 5, 5, 5 into two batches of 3 within 100: 97.5 per batch on average, but one
    // batch must take two records of 60 and three of them make 125.
    bcl::options opt{.batch_size = 3, .lookahead = 2, .memory_budget = 100.0};
    opt.policy = bcl::lookahead_policy::tumbling;
    using estimator = decltype(bcl::with_memory(&length_of, &length_of));
    bcl::balancer<seq, estimator> b{bcl::with_memory(&length_of, &length_of), opt};
    for (std::uint64_t i = 0; i < 6; ++i) b.push(seq{i, i < 3 ? 60.0 : 5.0});
    REQUIRE_THROWS_WITH(b.pop(), Catch::Contains("could not be split") && Catch::Contains("97.5") &&
                                     !Catch::Contains("no split can fit"));
    REQUIRE(std::move(b).take_state().pending.size() == 6);
}

TEST_CASE("largest_first emits the first round's most memory-hungry batch first", "[budget]") {
    for (std::uint64_t seed = 0; seed < 20; ++seed) {
        const cost_list lengths = lognormal_costs(16 * 8 * 3, case_seed(seed));
        bcl::options opt{.batch_size = 16, .lookahead = 8, .seed = seed, .largest_first = true};
        const auto out = run_seqs(lengths, bcl::with_memory(&length_of, &length_of), opt);
        double first = 0;
        double largest = 0;
        for (std::size_t j = 0; j < 8; ++j) {
            double memory = 0;
            for (const seq& s : out.batches[j]) memory += s.length;
            if (j == 0) first = memory;
            largest = std::max(largest, memory);
        }
        REQUIRE(first == largest);
    }
}

TEST_CASE("Cap and budget options are checked against the estimator and their ranges",
          "[cap][errors]") {
    bcl::options opt{.batch_size = 4, .lookahead = 2};
    opt.cap = {.kind = bcl::cap_kind::fixed, .value = 10, .action = bcl::cap_action::truncate};
    REQUIRE_THROWS_WITH((bcl::balancer<seq, double (*)(const seq&)>{&length_of, opt}),
                        Catch::Contains("truncate"));
    opt.cap = {};
    opt.memory_budget = 10;
    REQUIRE_THROWS_WITH((bcl::balancer<seq, double (*)(const seq&)>{&length_of, opt}),
                        Catch::Contains("memory"));
    opt.memory_budget = -1;
    REQUIRE_THROWS_WITH(bcl::validate(opt), Catch::Contains("memory_budget"));
    opt.memory_budget = 0;
    opt.cap = {.kind = bcl::cap_kind::quantile, .quantile = 1.0};
    REQUIRE_THROWS_WITH(bcl::validate(opt), Catch::Contains("quantile"));
    opt.cap = {.kind = bcl::cap_kind::fixed, .value = 0};
    REQUIRE_THROWS_WITH(bcl::validate(opt), Catch::Contains("cap.value"));
}

TEST_CASE("Under a memory budget the gap to the lower bound compares a window's packs with their "
          "own bound, and every state restores",
          "[budget][resume]") {
    // Records cost between 1e-200 and 1e-190, and now and then 1e100: far above a mean batch, so
    // costliest-first emission shapes heavy batches around them, and the lower bound of the rest
    // of such a window is tiny. Memory is an independent size between 0.5 and 1.5 under a budget
    // of 5 per batch of 4: every round of these runs can be split within it, but not always by the
    // cost partition, so the budget moves records in some rounds (276 of these runs' rounds, 22 of
    // them shaped, in an instrumented build). Whatever moved, the heaviest pack a gap compares with
    // the bound is one of the packs the bound covers, so the gap is at most K - 1 (heaviest <=
    // total <= K * bound), and the statistics stay finite: a state saved at any point restores.
    auto cost_and_memory = bcl::with_memory(&length_of, [](const seq& s) { return s.aux; });
    using balancer_t = bcl::balancer<seq, decltype(cost_and_memory)>;
    std::size_t gaps = 0;
    for (const bool sliding : {false, true})
        for (std::uint64_t seed = 0; seed < 24; ++seed) {
            bcl::options opt{.batch_size = 4, .lookahead = 4, .seed = seed};
            if (sliding) opt.policy = bcl::lookahead_policy::sliding;
            opt.memory_budget = 5.0;
            INFO((sliding ? "sliding" : "tumbling") << " seed " << seed);
            std::mt19937_64 rng(case_seed(seed + 500));
            std::uniform_real_distribution<double> unit(0.0, 1.0);
            balancer_t b{cost_and_memory, opt};
            const auto restore_copy = [&] {
                balancer_t::state saved = b.save();
                const std::string bytes = saved.to_bytes();
                balancer_t{cost_and_memory, opt,
                           balancer_t::state::from_bytes(bytes, std::move(saved.pending))};
            };
            for (std::uint64_t i = 0; i < 600; ++i) {
                const double cost =
                    unit(rng) < 0.03 ? 1e100 : std::pow(10.0, -200 + 10 * unit(rng));
                b.push(seq{i, cost, 0.5 + unit(rng)});
                while (auto batch = b.pop()) (void)batch;
                if (i % 25 == 0) REQUIRE_NOTHROW(restore_copy());
            }
            b.finish();
            while (auto batch = b.pop()) (void)batch;
            const bcl::running_stats& gap = b.stats().gap_to_lower_bound;
            gaps += gap.count();
            CHECK(gap.max() <= static_cast<double>(opt.lookahead - 1) * (1 + 1e-9));
            REQUIRE_NOTHROW(restore_copy());
        }
    CHECK(gaps > 0);
}
