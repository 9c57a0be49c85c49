// bcl::torch::distributed_balanced_sampler in token mode with epoch_order_kind::keyed, resumed at
// another world size, as a specification (docs/resume.md, "At another world size"; Python's
// python/tests/test_token_resize.py): an archive saved at R ranks at a step boundary loads into a
// sampler of R' ranks, any saving rank's archive serving every new rank, and the epoch goes on
// with every index exactly once over the epoch, as many micro-batches on every new rank; chains
// of resizes; an archive holds the rest at its window's start and the position within it, small
// whatever the epoch, and resumes exactly at its own size from any position; one saved within a
// step is refused at another size naming the step boundary, the sampler unchanged.

#include "sampler_support.hpp"

#include <bcl/keyed_order.hpp>
#include <bcl/token_epoch_plan.hpp>
#include <bcl/torch/distributed_balanced_sampler.hpp>

#include <catch2/catch.hpp>
#include <torch/torch.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace {

using namespace sampler_support;
using bcl::torch::distributed_balanced_sampler;
using bcl::torch::epoch_order_kind;
using bcl::torch::token_padding;

constexpr std::size_t micro = 2; // micro-batches a step
constexpr std::uint64_t max_tokens = 1000;

std::vector<std::uint64_t> token_lengths(std::size_t n) {
    std::vector<std::uint64_t> out(n);
    for (std::size_t i = 0; i < n; ++i)
        out[i] = i % 10 == 0 ? max_tokens : i % 10 < 3 ? 500 + (i * 131) % 500 : (i * 37) % 250;
    return out;
}

distributed_balanced_sampler sampler(const std::vector<std::uint64_t>& lengths, std::size_t ranks,
                                     std::size_t rank, std::uint64_t seed = 3) {
    return distributed_balanced_sampler(std::vector<double>(), lengths,
                                        {.num_replicas = ranks,
                                         .rank = rank,
                                         .lookahead = 2,
                                         .seed = seed,
                                         .order = epoch_order_kind::keyed,
                                         .max_tokens = max_tokens,
                                         .micro_batches = micro,
                                         .padding = token_padding::empty});
}

std::vector<distributed_balanced_sampler> world(const std::vector<std::uint64_t>& lengths,
                                                std::size_t ranks) {
    std::vector<distributed_balanced_sampler> out;
    for (std::size_t r = 0; r < ranks; ++r) out.push_back(sampler(lengths, ranks, r));
    return out;
}

// The first micro-batch of each step of epoch 0 at `ranks` (and the end): the steps of
// bcl::token_epoch_planner::share over the keyed order materialized.
std::vector<std::size_t> step_starts(const std::vector<std::uint64_t>& lengths, std::size_t ranks) {
    const bcl::keyed_order order(lengths.size(), 3, 0);
    std::vector<std::size_t> positions(lengths.size());
    for (std::size_t p = 0; p < positions.size(); ++p) positions[p] = order.at(p);
    bcl::token_plan_options opt;
    opt.allow_empty_micro_batches = true;
    bcl::token_epoch_planner planner;
    bcl::token_epoch_share<std::size_t> share;
    planner.share<std::size_t>(lengths, {}, positions,
                               {.ranks = ranks, .max_tokens = max_tokens, .multiple_of = 1}, micro,
                               2, 0, opt, share);
    return share.steps;
}

// Each rank's first `position` micro-batches, appended to `taken`.
void run(std::vector<distributed_balanced_sampler>& ranks, std::size_t position,
         index_batch& taken) {
    for (distributed_balanced_sampler& s : ranks)
        for (std::size_t k = 0; k < position; ++k) {
            auto b = s.next(1);
            REQUIRE(b.has_value());
            taken.insert(taken.end(), b->begin(), b->end());
        }
}

// The rest of every rank's pass, each as many micro-batches, appended to `taken`.
void drain_world(std::vector<distributed_balanced_sampler>& ranks, index_batch& taken) {
    std::vector<std::size_t> counts;
    for (distributed_balanced_sampler& s : ranks) {
        const std::size_t left = s.size() - s.position();
        const std::vector<index_batch> rest = drain(s, 1);
        REQUIRE(rest.size() == left);
        counts.push_back(rest.size());
        for (const index_batch& b : rest) taken.insert(taken.end(), b.begin(), b.end());
    }
    REQUIRE(
        std::all_of(counts.begin(), counts.end(), [&](std::size_t c) { return c == counts[0]; }));
}

void require_once(std::size_t n, const index_batch& taken) {
    std::vector<std::size_t> counts(n, 0);
    for (const std::size_t i : taken) {
        REQUIRE(i < n);
        ++counts[i];
    }
    for (std::size_t i = 0; i < n; ++i) {
        CAPTURE(i);
        REQUIRE(counts[i] == 1);
    }
}

std::vector<distributed_balanced_sampler> resumed(const std::vector<std::uint64_t>& lengths,
                                                  std::size_t ranks, const std::string& bytes) {
    std::vector<distributed_balanced_sampler> out = world(lengths, ranks);
    for (distributed_balanced_sampler& s : out) load_bytes(s, bytes);
    return out;
}

} // namespace

TEST_CASE("torch token resize: a keyed token archive saved at R ranks goes on at R' (1, R-1, "
          "R+1, 2R, R/2, a prime) at every step boundary, every index once, equal counts",
          "[torch][distributed][tokens][resize][keyed]") {
    struct sizes {
        std::size_t from, to;
    };
    const sizes sz = GENERATE(sizes{4, 1}, sizes{4, 3}, sizes{4, 5}, sizes{4, 8}, sizes{4, 2},
                              sizes{4, 7}, sizes{3, 3}, sizes{1, 4});
    const std::size_t n = 300;
    const std::vector<std::uint64_t> lengths = token_lengths(n);
    for (const std::size_t p : step_starts(lengths, sz.from)) {
        CAPTURE(sz.from, sz.to, p);
        std::vector<distributed_balanced_sampler> old = world(lengths, sz.from);
        index_batch taken;
        run(old, p, taken);
        const std::string bytes = saved_bytes(old[p % sz.from]); // any rank's serves every rank
        std::vector<distributed_balanced_sampler> fresh = resumed(lengths, sz.to, bytes);
        drain_world(fresh, taken);
        require_once(n, taken);
    }
}

TEST_CASE("torch token resize: chains of resizes within one epoch; the archive stays small and "
          "holds the rest at its window's start",
          "[torch][distributed][tokens][resize][keyed]") {
    const std::size_t n = 1200;
    const std::vector<std::uint64_t> lengths = token_lengths(n);
    std::vector<distributed_balanced_sampler> current = world(lengths, 4);
    index_batch taken;
    for (const std::size_t next : {3, 6, 2}) {
        run(current, 5 * micro, taken);
        const std::string bytes = saved_bytes(current.back());
        const archive_parts parts = archive_parts::of(bytes, false);
        REQUIRE(parts.ints("bcl_position")[0] < std::int64_t(5 * micro));
        REQUIRE(bytes.size() < 16384); // a bitmap of about a window, never a list of records
        current = resumed(lengths, next, bytes);
    }
    drain_world(current, taken);
    require_once(n, taken);
}

TEST_CASE("torch token resize: an archive resumes exactly at its own size from any position; one "
          "saved within a step is refused at another size naming the step boundary, the sampler "
          "unchanged",
          "[torch][distributed][tokens][resize][keyed]") {
    const std::vector<std::uint64_t> lengths = token_lengths(500);
    distributed_balanced_sampler whole = sampler(lengths, 3, 1);
    const std::vector<index_batch> all = drain(whole, 1);
    for (std::size_t taken = 0; taken <= all.size(); taken += 3) {
        CAPTURE(taken);
        distributed_balanced_sampler saved = sampler(lengths, 3, 1);
        for (std::size_t k = 0; k < taken; ++k) REQUIRE(saved.next(1) == all[k]);
        distributed_balanced_sampler again = sampler(lengths, 3, 1);
        load_bytes(again, saved_bytes(saved));
        REQUIRE(drain(again, 1) ==
                std::vector<index_batch>(all.begin() + std::ptrdiff_t(taken), all.end()));
    }
    distributed_balanced_sampler within = sampler(lengths, 3, 1);
    for (std::size_t k = 0; k < micro + 1; ++k) (void)within.next(1);
    const std::string bytes = saved_bytes(within);
    distributed_balanced_sampler other = sampler(lengths, 2, 0);
    (void)other.next(1);
    const std::string before = saved_bytes(other);
    REQUIRE_THROWS_WITH(load_bytes(other, bytes),
                        Contains("within a step") && Contains("save it after the optimizer step"));
    REQUIRE(saved_bytes(other) == before);
}
