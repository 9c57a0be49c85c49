// bcl::detail::plan::kk_groups, as a specification: n records (n a multiple of k) split into k
// groups of n / k, every record in exactly one, the groups heaviest first with loads that are
// their records' sums; and the groups are those of the documented merge rule (verl's balanced
// Karmarkar-Karp), written again here the slow and plain way and compared on small inputs.

#include <bcl/detail/plan/kk_groups.hpp>

#include <catch2/catch.hpp>
#include <fmt/core.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

namespace {

using bcl::detail::plan::kk_groups;

/// One group of a state: its records and their sum.
struct group {
    std::uint64_t sum = 0;
    std::vector<std::uint32_t> records;
};

/// A state: k groups, heaviest first, and when it was made (ties go to the first made).
struct merge_state {
    std::vector<group> groups;
    std::size_t made = 0;
    [[nodiscard]] std::uint64_t spread() const { return groups.front().sum - groups.back().sum; }
};

/// The merge rule of kk_groups' documentation, plainly: records sorted by (cost, index)
/// ascending, cut into runs of k, each run a state of one-record groups heaviest first (ties:
/// the higher index first); while more than one state is left, the state of largest spread
/// (ties: made first) merges with the next such state, the i-th heaviest group of the first with
/// the i-th lightest of the second, the merged groups sorted heaviest first (ties keep their
/// order), made last. Returns the groups of the last state, each one's records ascending.
std::vector<group> naive_kk(const std::vector<std::uint64_t>& cost, std::size_t k) {
    std::vector<std::uint32_t> order(cost.size());
    for (std::size_t i = 0; i < cost.size(); ++i) order[i] = static_cast<std::uint32_t>(i);
    std::sort(order.begin(), order.end(), [&](std::uint32_t a, std::uint32_t b) {
        return cost[a] < cost[b] || (cost[a] == cost[b] && a < b);
    });
    std::vector<merge_state> states;
    std::size_t made = 0;
    for (std::size_t first = 0; first < order.size(); first += k) {
        merge_state s;
        for (std::size_t g = 0; g < k; ++g) {
            const std::uint32_t r = order[first + k - 1 - g];
            s.groups.push_back({cost[r], {r}});
        }
        s.made = made++;
        states.push_back(s);
    }
    const auto take_widest = [&states] {
        std::size_t best = 0;
        for (std::size_t i = 1; i < states.size(); ++i)
            if (states[i].spread() > states[best].spread() ||
                (states[i].spread() == states[best].spread() && states[i].made < states[best].made))
                best = i;
        merge_state s = states[best];
        states.erase(states.begin() + static_cast<std::ptrdiff_t>(best));
        return s;
    };
    while (states.size() > 1) {
        merge_state a = take_widest();
        const merge_state b = take_widest();
        for (std::size_t g = 0; g < k; ++g) {
            const group& other = b.groups[k - 1 - g];
            a.groups[g].sum += other.sum;
            a.groups[g].records.insert(a.groups[g].records.end(), other.records.begin(),
                                       other.records.end());
        }
        std::stable_sort(a.groups.begin(), a.groups.end(),
                         [](const group& x, const group& y) { return x.sum > y.sum; });
        a.made = made++;
        states.push_back(a);
    }
    if (states.empty()) return {};
    for (group& g : states.front().groups) std::sort(g.records.begin(), g.records.end());
    return states.front().groups;
}

} // namespace

TEST_CASE("kk_groups: k groups of n / k, every record in exactly one, heaviest first, loads the "
          "sums",
          "[plan][kk_groups]") {
    std::mt19937_64 gen(21);
    kk_groups kk; // one splitter for every input: nothing of a former split may remain
    std::vector<std::uint32_t> members;
    for (int round = 0; round < 300; ++round) {
        const std::size_t k = 1 + gen() % 8;
        const std::size_t n = k * (gen() % 12);
        std::vector<std::uint64_t> cost(n);
        const std::uint64_t range = round % 3 == 0 ? 3 : 1'000'000;
        for (std::uint64_t& c : cost) c = gen() % range;
        kk.split(cost, k);
        INFO(fmt::format("round {}: n {} k {}", round, n, k));
        std::vector<int> seen(n, 0);
        for (std::size_t g = 0; g < k; ++g) {
            kk.members(g, members);
            CHECK(members.size() == n / k);
            CHECK(std::is_sorted(members.begin(), members.end()));
            std::uint64_t sum = 0;
            for (const std::uint32_t r : members) {
                ++seen[r];
                sum += cost[r];
            }
            CHECK(kk.load(g) == sum);
            if (g > 0) CHECK(kk.load(g - 1) >= kk.load(g));
        }
        CHECK(std::all_of(seen.begin(), seen.end(), [](int s) { return s == 1; }));
    }
}

TEST_CASE("kk_groups: the groups of the documented merge rule, written again plainly",
          "[plan][kk_groups]") {
    std::mt19937_64 gen(22);
    kk_groups kk;
    std::vector<std::uint32_t> members;
    for (int round = 0; round < 1000; ++round) {
        const std::size_t k = 1 + gen() % 5;
        const std::size_t n = k * (gen() % 8);
        std::vector<std::uint64_t> cost(n);
        // Narrow ranges too: ties between costs, spreads and group sums are where rules differ.
        const std::uint64_t range = round % 2 == 0 ? 4 : 100;
        for (std::uint64_t& c : cost) c = gen() % range;
        kk.split(cost, k);
        const std::vector<group> expected = naive_kk(cost, k);
        INFO(fmt::format("round {}: n {} k {}", round, n, k));
        for (std::size_t g = 0; g < k && !expected.empty(); ++g) {
            kk.members(g, members);
            CHECK(members == expected[g].records);
            CHECK(kk.load(g) == expected[g].sum);
        }
    }
    // By hand, k = 2: {5, 4, 3, 1} sorted 1, 3, 4, 5 (indices 3, 2, 1, 0) makes the states
    // {3 | 1} and {5 | 4}, spreads 2 and 1. The first merges with the second: {3 + 4, 1 + 5} =
    // {7, 6}: records {2, 1} and {3, 0}.
    kk.split(std::vector<std::uint64_t>{5, 4, 3, 1}, 2);
    kk.members(0, members);
    CHECK(members == std::vector<std::uint32_t>{1, 2});
    CHECK(kk.load(0) == 7);
    kk.members(1, members);
    CHECK(members == std::vector<std::uint32_t>{0, 3});
    CHECK(kk.load(1) == 6);
}
