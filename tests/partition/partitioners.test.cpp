// The partitioners beside the default (capped LPT, balanced Karmarkar-Karp, snake dealing, the
// exact solver), swap refinement as a pass over any of them, and the grouped lower-bound term.
// Checked against the pack-size contract, against an independent exhaustive solver on every
// window small enough to enumerate, and against values worked out by hand.

#include "../support/brute_force.hpp"
#include "../support/distributions.hpp"

#include <bcl/error.hpp>
#include <bcl/partition/exact.hpp>
#include <bcl/partition/karmarkar_karp.hpp>
#include <bcl/partition/lower_bound.hpp>
#include <bcl/partition/lpt.hpp>
#include <bcl/partition/lpt_swap.hpp>
#include <bcl/partition/partitioner.hpp>
#include <bcl/partition/snake.hpp>
#include <bcl/partition/swap_refinement.hpp>

#include <catch2/catch.hpp>
#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <limits>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <utility>
#include <vector>

using namespace bcl_test;

namespace {

/// A list of sizes, spelled as plain numbers.
std::vector<std::size_t> size_list(std::initializer_list<unsigned> list) {
    return {list.begin(), list.end()};
}

/// a <= b up to a relative 1e-9 (sums of the same numbers in different orders differ in the last
/// bits).
bool at_most(double a, double b) {
    return a <= b + 1e-9 * std::abs(b);
}
bool about_equal(double a, double b) {
    return at_most(a, b) && at_most(b, a);
}

/// One partitioner behind a uniform call, so every property below runs over all of them.
struct named_partitioner {
    std::string name;
    std::function<bcl::partition_summary(std::span<const double>, bcl::pack_shape,
                                         std::span<std::uint32_t>)>
        call;
    std::size_t max_items = std::numeric_limits<std::size_t>::max();
};

template <bcl::partitioner P>
named_partitioner wrap(std::string name,
                       std::size_t max_items = std::numeric_limits<std::size_t>::max()) {
    auto shared = std::make_shared<P>(); // keeps its scratch between calls, as a balancer would
    return {std::move(name),
            [shared](std::span<const double> c, bcl::pack_shape s, std::span<std::uint32_t> o) {
                return (*shared)(c, s, o);
            },
            max_items};
}

/// Swap refinement started from a partition that ignores the costs: item i to pack i / B.
struct refine_arrival_order {
    bcl::detail::swap_refinement refinement;
    bcl::partition_summary operator()(std::span<const double> costs, bcl::pack_shape shape,
                                      std::span<std::uint32_t> pack_of) {
        if (shape.pack_size > 0 && pack_of.size() == costs.size()) // else let refinement reject it
            for (std::size_t i = 0; i < costs.size(); ++i)
                pack_of[i] = static_cast<std::uint32_t>(i / shape.pack_size);
        return refinement(costs, shape, pack_of);
    }
};

std::vector<named_partitioner> all_partitioners() {
    return {wrap<bcl::detail::lpt_partitioner>("lpt"),
            wrap<bcl::lpt_swap_partitioner>("lpt_swap"),
            wrap<bcl::detail::karmarkar_karp_partitioner>("karmarkar_karp"),
            wrap<bcl::detail::snake_partitioner>("snake"),
            wrap<bcl::detail::refined<bcl::detail::karmarkar_karp_partitioner>>(
                "refined<karmarkar_karp>"),
            wrap<bcl::detail::refined<bcl::detail::snake_partitioner>>("refined<snake>"),
            wrap<refine_arrival_order>("swap_refinement(arrival order)"),
            wrap<bcl::detail::exact_partitioner>("exact", 12)};
}

struct partition_outcome {
    std::vector<std::uint32_t> pack_of;
    bcl::partition_summary summary;
    std::vector<double> loads;
};

partition_outcome run_partitioner(const named_partitioner& p, const cost_list& costs, std::size_t k,
                                  std::size_t b) {
    partition_outcome o;
    o.pack_of.assign(costs.size(), 0xdeadbeef); // not a valid pack: every slot must be written
    o.summary = p.call(costs, bcl::pack_shape{k, b}, o.pack_of);
    o.loads.assign(k, 0.0);
    for (std::size_t i = 0; i < costs.size(); ++i)
        if (o.pack_of[i] < k) o.loads[o.pack_of[i]] += costs[i];
    return o;
}

double heaviest_load(const partition_outcome& o) {
    return o.loads.empty() ? 0.0 : *std::max_element(o.loads.begin(), o.loads.end());
}

/// Every window small enough for the exhaustive solver: K, B in 1..4, K*B <= 12, each full size
/// and each short one, 12 windows per distribution.
struct small_window {
    std::string what;
    cost_list costs;
    std::size_t k;
    std::size_t b;
    bool full;
    double optimum;
};

const std::vector<small_window>& small_windows() {
    static const std::vector<small_window> windows = [] {
        std::vector<small_window> all;
        std::uint64_t counter = 5000;
        for (std::size_t k = 1; k <= 4; ++k)
            for (std::size_t b = 1; b <= 4; ++b) {
                if (k * b > 12) continue;
                for (std::size_t n = (k - 1) * b + 1; n <= k * b; ++n)
                    for (const distribution& dist : all_distributions())
                        for (int rep = 0; rep < 12; ++rep) {
                            const std::uint64_t seed = case_seed(++counter);
                            cost_list costs = dist.generate(n, seed);
                            const double optimum =
                                brute_force_min_heaviest(costs, window_capacities(n, k, b));
                            all.push_back({fmt::format("K={} B={} n={} costs={} seed={}", k, b, n,
                                                       dist.name, seed),
                                           std::move(costs), k, b, n == k * b, optimum});
                        }
            }
        return all;
    }();
    return windows;
}

/// Token-count windows like the benchmark's: lengths round(lognormal(6, 1)), cost L + L^2/24576.
cost_list lognormal_token_costs(std::size_t n, std::uint64_t seed) {
    cost_list costs = lognormal_costs(n, seed);
    for (double& c : costs) {
        const double length = std::max(1.0, std::round(c));
        c = length + length * length / 24576.0;
    }
    return costs;
}

} // namespace

// ---------------------------------------------------------------------------------------------
// The contract: exactly B per pack, every item once, an honest summary
// ---------------------------------------------------------------------------------------------

TEST_CASE("Every partitioner fills each pack to exactly its capacity, places every item once and "
          "reports its heaviest pack and a bound below it",
          "[partitioners][contract]") {
    std::uint64_t counter = 0;
    for (const named_partitioner& p : all_partitioners())
        for (const std::size_t k : size_list({1, 2, 3, 5, 8, 16, 64}))
            for (const std::size_t b : size_list({1, 2, 3, 7, 32})) {
                const std::size_t full = k * b;
                const std::size_t shortest = (k - 1) * b + 1;
                std::vector<std::size_t> sizes{full, std::max(shortest, full - 1), shortest};
                sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());
                for (const std::size_t n : sizes) {
                    if (n > p.max_items) continue;
                    for (const distribution& dist : all_distributions()) {
                        const std::uint64_t seed = case_seed(++counter);
                        INFO(fmt::format("{}: K={} B={} n={} costs={} seed={}", p.name, k, b, n,
                                         dist.name, seed));
                        const cost_list costs = dist.generate(n, seed);
                        const partition_outcome o = run_partitioner(p, costs, k, b);
                        CHECK(check_fill(o.pack_of, window_capacities(n, k, b)) == "");
                        CHECK(about_equal(o.summary.heaviest, heaviest_load(o)));
                        CHECK(at_most(o.summary.lower_bound, o.summary.heaviest));
                    }
                }
            }
}

TEST_CASE("Every partitioner is deterministic: the same costs give the same packs, whatever it "
          "partitioned before",
          "[partitioners][determinism]") {
    std::uint64_t counter = 700;
    for (const named_partitioner& p : all_partitioners()) {
        const std::size_t k = p.max_items < 64 ? 3 : 8;
        const std::size_t b = p.max_items < 64 ? 4 : 32;
        for (const std::size_t n : {k * b, k * b - 1}) {
            INFO(fmt::format("{}: K={} B={} n={}", p.name, k, b, n));
            const cost_list costs = rounded_lognormal_costs(n, case_seed(++counter)); // with ties
            const partition_outcome once = run_partitioner(p, costs, k, b);
            if (p.max_items >= 256)
                static_cast<void>(
                    run_partitioner(p, lognormal_costs(256, case_seed(++counter)), 4, 64));
            const partition_outcome again = run_partitioner(p, costs, k, b);
            CHECK(once.pack_of == again.pack_of);
            CHECK(once.summary.heaviest == again.summary.heaviest);
            CHECK(once.summary.lower_bound == again.summary.lower_bound);
        }
    }
}

TEST_CASE("Every partitioner rejects a NaN, infinite or negative cost with a bcl::error naming "
          "its position, and accepts -0.0",
          "[partitioners][errors]") {
    const double bad_values[] = {std::numeric_limits<double>::quiet_NaN(),
                                 std::numeric_limits<double>::infinity(), -1.0, -1e-300};
    for (const named_partitioner& p : all_partitioners())
        for (const double bad : bad_values) {
            INFO(p.name << " with " << bad);
            std::vector<double> costs{3, 1, 4, 1, 5, 9};
            costs[4] = bad;
            std::vector<std::uint32_t> pack_of(costs.size());
            bool threw = false;
            try {
                static_cast<void>(p.call(costs, {3, 2}, pack_of));
            } catch (const bcl::error& e) {
                threw = true;
                CHECK_THAT(e.what(), Catch::Contains("cost 4"));
            }
            CHECK(threw);
        }
    for (const named_partitioner& p : all_partitioners()) {
        INFO(p.name);
        const std::vector<double> costs{-0.0, 1, 2, 3};
        std::vector<std::uint32_t> pack_of(costs.size());
        CHECK_NOTHROW(p.call(costs, {2, 2}, pack_of));
    }
}

TEST_CASE("A shape that does not fit the costs, or a pack_of of the wrong length, is a bcl::error",
          "[partitioners][errors]") {
    const std::vector<double> costs{1, 2, 3, 4, 5, 6};
    for (const named_partitioner& p : all_partitioners()) {
        INFO(p.name);
        std::vector<std::uint32_t> pack_of(6);
        std::vector<std::uint32_t> short_ids(5);
        CHECK_THROWS_AS(p.call(costs, {2, 3}, short_ids), bcl::error);
        CHECK_THROWS_AS(p.call(costs, {2, 2}, pack_of), bcl::error); // more items than slots
        CHECK_THROWS_AS(p.call(costs, {4, 2}, pack_of), bcl::error); // a pack would stay empty
        CHECK_THROWS_AS(p.call(costs, {0, 6}, pack_of), bcl::error);
        CHECK_THROWS_AS(p.call(costs, {6, 0}, pack_of), bcl::error);
        CHECK_NOTHROW(p.call(costs, {2, 4}, pack_of)); // a short last pack of 2
    }
}

// ---------------------------------------------------------------------------------------------
// The exact solver, and everything against it
// ---------------------------------------------------------------------------------------------

TEST_CASE("exact_partitioner finds the optimum of every small window, as the independent "
          "exhaustive search does, and reports it as its own lower bound",
          "[partitioners][exact]") {
    bcl::detail::exact_partitioner exact;
    std::size_t wrong = 0;
    for (const small_window& w : small_windows()) {
        std::vector<std::uint32_t> pack_of(w.costs.size());
        const bcl::partition_summary s = exact(w.costs, {w.k, w.b}, pack_of);
        std::vector<double> loads(w.k, 0.0);
        for (std::size_t i = 0; i < w.costs.size(); ++i) loads[pack_of[i]] += w.costs[i];
        const double found = *std::max_element(loads.begin(), loads.end());
        if (!about_equal(found, w.optimum)) {
            ++wrong;
            UNSCOPED_INFO("exact " << found << " vs optimum " << w.optimum << ": " << w.what);
        }
        CHECK(check_fill(pack_of, window_capacities(w.costs.size(), w.k, w.b)) == "");
        CHECK(about_equal(s.lower_bound, s.heaviest));
    }
    INFO(small_windows().size() << " windows");
    CHECK(wrong == 0);
}

TEST_CASE("exact_partitioner refuses windows above max_items rather than search for hours",
          "[partitioners][exact][errors]") {
    bcl::detail::exact_partitioner exact;
    exact.max_items = 8;
    const cost_list costs = lognormal_costs(9, 1);
    std::vector<std::uint32_t> pack_of(costs.size());
    CHECK_THROWS_AS(exact(costs, {3, 3}, pack_of), bcl::error);
    exact.max_items = 9;
    CHECK_NOTHROW(exact(costs, {3, 3}, pack_of));
}

TEST_CASE("On every small window no partitioner beats the optimum and no bound exceeds it",
          "[partitioners][exact]") {
    const auto partitioners = all_partitioners();
    std::size_t violations = 0;
    for (const small_window& w : small_windows()) {
        const double bound = bcl::detail::pack_lower_bound(w.costs, {w.k, w.b});
        if (!at_most(bound, w.optimum)) {
            ++violations;
            UNSCOPED_INFO("bound " << bound << " > optimum " << w.optimum << ": " << w.what);
        }
        for (const named_partitioner& p : partitioners) {
            const partition_outcome o = run_partitioner(p, w.costs, w.k, w.b);
            if (!at_most(w.optimum, heaviest_load(o)) ||
                !at_most(o.summary.lower_bound, w.optimum)) {
                ++violations;
                UNSCOPED_INFO(p.name << ": heaviest " << heaviest_load(o) << ", bound "
                                     << o.summary.lower_bound << ", optimum " << w.optimum << ": "
                                     << w.what);
            }
        }
    }
    CHECK(violations == 0);
}

TEST_CASE("The default finds the optimum of nearly every small window; refinement lifts the "
          "chunk-based methods to the same level",
          "[partitioners][exact][quality]") {
    struct tally {
        std::size_t optimal = 0;
        std::size_t windows = 0;
        [[nodiscard]] double fraction() const {
            return static_cast<double>(optimal) / static_cast<double>(windows);
        }
    };
    std::vector<named_partitioner> partitioners{
        wrap<bcl::lpt_swap_partitioner>("lpt_swap"),
        wrap<bcl::detail::refined<bcl::detail::karmarkar_karp_partitioner>>(
            "refined<karmarkar_karp>"),
        wrap<bcl::detail::refined<bcl::detail::snake_partitioner>>("refined<snake>"),
        wrap<bcl::detail::karmarkar_karp_partitioner>("karmarkar_karp"),
        wrap<bcl::detail::lpt_partitioner>("lpt")};
    std::vector<tally> full(partitioners.size());
    std::vector<tally> short_windows(partitioners.size());
    for (const small_window& w : small_windows())
        for (std::size_t i = 0; i < partitioners.size(); ++i) {
            tally& t = w.full ? full[i] : short_windows[i];
            ++t.windows;
            t.optimal += at_most(heaviest_load(run_partitioner(partitioners[i], w.costs, w.k, w.b)),
                                 w.optimum);
        }
    for (std::size_t i = 0; i < partitioners.size(); ++i)
        UNSCOPED_INFO(fmt::format("{}: optimal on {:.2f}% of full and {:.2f}% of short windows",
                                  partitioners[i].name, 100 * full[i].fraction(),
                                  100 * short_windows[i].fraction()));
    // Measured when written (full / short windows): lpt_swap 98.7% / 95.4%, refined KK 98.9% /
    // 98.0%, refined snake 98.7% / 97.1%; plain KK 84.0% / 72.0%, plain LPT 93.0% / 51.6%. The
    // bounds leave room for a different but equally good tie-breaking, not for a weaker
    // refinement.
    CHECK(full[0].fraction() >= 0.95);
    CHECK(short_windows[0].fraction() >= 0.93);
    CHECK(full[1].fraction() >= 0.93);
    CHECK(full[2].fraction() >= 0.93);
    // Refinement is what does it: without it the same starts are optimal far less often.
    CHECK(full[3].fraction() < full[1].fraction());
    CHECK(full[4].fraction() < full[0].fraction());
}

// ---------------------------------------------------------------------------------------------
// Swap refinement as a pass
// ---------------------------------------------------------------------------------------------

TEST_CASE("Swap refinement never makes a partition worse and never changes a pack's size",
          "[partitioners][refinement]") {
    bcl::detail::swap_refinement refine;
    std::mt19937_64 gen(42);
    std::uint64_t counter = 900;
    for (const std::size_t k : size_list({2, 3, 8, 16}))
        for (const std::size_t b : size_list({1, 2, 5, 16}))
            for (const distribution& dist : all_distributions()) {
                const std::size_t n = k * b - (b > 1 ? 1 : 0);
                const cost_list costs = dist.generate(n, case_seed(++counter));
                // A random valid start: slot s of a shuffled window goes to pack s / B.
                std::vector<std::uint32_t> order(n);
                for (std::size_t i = 0; i < n; ++i) order[i] = static_cast<std::uint32_t>(i);
                std::shuffle(order.begin(), order.end(), gen);
                std::vector<std::uint32_t> pack_of(n);
                for (std::size_t s = 0; s < n; ++s)
                    pack_of[order[s]] = static_cast<std::uint32_t>(s / b);
                std::vector<double> before(k, 0.0);
                for (std::size_t i = 0; i < n; ++i) before[pack_of[i]] += costs[i];
                INFO(fmt::format("K={} B={} n={} costs={}", k, b, n, dist.name));
                const bcl::partition_summary s = refine(costs, {k, b}, pack_of);
                CHECK(check_fill(pack_of, window_capacities(n, k, b)) == "");
                CHECK(at_most(s.heaviest, *std::max_element(before.begin(), before.end())));
            }
}

TEST_CASE("Swap refinement rejects a pack_of that is not a partition of the shape",
          "[partitioners][refinement][errors]") {
    bcl::detail::swap_refinement refine;
    const std::vector<double> costs{5, 4, 3, 2, 1, 0};
    std::vector<std::uint32_t> out_of_range{0, 0, 1, 1, 2, 3};
    std::vector<std::uint32_t> overfull{0, 0, 0, 1, 1, 2};
    std::vector<std::uint32_t> valid{2, 1, 0, 0, 1, 2};
    CHECK_THROWS_AS(refine(costs, {3, 2}, out_of_range), bcl::error);
    CHECK_THROWS_AS(refine(costs, {3, 2}, overfull), bcl::error);
    CHECK_NOTHROW(refine(costs, {3, 2}, valid));
}

namespace {

/// Capped LPT the plain way, as its documentation states it: items by cost high to low (ties by
/// position), each to the lightest pack with a free slot (ties to the lowest pack id).
std::vector<std::uint32_t> reference_capped_lpt(const cost_list& costs, bcl::pack_shape shape) {
    const std::size_t n = costs.size();
    std::vector<std::uint32_t> order(n);
    for (std::size_t i = 0; i < n; ++i) order[i] = static_cast<std::uint32_t>(i);
    std::stable_sort(order.begin(), order.end(),
                     [&](std::uint32_t a, std::uint32_t b) { return costs[a] > costs[b]; });
    std::vector<double> load(shape.packs, 0.0);
    std::vector<std::size_t> count(shape.packs, 0);
    std::vector<std::uint32_t> pack_of(n);
    for (const std::uint32_t item : order) {
        std::size_t best = shape.packs;
        for (std::size_t p = 0; p < shape.packs; ++p)
            if (count[p] < shape.capacity(p, n) && (best == shape.packs || load[p] < load[best]))
                best = p;
        pack_of[item] = static_cast<std::uint32_t>(best);
        load[best] += costs[item];
        ++count[best];
    }
    return pack_of;
}

} // namespace

TEST_CASE("lpt_partitioner makes exactly capped LPT's choices, whichever way it finds the lightest "
          "pack (a scan, groups of 8, a winner tree)",
          "[partitioners][lpt]") {
    bcl::detail::lpt_partitioner lpt;
    std::uint64_t counter = 1100;
    // Across each switch: up to 24 packs a plain scan, up to 256 groups, above that a tree.
    for (const std::size_t k : size_list({1, 2, 7, 24, 25, 33, 64, 100, 256, 257, 300}))
        for (const std::size_t b : size_list({1, 2, 5, 16}))
            for (const distribution& dist : all_distributions()) {
                // A full window and one with a short last pack.
                for (const std::size_t n : {k * b, k * b - (b > 1 ? b / 2 : 0)}) {
                    const cost_list costs = dist.generate(n, case_seed(++counter));
                    std::vector<std::uint32_t> pack_of(n);
                    lpt(costs, {k, b}, pack_of);
                    INFO(fmt::format("K={} B={} n={} costs={}", k, b, n, dist.name));
                    CHECK(pack_of == reference_capped_lpt(costs, {k, b}));
                }
            }
}

TEST_CASE("lpt_swap_partitioner is capped LPT followed by swap refinement: refined<lpt> gives the "
          "same packs",
          "[partitioners][refinement]") {
    bcl::lpt_swap_partitioner fused;
    bcl::detail::refined<bcl::detail::lpt_partitioner> composed;
    std::uint64_t counter = 1200;
    for (const std::size_t k : size_list({2, 8, 64}))
        for (const std::size_t b : size_list({1, 3, 16, 64}))
            for (const distribution& dist : all_distributions()) {
                const std::size_t n = k * b - (b > 1 ? 1 : 0);
                const cost_list costs = dist.generate(n, case_seed(++counter));
                std::vector<std::uint32_t> a(n);
                std::vector<std::uint32_t> c(n);
                INFO(fmt::format("K={} B={} n={} costs={}", k, b, n, dist.name));
                const bcl::partition_summary sa = fused(costs, {k, b}, a);
                const bcl::partition_summary sc = composed(costs, {k, b}, c);
                CHECK(a == c);
                CHECK(sa.heaviest == sc.heaviest);
                CHECK(sa.lower_bound == sc.lower_bound);
            }
}

TEST_CASE("When refinement stops above the bound, no single swap between the heaviest pack and "
          "another pack would lower it (the documented stopping rule), whatever the start",
          "[partitioners][refinement]") {
    std::vector<named_partitioner> refined{
        wrap<bcl::detail::refined<bcl::detail::karmarkar_karp_partitioner>>(
            "refined<karmarkar_karp>"),
        wrap<bcl::detail::refined<bcl::detail::snake_partitioner>>("refined<snake>"),
        wrap<refine_arrival_order>("swap_refinement(arrival order)")};
    std::uint64_t counter = 1500;
    std::size_t stopped_above_bound = 0;
    for (const named_partitioner& p : refined)
        for (const std::size_t k : size_list({2, 4, 8}))
            for (const std::size_t b : size_list({2, 5, 16}))
                for (const distribution& dist : all_distributions()) {
                    const std::size_t n = k * b;
                    const cost_list costs = dist.generate(n, case_seed(++counter));
                    INFO(fmt::format("{}: K={} B={} costs={}", p.name, k, b, dist.name));
                    const partition_outcome o = run_partitioner(p, costs, k, b);
                    if (at_most(o.summary.heaviest, o.summary.lower_bound)) continue;
                    ++stopped_above_bound;
                    std::vector<std::vector<double>> members(k);
                    for (std::size_t i = 0; i < n; ++i) members[o.pack_of[i]].push_back(costs[i]);
                    const double top = heaviest_load(o);
                    bool some_heaviest_is_stuck = false;
                    for (std::size_t h = 0; h < k; ++h) {
                        if (o.loads[h] < top * (1 - 1e-12)) continue;
                        bool improvable = false;
                        for (std::size_t q = 0; q < k; ++q) {
                            if (o.loads[q] >= o.loads[h]) continue;
                            const double gap = o.loads[h] - o.loads[q];
                            for (const double x : members[h])
                                for (const double y : members[q])
                                    if (std::min(x - y, gap - (x - y)) > 1e-9 * top)
                                        improvable = true;
                        }
                        if (!improvable) some_heaviest_is_stuck = true;
                    }
                    CHECK(some_heaviest_is_stuck);
                }
    CHECK(stopped_above_bound > 0);
}

TEST_CASE("With refinement effort off, swap refinement is plain 1-for-1 refinement: never better "
          "than with it on, summed over many windows",
          "[partitioners][refinement]") {
    bcl::lpt_swap_partitioner plain{bcl::refinement_effort{.above = 0.0, .searches_per_pack = 0}};
    bcl::lpt_swap_partitioner full{bcl::refinement_effort{.above = 0.0, .searches_per_pack = 64}};
    double plain_gap = 0.0;
    double full_gap = 0.0;
    for (std::uint64_t seed = 1; seed <= 40; ++seed) {
        const cost_list costs = lognormal_token_costs(8 * 16, seed);
        std::vector<std::uint32_t> pack_of(costs.size());
        const bcl::partition_summary a = plain(costs, {8, 16}, pack_of);
        const bcl::partition_summary c = full(costs, {8, 16}, pack_of);
        plain_gap += a.heaviest / a.lower_bound - 1;
        full_gap += c.heaviest / c.lower_bound - 1;
    }
    INFO("mean gap " << plain_gap / 40 << " without phase 2, " << full_gap / 40 << " with");
    CHECK(full_gap < plain_gap);
}

// ---------------------------------------------------------------------------------------------
// The lower bound's grouped term
// ---------------------------------------------------------------------------------------------

TEST_CASE("The grouped bound: big items cannot all have the cheapest partners", "[lower-bound]") {
    SECTION("{11,10,8,2,2,2,2,1,0}, K=3, B=3 -> 13") {
        // total/K = 38/3 = 12.67 and every single-item or pigeonhole term is at most 12. But 11
        // and 10 lie in two different packs (together they already weigh 21), which hold four
        // more items, at least 0+1+2+2 = 5: one of the two weighs at least (21 + 5)/2 = 13.
        // {11,2,0} {10,2,1} {8,2,2} shows 13 is the optimum.
        const std::vector<double> costs{11, 10, 8, 2, 2, 2, 2, 1, 0};
        CHECK(bcl::detail::pack_lower_bound(costs, {3, 3}) == 13.0);
        CHECK(brute_force_min_heaviest(costs, window_capacities(9, 3, 3)) == 13.0);
    }
    SECTION("{8,6,4,3,3,3,3,2,0}, K=3, B=3 -> 11") {
        // total/K = 32/3 = 10.67, and no single-item or pigeonhole term reaches 11. 8 and 6 in one
        // pack weigh 14 already; in two packs they have four partners, at least 0+2+3+3 = 8, and
        // one of the two weighs at least (14 + 8)/2 = 11. {8,3,0} {6,3,2} {4,3,3} reaches it.
        const std::vector<double> costs{8, 6, 4, 3, 3, 3, 3, 2, 0};
        CHECK(bcl::detail::pack_lower_bound(costs, {3, 3}) == 11.0);
        CHECK(brute_force_min_heaviest(costs, window_capacities(9, 3, 3)) == 11.0);
    }
    SECTION("heavy tails at K=64, B=16: the bound is within 1e-3 of the default's heaviest pack") {
        // Windows where the largest items each approach a pack's share were the ones the older
        // bound left 1% short; the grouped term closes that gap (checked here on many windows).
        bcl::lpt_swap_partitioner p;
        double worst = 0.0;
        for (std::uint64_t seed = 1; seed <= 30; ++seed) {
            const cost_list costs = lognormal_token_costs(64 * 16, seed);
            std::vector<std::uint32_t> pack_of(costs.size());
            const bcl::partition_summary s = p(costs, {64, 16}, pack_of);
            worst = std::max(worst, s.heaviest / s.lower_bound - 1);
        }
        INFO("worst gap " << worst);
        CHECK(worst < 1e-3);
    }
}

TEST_CASE("The bound the partitioners report is pack_lower_bound_sorted's, up to rounding",
          "[lower-bound]") {
    // The partitioners read the same terms off prefix sums they keep anyway; only the summation
    // order differs.
    bcl::detail::lpt_partitioner p;
    std::uint64_t counter = 2000;
    for (const std::size_t k : size_list({1, 2, 3, 8, 64, 200}))
        for (const std::size_t b : size_list({1, 2, 5, 16, 64}))
            for (const distribution& dist : all_distributions()) {
                const cost_list costs = dist.generate(k * b, case_seed(++counter));
                std::vector<std::uint32_t> pack_of(costs.size());
                const double reported = p(costs, {k, b}, pack_of).lower_bound;
                const double direct = bcl::detail::pack_lower_bound(costs, {k, b});
                INFO(
                    fmt::format("K={} B={} costs={}: {} vs {}", k, b, dist.name, reported, direct));
                CHECK(std::abs(reported - direct) <= 1e-12 * std::max(1.0, std::abs(direct)));
            }
}

// ---------------------------------------------------------------------------------------------
// Quality at the benchmark's shapes (docs/benchmarks.md)
// ---------------------------------------------------------------------------------------------

TEST_CASE("The default's mean gap to the lower bound is at most 1e-4 on token windows at K=8, "
          "B=64 and K=64, B=16",
          "[partitioners][quality]") {
    bcl::lpt_swap_partitioner p;
    for (const auto& [k, b] : {std::pair<std::size_t, std::size_t>{8, 64}, {64, 16}}) {
        double gap = 0.0;
        constexpr int windows = 100;
        for (int w = 0; w < windows; ++w) {
            const auto seed = case_seed(static_cast<std::uint64_t>(w) + 77);
            const cost_list costs = lognormal_token_costs(k * b, seed);
            std::vector<std::uint32_t> pack_of(costs.size());
            const bcl::partition_summary s = p(costs, {k, b}, pack_of);
            gap += s.heaviest / s.lower_bound - 1;
        }
        INFO(fmt::format("K={} B={}: mean gap {:.3g}", k, b, gap / windows));
        CHECK(gap / windows <= 1e-4);
    }
}

TEST_CASE("Chunk-based methods stay far from the bound on heavy tails; refinement brings them to "
          "the default's level",
          "[partitioners][quality]") {
    bcl::detail::karmarkar_karp_partitioner kk;
    bcl::detail::snake_partitioner snake;
    bcl::detail::refined<bcl::detail::karmarkar_karp_partitioner> kk_refined;
    double kk_gap = 0.0;
    double snake_gap = 0.0;
    double refined_gap = 0.0;
    constexpr int windows = 20;
    for (int w = 0; w < windows; ++w) {
        const cost_list costs =
            lognormal_token_costs(8 * 64, case_seed(static_cast<std::uint64_t>(w) + 300));
        std::vector<std::uint32_t> pack_of(costs.size());
        const auto gap = [](const bcl::partition_summary& s) {
            return s.heaviest / s.lower_bound - 1;
        };
        kk_gap += gap(kk(costs, {8, 64}, pack_of));
        snake_gap += gap(snake(costs, {8, 64}, pack_of));
        refined_gap += gap(kk_refined(costs, {8, 64}, pack_of));
    }
    INFO(fmt::format("mean gaps: kk {:.3g}, snake {:.3g}, refined kk {:.3g}", kk_gap / windows,
                     snake_gap / windows, refined_gap / windows));
    CHECK(kk_gap / windows > 1e-2);
    CHECK(snake_gap / windows > 1e-2);
    CHECK(refined_gap / windows <= 1e-4);
}
