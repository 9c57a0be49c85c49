// What bcl asks of a record and promises about it: move-only records work, a record pushed as an
// rvalue is never copied and moved a bounded number of times (once in, once out), and nothing is
// lost when the estimator or the upstream range throws halfway through a window.

#include "support/distributions.hpp"

#include <bcl/balance.hpp>
#include <bcl/balancer.hpp>
#include <bcl/error.hpp>
#include <bcl/options.hpp>

#include <catch2/catch.hpp>
#include <fmt/core.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <ranges>
#include <span>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

using namespace bcl_test;

namespace {

// --- move-only records ------------------------------------------------------------------------

struct move_only {
    std::uint64_t id = 0;
    double cost = 0.0;
    std::unique_ptr<std::uint64_t> payload; // holds id; null once moved from
};

static_assert(!std::is_copy_constructible_v<move_only>);

move_only make_move_only(std::uint64_t id, double cost) {
    return {id, cost, std::make_unique<std::uint64_t>(id)};
}

struct move_only_cost {
    double operator()(const move_only& r) const noexcept { return r.cost; }
};

/// Moves every record out of the batch (what a trainer keeping them would do) and returns ids.
void take(std::span<move_only> batch, std::vector<std::uint64_t>& out,
          std::vector<move_only>* keep = nullptr) {
    for (move_only& r : batch) {
        out.push_back(*r.payload);
        if (keep) keep->push_back(std::move(r));
    }
}

std::vector<std::uint64_t> iota_ids(std::size_t n) {
    std::vector<std::uint64_t> ids(n);
    for (std::size_t i = 0; i < n; ++i) ids[i] = i;
    return ids;
}

std::vector<std::uint64_t> sorted(std::vector<std::uint64_t> v) {
    std::sort(v.begin(), v.end());
    return v;
}

// --- records that count how they are copied and moved -----------------------------------------

struct counters {
    std::size_t copies = 0;
    std::size_t moves = 0;
};
counters g_counts; // this file's tests are single-threaded

/// Counts copies and moves globally, and carries how many times this particular value has been
/// moved (or copied) since it was made, so a per-record bound can be checked.
struct counted {
    std::uint64_t id = 0;
    double cost = 0.0;
    int hops = 0;

    counted(std::uint64_t i, double c) : id(i), cost(c) {}
    counted(const counted& o) : id(o.id), cost(o.cost), hops(o.hops + 1) { ++g_counts.copies; }
    counted(counted&& o) noexcept : id(o.id), cost(o.cost), hops(o.hops + 1) { ++g_counts.moves; }
    counted& operator=(const counted& o) {
        id = o.id;
        cost = o.cost;
        hops = o.hops + 1;
        ++g_counts.copies;
        return *this;
    }
    counted& operator=(counted&& o) noexcept {
        id = o.id;
        cost = o.cost;
        hops = o.hops + 1;
        ++g_counts.moves;
        return *this;
    }
    ~counted() = default;
};

struct counted_cost {
    double operator()(const counted& r) const noexcept { return r.cost; }
};

// --- user code that throws --------------------------------------------------------------------

/// Deliberately unrelated to bcl::error and std::exception: if bcl wrapped or translated it, a
/// catch of this exact type would not see it.
struct estimator_failure {
    std::uint64_t id;
};
struct upstream_failure {
    std::uint64_t id;
};

constexpr std::uint64_t failing_id = 36; // the 37th record

/// Throws estimator_failure on the 37th record. Record ids are arrival indices, so this depends
/// on the record alone, as an estimator should.
struct throwing_cost {
    double operator()(const move_only& r) const {
        if (r.id == failing_id) throw estimator_failure{r.id};
        return r.cost;
    }
};

} // namespace

// ---------------------------------------------------------------------------------------------

TEST_CASE("Move-only records go through bcl::balancer, each exactly once", "[records]") {
    const std::size_t n = 1000;
    const cost_list costs = pareto_costs(n, 11);
    bcl::balancer<move_only, move_only_cost> bal{move_only_cost{},
                                                 {.batch_size = 8, .lookahead = 4}};
    std::vector<std::uint64_t> out;
    std::vector<move_only> kept;
    for (std::size_t i = 0; i < n; ++i) {
        bal.push(make_move_only(i, costs[i]));
        while (auto batch = bal.pop()) take(*batch, out, &kept);
    }
    bal.finish();
    while (auto batch = bal.pop()) take(*batch, out, &kept);
    CHECK(sorted(out) == iota_ids(n));
    // The records the trainer kept are whole: each still owns its payload.
    for (const move_only& r : kept) REQUIRE((r.payload && *r.payload == r.id));
}

TEST_CASE("Move-only records go through bcl::balance, from an owned vector or a view that makes "
          "them",
          "[records]") {
    const std::size_t n = 777;
    const cost_list costs = lognormal_costs(n, 5);
    const bcl::options opt{.batch_size = 5, .lookahead = 6};
    std::vector<std::uint64_t> out;

    SECTION("an owned vector, moved in") {
        std::vector<move_only> source;
        for (std::size_t i = 0; i < n; ++i) source.push_back(make_move_only(i, costs[i]));
        for (auto&& batch : bcl::balance(std::move(source), move_only_cost{}, opt))
            take(batch, out);
    }
    SECTION("an lvalue vector, its records moved out in place") {
        std::vector<move_only> source;
        for (std::size_t i = 0; i < n; ++i) source.push_back(make_move_only(i, costs[i]));
        for (auto&& batch : bcl::balance(source, move_only_cost{}, opt)) take(batch, out);
        for (const move_only& r : source) CHECK(r.payload == nullptr);
    }
    SECTION("a transform view producing prvalues") {
        auto made = std::views::iota(std::uint64_t{0}, std::uint64_t{n}) |
                    std::views::transform([&costs](std::uint64_t i) {
                        return make_move_only(i, costs[static_cast<std::size_t>(i)]);
                    });
        for (auto&& batch : bcl::balance(std::move(made), move_only_cost{}, opt)) take(batch, out);
    }
    CHECK(sorted(out) == iota_ids(n));
}

TEST_CASE("A record pushed as an rvalue is never copied; it is moved once in, once out, and under "
          "the sliding policy once per round it waits (at most max_age)",
          "[records]") {
    const std::size_t n = 500;
    const cost_list costs = lognormal_costs(n, 3);
    const auto policy = GENERATE(bcl::lookahead_policy::tumbling, bcl::lookahead_policy::sliding);
    const bcl::options opt{.batch_size = 4, .lookahead = 8, .policy = policy};
    const int max_hops =
        policy == bcl::lookahead_policy::sliding ? 2 + static_cast<int>(opt.max_age) : 2;
    const auto max_moves = static_cast<std::size_t>(max_hops) * n;
    INFO((policy == bcl::lookahead_policy::sliding ? "sliding" : "tumbling"));
    std::vector<std::uint64_t> out;
    int most_hops = 0;
    const auto look = [&](std::span<counted> batch) {
        for (const counted& r : batch) {
            out.push_back(r.id);
            most_hops = std::max(most_hops, r.hops);
        }
    };

    SECTION("bcl::balancer::push(Record&&)") {
        bcl::balancer<counted, counted_cost> bal{counted_cost{}, opt};
        g_counts = {};
        for (std::size_t i = 0; i < n; ++i) {
            bal.push(counted{i, costs[i]}); // hops 0 when made
            while (auto batch = bal.pop()) look(*batch);
        }
        bal.finish();
        while (auto batch = bal.pop()) look(*batch);
        CHECK(g_counts.copies == 0);
        CHECK(g_counts.moves <= max_moves);
    }
    SECTION("bcl::balance over a vector moved in") {
        std::vector<counted> source;
        source.reserve(n); // no reallocation: every record starts at hops 0
        for (std::size_t i = 0; i < n; ++i) source.emplace_back(i, costs[i]);
        g_counts = {};
        for (auto&& batch : bcl::balance(std::move(source), counted_cost{}, opt)) look(batch);
        CHECK(g_counts.copies == 0);
        CHECK(g_counts.moves <= max_moves);
    }
    SECTION("bcl::balance over a view making prvalues") {
        g_counts = {};
        auto made = std::views::iota(std::uint64_t{0}, std::uint64_t{n}) |
                    std::views::transform([&costs](std::uint64_t i) {
                        return counted{i, costs[static_cast<std::size_t>(i)]};
                    });
        for (auto&& batch : bcl::balance(std::move(made), counted_cost{}, opt)) look(batch);
        CHECK(g_counts.copies == 0);
        CHECK(g_counts.moves <= max_moves);
    }
    CHECK(most_hops <= max_hops);
    CHECK(sorted(out) == iota_ids(n));
}

TEST_CASE("A record pushed as an lvalue is copied exactly once and the caller keeps the original",
          "[records]") {
    const std::size_t n = 100;
    bcl::balancer<counted, counted_cost> bal{counted_cost{}, {.batch_size = 3, .lookahead = 4}};
    std::vector<counted> mine;
    mine.reserve(n);
    for (std::size_t i = 0; i < n; ++i) mine.emplace_back(i, static_cast<double>(i % 7));
    g_counts = {};
    std::vector<std::uint64_t> out;
    for (const counted& r : mine) {
        bal.push(r);
        while (auto batch = bal.pop())
            for (const counted& x : *batch) out.push_back(x.id);
    }
    bal.finish();
    while (auto batch = bal.pop())
        for (const counted& x : *batch) out.push_back(x.id);
    CHECK(g_counts.copies == n);
    CHECK(sorted(out) == iota_ids(n));
    for (std::size_t i = 0; i < n; ++i) CHECK(mine[i].id == i);
}

TEST_CASE("An exception from the estimator propagates unchanged, the record stays with the caller, "
          "and everything pushed before it can still be drained",
          "[records][errors]") {
    const std::size_t n = 100;
    const cost_list costs = lognormal_costs(n, 8);
    // B=4, K=4: record 36 is the 5th of the third window (32..47), so one window has been
    // partitioned and handed out before it and four records sit in the current window.
    const bcl::options opt{.batch_size = 4, .lookahead = 4};
    const bool lazy = GENERATE(false, true);
    INFO((lazy ? "popping only when can_push() is false" : "popping after every push"));

    bcl::balancer<move_only, throwing_cost> bal{throwing_cost{}, opt};
    std::vector<std::uint64_t> out;
    for (std::uint64_t i = 0; i < failing_id; ++i) {
        if (lazy) {
            while (!bal.can_push()) take(*bal.pop(), out);
            bal.push(make_move_only(i, costs[i]));
        } else {
            bal.push(make_move_only(i, costs[i]));
            while (auto batch = bal.pop()) take(*batch, out);
        }
    }
    move_only failing = make_move_only(failing_id, costs[failing_id]);
    bool caught_unchanged = false;
    try {
        bal.push(std::move(failing));
    } catch (const estimator_failure& e) {
        caught_unchanged = e.id == failing_id;
    }
    CHECK(caught_unchanged);
    REQUIRE(failing.payload != nullptr);
    CHECK(*failing.payload == failing_id);
    CHECK(bal.buffered() == failing_id - out.size());

    bal.finish();
    while (auto batch = bal.pop()) take(*batch, out);
    CHECK(sorted(out) == iota_ids(failing_id));
}

TEST_CASE("An exception from the estimator inside bcl::balance over an lvalue vector propagates "
          "unchanged and leaves the failing record in the vector",
          "[records][errors]") {
    const std::size_t n = 100;
    const cost_list costs = lognormal_costs(n, 9);
    std::vector<move_only> source;
    for (std::size_t i = 0; i < n; ++i) source.push_back(make_move_only(i, costs[i]));

    auto view = bcl::balance(source, throwing_cost{}, {.batch_size = 4, .lookahead = 4});
    std::vector<std::uint64_t> out;
    bool caught_unchanged = false;
    try {
        for (auto&& batch : view) take(batch, out);
    } catch (const estimator_failure& e) {
        caught_unchanged = e.id == failing_id;
    }
    CHECK(caught_unchanged);
    // Records 0..35 were moved into the balancer; 36 (the failing one) and later were not.
    for (std::size_t i = 0; i < n; ++i) {
        INFO("source[" << i << "]");
        CHECK((source[i].payload != nullptr) == (i >= failing_id));
    }
    CHECK(view.balancer().stats().records_in == failing_id);

    view.balancer().finish();
    while (auto batch = view.balancer().pop()) take(*batch, out);
    CHECK(sorted(out) == iota_ids(failing_id));
}

TEST_CASE("An exception from the upstream range propagates unchanged and every record pulled "
          "before it can be drained from view.balancer()",
          "[records][errors]") {
    constexpr std::uint64_t fails_at = 50;
    const std::size_t n = 200;
    const cost_list costs = pareto_costs(n, 4);
    // B=4, K=4: element 50 is the 3rd of the fourth window (48..63).
    const bcl::options opt{.batch_size = 4, .lookahead = 4};
    auto made = std::views::iota(std::uint64_t{0}, std::uint64_t{n}) |
                std::views::transform([&costs](std::uint64_t i) {
                    if (i == fails_at) throw upstream_failure{i};
                    return make_move_only(i, costs[static_cast<std::size_t>(i)]);
                });
    auto view = bcl::balance(std::move(made), move_only_cost{}, opt);

    std::vector<std::uint64_t> out;
    bool caught_unchanged = false;
    try {
        for (auto&& batch : view) take(batch, out);
    } catch (const upstream_failure& e) {
        caught_unchanged = e.id == fails_at;
    }
    CHECK(caught_unchanged);
    CHECK(view.balancer().stats().records_in == fails_at);

    view.balancer().finish();
    while (auto batch = view.balancer().pop()) take(*batch, out);
    CHECK(sorted(out) == iota_ids(fails_at));
}

namespace {

/// Only nothrow movable (construction and assignment): not copyable, not default-constructible.
/// bcl::record asks for nothing more.
struct minimal_record {
    minimal_record(std::uint64_t i, double c) : id(i), cost(c), payload(std::make_unique<int>(1)) {}
    std::uint64_t id;
    double cost;
    std::unique_ptr<int> payload;
};
static_assert(!std::is_default_constructible_v<minimal_record>);
static_assert(!std::is_copy_constructible_v<minimal_record>);
static_assert(!std::is_copy_assignable_v<minimal_record>);
static_assert(std::is_nothrow_move_constructible_v<minimal_record>);
static_assert(std::is_nothrow_move_assignable_v<minimal_record>);

struct minimal_cost {
    double operator()(const minimal_record& r) const noexcept { return r.cost; }
};

} // namespace

TEST_CASE("A record need only be nothrow movable: not copyable or default-constructible",
          "[records]") {
    STATIC_REQUIRE(bcl::record<minimal_record>);
    const std::size_t n = 300;
    const cost_list costs = uniform_costs(n, 6);
    const bcl::options opt{.batch_size = 7, .lookahead = 3};
    std::vector<std::uint64_t> out;
    SECTION("through bcl::balancer") {
        bcl::balancer<minimal_record, minimal_cost> bal{minimal_cost{}, opt};
        for (std::size_t i = 0; i < n; ++i) {
            bal.push(minimal_record{i, costs[i]});
            while (auto batch = bal.pop())
                for (const minimal_record& r : *batch) out.push_back(r.id);
        }
        bal.finish();
        while (auto batch = bal.pop())
            for (const minimal_record& r : *batch) out.push_back(r.id);
    }
    SECTION("through bcl::balance") {
        auto made = std::views::iota(std::uint64_t{0}, std::uint64_t{n}) |
                    std::views::transform([&costs](std::uint64_t i) {
                        return minimal_record{i, costs[static_cast<std::size_t>(i)]};
                    });
        for (auto&& batch : bcl::balance(std::move(made), minimal_cost{}, opt))
            for (const minimal_record& r : batch) out.push_back(r.id);
    }
    CHECK(sorted(out) == iota_ids(n));
}
