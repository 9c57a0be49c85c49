// The six points of the contract (README), each a property checked on every cost distribution,
// sizes around B and K*B plus random ones, several (B, K) including B = 1 and K = 1, and a seed per
// case; through the push/pop core and through the bcl::balance adaptor. A third way of driving
// the core (pop only when can_push() is false, so that push() partitions) is shown to give the
// very same batches, so every property holds for it too. Expectations come from (N, B, K,
// drop_last) alone, never from what the code returned.

#include "support/contract_checks.hpp"
#include "support/distributions.hpp"
#include "support/error_message.hpp"

#include <bcl/balance.hpp>
#include <bcl/balancer.hpp>
#include <bcl/detail/random.hpp>
#include <bcl/error.hpp>
#include <bcl/options.hpp>

#include <catch2/catch.hpp>
#include <fmt/core.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <set>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

using namespace bcl_test;
using Catch::Matchers::Contains;

namespace {

/// A move-only record, so "the record is still in the caller's hands" is observable: the token is
/// non-null exactly while this object owns the record.
struct owned_rec {
    std::uint64_t id = 0;
    double cost = 0.0;
    std::unique_ptr<std::uint64_t> token;
};

owned_rec make_owned(std::uint64_t id, double cost) {
    return {id, cost, std::make_unique<std::uint64_t>(id)};
}

struct owned_cost {
    double operator()(const owned_rec& r) const noexcept { return r.cost; }
};

/// Ids held by a batch of owned records, read through the token (so a moved-from record, which
/// must never be handed out, would crash the test rather than pass it).
void collect(std::span<owned_rec> batch, std::vector<std::uint64_t>& out) {
    for (const owned_rec& r : batch) out.push_back(*r.token);
}

/// "" if `ids` is exactly {0, ..., n-1}, otherwise what is wrong.
std::string check_ids_are_0_to(std::vector<std::uint64_t> ids, std::size_t n) {
    std::sort(ids.begin(), ids.end());
    for (std::size_t i = 1; i < ids.size(); ++i)
        if (ids[i] == ids[i - 1]) return fmt::format("record {} came out twice", ids[i]);
    if (ids.size() != n) return fmt::format("{} records came out, expected {}", ids.size(), n);
    for (std::size_t i = 0; i < n; ++i)
        if (ids[i] != i) return fmt::format("record {} never came out", i);
    return {};
}

/// True if `text` names record `position`: "record" followed by that whole number, as in
/// "record 17 has cost nan" (and not "record 170"). A bare number would not do: a message also
/// says things like ">= 0".
bool names_record(const std::string& text, std::uint64_t position) {
    const std::string word = "record ";
    for (std::size_t at = text.find(word); at != std::string::npos; at = text.find(word, at + 1)) {
        std::size_t end = at + word.size();
        while (end < text.size() && text[end] >= '0' && text[end] <= '9') ++end;
        const std::string digits = text.substr(at + word.size(), end - at - word.size());
        if (!digits.empty() && digits == std::to_string(position)) return true;
    }
    return false;
}

struct bad_value {
    const char* name;
    double value;
};

const bad_value bad_cost_values[] = {
    {"NaN", std::numeric_limits<double>::quiet_NaN()},
    {"+infinity", std::numeric_limits<double>::infinity()},
    {"-infinity", -std::numeric_limits<double>::infinity()},
    {"a negative cost", -2.5},
};

/// The message names the value: "nan", "inf", "-inf" or "-2.5" (fmt's shortest round-trip form,
/// the usual spelling), and +infinity is not reported as -inf.
bool names_value(const std::string& message, double value) {
    const std::string text = fmt::format("{}", value);
    if (message.find(text) == std::string::npos) return false;
    if (text == "inf" && message.find("-inf") != std::string::npos) return false;
    return true;
}

/// Positions at which a bad record is pushed: first record, inside the first batch, the batch
/// edges, the last record of the first window, the first record of the next one (the full window
/// must be partitioned first), mid second window, and later.
std::vector<std::size_t> bad_positions(std::size_t b, std::size_t k) {
    const std::size_t w = k * b;
    std::set<std::size_t> at{0, 1, b - 1, b, w - 1, w, w + b / 2 + 1, 2 * w + 1, 3 * w - 1};
    return {at.begin(), at.end()};
}

constexpr std::pair<std::size_t, std::size_t> error_shapes[] = {
    {1, 1}, {3, 1}, {1, 4}, {4, 3}, {8, 8}};

} // namespace

// ---------------------------------------------------------------------------------------------
// 1. Cardinality
// ---------------------------------------------------------------------------------------------

TEST_CASE("Every batch holds exactly batch_size records except the last, which holds N mod B",
          "[contract][cardinality]") {
    const driver d = GENERATE(driver::eager, driver::range); // lazy: see the agreement test
    INFO(name_of(d));
    for (const scenario& sc : contract_scenarios(false)) {
        INFO(sc.describe());
        const run_result r = run(d, sc.costs(), sc.options());
        CHECK(check_cardinality(r.batches, sc.n, sc.b, false) == "");
    }
}

TEST_CASE("With drop_last there is no short batch, there are floor(N/B) batches, and the records "
          "dropped are the last N mod B pushed",
          "[contract][cardinality]") {
    const driver d = GENERATE(driver::eager, driver::range); // lazy: see the agreement test
    INFO(name_of(d));
    for (const scenario& sc : contract_scenarios(true)) {
        INFO(sc.describe());
        const run_result r = run(d, sc.costs(), sc.options());
        CHECK(check_cardinality(r.batches, sc.n, sc.b, true) == "");
        // Exactly ids 0 .. N - (N mod B) - 1 come out: the dropped ones are the last arrivals.
        CHECK(check_exactly_once(r.batches, sc.n, sc.b, true) == "");
        CHECK(r.stats.records_dropped == sc.n % sc.b);
    }
}

// ---------------------------------------------------------------------------------------------
// 2. Same batch count on every rank
// ---------------------------------------------------------------------------------------------

TEST_CASE("The number of batches is ceil(N/B), or floor(N/B) with drop_last, whatever the costs",
          "[contract][count]") {
    const driver d = GENERATE(driver::eager, driver::range); // lazy: see the agreement test
    INFO(name_of(d));
    std::uint64_t counter = 0;
    for (const auto& [b, k] : contract_shapes)
        for (const std::size_t n : contract_sizes(b, k, case_seed(++counter)))
            for (const bool drop_last : {false, true}) {
                // Same N, every distribution (so every rank's costs differ): one batch count.
                std::set<std::size_t> counts;
                for (const distribution& dist : all_distributions()) {
                    const scenario sc{b, k, &dist, n, case_seed(++counter), drop_last};
                    counts.insert(run(d, sc.costs(), sc.options()).batches.size());
                }
                INFO(fmt::format("B={} K={} N={} drop_last={}", b, k, n, drop_last));
                const std::size_t expected = drop_last ? n / b : (n + b - 1) / b;
                CHECK(counts == std::set<std::size_t>{expected});
            }
}

// ---------------------------------------------------------------------------------------------
// 3. Exactly once
// ---------------------------------------------------------------------------------------------

TEST_CASE("Every record comes out exactly once", "[contract][exactly-once]") {
    const driver d = GENERATE(driver::eager, driver::range); // lazy: see the agreement test
    INFO(name_of(d));
    for (const scenario& sc : contract_scenarios(false)) {
        INFO(sc.describe());
        const run_result r = run(d, sc.costs(), sc.options());
        CHECK(check_exactly_once(r.batches, sc.n, sc.b, false) == "");
        CHECK(r.stats.records_in == sc.n);
        CHECK(r.stats.records_out == sc.n);
        CHECK(r.stats.records_dropped == 0);
    }
}

// ---------------------------------------------------------------------------------------------
// 4. Bounded delay
// ---------------------------------------------------------------------------------------------

TEST_CASE("A record leaves in one of the K batches of its own window, so at most K-1 batches late",
          "[contract][delay]") {
    const driver d = GENERATE(driver::eager, driver::range); // lazy: see the agreement test
    const bool drop_last = GENERATE(false, true);
    INFO(name_of(d));
    for (const scenario& sc : contract_scenarios(drop_last)) {
        INFO(sc.describe());
        const run_result r = run(d, sc.costs(), sc.options());
        CHECK(check_own_window(r.batches, sc.b, sc.k) == "");
        CHECK(r.stats.max_delay_batches <= sc.k - 1);
    }
}

// ---------------------------------------------------------------------------------------------
// 5. Determinism
// ---------------------------------------------------------------------------------------------

TEST_CASE("The same input, options and seed give the same batches", "[contract][determinism]") {
    const driver d = GENERATE(driver::eager, driver::range); // lazy: see the agreement test
    INFO(name_of(d));
    const auto scenarios = contract_scenarios(false);
    for (std::size_t i = 0; i < scenarios.size(); i += 3) {
        const scenario& sc = scenarios[i];
        INFO(sc.describe());
        const cost_list costs = sc.costs();
        CHECK((run(d, costs, sc.options()).batches == run(d, costs, sc.options()).batches));
    }
}

TEST_CASE("The batches do not depend on how they are pulled: bcl::balance, and bcl::balancer "
          "popped eagerly or lazily, agree",
          "[contract][determinism]") {
    const bool drop_last = GENERATE(false, true);
    const auto scenarios = contract_scenarios(drop_last);
    for (const scenario& sc : scenarios) {
        INFO(sc.describe());
        const cost_list costs = sc.costs();
        const batch_ids eager = run(driver::eager, costs, sc.options()).batches;
        CHECK((run(driver::lazy, costs, sc.options()).batches == eager));
        CHECK((run(driver::range, costs, sc.options()).batches == eager));
    }
}

TEST_CASE("A different seed still keeps the whole contract", "[contract][determinism]") {
    const driver d = GENERATE(driver::eager, driver::range);
    INFO(name_of(d));
    const auto scenarios = contract_scenarios(false);
    for (std::size_t i = 0; i < scenarios.size(); i += 5) {
        const scenario& sc = scenarios[i];
        const cost_list costs = sc.costs();
        for (const std::uint64_t seed :
             {std::uint64_t{1}, std::uint64_t{0xffffffffffffffff}, case_seed(i)}) {
            bcl::options opt = sc.options();
            opt.seed = seed;
            INFO(sc.describe() << " with options.seed=" << seed);
            const run_result r = run(d, costs, opt);
            CHECK(check_cardinality(r.batches, sc.n, sc.b, false) == "");
            CHECK(check_exactly_once(r.batches, sc.n, sc.b, false) == "");
            CHECK(check_own_window(r.batches, sc.b, sc.k) == "");
        }
    }
}

TEST_CASE("The seed only reorders whole batches within a window; costliest first the order does "
          "not depend on it",
          "[contract][determinism]") {
    // Windows of K=8 batches of B=4, ten of them and a short tail.
    const std::size_t b = 4;
    const std::size_t k = 8;
    const std::size_t n = 10 * k * b + 6;
    const auto as_sets = [&](const batch_ids& batches) {
        // Window index -> the set of batches (each batch as a sorted id list) emitted for it.
        std::vector<std::set<std::vector<std::uint64_t>>> windows((batches.size() + k - 1) / k);
        for (std::size_t j = 0; j < batches.size(); ++j) {
            std::vector<std::uint64_t> ids = batches[j];
            std::sort(ids.begin(), ids.end());
            windows[j / k].insert(ids);
        }
        return windows;
    };
    for (const distribution& dist : all_distributions()) {
        INFO(dist.name);
        const cost_list costs = dist.generate(n, 7);
        SECTION("shuffled: same batches per window, in a seed-dependent order") {
            const batch_ids one = run(driver::eager, costs,
                                      {.batch_size = b,
                                       .lookahead = k,
                                       .seed = 1,
                                       .emission = bcl::emission_order::shuffled})
                                      .batches;
            const batch_ids two = run(driver::eager, costs,
                                      {.batch_size = b,
                                       .lookahead = k,
                                       .seed = 2,
                                       .emission = bcl::emission_order::shuffled})
                                      .batches;
            CHECK((as_sets(one) == as_sets(two)));
            // Eleven windows, each shuffled over 8! orders: equal sequences would mean the seed
            // is ignored.
            CHECK((one != two));
        }
        SECTION("costliest first: the seed is irrelevant") {
            const batch_ids one =
                run(driver::eager, costs, {.batch_size = b, .lookahead = k, .seed = 1}).batches;
            const batch_ids two =
                run(driver::eager, costs, {.batch_size = b, .lookahead = k, .seed = 2}).batches;
            CHECK((one == two));
        }
    }
}

TEST_CASE("The generator behind the seed reproduces the published SplitMix64 sequence, so a seed "
          "means the same on every platform",
          "[contract][determinism]") {
    // Reference values of SplitMix64 (Steele, Lea and Flood; Vigna's splitmix64.c) from state 0.
    bcl::detail::splitmix64 gen{0};
    CHECK(gen.next() == 0xe220a8397b1dcdafULL);
    CHECK(gen.next() == 0x6e789e6aa1b965f4ULL);
    CHECK(gen.next() == 0x06c45d188009454fULL);

    SECTION("below(n) stays below n") {
        bcl::detail::splitmix64 g{42};
        for (std::uint64_t bound : {1ULL, 2ULL, 3ULL, 7ULL, 1000ULL, (1ULL << 63) + 5})
            for (int i = 0; i < 200; ++i) REQUIRE(g.below(bound) < bound);
    }
    SECTION("shuffle() permutes") {
        bcl::detail::splitmix64 g{9};
        std::vector<int> v(50);
        for (int i = 0; i < 50; ++i) v[static_cast<std::size_t>(i)] = i;
        bcl::detail::shuffle(v.data(), v.size(), g);
        std::vector<int> sorted = v;
        std::sort(sorted.begin(), sorted.end());
        for (int i = 0; i < 50; ++i) CHECK(sorted[static_cast<std::size_t>(i)] == i);
    }
}

// ---------------------------------------------------------------------------------------------
// 6. Bad input is an error, not a wrong batch
// ---------------------------------------------------------------------------------------------

TEST_CASE("A NaN, infinite or negative cost pushed into bcl::balancer is a bcl::error naming the "
          "record position and value, and loses nothing",
          "[contract][errors]") {
    const bool keep_going = GENERATE(false, true);
    INFO((keep_going ? "pushing more records after the error" : "finishing after the error"));
    for (const auto& [b, k] : error_shapes)
        for (const std::size_t pos : bad_positions(b, k))
            for (const bad_value& bad : bad_cost_values) {
                INFO(fmt::format("B={} K={}: {} at record {}", b, k, bad.name, pos));
                const cost_list costs = lognormal_costs(pos + 2 * k * b + 3, pos);
                bcl::balancer<owned_rec, owned_cost> bal{owned_cost{},
                                                         {.batch_size = b, .lookahead = k}};
                std::vector<std::uint64_t> out;
                for (std::size_t i = 0; i < pos; ++i) {
                    bal.push(make_owned(i, costs[i]));
                    while (auto batch = bal.pop()) collect(*batch, out);
                }
                owned_rec rejected = make_owned(pos, bad.value);
                const std::string message =
                    bcl_error_message([&] { bal.push(std::move(rejected)); });
                INFO("message: " << message);
                CHECK(names_record(message, pos));
                CHECK(names_value(message, bad.value));

                // The failed record is still the caller's; everything before it is buffered.
                REQUIRE(rejected.token != nullptr);
                CHECK(*rejected.token == pos);
                CHECK(bal.stats().records_in == pos);
                CHECK(bal.buffered() == pos - out.size());

                std::size_t good = pos;
                if (keep_going) {
                    for (std::size_t i = pos + 1; i < costs.size(); ++i) {
                        // Ids stay 0..good-1 so the check below is simple.
                        bal.push(make_owned(good++, costs[i]));
                        while (auto batch = bal.pop()) collect(*batch, out);
                    }
                }
                bal.finish();
                while (auto batch = bal.pop()) collect(*batch, out);
                CHECK(check_ids_are_0_to(out, good) == "");
                CHECK(bal.stats().batches == (good + b - 1) / b);
                CHECK(bal.buffered() == 0);
            }
}

TEST_CASE("A NaN, infinite or negative cost met by bcl::balance is a bcl::error naming the record "
          "position and value; the record stays in the source and the rest can be drained",
          "[contract][errors]") {
    for (const auto& [b, k] : error_shapes)
        for (const std::size_t pos : bad_positions(b, k))
            for (const bad_value& bad : bad_cost_values) {
                INFO(fmt::format("B={} K={}: {} at record {}", b, k, bad.name, pos));
                const cost_list costs = pareto_costs(pos + k * b + 3, pos);
                std::vector<owned_rec> source;
                for (std::size_t i = 0; i < costs.size(); ++i)
                    source.push_back(make_owned(i, i == pos ? bad.value : costs[i]));

                auto view = bcl::balance(source, owned_cost{}, {.batch_size = b, .lookahead = k});
                std::vector<std::uint64_t> out;
                const std::string message = bcl_error_message([&] {
                    for (auto&& batch : view) collect(batch, out);
                });
                INFO("message: " << message);
                CHECK(names_record(message, pos));
                CHECK(names_value(message, bad.value));

                // Records before pos were moved out of the source, pos and later were not.
                for (std::size_t i = 0; i < source.size(); ++i) {
                    INFO("source[" << i << "]");
                    CHECK((source[i].token != nullptr) == (i >= pos));
                }
                CHECK(view.balancer().stats().records_in == pos);

                view.balancer().finish();
                while (auto batch = view.balancer().pop()) collect(*batch, out);
                CHECK(check_ids_are_0_to(out, pos) == "");
            }
}

TEST_CASE(
    "A batch_size or lookahead of 0, or a window too large, is a bcl::error naming the option",
    "[contract][errors]") {
    const bool via_range = GENERATE(false, true);
    INFO((via_range ? "bcl::balance" : "bcl::balancer"));
    const auto make = [via_range](bcl::options opt) {
        return bcl_error_message([&] {
            if (via_range) {
                auto view = bcl::balance(std::vector<rec>(3), cost_of{}, opt);
                static_cast<void>(view);
            } else {
                bcl::balancer<rec, cost_of> b{cost_of{}, opt};
            }
        });
    };
    SECTION("batch_size 0") {
        CHECK_THAT(make({.batch_size = 0, .lookahead = 8}), Contains("batch_size"));
        CHECK_THAT(make({.batch_size = 0, .lookahead = 0}), Contains("batch_size"));
    }
    SECTION("lookahead 0") {
        CHECK_THAT(make({.batch_size = 4, .lookahead = 0}), Contains("lookahead"));
    }
    SECTION("a window of more than bcl::max_window_records records") {
        CHECK_THAT(make({.batch_size = bcl::max_window_records, .lookahead = 2}),
                   Contains("batch_size") && Contains("lookahead"));
        CHECK_THAT(make({.batch_size = 2, .lookahead = bcl::max_window_records}),
                   Contains("batch_size") && Contains("lookahead"));
    }
}

TEST_CASE("push() after finish() is a bcl::error and the record stays with the caller",
          "[contract][errors]") {
    bcl::balancer<owned_rec, owned_cost> bal{owned_cost{}, {.batch_size = 2, .lookahead = 2}};
    bal.push(make_owned(0, 1.0));
    bal.finish();
    CHECK_FALSE(bal.can_push());
    owned_rec late = make_owned(1, 1.0);
    CHECK_THROWS_AS(bal.push(std::move(late)), bcl::error);
    REQUIRE(late.token != nullptr);
    CHECK(*late.token == 1);
    // The record pushed before finish() still comes out, alone, and nothing else.
    std::vector<std::uint64_t> out;
    while (auto batch = bal.pop()) collect(*batch, out);
    CHECK(out == std::vector<std::uint64_t>{0});
}

TEST_CASE("push() into a full window while batches are waiting is a bcl::error that can_push() "
          "predicts, and nothing is lost",
          "[contract][errors]") {
    const std::size_t b = 4;
    const std::size_t k = 2;
    // Tumbling: the buffer is one window (sliding's is buffer_windows windows, same rule).
    bcl::balancer<owned_rec, owned_cost> bal{
        owned_cost{}, {.batch_size = b, .lookahead = k, .policy = bcl::lookahead_policy::tumbling}};
    std::uint64_t next = 0;
    // One full window: can_push() is still true, because no batch is waiting yet.
    for (; next < k * b; ++next) {
        REQUIRE(bal.can_push());
        bal.push(make_owned(next, 1.0 + static_cast<double>(next)));
    }
    // The next push partitions that window (K batches now wait), then fills the next window.
    for (; next < 2 * k * b; ++next) {
        REQUIRE(bal.can_push());
        bal.push(make_owned(next, 1.0 + static_cast<double>(next)));
    }
    CHECK_FALSE(bal.can_push());
    owned_rec refused = make_owned(next, 1.0);
    CHECK_THROWS_AS(bal.push(std::move(refused)), bcl::error);
    REQUIRE(refused.token != nullptr);
    CHECK(bal.buffered() == 2 * k * b);

    // Popping the waiting batches makes room again.
    std::vector<std::uint64_t> out;
    for (std::size_t j = 0; j < k; ++j) {
        auto batch = bal.pop();
        REQUIRE(batch);
        collect(*batch, out);
    }
    CHECK(bal.can_push());
    bal.push(std::move(refused));
    ++next;
    bal.finish();
    while (auto batch = bal.pop()) collect(*batch, out);
    CHECK(check_ids_are_0_to(out, next) == "");
}

TEST_CASE("Every error bcl throws is a bcl::error, itself a std::runtime_error",
          "[contract][errors]") {
    STATIC_REQUIRE(std::is_base_of_v<std::runtime_error, bcl::error>);

    const auto throws_runtime_error = [](auto&& f) {
        try {
            f();
        } catch (const bcl::error& e) {
            const std::runtime_error& base = e; // caught as both
            return std::string(base.what()).size() > 0;
        } catch (...) {
            return false;
        }
        return false;
    };
    using balancer = bcl::balancer<rec, cost_of>;
    CHECK(throws_runtime_error([] { balancer b{cost_of{}, {.batch_size = 0}}; }));
    CHECK(throws_runtime_error([] { balancer b{cost_of{}, {.batch_size = 1, .lookahead = 0}}; }));
    CHECK(throws_runtime_error([] {
        balancer b{cost_of{}, {.batch_size = 1}};
        b.push(rec{0, -1.0});
    }));
    CHECK(throws_runtime_error([] {
        balancer b{cost_of{}, {.batch_size = 1}};
        b.finish();
        b.push(rec{0, 1.0});
    }));
    CHECK(throws_runtime_error([] {
        balancer b{cost_of{},
                   {.batch_size = 1, .lookahead = 1, .policy = bcl::lookahead_policy::tumbling}};
        b.push(rec{0, 1.0});
        b.push(rec{1, 1.0}); // partitions record 0: one batch waits
        b.push(rec{2, 1.0}); // the window (record 1) is full and a batch waits
    }));
    // And they are catchable as std::runtime_error without naming bcl::error.
    CHECK_THROWS_AS(balancer(cost_of{}, {.batch_size = 0}), std::runtime_error);
}
