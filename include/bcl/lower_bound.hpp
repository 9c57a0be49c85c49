#pragma once
// A lower bound on the heaviest pack of any partition of a window into packs of exactly B items.

#include <bcl/partitioner.hpp>

#include <algorithm>
#include <cstddef>
#include <functional>
#include <numeric>
#include <span>
#include <vector>

namespace bcl {

/// Lower bound on the heaviest pack over every partition of `desc` (costs sorted high to low) into
/// `shape.packs` packs of exactly `shape.pack_size` items. With v sorted high to low (1-based), n
/// items, K packs of B and s_r the sum of the r smallest, it is the largest of:
///   - total / K (some pack is at least average) and v_1 (some pack holds the largest item);
///   - for i = 1..K: v_i + v_(n-i(B-1)+1) + s_(B-2). The packs holding v_1..v_i hold i(B-1) other
///     items (or two of v_1..v_i share a pack, which is worse); the largest of those is at least
///     v_(n-i(B-1)+1), and its pack has B-2 more items;
///   - for t = 1..B-1: v_(tK-t+1) + ... + v_(tK+1) + s_(B-t-1). Among the tK+1 largest items some
///     pack holds t+1 (pigeonhole), and it has B-t-1 more items.
/// A short window (n < K*B, the last pack partly empty) gets only the first two terms.
/// O(n), no allocation. Precondition: `desc` is sorted non-increasing and holds finite values >= 0.
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
    return bound;
}

/// As pack_lower_bound_sorted, for costs in any order. Copies and sorts: O(n log n), allocates.
[[nodiscard]] inline double pack_lower_bound(std::span<const double> costs, pack_shape shape) {
    std::vector<double> desc(costs.begin(), costs.end());
    std::sort(desc.begin(), desc.end(), std::greater<>{});
    return pack_lower_bound_sorted(desc, shape);
}

} // namespace bcl
