#pragma once
// Internal: the two searches of a token plan, each in a number of tries that grows with the
// logarithm of the distance it covers: the least micro-batch count at which a plan packs, and
// the longest prefix of a stream's candidates that packs into its window.

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

/// The longest prefix of `fit` candidates, at least `full` long (`fit` >= `full`, one record a
/// cell), that `packs(count)` packs, within `step` = max(1, fit / 1024) records below the
/// longest; or 0 if not even `full` packs. A shorter prefix packs if a longer does, as a rule:
/// so `fit` first (mostly all that fit by tokens, or a few records less, pack), then galloping
/// down (a step, then 2, 4, ... steps less) to one that packs, then halving the gap above it
/// until it is under a step. Each try is a whole deal; a window left within 0.1% of its records
/// short of the longest is the same window, and the next takes the rest. At most
/// 2 log2(1024) + 3 tries: 12 galloping, 11 halving.
template <class Packs>
[[nodiscard]] std::size_t longest_prefix(std::size_t fit, std::size_t full, Packs&& packs) {
    const std::size_t step = std::max<std::size_t>(1, fit / 1024);
    std::size_t lo = fit;
    std::size_t hi = fit; // the longest that may pack
    bool lo_packs = false;
    for (std::size_t less = step;; less *= 2) {
        lo_packs = packs(lo);
        if (lo_packs || lo == full) break;
        hi = lo - 1;
        lo = fit - std::min(fit - full, less);
    }
    if (!lo_packs) return 0;
    while (hi - lo >= step) {
        const std::size_t mid = lo + (hi - lo + 1) / 2;
        if (packs(mid))
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

} // namespace bcl::detail::tokens
