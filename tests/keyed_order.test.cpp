// bcl::keyed_order, as a specification: for every N (0, 1, 2, powers of two and their
// neighbours, and every N up to 300) and every key, a permutation of [0, N); another seed or
// epoch, another order; a fair shuffle: every index equally likely at every position over keys
// (chi-square), neighbours in the order no more often neighbours in the data than chance, no
// drift of index with position; fill() is at() over a range.

#include "support/case_count.hpp"

#include <bcl/keyed_order.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <numeric>
#include <span>
#include <vector>

namespace {

std::vector<std::uint64_t> whole_order(const bcl::keyed_order& order) {
    std::vector<std::uint64_t> out(order.size());
    for (std::uint64_t p = 0; p < order.size(); ++p) out[p] = order.at(p);
    return out;
}

bool is_permutation_of_range(std::vector<std::uint64_t> v) {
    std::sort(v.begin(), v.end());
    for (std::size_t i = 0; i < v.size(); ++i)
        if (v[i] != i) return false;
    return true;
}

} // namespace

TEST_CASE("keyed_order is a permutation of [0, N) for every N and key", "[keyed_order]") {
    std::vector<std::uint64_t> sizes;
    for (std::uint64_t n = 0; n <= 300; ++n) sizes.push_back(n);
    for (unsigned k = 9; k <= 20; ++k)
        for (const std::uint64_t d : {std::uint64_t{0}, std::uint64_t{1}, ~std::uint64_t{0}})
            sizes.push_back((std::uint64_t{1} << k) + d);
    for (const std::uint64_t n : sizes)
        for (std::uint64_t key = 0; key < (n < 64 ? 20U : 3U); ++key) {
            const bcl::keyed_order order(n, 1000 + key, key * 7);
            CAPTURE(n, key);
            REQUIRE(order.size() == n);
            REQUIRE(is_permutation_of_range(whole_order(order)));
        }
}

TEST_CASE("keyed_order: another seed or epoch draws another order; the same key the same",
          "[keyed_order]") {
    const std::uint64_t n = 1000;
    const auto base = whole_order(bcl::keyed_order(n, 5, 0));
    CHECK(base == whole_order(bcl::keyed_order(n, 5, 0)));
    CHECK(base != whole_order(bcl::keyed_order(n, 5, 1)));
    CHECK(base != whole_order(bcl::keyed_order(n, 6, 0)));
    // Seed and epoch are not interchangeable (seed + epoch would be DistributedSampler's key).
    CHECK(whole_order(bcl::keyed_order(n, 6, 5)) != whole_order(bcl::keyed_order(n, 5, 6)));
}

TEST_CASE("keyed_order: every index is equally likely at every position, over seeds and over "
          "epochs",
          "[keyed_order]") {
    for (const std::uint64_t n : {std::uint64_t{3}, std::uint64_t{8}, std::uint64_t{13}}) {
        for (const bool by_epoch : {false, true}) {
            const std::size_t keys = bcl_test::random_cases(30000);
            std::vector<double> count(n * n, 0.0);
            for (std::uint64_t key = 0; key < keys; ++key) {
                const bcl::keyed_order order(n, by_epoch ? 77 : key, by_epoch ? key : 3);
                for (std::uint64_t p = 0; p < n; ++p) count[p * n + order.at(p)] += 1.0;
            }
            const double expected = static_cast<double>(keys) / static_cast<double>(n);
            double chi2 = 0.0;
            for (const double c : count) chi2 += (c - expected) * (c - expected) / expected;
            // (n-1)^2 degrees of freedom: mean (n-1)^2, sd sqrt(2)(n-1); 6 sd is a bound no fair
            // shuffle passes by chance (about 1e-9).
            const double dof = static_cast<double>((n - 1) * (n - 1));
            CAPTURE(n, by_epoch, keys, chi2, dof);
            CHECK(chi2 < dof + 6.0 * std::sqrt(2.0 * dof) + 10.0);
        }
    }
}

TEST_CASE("keyed_order: neighbours in the order are neighbours in the data by chance alone, and "
          "index does not drift with position",
          "[keyed_order]") {
    for (const std::uint64_t n : {std::uint64_t{1000}, std::uint64_t{1024}, std::uint64_t{4097}}) {
        const std::size_t keys = bcl_test::random_cases(60);
        double adjacent = 0.0;
        double worst_rho = 0.0;
        for (std::uint64_t key = 0; key < keys; ++key) {
            const auto v = whole_order(bcl::keyed_order(n, 11, key));
            for (std::size_t p = 0; p + 1 < n; ++p)
                adjacent += (v[p + 1] == v[p] + 1 || v[p] == v[p + 1] + 1) ? 1.0 : 0.0;
            // Spearman's rho of (position, index): both are ranks.
            double d2 = 0.0;
            for (std::size_t p = 0; p < n; ++p) {
                const double d = static_cast<double>(p) - static_cast<double>(v[p]);
                d2 += d * d;
            }
            const double nd = static_cast<double>(n);
            const double rho = 1.0 - 6.0 * d2 / (nd * (nd * nd - 1.0));
            worst_rho = std::max(worst_rho, std::abs(rho));
        }
        // A uniform shuffle makes a pair adjacent with probability 2/n: n-1 pairs, about 2 a key.
        const double per_key = adjacent / static_cast<double>(keys);
        CAPTURE(n, per_key, worst_rho);
        CHECK(per_key < 4.0);
        // rho's sd is 1/sqrt(n - 1): 5 sd over 60 keys.
        CHECK(worst_rho < 5.0 / std::sqrt(static_cast<double>(n - 1)));
    }
}

TEST_CASE("keyed_order: fill() is at() over a range, at any start", "[keyed_order]") {
    const bcl::keyed_order order(100003, 9, 2);
    std::vector<std::int64_t> window(777);
    for (const std::uint64_t first :
         {std::uint64_t{0}, std::uint64_t{5000}, std::uint64_t{100003 - 777}}) {
        order.fill(first, std::span<std::int64_t>(window));
        for (std::size_t k = 0; k < window.size(); ++k)
            REQUIRE(window[k] == static_cast<std::int64_t>(order.at(first + k)));
    }
}
