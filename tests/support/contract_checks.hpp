#pragma once
// Drivers that push a cost list through bcl and record the batches as lists of record ids, and
// checkers for the contract points (README) that derive every expectation from (N, B, K,
// drop_last) alone. A checker returns an empty string when the property holds and a sentence
// naming the first violation otherwise, so a failing CHECK says what went wrong.

#include "case_count.hpp"
#include "distributions.hpp"

#include <bcl/balance.hpp>
#include <bcl/balancer.hpp>
#include <bcl/options.hpp>
#include <bcl/statistics.hpp>

#include <fmt/core.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <random>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace bcl_test {

/// A plain record: its arrival index and its cost.
struct rec {
    std::uint64_t id = 0;
    double cost = 0.0;
};

struct cost_of {
    double operator()(const rec& r) const noexcept { return r.cost; }
};

using batch_ids = std::vector<std::vector<std::uint64_t>>;

struct run_result {
    batch_ids batches;
    bcl::statistics stats;
};

inline std::vector<rec> make_records(const cost_list& costs) {
    std::vector<rec> records;
    records.reserve(costs.size());
    for (std::size_t i = 0; i < costs.size(); ++i) records.push_back({i, costs[i]});
    return records;
}

inline std::vector<std::uint64_t> ids_of(std::span<rec> batch) {
    std::vector<std::uint64_t> ids;
    ids.reserve(batch.size());
    for (const rec& r : batch) ids.push_back(r.id);
    return ids;
}

/// Finishes `b` and pops everything left, batch by batch.
template <class Balancer>
batch_ids drain(Balancer& b) {
    batch_ids out;
    b.finish();
    while (auto batch = b.pop()) out.push_back(ids_of(*batch));
    return out;
}

/// How a test drives bcl.
enum class driver {
    eager, ///< bcl::balancer, pop() until empty after every push (the loop every trainer runs)
    lazy,  ///< bcl::balancer, pop() only while can_push() is false, so push() partitions
    range, ///< bcl::balance over the moved record vector
};

inline const char* name_of(driver d) {
    switch (d) {
    case driver::eager:
        return "bcl::balancer popping after every push";
    case driver::lazy:
        return "bcl::balancer popping only when can_push() is false";
    case driver::range:
        return "bcl::balance";
    }
    return "?";
}

inline constexpr driver all_drivers[] = {driver::eager, driver::lazy, driver::range};

inline run_result run(driver d, const cost_list& costs, const bcl::options& opt) {
    run_result result;
    if (d == driver::range) {
        auto view = bcl::balance(make_records(costs), cost_of{}, opt);
        for (auto&& batch : view) result.batches.push_back(ids_of(batch));
        result.stats = view.balancer().stats();
        return result;
    }
    bcl::balancer<rec, cost_of> b{cost_of{}, opt};
    for (std::size_t i = 0; i < costs.size(); ++i) {
        if (d == driver::lazy) {
            while (!b.can_push()) {
                auto batch = b.pop();
                if (!batch) throw std::logic_error("can_push() is false but pop() has nothing");
                result.batches.push_back(ids_of(*batch));
            }
            b.push(rec{i, costs[i]});
        } else {
            b.push(rec{i, costs[i]});
            while (auto batch = b.pop()) result.batches.push_back(ids_of(*batch));
        }
    }
    b.finish();
    while (auto batch = b.pop()) result.batches.push_back(ids_of(*batch));
    result.stats = b.stats();
    return result;
}

/// Batches expected for N records: ceil(N/B), or floor(N/B) with drop_last.
inline std::size_t expected_batches(std::size_t n, std::size_t b, bool drop_last) {
    return drop_last ? n / b : (n + b - 1) / b;
}

/// Contract point 1: all batches have B records but the last, which has N mod B when that is
/// nonzero and drop_last is off.
inline std::string check_cardinality(const batch_ids& batches, std::size_t n, std::size_t b,
                                     bool drop_last) {
    const std::size_t count = expected_batches(n, b, drop_last);
    if (batches.size() != count)
        return fmt::format("{} batches, expected {}", batches.size(), count);
    for (std::size_t j = 0; j < batches.size(); ++j) {
        const bool short_last = j + 1 == count && n % b != 0 && !drop_last;
        const std::size_t want = short_last ? n % b : b;
        if (batches[j].size() != want)
            return fmt::format("batch {} of {} has {} records, expected {}", j, count,
                               batches[j].size(), want);
    }
    return {};
}

/// Contract point 3: the ids out are exactly 0..kept-1, each once, where kept = N, or N minus the
/// last N mod B arrivals with drop_last.
inline std::string check_exactly_once(const batch_ids& batches, std::size_t n, std::size_t b,
                                      bool drop_last) {
    const std::size_t kept = drop_last ? n - n % b : n;
    std::vector<std::uint64_t> seen(kept, 0);
    for (const auto& batch : batches)
        for (const std::uint64_t id : batch) {
            if (id >= kept) return fmt::format("record {} came out but should not have", id);
            if (++seen[id] > 1) return fmt::format("record {} came out twice", id);
        }
    for (std::size_t id = 0; id < kept; ++id)
        if (seen[id] == 0) return fmt::format("record {} never came out", id);
    return {};
}

/// Contract point 4 (tumbling): record i leaves in one of the K batches of its own window
/// w = i / (K*B), i.e. a batch index in [w*K, w*K + K).
inline std::string check_own_window(const batch_ids& batches, std::size_t b, std::size_t k) {
    for (std::size_t j = 0; j < batches.size(); ++j)
        for (const std::uint64_t id : batches[j]) {
            const std::size_t window = id / (k * b);
            if (j < window * k || j >= window * k + k)
                return fmt::format("record {} (window {}) left in batch {}, outside [{}, {})", id,
                                   window, j, window * k, window * k + k);
        }
    return {};
}

/// One property-test case: a shape, a distribution, a size and a seed.
struct scenario {
    std::size_t b = 1;
    std::size_t k = 1;
    const distribution* dist = nullptr;
    std::size_t n = 0;
    std::uint64_t seed = 0;
    bool drop_last = false;
    bcl::emission_order emission = bcl::emission_order::costliest_first;
    bcl::batch_cost batching = bcl::batch_cost::packed;

    [[nodiscard]] cost_list costs() const { return dist->generate(n, seed); }
    [[nodiscard]] bcl::options options() const {
        return {.batch_size = b,
                .lookahead = k,
                .drop_last = drop_last,
                .seed = seed ^ 0xb5c1,
                .emission = emission,
                .batching = batching,
                .policy = bcl::lookahead_policy::tumbling};
    }
    [[nodiscard]] std::string describe() const {
        return fmt::format("B={} K={} N={} costs={} seed={} drop_last={} emission={} batching={}",
                           b, k, n, dist->name, seed, drop_last,
                           emission == bcl::emission_order::shuffled ? "shuffled"
                                                                     : "costliest_first",
                           batching == bcl::batch_cost::padded ? "padded" : "packed");
    }
};

/// (B, K) pairs the property tests cover: the degenerate B = 1 and K = 1, small odd shapes, and a
/// realistic one.
inline constexpr std::pair<std::size_t, std::size_t> contract_shapes[] = {
    {1, 1}, {1, 6}, {5, 1}, {2, 2}, {4, 8}, {7, 3}, {32, 8}};

/// How many of contract_sizes() are random, at its end.
inline constexpr std::size_t contract_random_sizes = 2;

/// Sizes for a shape: the edges around B and K*B, two windows and a bit, and two random sizes
/// up to 3000 (different for every shape and distribution).
inline std::vector<std::size_t> contract_sizes(std::size_t b, std::size_t k, std::uint64_t seed) {
    std::mt19937_64 gen(seed);
    const std::size_t w = k * b;
    return {0,
            1,
            b - 1,
            b,
            b + 1,
            w - 1,
            w,
            w + 1,
            2 * w + 3,
            static_cast<std::size_t>(uniform_integer(gen, 0, 3000)),
            static_cast<std::size_t>(uniform_integer(gen, 0, 3000))};
}

/// Every shape x every distribution x every size, each with its own seed: 847 scenarios, so each
/// property is checked on 847 seeds per driver. The emission orders and batch costs take turns
/// (costliest-first and shuffled, packed and padded), so each pair is checked on about 212.
/// Under the sanitizers (support/case_count.hpp) every edge size is kept and the two random sizes,
/// which are most of the records, are drawn for one (shape, distribution) in case_divisor.
inline std::vector<scenario> contract_scenarios(bool drop_last) {
    std::vector<scenario> all;
    std::uint64_t counter = drop_last ? 1'000'000 : 0;
    std::size_t combination = 0;
    for (const auto& [b, k] : contract_shapes)
        for (const distribution& dist : all_distributions()) {
            const std::vector<std::size_t> sizes = contract_sizes(b, k, case_seed(++counter));
            const bool with_random_sizes = combination++ % case_divisor == 0;
            for (std::size_t i = 0; i < sizes.size(); ++i) {
                const std::uint64_t seed = case_seed(++counter); // drawn alike either way
                if (i + contract_random_sizes >= sizes.size() && !with_random_sizes) continue;
                scenario sc{b, k, &dist, sizes[i], seed, drop_last};
                sc.emission = all.size() % 2 == 0 ? bcl::emission_order::costliest_first
                                                  : bcl::emission_order::shuffled;
                sc.batching =
                    all.size() % 4 < 2 ? bcl::batch_cost::packed : bcl::batch_cost::padded;
                all.push_back(sc);
            }
        }
    return all;
}

} // namespace bcl_test
