// bcl::torch::distributed_balanced_sampler over a table of stage costs
// (distributed_sampler_options::stages = D, costs N rows of D), as a specification
// (docs/stages.md; Python's python/tests/test_stage_sampler.py): every rank's batches are those of
// the core's plan of the same table (bcl::epoch_planner::share over a bcl::stage_table_view), in
// either order, every index of the epoch once, B a batch, as many on every rank; one stage plans
// as one cost a record; an archive resumes where it was saved, a keyed one at another number of
// ranks too, and one of the same values as one cost a record is refused, changing nothing; bad
// stages, a bad cost (naming its record and stage) and settings that are for one cost a record
// are errors at construction.

#include "sampler_support.hpp"

#include <bcl/epoch_plan.hpp>
#include <bcl/keyed_order.hpp>
#include <bcl/stage_plan.hpp>
#include <bcl/torch/distributed_balanced_sampler.hpp>

#include <catch2/catch.hpp>
#include <torch/torch.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace {

using namespace sampler_support;
using bcl::torch::distributed_balanced_sampler;
using bcl::torch::distributed_sampler_options;
using bcl::torch::epoch_order_kind;
using Catch::Matchers::Contains;

constexpr std::size_t batch = 4;

// n records of two stages: an encoder's cost, heavy-tailed and zero for a third of them, and a
// language model's, from the test lengths.
std::vector<double> stage_costs(std::size_t n) {
    const std::vector<std::size_t> lengths = make_lengths(n);
    std::vector<double> c;
    for (std::size_t i = 0; i < n; ++i) {
        const double l = double(lengths[i]);
        c.push_back(i % 3 == 0 ? 0.0 : double((i * 7919) % 97) * double((i * 7919) % 97));
        c.push_back(l + l * l / 256.0);
    }
    return c;
}

distributed_sampler_options settings(std::size_t ranks, std::size_t rank, epoch_order_kind order,
                                     std::size_t stages = 2) {
    return {.num_replicas = ranks,
            .rank = rank,
            .batch_size = batch,
            .lookahead = 3,
            .seed = 5,
            .order = order,
            .stages = stages};
}

distributed_balanced_sampler sampler(const std::vector<double>& costs, std::size_t ranks,
                                     std::size_t rank, epoch_order_kind order,
                                     std::size_t stages = 2) {
    return distributed_balanced_sampler(costs, std::vector<std::uint64_t>(),
                                        settings(ranks, rank, order, stages));
}

} // namespace

TEST_CASE("torch stages: every rank's batches are the core's plan of the stage table, every index "
          "once, B a batch, in either order",
          "[torch][distributed][stages]") {
    const epoch_order_kind order =
        GENERATE(epoch_order_kind::fisher_yates, epoch_order_kind::keyed);
    const std::size_t n = GENERATE(std::size_t{101}, std::size_t{240});
    const std::size_t ranks = GENERATE(std::size_t{1}, std::size_t{3}, std::size_t{4});
    CAPTURE(n, ranks, order == epoch_order_kind::keyed);
    const std::vector<double> costs = stage_costs(n);
    std::vector<std::size_t> counts(n, 0);
    std::size_t per_rank = 0;
    for (std::size_t rank = 0; rank < ranks; ++rank) {
        distributed_balanced_sampler s = sampler(costs, ranks, rank, order);
        const std::vector<index_batch> got = drain(s, batch);
        if (rank == 0) per_rank = got.size();
        REQUIRE(got.size() == per_rank);
        for (std::size_t i = 0; i + 1 < got.size(); ++i) REQUIRE(got[i].size() == batch);
        for (const index_batch& b : got)
            for (const std::size_t i : b) ++counts.at(i);
        if (order == epoch_order_kind::keyed) { // the core's plan of the keyed order
            std::vector<std::uint64_t> keyed(n);
            const bcl::keyed_order o(n, 5, 0);
            for (std::size_t p = 0; p < n; ++p) keyed[p] = o.at(p);
            bcl::epoch_share<std::uint64_t> share;
            bcl::epoch_planner{}.share(
                bcl::stage_table_view{costs, 2}, std::span<const std::uint64_t>(keyed),
                {.ranks = ranks, .lookahead = 3, .batch = batch}, rank, {}, share);
            REQUIRE(share.batches() == got.size());
            for (std::size_t i = 0; i < got.size(); ++i) {
                const auto want = share.batch(i);
                REQUIRE(index_batch(want.begin(), want.end()) == got[i]);
            }
        }
    }
    for (std::size_t i = 0; i < n; ++i) REQUIRE(counts[i] >= 1);
}

TEST_CASE("torch stages: one stage plans as one cost a record", "[torch][distributed][stages]") {
    const epoch_order_kind order =
        GENERATE(epoch_order_kind::fisher_yates, epoch_order_kind::keyed);
    const std::vector<double> rows = stage_costs(90);
    std::vector<double> first;
    for (std::size_t i = 0; i < 90; ++i) first.push_back(rows[2 * i + 1]);
    for (std::size_t rank = 0; rank < 3; ++rank) {
        distributed_balanced_sampler one = sampler(first, 3, rank, order, 1);
        distributed_balanced_sampler flat =
            distributed_balanced_sampler(first, std::vector<std::uint64_t>(),
                                         {.num_replicas = 3,
                                          .rank = rank,
                                          .batch_size = batch,
                                          .lookahead = 3,
                                          .seed = 5,
                                          .order = order});
        REQUIRE(drain(one, batch) == drain(flat, batch));
    }
}

TEST_CASE("torch stages: an archive resumes where it was saved, a keyed one at another number of "
          "ranks; one of the same values as one cost a record is refused, changing nothing",
          "[torch][distributed][stages]") {
    const std::vector<double> costs = stage_costs(120);
    for (const epoch_order_kind order : {epoch_order_kind::fisher_yates, epoch_order_kind::keyed})
        for (const std::size_t taken : {std::size_t{0}, std::size_t{2}, std::size_t{5}}) {
            CAPTURE(taken, order == epoch_order_kind::keyed);
            (void)require_resumes([&] { return sampler(costs, 3, 1, order); }, taken);
        }
    // Keyed, saved at 3 ranks after two steps, resumed at 2: every index once over the epoch.
    std::vector<distributed_balanced_sampler> old;
    for (std::size_t r = 0; r < 3; ++r)
        old.push_back(sampler(costs, 3, r, epoch_order_kind::keyed));
    index_batch taken;
    for (int step = 0; step < 2; ++step)
        for (distributed_balanced_sampler& s : old)
            if (auto b = s.next(batch)) taken.insert(taken.end(), b->begin(), b->end());
    const std::string bytes = saved_bytes(old[0]);
    std::size_t left = 0;
    for (std::size_t r = 0; r < 2; ++r) {
        distributed_balanced_sampler s = sampler(costs, 2, r, epoch_order_kind::keyed);
        load_bytes(s, bytes);
        const std::vector<index_batch> rest = drain(s, batch);
        if (r == 0) left = rest.size();
        REQUIRE(rest.size() == left);
        for (const index_batch& b : rest) taken.insert(taken.end(), b.begin(), b.end());
    }
    std::vector<std::size_t> counts(120, 0);
    for (const std::size_t i : taken) ++counts.at(i);
    std::size_t repeated = 0;
    for (const std::size_t c : counts) {
        REQUIRE(c >= 1);
        repeated += c - 1;
    }
    REQUIRE(repeated <= 5);
    // The same values read as one cost a record (240 records) make another table.
    distributed_balanced_sampler flat = distributed_balanced_sampler(
        costs, std::vector<std::uint64_t>(), settings(3, 0, epoch_order_kind::keyed, 1));
    (void)flat.next(batch);
    distributed_balanced_sampler staged = sampler(costs, 3, 0, epoch_order_kind::keyed);
    (void)staged.next(batch);
    const std::string before = saved_bytes(staged);
    REQUIRE_THROWS_AS(load_bytes(staged, saved_bytes(flat)), bcl::error);
    REQUIRE(saved_bytes(staged) == before);
}

TEST_CASE("torch stages: bad stages, a bad cost and settings for one cost a record are errors "
          "naming them",
          "[torch][distributed][stages][errors]") {
    std::vector<double> costs = stage_costs(40);
    const auto refused = [&](const std::vector<double>& c, distributed_sampler_options o,
                             const std::string& words) {
        CAPTURE(words);
        REQUIRE_THROWS_WITH(distributed_balanced_sampler(c, std::vector<std::uint64_t>(), o),
                            Contains(words));
    };
    refused(costs, settings(2, 0, epoch_order_kind::keyed, 0), "0 stages; a record has 1 to 16");
    refused(costs, settings(2, 0, epoch_order_kind::keyed, 17), "17 stages");
    refused(costs, settings(2, 0, epoch_order_kind::keyed, 3), "80 costs are not rows of 3");
    distributed_sampler_options capped = settings(2, 0, epoch_order_kind::keyed);
    capped.plan.cap = 5.0;
    refused(costs, capped, "stages is 2, but a plan cap and padded batching are for one cost");
    distributed_sampler_options tokens{
        .num_replicas = 2, .max_tokens = 64, .micro_batches = 1, .stages = 2};
    REQUIRE_THROWS_WITH(distributed_balanced_sampler(std::vector<double>(),
                                                     std::vector<std::uint64_t>(40, 8), tokens),
                        Contains("stages is 2, but it is for batches of batch_size"));
    costs[2 * 7 + 1] = std::numeric_limits<double>::quiet_NaN();
    refused(costs, settings(2, 0, epoch_order_kind::keyed), "record 7's cost of stage 1 is nan");
}
