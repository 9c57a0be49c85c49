// "Steady state allocates nothing" (DESIGN.md): after the first windows, pushing and popping
// through a balancer performs no heap allocation.
//
// This file replaces the global operator new and delete for the whole test binary. They forward
// to malloc and free and count only while a counting_scope is alive on the calling thread, so
// every other test (and Catch2 itself) is unaffected.

#include "support/contract_checks.hpp"
#include "support/distributions.hpp"

#include <bcl/balance.hpp>
#include <bcl/balancer.hpp>
#include <bcl/epoch_plan.hpp>
#include <bcl/global_plan.hpp>
#include <bcl/stage_balancer.hpp>
#include <bcl/token_plan.hpp>

#include <catch2/catch.hpp>

#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <new>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace {

constinit thread_local bool t_counting = false;
constinit thread_local std::size_t t_allocations = 0;

/// Counts the allocations made on this thread while it is alive.
class counting_scope {
public:
    counting_scope() noexcept {
        t_allocations = 0;
        t_counting = true;
    }
    ~counting_scope() { t_counting = false; }
    counting_scope(const counting_scope&) = delete;
    counting_scope& operator=(const counting_scope&) = delete;
    [[nodiscard]] std::size_t allocations() const noexcept { return t_allocations; }
};

void* counted_allocate(std::size_t size) {
    if (t_counting) ++t_allocations;
    if (void* p = std::malloc(size == 0 ? 1 : size)) return p;
    throw std::bad_alloc{};
}

} // namespace

// Every non-aligned form, so each allocation is paired with a matching release (the sanitizers
// check that). The aligned forms are left to the implementation, which pairs them itself.
void* operator new(std::size_t size) {
    return counted_allocate(size);
}
void* operator new[](std::size_t size) {
    return counted_allocate(size);
}
void* operator new(std::size_t size, const std::nothrow_t&) noexcept {
    try {
        return counted_allocate(size);
    } catch (...) {
        return nullptr;
    }
}
void* operator new[](std::size_t size, const std::nothrow_t& tag) noexcept {
    return operator new(size, tag);
}
void operator delete(void* p) noexcept {
    std::free(p);
}
void operator delete[](void* p) noexcept {
    std::free(p);
}
void operator delete(void* p, std::size_t) noexcept {
    std::free(p);
}
void operator delete[](void* p, std::size_t) noexcept {
    std::free(p);
}
void operator delete(void* p, const std::nothrow_t&) noexcept {
    std::free(p);
}
void operator delete[](void* p, const std::nothrow_t&) noexcept {
    std::free(p);
}

using namespace bcl_test;

namespace {

/// Keeps a pointer observable so the compiler cannot remove the allocation behind it.
void* volatile g_sink = nullptr;

constexpr std::size_t alloc_batch_size = 16;
constexpr std::size_t alloc_lookahead = 8;
constexpr std::size_t alloc_window = alloc_lookahead * alloc_batch_size;

const bcl::lookahead_policy policies[] = {bcl::lookahead_policy::tumbling,
                                          bcl::lookahead_policy::sliding};

const char* name_of(bcl::lookahead_policy policy) {
    return policy == bcl::lookahead_policy::sliding ? "sliding" : "tumbling";
}

/// Records pushed before the steady state: enough for the balancer to have run one round and
/// handed it out (one buffer and one window: the first round runs when the buffer is full).
std::size_t warm_up(const bcl::options& opt) {
    return bcl::buffer_capacity(opt) + opt.batch_size * opt.lookahead;
}

} // namespace

TEST_CASE("The allocation counter sees an allocation, so a count of zero means something",
          "[allocation]") {
    std::size_t seen = 0;
    {
        counting_scope scope;
        auto* p = new std::vector<int>(100, 7);
        g_sink = p;
        delete p;
        seen = scope.allocations();
    }
    CHECK(seen >= 2); // the vector object and its buffer
}

TEST_CASE("After the first round, pushing and popping many more windows through bcl::balancer "
          "allocates nothing, under either policy",
          "[allocation]") {
    for (const bcl::lookahead_policy policy : policies)
        for (const distribution& dist : all_distributions()) {
            INFO(dist.name << ", " << name_of(policy));
            const std::size_t n = 40 * alloc_window + 5; // and a short final window
            const cost_list costs = dist.generate(n, 21);
            const bcl::options opt{
                .batch_size = alloc_batch_size, .lookahead = alloc_lookahead, .policy = policy};
            bcl::balancer<rec, cost_of> bal{cost_of{}, opt};
            std::vector<std::uint64_t> out;
            out.reserve(n);
            const auto take = [&](std::span<rec> batch) {
                for (const rec& r : batch) out.push_back(r.id);
            };

            std::size_t i = 0;
            for (; i < warm_up(opt); ++i) {
                bal.push(rec{i, costs[i]});
                while (auto batch = bal.pop()) take(*batch);
            }
            std::size_t steady = 0;
            std::size_t draining = 0;
            {
                counting_scope scope;
                for (; i < n; ++i) {
                    bal.push(rec{i, costs[i]});
                    while (auto batch = bal.pop()) take(*batch);
                }
                steady = scope.allocations();
                bal.finish();
                while (auto batch = bal.pop()) take(*batch);
                draining = scope.allocations() - steady;
            }
            CHECK(steady == 0);
            CHECK(draining == 0);
            // The measured loop really moved every record.
            CHECK(check_exactly_once({out}, n, alloc_batch_size, false) == "");
        }
}

TEST_CASE("After its first rounds, pushing and popping many more windows of two stage costs "
          "through bcl::stage_balancer allocates nothing, under either policy",
          "[allocation]") {
    struct staged {
        std::uint64_t id;
        std::array<double, 2> cost;
    };
    struct stage_cost_of {
        std::array<double, 2> operator()(const staged& r) const { return r.cost; }
    };
    for (const bcl::lookahead_policy policy : policies)
        for (const distribution& dist : all_distributions()) {
            INFO(dist.name << ", " << name_of(policy));
            const std::size_t n = 40 * alloc_window + 5; // and a short final window
            const cost_list vision = dist.generate(n, 22);
            const cost_list language = lognormal_costs(n, 23);
            const bcl::options opt{
                .batch_size = alloc_batch_size, .lookahead = alloc_lookahead, .policy = policy};
            bcl::stage_balancer<staged, stage_cost_of> bal{stage_cost_of{}, opt};
            std::vector<std::uint64_t> out;
            out.reserve(n);
            const auto take = [&](std::span<staged> batch) {
                for (const staged& r : batch) out.push_back(r.id);
            };
            const auto push = [&](std::size_t i) {
                bal.push(staged{i, {vision[i], language[i]}});
                while (auto batch = bal.pop()) take(*batch);
            };
            std::size_t i = 0;
            for (; i < 2 * warm_up(opt); ++i) push(i); // the planner's scratch grows to its size
            std::size_t steady = 0;
            std::size_t draining = 0;
            {
                counting_scope scope;
                for (; i < n; ++i) push(i);
                steady = scope.allocations();
                bal.finish();
                while (auto batch = bal.pop()) take(*batch);
                draining = scope.allocations() - steady;
            }
            CHECK(steady == 0);
            CHECK(draining == 0);
            CHECK(check_exactly_once({out}, n, alloc_batch_size, false) == "");
        }
}

TEST_CASE("After the first round, iterating bcl::balance over a vector allocates nothing",
          "[allocation]") {
    for (const bcl::lookahead_policy policy : policies) {
        INFO(name_of(policy));
        const std::size_t n = 30 * alloc_window;
        const cost_list costs = lognormal_costs(n, 5);
        const bcl::options opt{
            .batch_size = alloc_batch_size, .lookahead = alloc_lookahead, .policy = policy};
        auto view = bcl::balance(make_records(costs), cost_of{}, opt);
        std::vector<std::uint64_t> out;
        out.reserve(n);
        std::size_t batches = 0;
        std::size_t allocations = 0;
        {
            // Counting starts with the batch after the warm-up and stops at the end.
            std::optional<counting_scope> scope;
            for (auto&& batch : view) {
                if (++batches == warm_up(opt) / alloc_batch_size + 1) scope.emplace();
                for (const rec& r : batch) out.push_back(r.id);
            }
            if (scope) allocations = scope->allocations();
        }
        CHECK(batches == n / alloc_batch_size);
        CHECK(allocations == 0);
        CHECK(out.size() == n);
    }
}

TEST_CASE("A balancer whose first windows need no refinement allocates nothing when a later "
          "window does",
          "[allocation]") {
    // A first round of equal costs, which capped LPT already splits optimally, then heavy-tailed
    // windows that need swap refinement: scratch space the refinement alone uses must be
    // reserved up front too, not on its first use. (An earlier lpt_swap_partitioner resized its
    // pack-order scratch inside refine() and failed this test with one allocation.)
    for (const bcl::lookahead_policy policy : policies) {
        INFO(name_of(policy));
        const bcl::options opt{
            .batch_size = alloc_batch_size, .lookahead = alloc_lookahead, .policy = policy};
        const std::size_t n = 12 * alloc_window;
        cost_list costs = equal_costs(warm_up(opt), 0);
        const cost_list tail = pareto_costs(n - warm_up(opt), 3);
        costs.insert(costs.end(), tail.begin(), tail.end());

        bcl::balancer<rec, cost_of> bal{cost_of{}, opt};
        std::vector<std::uint64_t> out;
        out.reserve(n);
        std::size_t i = 0;
        for (; i < warm_up(opt); ++i) {
            bal.push(rec{i, costs[i]});
            while (auto batch = bal.pop())
                for (const rec& r : *batch) out.push_back(r.id);
        }
        std::size_t allocations = 0;
        {
            counting_scope scope;
            for (; i < n; ++i) {
                bal.push(rec{i, costs[i]});
                while (auto batch = bal.pop())
                    for (const rec& r : *batch) out.push_back(r.id);
            }
            allocations = scope.allocations();
        }
        CHECK(allocations == 0);
        CHECK(out.size() + bal.buffered() == n); // sliding still holds its buffer: no finish()
    }
}

namespace {

/// A record whose memory (its tokens) has nothing to do with its cost, so a cost-balanced split
/// leaves the batches' memory as uneven as chance makes it.
struct memory_sequence {
    std::uint64_t id = 0;
    double tokens = 0.0;
    double cost = 0.0;
};

struct sequence_cost {
    double operator()(const memory_sequence& s) const noexcept { return s.cost; }
};

struct token_memory {
    double operator()(const memory_sequence& s) const noexcept { return s.tokens; }
};

/// Pushes records from..to of `tokens` and `costs` through a balancer popping after every push, and
/// appends each batch's memory to `memories` (reserved by the caller, so this allocates nothing).
template <class Balancer>
void push_tokens(Balancer& bal, const std::vector<double>& tokens, const cost_list& costs,
                 std::size_t from, std::size_t to, std::vector<double>& memories) {
    for (std::size_t i = from; i < to; ++i) {
        bal.push(memory_sequence{i, tokens[i], costs[i]});
        while (auto batch = bal.pop()) {
            double m = 0.0;
            for (const memory_sequence& s : *batch) m += s.tokens;
            memories.push_back(m);
        }
    }
}

} // namespace

TEST_CASE("After the first round, a balancer under a memory budget allocates nothing, though it "
          "repairs rounds whose cost-balanced split is over the budget",
          "[allocation]") {
    // Either the first round needs a repair too, or (a calm start: records of equal memory)
    // the first repair comes later: its scratch space must be ready all the same.
    for (const bool calm_start : {false, true})
        for (const bcl::lookahead_policy policy : policies) {
            INFO(name_of(policy) << (calm_start ? ", calm start" : ""));
            const std::size_t n = 30 * alloc_window;
            const bcl::options plain{
                .batch_size = alloc_batch_size, .lookahead = alloc_lookahead, .policy = policy};
            std::vector<double> tokens(n);
            const cost_list draws = uniform_costs(n, 8);
            for (std::size_t i = 0; i < n; ++i)
                tokens[i] =
                    calm_start && i < warm_up(plain) ? 50.0 : std::floor(draws[i] / 10.0) + 1.0;
            const cost_list costs = lognormal_costs(n, 9);
            // A batch holds 16 * 50.5 = 808 tokens on average (1 to 100 each); 950 is above what
            // any round needs on average, while a split balanced on cost alone leaves some
            // batches over it.
            const double budget = 950.0;
            bcl::options opt = plain;
            opt.memory_budget = budget;
            const auto estimator = bcl::with_memory(sequence_cost{}, token_memory{});
            using estimator_type = std::remove_const_t<decltype(estimator)>;

            // The same records without the budget: the partitions the budgeted balancer starts
            // from. Some of their batches after the warm-up are over the budget (and, for a calm
            // start, none before).
            bcl::balancer<memory_sequence, estimator_type> unbudgeted{estimator, plain};
            std::vector<double> warm;
            std::vector<double> after;
            warm.reserve(n / alloc_batch_size);
            after.reserve(n / alloc_batch_size);
            push_tokens(unbudgeted, tokens, costs, 0, warm_up(opt), warm);
            push_tokens(unbudgeted, tokens, costs, warm_up(opt), n, after);
            const auto count_over = [&](const std::vector<double>& memories) {
                std::size_t over = 0;
                for (const double m : memories) over += m > budget ? 1 : 0;
                return over;
            };
            INFO("unbudgeted: " << count_over(warm) << " of the " << warm.size()
                                << " first batches over the budget, " << count_over(after)
                                << " of the " << after.size() << " after them");
            REQUIRE(count_over(after) > 0);
            if (calm_start)
                REQUIRE(count_over(warm) == 0);
            else
                REQUIRE(count_over(warm) > 0);

            bcl::balancer<memory_sequence, estimator_type> bal{estimator, opt};
            std::vector<double> steady;
            steady.reserve(n / alloc_batch_size);
            warm.clear();
            push_tokens(bal, tokens, costs, 0, warm_up(opt), warm);
            std::size_t allocations = 0;
            {
                counting_scope scope;
                push_tokens(bal, tokens, costs, warm_up(opt), n, steady);
                allocations = scope.allocations();
            }
            CHECK(allocations == 0);
            CHECK(steady.size() == after.size());
            CHECK(count_over(warm) + count_over(steady) == 0);
            CHECK(bal.stats().peak_batch_memory <= budget);
        }
}

TEST_CASE("bcl::global_planner allocates nothing once it has planned its largest window, nor "
          "after reserve()",
          "[allocation][global_plan]") {
    const bcl::plan_shape shape{.ranks = 16, .steps = alloc_lookahead, .batch = alloc_batch_size};
    const std::size_t n = shape.ranks * shape.steps * shape.batch;
    // Heavy tails (levelled steps), ties, a short window, padded: every path of the plan.
    const cost_list heavy = pareto_costs(n, 1);
    const cost_list ties = three_values_costs(n, 2);
    const cost_list light = lognormal_costs(n, 3);
    std::vector<bcl::plan_slot> out(n);
    bcl::plan_options padded;
    padded.batching = bcl::batch_cost::padded;
    for (const bool reserved : {false, true}) {
        INFO((reserved ? "after reserve()" : "after one window of each kind"));
        bcl::global_planner planner;
        if (reserved) {
            planner.reserve(shape);
        } else {
            (void)planner.plan(heavy, shape, out);
            (void)planner.plan(light, shape, padded, out);
        }
        std::size_t seen = 0;
        {
            counting_scope scope;
            for (int round = 0; round < 3; ++round) {
                (void)planner.plan(heavy, shape, out);
                (void)planner.plan(ties, shape, out);
                (void)planner.plan(light, shape, padded, out);
                const std::span<const double> part(light.data(), n / 2);
                (void)planner.plan(part, shape, std::span<bcl::plan_slot>(out.data(), n / 2));
            }
            seen = scope.allocations();
        }
        CHECK(seen == 0);
    }
}

TEST_CASE("bcl::epoch_planner plans an epoch into a share without allocating once it has "
          "planned one of the same size",
          "[allocation][epoch_plan]") {
    constexpr std::size_t n = 1000;
    const cost_list table = pareto_costs(n, 4);
    std::vector<std::size_t> order;
    const bcl::epoch_shape shape{
        .ranks = 8, .lookahead = alloc_lookahead, .batch = alloc_batch_size, .drop_last = false};
    bcl::epoch_planner planner;
    bcl::epoch_share<std::size_t> share;
    // A name longer than any short-string buffer: naming the planner costs nothing either.
    const std::string_view who = "bcl::torch::distributed_balanced_sampler (a long name)";
    bcl::epoch_order(n, true, 1, 0, order);
    planner.share(std::span<const double>(table), std::span<const std::size_t>(order), shape, 3, {},
                  share, who);
    std::size_t seen = 0;
    {
        counting_scope scope;
        for (std::uint64_t epoch = 1; epoch < 4; ++epoch) {
            bcl::epoch_order(n, true, 1, epoch, order);
            planner.share(std::span<const double>(table), std::span<const std::size_t>(order),
                          shape, 3, {}, share, who);
        }
        seen = scope.allocations();
    }
    CHECK(seen == 0);
}

TEST_CASE("bcl::token_planner plans held batches and stream windows without allocating once it "
          "has planned one of the same size",
          "[allocation][token_plan]") {
    std::mt19937_64 gen(6);
    std::vector<std::uint64_t> tokens(2000);
    for (auto& t : tokens) t = 1 + gen() % 20000;
    std::vector<bcl::micro_slot> out(tokens.size());
    const bcl::token_budget budget{.ranks = 8, .max_tokens = 32768};
    bcl::token_planner planner;
    (void)planner.plan_held(tokens, {}, {}, budget, 2, {}, out);
    (void)planner.plan_stream(tokens, {}, budget, 2, 4, false, {}, out);
    std::size_t seen = 0;
    {
        counting_scope scope;
        for (int round = 0; round < 3; ++round) {
            (void)planner.plan_held(tokens, {}, {}, budget, 2, {}, out);
            (void)planner.plan_stream(tokens, {}, budget, 2, 4, false, {}, out);
        }
        seen = scope.allocations();
    }
    CHECK(seen == 0);
}
