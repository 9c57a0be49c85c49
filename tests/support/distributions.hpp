#pragma once
// Seeded cost lists for property tests. Every generator is a pure function of (n, seed): the
// transforms are written out by hand on top of std::mt19937_64 (whose output is fully specified by
// the standard), so a seed gives the same costs with every standard library.

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <numbers>
#include <random>
#include <string_view>
#include <vector>

namespace bcl_test {

using cost_list = std::vector<double>;

/// Uniform in [0, 1) from the top 53 bits of one draw.
inline double unit_interval(std::mt19937_64& gen) {
    return static_cast<double>(gen() >> 11) * 0x1.0p-53;
}

/// Uniform in (0, 1]: safe to take the logarithm of.
inline double unit_interval_no_zero(std::mt19937_64& gen) {
    return 1.0 - unit_interval(gen);
}

/// Standard normal by Box-Muller (one value per two uniforms; simple beats fast here).
inline double standard_normal(std::mt19937_64& gen) {
    const double u = unit_interval_no_zero(gen);
    const double v = unit_interval(gen);
    return std::sqrt(-2.0 * std::log(u)) * std::cos(2.0 * std::numbers::pi * v);
}

/// Uniform integer in [lo, hi] (a tiny modulo bias is irrelevant for test data).
inline std::uint64_t uniform_integer(std::mt19937_64& gen, std::uint64_t lo, std::uint64_t hi) {
    return lo + gen() % (hi - lo + 1);
}

/// Uniform real costs in [1, 1000).
inline cost_list uniform_costs(std::size_t n, std::uint64_t seed) {
    std::mt19937_64 gen(seed);
    cost_list costs(n);
    for (double& c : costs) c = 1.0 + 999.0 * unit_interval(gen);
    return costs;
}

/// Lognormal(mu = 6, sigma = 1): median about 403, a moderately heavy right tail.
inline cost_list lognormal_costs(std::size_t n, std::uint64_t seed) {
    std::mt19937_64 gen(seed);
    cost_list costs(n);
    for (double& c : costs) c = std::exp(6.0 + 1.0 * standard_normal(gen));
    return costs;
}

/// Pareto(xm = 100, alpha = 1.5) by inversion: xm / U^(1/alpha). Infinite variance.
inline cost_list pareto_costs(std::size_t n, std::uint64_t seed) {
    std::mt19937_64 gen(seed);
    cost_list costs(n);
    for (double& c : costs) c = 100.0 / std::pow(unit_interval_no_zero(gen), 1.0 / 1.5);
    return costs;
}

/// Every cost the same: every partition is optimal.
inline cost_list equal_costs(std::size_t n, std::uint64_t /*seed*/) {
    return cost_list(n, 42.0);
}

/// Every cost zero: the degenerate case of a zero lower bound.
inline cost_list zero_costs(std::size_t n, std::uint64_t /*seed*/) {
    return cost_list(n, 0.0);
}

/// Integers 1..10 with a single 1e9 at a random position: one record no balancing can hide.
inline cost_list giant_outlier_costs(std::size_t n, std::uint64_t seed) {
    std::mt19937_64 gen(seed);
    cost_list costs(n);
    for (double& c : costs) c = static_cast<double>(uniform_integer(gen, 1, 10));
    if (n > 0) costs[uniform_integer(gen, 0, n - 1)] = 1e9;
    return costs;
}

/// Lognormal costs sorted ascending: the cheapest records arrive first.
inline cost_list ascending_costs(std::size_t n, std::uint64_t seed) {
    cost_list costs = lognormal_costs(n, seed);
    std::sort(costs.begin(), costs.end());
    return costs;
}

/// Lognormal costs sorted descending: the dearest records arrive first.
inline cost_list descending_costs(std::size_t n, std::uint64_t seed) {
    cost_list costs = lognormal_costs(n, seed);
    std::sort(costs.begin(), costs.end(), std::greater<>{});
    return costs;
}

/// Only the values 1, 2 and 3: ties everywhere.
inline cost_list three_values_costs(std::size_t n, std::uint64_t seed) {
    std::mt19937_64 gen(seed);
    cost_list costs(n);
    for (double& c : costs) c = static_cast<double>(uniform_integer(gen, 1, 3));
    return costs;
}

/// Bimodal with ties: 1 most of the time, 1000 with probability 1/10.
inline cost_list two_values_costs(std::size_t n, std::uint64_t seed) {
    std::mt19937_64 gen(seed);
    cost_list costs(n);
    for (double& c : costs) c = uniform_integer(gen, 0, 9) == 0 ? 1000.0 : 1.0;
    return costs;
}

/// Lognormal rounded to a multiple of 100 (zero included): heavy tail and many ties.
inline cost_list rounded_lognormal_costs(std::size_t n, std::uint64_t seed) {
    cost_list costs = lognormal_costs(n, seed);
    for (double& c : costs) c = 100.0 * std::round(c / 100.0);
    return costs;
}

/// A named generator, so property tests can say which one failed.
struct distribution {
    std::string_view name;
    cost_list (*generate)(std::size_t n, std::uint64_t seed);
};

/// Every distribution above; property tests loop over all of them.
inline const std::vector<distribution>& all_distributions() {
    static const std::vector<distribution> list{
        {"uniform", uniform_costs},
        {"lognormal(6,1)", lognormal_costs},
        {"pareto(100,1.5)", pareto_costs},
        {"all equal", equal_costs},
        {"all zero", zero_costs},
        {"giant outlier", giant_outlier_costs},
        {"sorted ascending", ascending_costs},
        {"reverse sorted", descending_costs},
        {"ties: 1,2,3", three_values_costs},
        {"ties: 1 or 1000", two_values_costs},
        {"ties: rounded lognormal", rounded_lognormal_costs},
    };
    return list;
}

/// A well-mixed seed for the i-th case of a test (SplitMix64 finalizer), so neighbouring cases do
/// not get neighbouring mt19937_64 seeds.
inline std::uint64_t case_seed(std::uint64_t i) {
    std::uint64_t z = i * 0x9e3779b97f4a7c15ULL + 0x1234567ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/// n costs from the distribution `seed` picks among all_distributions() (seed mod their count):
/// a table that a loop over seeds draws from each of them in turn.
inline cost_list costs_of_seed(std::size_t n, std::uint64_t seed) {
    const auto& list = all_distributions();
    return list[seed % list.size()].generate(n, seed);
}

} // namespace bcl_test
