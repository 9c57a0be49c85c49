#pragma once
// Exact solvers for tiny windows, written independently of bcl's partitioner and lower bound: the
// reference that the heuristic and the bound are checked against.

#include <fmt/core.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

namespace bcl_test {

/// Slot counts of a window of n items in `packs` packs of `pack_size`: every pack full but the
/// last, which holds what is left. Spelled out here rather than taken from bcl::pack_shape so the
/// tests do not trust the code they check.
inline std::vector<std::size_t> window_capacities(std::size_t n, std::size_t packs,
                                                  std::size_t pack_size) {
    if (packs == 0 || n > packs * pack_size || n <= (packs - 1) * pack_size)
        throw std::invalid_argument("window_capacities: the shape does not fit n");
    std::vector<std::size_t> caps(packs, pack_size);
    caps.back() = n - (packs - 1) * pack_size;
    return caps;
}

/// The sum of `values` in each of `packs` packs, item i in pack pack_of[i].
inline std::vector<double> pack_sums(std::span<const double> values,
                                     std::span<const std::uint32_t> pack_of, std::size_t packs) {
    std::vector<double> sums(packs, 0.0);
    for (std::size_t i = 0; i < values.size(); ++i) sums[pack_of[i]] += values[i];
    return sums;
}

/// "" if every pack p got exactly caps[p] items (so every item is in exactly one pack), otherwise
/// the first violation.
inline std::string check_fill(const std::vector<std::uint32_t>& pack_of,
                              const std::vector<std::size_t>& caps) {
    std::vector<std::size_t> count(caps.size(), 0);
    for (std::size_t i = 0; i < pack_of.size(); ++i) {
        if (pack_of[i] >= caps.size())
            return fmt::format("item {} is in pack {} of {}", i, pack_of[i], caps.size());
        ++count[pack_of[i]];
    }
    for (std::size_t p = 0; p < caps.size(); ++p)
        if (count[p] != caps[p])
            return fmt::format("pack {} has {} items, expected {}", p, count[p], caps[p]);
    return {};
}

namespace detail {

struct search {
    std::vector<double> items; // high to low: big items first fail fast against the bound
    std::vector<std::size_t> caps;
    std::vector<std::size_t> count;
    std::vector<double> load;
    double best = std::numeric_limits<double>::infinity();

    void place(std::size_t next, double heaviest) {
        if (next == items.size()) {
            best = std::min(best, heaviest);
            return;
        }
        const double c = items[next];
        for (std::size_t p = 0; p < caps.size(); ++p) {
            if (count[p] == caps[p]) continue;
            // Symmetry: empty packs of equal capacity are interchangeable, so only the first of
            // them is tried.
            if (count[p] == 0) {
                bool earlier_twin = false;
                for (std::size_t q = 0; q < p; ++q)
                    if (count[q] == 0 && caps[q] == caps[p]) earlier_twin = true;
                if (earlier_twin) continue;
            }
            const double old_load = load[p];
            const double new_load = old_load + c;
            if (new_load >= best) continue; // cannot beat what we already have
            load[p] = new_load;
            ++count[p];
            place(next + 1, std::max(heaviest, new_load));
            --count[p];
            load[p] = old_load; // restored exactly, no floating-point drift from subtracting
        }
    }
};

} // namespace detail

/// Minimum, over every way to put `costs` into packs holding exactly `capacities[p]` items, of the
/// heaviest pack. Exhaustive with symmetry breaking and branch-and-bound; meant for n <= 12.
inline double brute_force_min_heaviest(std::span<const double> costs,
                                       std::span<const std::size_t> capacities) {
    std::size_t slots = 0;
    for (const std::size_t c : capacities) slots += c;
    if (slots != costs.size())
        throw std::invalid_argument("brute_force_min_heaviest: capacities do not add up to n");
    if (costs.size() > 14) throw std::invalid_argument("brute_force_min_heaviest: n too large");
    if (costs.empty()) return 0.0;
    detail::search s;
    s.items.assign(costs.begin(), costs.end());
    std::sort(s.items.begin(), s.items.end(), std::greater<>{});
    s.caps.assign(capacities.begin(), capacities.end());
    s.count.assign(capacities.size(), 0);
    s.load.assign(capacities.size(), 0.0);
    s.place(0, 0.0);
    return s.best;
}

/// The same optimum by plain enumeration of all packs^n labelled assignments, no pruning and no
/// symmetry breaking: slow, but obviously right. Used to check the fast solver on n <= 8.
inline double plain_enumeration_min_heaviest(std::span<const double> costs,
                                             std::span<const std::size_t> capacities) {
    const std::size_t n = costs.size();
    const std::size_t k = capacities.size();
    if (n == 0) return 0.0;
    std::vector<std::size_t> label(n, 0);
    double best = std::numeric_limits<double>::infinity();
    for (;;) {
        std::vector<std::size_t> count(k, 0);
        std::vector<double> load(k, 0.0);
        for (std::size_t i = 0; i < n; ++i) {
            ++count[label[i]];
            load[label[i]] += costs[i];
        }
        bool fits = true;
        for (std::size_t p = 0; p < k; ++p) fits = fits && count[p] == capacities[p];
        if (fits) best = std::min(best, *std::max_element(load.begin(), load.end()));
        // Next labelling, as an odometer in base k.
        std::size_t i = 0;
        while (i < n && ++label[i] == k) label[i++] = 0;
        if (i == n) return best;
    }
}

/// The least objective of a global-plan window over every way to give each (step, rank) its
/// records, by exhaustive search (with a bound): the reference for tiny windows. The n records of
/// R = `ranks` ranks fall into ceil(m / B) steps of B per rank (m = n / R), the last holding the
/// rest; a step costs its costliest batch, a batch the sum of its costs or (padded) its size
/// times its dearest cost; the objective is the sum over steps.
inline double brute_force_plan_objective(std::span<const double> costs, std::size_t ranks,
                                         std::size_t batch, bool padded) {
    const std::size_t m = costs.size() / ranks;
    const std::size_t steps = (m + batch - 1) / batch;
    const std::size_t last = m - (steps == 0 ? 0 : (steps - 1) * batch);
    const std::size_t cells = steps * ranks;
    std::vector<std::size_t> room(cells);
    for (std::size_t k = 0; k < cells; ++k) room[k] = k / ranks + 1 == steps ? last : batch;
    std::vector<double> sum(cells, 0.0);
    std::vector<double> dearest(cells, 0.0);
    std::vector<std::size_t> count(cells, 0);
    double best = std::numeric_limits<double>::infinity();
    const auto value = [&] {
        double total = 0.0;
        for (std::size_t t = 0; t < steps; ++t) {
            double top = 0.0;
            for (std::size_t r = 0; r < ranks; ++r) {
                const std::size_t k = t * ranks + r;
                top = std::max(top, padded ? static_cast<double>(count[k]) * dearest[k] : sum[k]);
            }
            total += top;
        }
        return total;
    };
    std::function<void(std::size_t)> place = [&](std::size_t i) {
        if (value() >= best) return; // adding records never lowers the objective
        if (i == costs.size()) {
            best = value();
            return;
        }
        for (std::size_t k = 0; k < cells; ++k) {
            if (count[k] == room[k]) continue;
            const double old_dearest = dearest[k];
            sum[k] += costs[i];
            dearest[k] = std::max(old_dearest, costs[i]);
            ++count[k];
            place(i + 1);
            --count[k];
            dearest[k] = old_dearest;
            sum[k] -= costs[i];
        }
    };
    place(0);
    return best;
}

} // namespace bcl_test
