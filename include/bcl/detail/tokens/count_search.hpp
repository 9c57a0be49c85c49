#pragma once
// Internal: the least micro-batch count at which a plan packs, found in a number of tries that
// grows with the logarithm of its distance from the token bound.

#include <bcl/detail/config.hpp>

#include <algorithm>
#include <cstddef>

namespace bcl::detail::tokens {

/// The least count, a multiple of `m` in [least, most] (`least` a multiple of m), at which
/// `plans(count)` is true, or 0 if none is: `plans` at `least`, then at counts that climb by m,
/// 2m, 4m, ... (capped at the largest multiple of m up to `most`) until one plans, then halving
/// the gap between the last that did not and the first that did. For a gap of g multiples of m
/// that is at most 2 log2(g) + 4 tries: counts near the bound plan in one or two, a batch of
/// records above T/2 (twice the bound) in a few dozen, a refusal climbs to `most` in log2 tries.
/// Planning is monotone in the count as a rule (more cells, more room); where it is not, the
/// count found plans, and no count below it that was tried does. `plans` is called last on the
/// count returned, so a planner that keeps its last plan keeps that count's.
template <class Plans>
[[nodiscard]] std::size_t least_count(std::size_t least, std::size_t most, std::size_t m,
                                      Plans&& plans) {
    if (m == 0 || least > most) return 0;
    if (plans(least)) return least;
    const std::size_t top = most / m * m; // the largest count that may be tried
    std::size_t failed = least;           // the largest count known not to plan
    std::size_t found = 0;                // the least count known to plan
    for (std::size_t climb = m;; climb *= 2) {
        const std::size_t count = std::min(failed + climb, top);
        if (count <= failed) return 0;
        if (plans(count)) {
            found = count;
            break;
        }
        failed = count;
        if (count == top) return 0;
    }
    bool last_planned = true;
    while (found - failed > m) {
        const std::size_t mid = failed + (found - failed) / m / 2 * m;
        last_planned = plans(mid);
        (last_planned ? found : failed) = mid;
    }
    if (!last_planned) (void)plans(found);
    return found;
}

} // namespace bcl::detail::tokens
