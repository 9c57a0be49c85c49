// detail/distributed_keyed_pass.hpp, as a specification: a keyed pass planned window by window
// hands out, batch for batch, the plan of the whole epoch (tests/support/epoch_reference.hpp,
// written apart from the planner, and bcl::epoch_planner::share over the keyed order), in any
// order its batches are asked, and sums the same promises; its digest is the inputs' (the cost
// table, every setting that shapes a plan, the epoch, the ranks, the rest), equal on every rank;
// and rest_after(p) leaves exactly the order positions no rank took in its first p batches.

#include "../sampler_support.hpp"
#include "support/epoch_reference.hpp"

#include <bcl/epoch_plan.hpp>
#include <bcl/epoch_rest.hpp>
#include <bcl/keyed_order.hpp>
#include <bcl/torch/detail/distributed_keyed_pass.hpp>

#include <catch2/catch.hpp>
#include <torch/torch.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <set>
#include <vector>

namespace {

using namespace sampler_support;
using bcl::torch::distributed_sampler_options;
using bcl::torch::detail::distributed_keyed_pass;

constexpr const char* who = "keyed";

std::shared_ptr<const std::vector<double>> costs_of(std::size_t n) {
    const std::vector<std::size_t> lengths = make_lengths(n);
    std::vector<double> c;
    for (const std::size_t l : lengths) c.push_back(double(l) + double(l * l) / 256.0);
    return std::make_shared<const std::vector<double>>(std::move(c));
}

struct shape {
    std::size_t n, ranks, batch, lookahead;
};

std::vector<index_batch> batches_of(distributed_keyed_pass& p, bool backwards = false) {
    std::vector<index_batch> out(p.batches());
    for (std::size_t k = 0; k < p.batches(); ++k) {
        const std::size_t i = backwards ? p.batches() - 1 - k : k;
        const auto b = p.batch(i, who);
        out[i].assign(b.begin(), b.end());
    }
    return out;
}

} // namespace

TEST_CASE("distributed_keyed_pass: window by window, the batches and promises of the whole "
          "epoch's plan over the keyed order, in any order the batches are asked",
          "[torch][distributed_keyed_pass]") {
    const shape sh = GENERATE(shape{70, 3, 4, 2}, shape{97, 8, 3, 2}, shape{5, 8, 2, 4},
                              shape{1000, 5, 16, 8}, shape{301, 4, 4, 3}, shape{0, 3, 4, 2});
    const bool drop_last = GENERATE(false, true);
    const bool shuffle = GENERATE(true, false);
    CAPTURE(sh.n, sh.ranks, sh.batch, sh.lookahead, drop_last, shuffle);
    const auto costs = costs_of(sh.n);
    const bcl::epoch_shape es{
        .ranks = sh.ranks, .lookahead = sh.lookahead, .batch = sh.batch, .drop_last = drop_last};
    bcl::plan_options opt;
    opt.batching = bcl::batch_cost::padded;
    for (const std::uint64_t epoch : {0U, 3U}) {
        const index_batch order = keyed_reference_order(sh.n, 7, epoch, shuffle);
        const bcl_test::reference_epoch ref = bcl_test::reference_plan(
            order, *costs, sh.ranks, sh.lookahead, sh.batch, drop_last, opt);
        bcl::epoch_planner whole;
        for (std::size_t rank = 0; rank < sh.ranks; ++rank) {
            CAPTURE(epoch, rank);
            bcl::epoch_share<std::size_t> share;
            whole.share(std::span<const double>(*costs), std::span<const std::size_t>(order), es,
                        rank, opt, share);
            distributed_keyed_pass pass(costs);
            pass.start(7, epoch, shuffle, es, rank, opt, 11, bcl::epoch_rest(sh.n), who);
            REQUIRE(pass.batches() == share.batches());
            const std::vector<index_batch> got = batches_of(pass);
            REQUIRE(got == ref.batches[rank]);
            REQUIRE(batches_of(pass, /*backwards=*/true) == got);
            const bcl::epoch_plan_summary& s = pass.summary(who);
            REQUIRE(s.digest == ref.digest);
            REQUIRE(s.digest == share.summary.digest);
            REQUIRE(s.windows == share.summary.windows);
            REQUIRE(s.batches == share.summary.batches);
            REQUIRE(s.total == share.summary.total);
            REQUIRE(s.objective == share.summary.objective);
            REQUIRE(s.lower_bound == share.summary.lower_bound);
            REQUIRE(batches_of(pass) == got); // the summary planned every window; still the plan
        }
    }
}

TEST_CASE("distributed_keyed_pass: its digest is the inputs', known without planning: equal on "
          "every rank, another for another table, setting, epoch, number of ranks or rest",
          "[torch][distributed_keyed_pass]") {
    using bcl::torch::detail::keyed_inputs_digest;
    using bcl::torch::detail::keyed_pass_digest;
    const distributed_sampler_options o{.num_replicas = 4,
                                        .rank = 1,
                                        .batch_size = 4,
                                        .lookahead = 3,
                                        .seed = 9,
                                        .order = bcl::torch::epoch_order_kind::keyed};
    const std::uint64_t inputs = keyed_inputs_digest(o, 123);
    // Not the ranks nor the rank: those the pass mixes in (the rank never).
    distributed_sampler_options other = o;
    other.num_replicas = 7;
    other.rank = 5;
    CHECK(keyed_inputs_digest(other, 123) == inputs);
    std::set<std::uint64_t> seen{inputs, keyed_inputs_digest(o, 124)};
    const auto differs = [&](auto edit) {
        distributed_sampler_options x = o;
        edit(x);
        return seen.insert(keyed_inputs_digest(x, 123)).second;
    };
    CHECK(differs([](auto& x) { x.batch_size = 5; }));
    CHECK(differs([](auto& x) { x.lookahead = 2; }));
    CHECK(differs([](auto& x) { x.shuffle = false; }));
    CHECK(differs([](auto& x) { x.seed = 10; }));
    CHECK(differs([](auto& x) { x.drop_last = true; }));
    CHECK(differs([](auto& x) { x.plan.batching = bcl::batch_cost::padded; }));
    CHECK(differs([](auto& x) { x.plan.cap = 2.5; }));
    CHECK(differs([](auto& x) { x.plan.level_steps = false; }));
    CHECK(seen.size() == 10);

    const bcl::epoch_rest whole(70);
    const std::uint8_t taken[] = {0x06};
    const bcl::epoch_rest part = bcl::epoch_rest::from_parts(70, 10, 3, taken, who);
    const std::set<std::uint64_t> passes{
        keyed_pass_digest(inputs, 0, 4, whole), keyed_pass_digest(inputs, 1, 4, whole),
        keyed_pass_digest(inputs, 0, 3, whole), keyed_pass_digest(inputs, 0, 4, part)};
    CHECK(passes.size() == 4);

    // Equal on every rank, and what start() sets without planning a window.
    const auto costs = costs_of(70);
    const bcl::epoch_shape es{.ranks = 3, .lookahead = 2, .batch = 4};
    const std::uint64_t d = keyed_pass_digest(inputs, 2, 3, whole);
    for (std::size_t rank = 0; rank < 3; ++rank) {
        distributed_keyed_pass pass(costs);
        pass.start(9, 2, true, es, rank, {}, inputs, whole, who);
        CHECK(pass.digest() == d);
    }
    distributed_keyed_pass pass(costs);
    REQUIRE_THROWS_WITH(pass.start(9, 2, true, es, 3, {}, inputs, whole, who),
                        Contains("rank 3 of 3 ranks"));
    REQUIRE_THROWS_WITH(pass.start(9, 2, true, es, 0, {}, inputs, bcl::epoch_rest(71), who),
                        Contains("the epoch's rest is of an epoch of 71 records, not 70"));
}

TEST_CASE("distributed_keyed_pass: rest_after(p) leaves the order positions no rank took in its "
          "first p batches, and a pass over that rest hands out exactly those records",
          "[torch][distributed_keyed_pass]") {
    // N a multiple of R: no padding, so the positions taken are exactly those of the batches.
    const shape sh = GENERATE(shape{72, 3, 4, 2}, shape{96, 4, 3, 3}, shape{40, 2, 5, 8});
    CAPTURE(sh.n, sh.ranks, sh.batch, sh.lookahead);
    const auto costs = costs_of(sh.n);
    const bcl::epoch_shape es{.ranks = sh.ranks, .lookahead = sh.lookahead, .batch = sh.batch};
    const index_batch order = keyed_reference_order(sh.n, 3, 1, true);
    std::vector<std::size_t> position_of(sh.n);
    for (std::size_t p = 0; p < sh.n; ++p) position_of[order[p]] = p;
    std::vector<std::vector<index_batch>> all;
    for (std::size_t r = 0; r < sh.ranks; ++r) {
        distributed_keyed_pass pass(costs);
        pass.start(3, 1, true, es, r, {}, 0, bcl::epoch_rest(sh.n), who);
        all.push_back(batches_of(pass));
    }
    distributed_keyed_pass pass(costs);
    pass.start(3, 1, true, es, 0, {}, 0, bcl::epoch_rest(sh.n), who);
    for (std::size_t p = 0; p <= pass.batches(); ++p) {
        CAPTURE(p);
        std::vector<bool> taken(sh.n, false);
        for (const auto& rank : all)
            for (std::size_t i = 0; i < p; ++i)
                for (const std::size_t index : rank[i]) taken[position_of[index]] = true;
        const bcl::epoch_rest rest = pass.rest_after(p, who);
        std::vector<std::uint64_t> expected;
        for (std::size_t q = 0; q < sh.n; ++q)
            if (!taken[q]) expected.push_back(q);
        std::vector<std::uint64_t> got;
        for (std::uint64_t q = 0; q < rest.size(); ++q) got.push_back(rest.position(q));
        REQUIRE(got == expected);
        // A pass over the rest, at another size, hands out those records, each once.
        const bcl::epoch_shape other{.ranks = 2, .lookahead = 2, .batch = 3};
        index_batch after;
        for (std::size_t r = 0; r < 2; ++r) {
            distributed_keyed_pass next(costs);
            next.start(3, 1, true, other, r, {}, 0, rest, who);
            for (const index_batch& b : batches_of(next))
                after.insert(after.end(), b.begin(), b.end());
        }
        index_batch want;
        for (const std::uint64_t q : expected) want.push_back(order[q]);
        std::sort(want.begin(), want.end());
        std::sort(after.begin(), after.end());
        after.erase(std::unique(after.begin(), after.end()), after.end()); // the padding's repeats
        REQUIRE(after == want);
    }
    REQUIRE_THROWS_WITH(pass.rest_after(pass.batches() + 1, who), Contains("is past the pass's"));
}
