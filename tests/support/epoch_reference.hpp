#pragma once
// The global plan of an epoch written again from its documentation, with nothing of
// bcl::epoch_planner: the integer shuffle of (seed, epoch), DistributedSampler's layout (padded
// with the order's head, or cut), each window of R*K*B kept records planned by bcl::plan_window,
// rank r's batch of a step its records in the window's order, and the chain of the windows'
// digests. The core's and the libtorch sampler's specifications both compare against it.

#include <bcl/global_plan.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <numeric>
#include <utility>
#include <vector>

namespace bcl_test {

using index_list = std::vector<std::size_t>;

/// SplitMix64 from its description: state += the golden gamma, then the output function.
struct reference_splitmix {
    std::uint64_t state;
    std::uint64_t next() {
        std::uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
        return z ^ (z >> 31);
    }
};

/// The documented order: seeded with the output for the seed, then the output for that xor the
/// epoch; a Fisher-Yates shuffle from the top, each position's partner drawn below its count by
/// rejection of the 2^64 mod count lowest values. 0..n-1 without shuffle.
inline index_list reference_order(std::size_t n, std::uint64_t seed, std::uint64_t epoch,
                                  bool shuffle) {
    index_list order(n);
    std::iota(order.begin(), order.end(), std::size_t{0});
    if (!shuffle) return order;
    const std::uint64_t first = reference_splitmix{seed}.next();
    reference_splitmix rng{reference_splitmix{first ^ epoch}.next()};
    for (std::size_t count = n; count > 1; --count) {
        const std::uint64_t reject_below = (std::uint64_t(0) - count) % count;
        std::uint64_t x = rng.next();
        while (x < reject_below) x = rng.next();
        std::swap(order[count - 1], order[x % count]);
    }
    return order;
}

/// What every rank of an epoch must hand out.
struct reference_epoch {
    index_list kept;                              // the laid-out order's planned records
    std::vector<std::vector<index_list>> batches; // per rank, its batches
    std::uint64_t digest = 0;                     // the chain of the windows' plan digests
    std::size_t per_rank = 0;                     // m
};

/// The epoch of `order` over `table` for R ranks, windows of K steps, batches of B.
inline reference_epoch reference_plan(const index_list& order, const std::vector<double>& table,
                                      std::size_t r, std::size_t k, std::size_t b, bool drop_last,
                                      const bcl::plan_options& opt = {}) {
    const std::size_t n = order.size();
    // DistributedSampler: ceil((n - R) / R) = floor(n / R) each with drop_last when R does not
    // divide n, else ceil(n / R); BatchSampler's drop_last then cuts each share to whole batches.
    const std::size_t m0 = drop_last && n % r != 0 ? n / r : (n + r - 1) / r;
    reference_epoch out;
    out.per_rank = drop_last ? m0 - m0 % b : m0;
    for (std::size_t i = 0; i < out.per_rank * r; ++i) out.kept.push_back(order[i % n]);
    out.batches.resize(r);
    const std::size_t window = r * k * b;
    for (std::size_t first = 0; first < out.kept.size(); first += window) {
        const std::size_t count = std::min(window, out.kept.size() - first);
        std::vector<double> costs;
        for (std::size_t i = 0; i < count; ++i) costs.push_back(table[out.kept[first + i]]);
        const std::vector<bcl::plan_slot> slots =
            bcl::plan_window(costs, {.ranks = r, .steps = k, .batch = b}, opt);
        out.digest = bcl::plan_digest(slots, out.digest);
        const std::size_t steps = (count / r + b - 1) / b;
        for (std::size_t rank = 0; rank < r; ++rank)
            for (std::size_t step = 0; step < steps; ++step) {
                index_list batch;
                for (std::size_t i = 0; i < count; ++i)
                    if (slots[i].rank == rank && slots[i].step == step)
                        batch.push_back(out.kept[first + i]);
                out.batches[rank].push_back(std::move(batch));
            }
    }
    return out;
}

} // namespace bcl_test
