#pragma once
// A lower bound on the heaviest pack of any partition of a window into packs of exactly B items.

#include <bcl/detail/config.hpp>

#include <bcl/partition/partitioner.hpp>

#include <algorithm>
#include <array>
#include <cstddef>
#include <functional>
#include <limits>
#include <numeric>
#include <span>
#include <vector>

namespace bcl::detail {

/// The grouped term of pack_lower_bound_sorted for a full window (n == K*B, K >= 2):
/// max over j <= min(K, 128) of min over m in [ceil(j/B), j] of (P_j + s_(mB-j)) / m.
/// For each m the loop runs j from min(128, K, mB) down to m, so r = mB - j runs up by one and
/// s_r grows by one item per step; r's starting point only grows with m. O(n + J^2) in all.
[[nodiscard]] inline double grouped_pack_bound(std::span<const double> desc,
                                               pack_shape shape) noexcept {
    constexpr std::size_t max_groups = 128;
    const std::size_t n = desc.size();
    const std::size_t k = shape.packs;
    const std::size_t b = shape.pack_size;
    const std::size_t groups = std::min(k, max_groups);
    std::array<double, max_groups + 1> prefix{}; // prefix[j] = P_j
    std::array<double, max_groups + 1> best{};   // best[j] = min over the m seen so far
    for (std::size_t j = 1; j <= groups; ++j) {
        prefix[j] = prefix[j - 1] + desc[j - 1];
        best[j] = std::numeric_limits<double>::infinity();
    }
    double start_sum = 0.0; // s_start
    std::size_t start = 0;
    for (std::size_t m = 1; m <= groups; ++m) {
        const std::size_t j_hi = std::min(groups, m * b);
        const std::size_t r_lo = m * b - j_hi;
        for (; start < r_lo; ++start) start_sum += desc[n - 1 - start];
        double smallest = start_sum; // s_r for r = m*b - j
        std::size_t r = r_lo;
        for (std::size_t j = j_hi; j >= m; --j) {
            for (; r < m * b - j; ++r) smallest += desc[n - 1 - r];
            best[j] = std::min(best[j], (prefix[j] + smallest) / static_cast<double>(m));
            if (j == m) break; // j is unsigned; m >= 1
        }
    }
    double bound = 0.0;
    for (std::size_t j = 1; j <= groups; ++j) bound = std::max(bound, best[j]);
    return bound;
}

/// Lower bound on the heaviest pack over every partition of `desc` (costs sorted high to low) into
/// `shape.packs` packs of exactly `shape.pack_size` items. With v sorted high to low (1-based), n
/// items, K packs of B, P_j = v_1 + ... + v_j and s_r the sum of the r smallest, it is the largest
/// of:
///   - total / K (some pack is at least average) and v_1 (some pack holds the largest item);
///   - for i = 1..K: v_i + v_(n-i(B-1)+1) + s_(B-2). The packs holding v_1..v_i hold i(B-1) other
///     items (or two of v_1..v_i share a pack, which is worse); the largest of those is at least
///     v_(n-i(B-1)+1), and its pack has B-2 more items;
///   - for t = 1..B-1: v_(tK-t+1) + ... + v_(tK+1) + s_(B-t-1). Among the tK+1 largest items some
///     pack holds t+1 (pigeonhole), and it has B-t-1 more items;
///   - for j = 1..min(K, 128): the smallest over m = ceil(j/B)..j of (P_j + s_(mB-j)) / m. The j
///     largest items lie in some m packs, which hold mB - j other items, at least the mB - j
///     smallest; the heaviest of those m packs is at least their average. This is the term that
///     binds when several items each come close to a whole pack's share (heavy tails, small B):
///     the big items cannot all get the cheapest partners. (j > K never beats total / K.)
/// A short window (n < K*B, the last pack partly empty) gets only the first two terms.
/// O(n + min(K, 128)^2), no allocation. Precondition: `desc` is sorted non-increasing and holds
/// finite values >= 0.
[[nodiscard]] inline double pack_lower_bound_sorted(std::span<const double> desc,
                                                    pack_shape shape) noexcept {
    const std::size_t n = desc.size();
    const std::size_t k = shape.packs;
    const std::size_t b = shape.pack_size;
    if (n == 0 || k == 0) return 0.0;
    const double total = std::accumulate(desc.begin(), desc.end(), 0.0);
    double bound = std::max(desc[0], total / static_cast<double>(k));
    if (b < 2 || n != k * b) return bound;

    double smallest = 0.0; // s_(B-2)
    for (std::size_t r = 1; r + 2 <= b; ++r) smallest += desc[n - r];

    for (std::size_t i = 1; i <= k; ++i)
        bound = std::max(bound, desc[i - 1] + desc[n - i * (b - 1)] + smallest);

    // Running prefix sums P(m) = v_1 + ... + v_m at m = t(K-1) and m = tK+1, both increasing in t,
    // so the whole loop is O(n) rather than O(B^2).
    double prefix_lo = 0.0;
    double prefix_hi = 0.0;
    std::size_t lo = 0;
    std::size_t hi = 0;
    double rest = smallest; // s_(B-t-1), starting at t = 1
    for (std::size_t t = 1; t < b; ++t) {
        for (; lo < t * (k - 1); ++lo) prefix_lo += desc[lo];
        for (; hi < t * k + 1; ++hi) prefix_hi += desc[hi];
        bound = std::max(bound, (prefix_hi - prefix_lo) + rest);
        if (t + 1 < b) rest -= desc[n - (b - t - 1)];
        if (rest < 0.0) rest = 0.0;
    }
    return std::max(bound, detail::grouped_pack_bound(desc, shape));
}

/// pack_lower_bound_sorted from prefix sums, for partitioners that keep them anyway:
/// prefix[i] = desc[0] + ... + desc[i-1], n + 1 values. The same terms, each read off the prefix
/// sums (s_r = prefix[n] - prefix[n - r]), so O(K + B + min(K, 128)^2) instead of O(n); the
/// result can differ from pack_lower_bound_sorted's in the last bits.
[[nodiscard]] inline double pack_lower_bound_prefix(std::span<const double> desc,
                                                    std::span<const double> prefix,
                                                    pack_shape shape) noexcept {
    const std::size_t n = desc.size();
    const std::size_t k = shape.packs;
    const std::size_t b = shape.pack_size;
    if (n == 0 || k == 0) return 0.0;
    const double total = prefix[n];
    double bound = std::max(desc[0], total / static_cast<double>(k));
    if (b < 2 || n != k * b) return bound;
    const auto smallest = [&](std::size_t r) { return total - prefix[n - r]; }; // s_r
    for (std::size_t i = 1; i <= k; ++i)
        bound = std::max(bound, desc[i - 1] + desc[n - i * (b - 1)] + smallest(b - 2));
    for (std::size_t t = 1; t < b; ++t)
        bound = std::max(bound, (prefix[t * k + 1] - prefix[t * (k - 1)]) + smallest(b - t - 1));
    constexpr std::size_t max_groups = 128;
    const std::size_t groups = std::min(k, max_groups);
    for (std::size_t j = 1; j <= groups; ++j) {
        double best = std::numeric_limits<double>::infinity();
        for (std::size_t m = (j + b - 1) / b; m <= j; ++m)
            best = std::min(best, (prefix[j] + smallest(m * b - j)) / static_cast<double>(m));
        bound = std::max(bound, best);
    }
    return bound;
}

/// As pack_lower_bound_sorted, for costs in any order. Copies and sorts: O(n log n), allocates.
[[nodiscard]] inline double pack_lower_bound(std::span<const double> costs, pack_shape shape) {
    std::vector<double> desc(costs.begin(), costs.end());
    std::sort(desc.begin(), desc.end(), std::greater<>{});
    return pack_lower_bound_sorted(desc, shape);
}

} // namespace bcl::detail
