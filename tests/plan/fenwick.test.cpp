// bcl::detail::plan::fenwick, as a specification: after build() over n values, prefix(i) is the
// sum of the first i values; subtract(i, d) lowers value i by d and nothing else; and
// longest_prefix_below(bound, key) is the longest prefix whose sum, read through key, is below
// the bound (the empty one if none is). Every expectation is the same sum taken by a plain loop
// over a copy of the values.

#include <bcl/detail/plan/fenwick.hpp>

#include <catch2/catch.hpp>

#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

namespace {

using bcl::detail::plan::fenwick;

/// Two sums kept in one tree, as step_leveller keeps its free records and their cost.
struct pair_sum {
    std::size_t count = 0;
    std::uint64_t cost = 0;
    pair_sum& operator+=(const pair_sum& o) {
        count += o.count;
        cost += o.cost;
        return *this;
    }
    pair_sum& operator-=(const pair_sum& o) {
        count -= o.count;
        cost -= o.cost;
        return *this;
    }
};

std::uint64_t naive_prefix(const std::vector<std::uint64_t>& v, std::size_t i) {
    std::uint64_t sum = 0;
    for (std::size_t k = 0; k < i; ++k) sum += v[k];
    return sum;
}

const auto identity_value = [](std::uint64_t x) { return x; };

/// The longest prefix whose sum is at most `bound`, by walking the values one at a time.
std::size_t naive_longest_at_most(const std::vector<std::uint64_t>& v, std::uint64_t bound) {
    std::uint64_t sum = 0;
    std::size_t length = 0;
    while (length < v.size() && sum + v[length] <= bound) sum += v[length++];
    return length;
}

} // namespace

TEST_CASE("fenwick: prefix(i) is the sum of the first i values, after any sequence of subtract()",
          "[plan][fenwick]") {
    std::mt19937_64 gen(5);
    fenwick<std::uint64_t> tree; // one tree, rebuilt: nothing of a former build may remain
    for (std::size_t n : {0U, 1U, 2U, 3U, 7U, 8U, 9U, 31U, 64U, 100U, 257U}) {
        std::vector<std::uint64_t> v(n);
        for (std::uint64_t& x : v) x = gen() % 1000;
        tree.build(n, [&](std::size_t i) { return v[i]; });
        REQUIRE(tree.size() == n);
        for (std::size_t i = 0; i <= n; ++i) CHECK(tree.prefix(i) == naive_prefix(v, i));
        for (std::size_t round = 0; round < 2 * n; ++round) {
            const std::size_t at = gen() % n;
            const std::uint64_t d = v[at] == 0 ? 0 : gen() % (v[at] + 1);
            tree.subtract(at, d);
            v[at] -= d;
            const std::size_t i = gen() % (n + 1);
            INFO("n " << n << " round " << round << " prefix " << i);
            CHECK(tree.prefix(i) == naive_prefix(v, i));
        }
        for (std::size_t i = 0; i <= n; ++i) CHECK(tree.prefix(i) == naive_prefix(v, i));
    }
}

TEST_CASE("fenwick: longest_prefix_below finds the longest prefix whose sum is below the bound, "
          "or the empty one",
          "[plan][fenwick]") {
    std::mt19937_64 gen(6);
    fenwick<std::uint64_t> tree;
    for (std::size_t n : {1U, 2U, 5U, 16U, 17U, 100U}) {
        std::vector<std::uint64_t> v(n);
        for (std::uint64_t& x : v) x = gen() % 4; // zeros too: the longest, not the first
        tree.build(n, [&](std::size_t i) { return v[i]; });
        const std::uint64_t total = naive_prefix(v, n);
        for (std::uint64_t bound = 0; bound <= total + 1; ++bound) {
            INFO("n " << n << " bound " << bound);
            // Below bound + 1: at most bound.
            const auto f = tree.longest_prefix_below(bound + 1, identity_value);
            CHECK(f.length == naive_longest_at_most(v, bound));
            CHECK(f.sum == naive_prefix(v, f.length));
        }
        // Below 0: nothing is, so the empty prefix, of sum zero.
        const auto none = tree.longest_prefix_below(0, identity_value);
        CHECK(none.length == 0);
        CHECK(none.sum == 0);
    }
}

TEST_CASE("fenwick: two sums in one tree answer 'the k-th value still present' with the sum of "
          "those before it",
          "[plan][fenwick]") {
    // The leveller's use: a count of 1 per record still free, its cost beside it. The k-th free
    // record is at the length of the longest prefix holding fewer than k free records.
    std::mt19937_64 gen(7);
    const std::size_t n = 90;
    std::vector<std::uint64_t> cost(n);
    for (std::uint64_t& c : cost) c = gen() % 500;
    std::vector<bool> free(n, true);
    fenwick<pair_sum> tree;
    tree.build(n, [&](std::size_t i) { return pair_sum{1, cost[i]}; });
    for (std::size_t taken = 0; taken < n; ++taken) {
        std::vector<std::size_t> free_list;
        for (std::size_t i = 0; i < n; ++i)
            if (free[i]) free_list.push_back(i);
        for (std::size_t k = 1; k <= free_list.size(); ++k) {
            const auto f = tree.longest_prefix_below(k, [](const pair_sum& s) { return s.count; });
            INFO("taken " << taken << " k " << k);
            REQUIRE(f.length == free_list[k - 1]);
            std::uint64_t before = 0;
            for (std::size_t j = 0; j + 1 < k; ++j) before += cost[free_list[j]];
            CHECK(f.sum.cost == before);
            CHECK(f.sum.count == k - 1);
        }
        const std::size_t at = free_list[gen() % free_list.size()];
        tree.subtract(at, pair_sum{1, cost[at]});
        free[at] = false;
    }
    CHECK(tree.prefix(n).count == 0);
    CHECK(tree.prefix(n).cost == 0);
}
