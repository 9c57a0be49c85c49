// bcl::keyed_token_pass, as a specification: a token-budget pass planned window by window over
// the keyed order hands out, micro-batch for micro-batch, bcl::token_epoch_planner::share's plan
// of the same order materialized, in any order the micro-batches are asked, and sums the same
// promises; its count is found by a walk that keeps nothing; point(p) is a rest and a position
// from which a pass at the same size hands out what the first would have; rest_after(p) at a
// step boundary leaves exactly the records no rank took, and passes over it at another size (and
// again at a third) hand each out once; within a step it is refused, naming the step boundary.

#include "support/distributions.hpp"

#include <bcl/epoch_rest.hpp>
#include <bcl/error.hpp>
#include <bcl/keyed_order.hpp>
#include <bcl/keyed_token_epoch.hpp>
#include <bcl/token_epoch_plan.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <random>
#include <span>
#include <vector>

namespace {

using Catch::Matchers::Contains;
using micro_list = std::vector<std::vector<std::uint64_t>>;

struct token_case {
    std::size_t n, ranks;
    std::uint64_t max_tokens;
    std::size_t micro, lookahead, multiple_of;
};

// Lengths in [0, T]: mostly short, a share of them above T/2, some of exactly T.
std::vector<std::uint64_t> token_lengths(std::size_t n, std::uint64_t t, std::uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::vector<std::uint64_t> out(n);
    for (std::uint64_t& l : out) {
        const std::uint64_t kind = rng() % 10;
        l = kind == 0 ? t : kind < 3 ? t / 2 + rng() % (t / 2) : rng() % (t / 4 + 1);
    }
    return out;
}

// The order a pass over `rest` walks, materialized.
std::vector<std::uint64_t> rest_order(const bcl::epoch_rest& rest, std::uint64_t seed,
                                      std::uint64_t epoch, bool shuffle) {
    const bcl::keyed_order order(rest.epoch_size(), seed, epoch);
    std::vector<std::uint64_t> out(rest.size());
    for (std::uint64_t q = 0; q < rest.size(); ++q)
        out[q] = shuffle ? order.at(rest.position(q)) : rest.position(q);
    return out;
}

struct tables {
    std::vector<std::uint64_t> tokens;
    std::vector<double> costs; // empty: the default cost

    [[nodiscard]] auto tokens_of() const {
        return [this](std::uint64_t i) { return tokens.at(i); };
    }
    [[nodiscard]] auto cost_of() const {
        return [this](std::uint64_t i) { return costs.at(i); };
    }
};

bcl::token_epoch_shape shape_of(const token_case& c, bool empty, bool repeat) {
    bcl::token_epoch_shape shape;
    shape.budget = {.ranks = c.ranks, .max_tokens = c.max_tokens, .multiple_of = c.multiple_of};
    shape.micro_batches = c.micro;
    shape.lookahead = c.lookahead;
    shape.options.allow_empty_micro_batches = empty;
    shape.repeat_to_fill = repeat;
    return shape;
}

// The share token_epoch_planner::share plans for `rank` over `order`.
bcl::token_epoch_share<std::uint64_t> reference_share(const tables& t,
                                                      const std::vector<std::uint64_t>& order,
                                                      const bcl::token_epoch_shape& shape,
                                                      std::size_t rank) {
    bcl::token_epoch_planner planner;
    bcl::token_epoch_share<std::uint64_t> share;
    planner.share<std::uint64_t>(t.tokens, t.costs, order, shape.budget, shape.micro_batches,
                                 shape.lookahead, rank, shape.options, share,
                                 "bcl::token_epoch_planner", shape.repeat_to_fill);
    return share;
}

micro_list share_batches(const bcl::token_epoch_share<std::uint64_t>& s, std::size_t from = 0) {
    micro_list out;
    for (std::size_t i = from; i < s.micro_batches(); ++i) {
        const auto b = s.micro_batch(i);
        out.emplace_back(b.begin(), b.end());
    }
    return out;
}

// The pass's micro-batches from `from` to its end, asked in order (or from the end backwards).
micro_list pass_batches(bcl::keyed_token_pass<>& pass, const tables& t, std::size_t from = 0,
                        bool backwards = false) {
    const std::size_t count = pass.micro_batches(t.tokens_of(), t.cost_of());
    micro_list out(count - from);
    for (std::size_t k = 0; k < out.size(); ++k) {
        const std::size_t i = backwards ? count - 1 - k : from + k;
        const auto b = pass.micro_batch(i, t.tokens_of(), t.cost_of());
        REQUIRE(b.has_value());
        out[i - from].assign(b->begin(), b->end());
    }
    REQUIRE_FALSE(pass.micro_batch(count, t.tokens_of(), t.cost_of()).has_value());
    return out;
}

const std::vector<token_case>& token_cases() {
    static const std::vector<token_case> cases{
        {300, 3, 100, 2, 2, 1}, {97, 2, 64, 1, 3, 1},    {400, 4, 128, 2, 2, 2},
        {41, 5, 50, 1, 1, 1},   {1000, 8, 256, 2, 4, 1}, {12, 3, 40, 1, 2, 1},
    };
    return cases;
}

} // namespace

TEST_CASE("keyed token pass: window by window, the micro-batches and promises of the whole "
          "epoch's token plan over the keyed order, in any order they are asked",
          "[keyed_token_epoch]") {
    for (const token_case& c : token_cases())
        for (const bool with_costs : {false, true})
            for (const bool shuffle : {true, false})
                for (const bool empty : {false, true}) {
                    CAPTURE(c.n, c.ranks, c.max_tokens, c.micro, c.lookahead, c.multiple_of,
                            with_costs, shuffle, empty);
                    tables t{token_lengths(c.n, c.max_tokens, c.n + c.ranks), {}};
                    if (with_costs) t.costs = bcl_test::costs_of_seed(c.n, c.n);
                    const bcl::token_epoch_shape shape = shape_of(c, empty, !empty);
                    const bcl::epoch_rest whole(c.n);
                    const std::vector<std::uint64_t> order = rest_order(whole, 11, 2, shuffle);
                    for (std::size_t rank = 0; rank < c.ranks; ++rank) {
                        const auto share = reference_share(t, order, shape, rank);
                        bcl::keyed_token_pass<> pass;
                        pass.start(11, 2, shuffle, shape, rank, with_costs, 5, whole);
                        REQUIRE_FALSE(pass.walked());
                        // Forward, micro-batch by micro-batch, the pass walking as it goes.
                        const auto first = pass.micro_batch(0, t.tokens_of(), t.cost_of());
                        REQUIRE(first.has_value());
                        REQUIRE(std::vector<std::uint64_t>(first->begin(), first->end()) ==
                                share_batches(share).front());
                        REQUIRE(pass_batches(pass, t) == share_batches(share));
                        REQUIRE(pass.walked());
                        REQUIRE(pass.planned().digest == share.digest);
                        REQUIRE(pass.planned().windows == share.windows);
                        REQUIRE(pass.planned().micro_steps == share.micro_steps);
                        REQUIRE(pass.planned().repeated == share.repeated);
                        REQUIRE(pass.planned().total == Approx(share.total));
                        REQUIRE(pass.planned().objective == Approx(share.objective));
                        // Backwards, each window planned again where it is asked.
                        REQUIRE(pass_batches(pass, t, 0, true) == share_batches(share));
                        REQUIRE(pass.planned().windows == share.windows); // counted once
                    }
                }
}

TEST_CASE("keyed token pass: its count comes from a walk that keeps no micro-batch, after which "
          "the pass hands out the same micro-batches",
          "[keyed_token_epoch]") {
    const token_case c{500, 4, 128, 2, 2, 1};
    const tables t{token_lengths(c.n, c.max_tokens, 3), {}};
    const bcl::token_epoch_shape shape = shape_of(c, false, true);
    bcl::keyed_token_pass<> reference;
    reference.start(3, 0, true, shape, 1, false, 0, bcl::epoch_rest(c.n));
    const micro_list expected = pass_batches(reference, t);
    bcl::keyed_token_pass<> pass;
    pass.start(3, 0, true, shape, 1, false, 0, bcl::epoch_rest(c.n));
    const auto middle = pass.micro_batch(expected.size() / 2, t.tokens_of(), t.cost_of());
    REQUIRE(middle.has_value());
    REQUIRE(std::vector<std::uint64_t>(middle->begin(), middle->end()) ==
            expected[expected.size() / 2]);
    REQUIRE(pass.micro_batches(t.tokens_of(), t.cost_of()) == expected.size());
    REQUIRE(pass_batches(pass, t) == expected);
}

TEST_CASE("keyed token pass: an epoch padded by repetition repeats the epoch's first records, "
          "so that a pass over point(p)'s rest ends as the pass it continues",
          "[keyed_token_epoch]") {
    // 97 records of T tokens on 4 ranks: each alone in a micro-batch, 3 repeated to fill.
    const token_case c{97, 4, 300, 1, 3, 1};
    const tables t{std::vector<std::uint64_t>(c.n, c.max_tokens), {}};
    const bcl::token_epoch_shape shape = shape_of(c, false, true);
    bcl::keyed_token_pass<> pass;
    pass.start(6, 0, true, shape, 1, false, 2, bcl::epoch_rest(c.n));
    const micro_list all = pass_batches(pass, t);
    REQUIRE(pass.planned().repeated == 3);
    const bcl::keyed_order order(c.n, 6, 0);
    for (std::size_t p = 0; p < all.size(); ++p) {
        CAPTURE(p);
        const bcl::token_pass_point at = pass.point(p, t.tokens_of(), t.cost_of());
        bcl::keyed_token_pass<> resumed;
        resumed.start(6, 0, true, shape, 1, false, 2, at.rest);
        REQUIRE(pass_batches(resumed, t, at.position) ==
                micro_list(all.begin() + static_cast<std::ptrdiff_t>(p), all.end()));
        REQUIRE(resumed.planned().repeated == 3);
    }
    // The repeated ones are the epoch's first: every rank's micro-batches over the epoch hold
    // order positions 0, 1 and 2 twice.
    std::vector<int> seen(c.n, 0);
    for (std::size_t r = 0; r < c.ranks; ++r) {
        bcl::keyed_token_pass<> mine;
        mine.start(6, 0, true, shape, r, false, 2, bcl::epoch_rest(c.n));
        for (const auto& b : pass_batches(mine, t))
            for (const std::uint64_t i : b) ++seen[i];
    }
    for (std::uint64_t q = 0; q < c.n; ++q) REQUIRE(seen[order.at(q)] == (q < 3 ? 2 : 1));
}

TEST_CASE("keyed token pass: a pass at the same size over point(p)'s rest, from its position, "
          "hands out what the first pass hands out from p, at every p, padding by repetition too",
          "[keyed_token_epoch]") {
    for (const token_case& c : token_cases())
        for (const bool with_costs : {false, true})
            for (const bool repeat : {false, true}) {
                CAPTURE(c.n, c.ranks, c.max_tokens, c.micro, c.lookahead, with_costs, repeat);
                tables t{token_lengths(c.n, c.max_tokens, c.n), {}};
                if (with_costs) t.costs = bcl_test::costs_of_seed(c.n, c.n + 1);
                const bcl::token_epoch_shape shape = shape_of(c, !repeat, repeat);
                const std::size_t rank = c.ranks - 1;
                bcl::keyed_token_pass<> pass;
                pass.start(4, 1, true, shape, rank, with_costs, 9, bcl::epoch_rest(c.n));
                const micro_list all = pass_batches(pass, t);
                for (std::size_t p = 0; p <= all.size(); ++p) {
                    CAPTURE(p);
                    const bcl::token_pass_point at = pass.point(p, t.tokens_of(), t.cost_of());
                    if (p == all.size()) {
                        REQUIRE(at.rest.size() == 0);
                        continue;
                    }
                    bcl::keyed_token_pass<> resumed;
                    resumed.start(4, 1, true, shape, rank, with_costs, 9, at.rest);
                    REQUIRE(resumed.digest() == bcl::keyed_epoch_digest(9, 1, c.ranks, at.rest));
                    const micro_list rest = pass_batches(resumed, t, at.position);
                    REQUIRE(rest ==
                            micro_list(all.begin() + static_cast<std::ptrdiff_t>(p), all.end()));
                }
                REQUIRE_THROWS_WITH(pass.point(all.size() + 1, t.tokens_of(), t.cost_of()),
                                    Contains("past the pass's " + std::to_string(all.size())));
            }
}

namespace {

// Every rank's micro-batches of a pass over `rest` at `ranks`, as the sampler of each would hand
// them out; checks that every rank has as many and that a pass over the rest is
// token_epoch_planner::share's plan of the rest's order.
std::vector<micro_list> every_rank(const tables& t, const bcl::epoch_rest& rest,
                                   bcl::token_epoch_shape shape, std::size_t ranks) {
    shape.budget.ranks = ranks;
    const std::vector<std::uint64_t> order = rest_order(rest, 21, 4, true);
    std::vector<micro_list> out(ranks);
    for (std::size_t r = 0; r < ranks; ++r) {
        bcl::keyed_token_pass<> pass;
        pass.start(21, 4, true, shape, r, !t.costs.empty(), 1, rest);
        out[r] = pass_batches(pass, t);
        REQUIRE(out[r] == share_batches(reference_share(t, order, shape, r)));
        REQUIRE(out[r].size() == out[0].size());
    }
    return out;
}

// The step boundaries of a pass over `rest` at `ranks`: the first micro-batch of each step.
std::vector<std::size_t> step_starts(const tables& t, const bcl::epoch_rest& rest,
                                     bcl::token_epoch_shape shape, std::size_t ranks) {
    shape.budget.ranks = ranks;
    return reference_share(t, rest_order(rest, 21, 4, true), shape, 0).steps;
}

// Counts each index in every rank's first `position` micro-batches into `seen`.
void count_taken(const std::vector<micro_list>& ranks, std::size_t position,
                 std::vector<int>& seen) {
    for (const micro_list& mine : ranks)
        for (std::size_t i = 0; i < position; ++i)
            for (const std::uint64_t index : mine[i]) ++seen[index];
}

} // namespace

TEST_CASE("keyed token pass: the rest after any step boundary, planned at another number of "
          "ranks (and again at a third), hands out every record no rank took exactly once",
          "[keyed_token_epoch]") {
    const std::vector<token_case> cases{{240, 4, 100, 2, 2, 1}, {180, 6, 64, 1, 2, 1}};
    for (const token_case& c : cases) {
        const tables t{token_lengths(c.n, c.max_tokens, 17), {}};
        const bcl::token_epoch_shape shape = shape_of(c, true, false);
        const std::size_t r = c.ranks;
        const std::vector<micro_list> before = every_rank(t, bcl::epoch_rest(c.n), shape, r);
        const std::vector<std::size_t> steps = step_starts(t, bcl::epoch_rest(c.n), shape, r);
        for (const std::size_t r2 : {std::size_t{1}, r - 1, r + 1, 2 * r, r / 2, std::size_t{7}}) {
            for (const std::size_t p : steps) {
                CAPTURE(c.n, r, r2, p);
                bcl::keyed_token_pass<> pass;
                pass.start(21, 4, true, shape, p % r, false, 1, bcl::epoch_rest(c.n));
                const bcl::epoch_rest left = pass.rest_after(p, t.tokens_of(), t.cost_of());
                std::vector<int> seen(c.n, 0);
                count_taken(before, p, seen);
                REQUIRE(left.size() ==
                        static_cast<std::uint64_t>(std::count(seen.begin(), seen.end(), 0)));
                if (left.size() == 0) continue;
                // Any rank's rest is every rank's.
                bcl::keyed_token_pass<> other;
                other.start(21, 4, true, shape, (p + 1) % r, false, 1, bcl::epoch_rest(c.n));
                const bcl::epoch_rest also = other.rest_after(p, t.tokens_of(), t.cost_of());
                REQUIRE(std::vector<std::uint8_t>(also.taken().begin(), also.taken().end()) ==
                        std::vector<std::uint8_t>(left.taken().begin(), left.taken().end()));
                REQUIRE(also.start() == left.start());
                const std::vector<micro_list> after = every_rank(t, left, shape, r2);
                // A second resize, at the middle step boundary of the pass at r2, to r.
                const std::vector<std::size_t> steps2 = step_starts(t, left, shape, r2);
                const std::size_t p2 = steps2[steps2.size() / 2];
                bcl::token_epoch_shape shape2 = shape;
                shape2.budget.ranks = r2;
                bcl::keyed_token_pass<> second;
                second.start(21, 4, true, shape2, 0, false, 1, left);
                const bcl::epoch_rest left2 = second.rest_after(p2, t.tokens_of(), t.cost_of());
                count_taken(after, p2, seen);
                if (left2.size() > 0) {
                    const std::vector<micro_list> last = every_rank(t, left2, shape, r);
                    count_taken(last, last[0].size(), seen);
                }
                REQUIRE(std::all_of(seen.begin(), seen.end(), [](int k) { return k == 1; }));
            }
        }
    }
}

TEST_CASE("keyed token pass: a position within a step has no rest at another size: refused, "
          "naming the step and the step boundary, the pass unchanged",
          "[keyed_token_epoch]") {
    const token_case c{300, 3, 100, 3, 2, 1};
    const tables t{token_lengths(c.n, c.max_tokens, 5), {}};
    const bcl::token_epoch_shape shape = shape_of(c, true, false);
    bcl::keyed_token_pass<> pass;
    pass.start(21, 4, true, shape, 0, false, 1, bcl::epoch_rest(c.n));
    const micro_list all = pass_batches(pass, t);
    const std::vector<std::size_t> steps = step_starts(t, bcl::epoch_rest(c.n), shape, c.ranks);
    REQUIRE(steps.size() > 2);
    REQUIRE(steps[1] - steps[0] == 3); // M = 3 micro-batches a step
    REQUIRE_THROWS_WITH(pass.rest_after(steps[1] + 1, t.tokens_of(), t.cost_of()),
                        Contains("micro-batch " + std::to_string(steps[1] + 1) +
                                 " of the pass is within a step (its micro-batches " +
                                 std::to_string(steps[1]) + " to " +
                                 std::to_string(steps[2] - 1)) &&
                            Contains("save it after the optimizer step"));
    REQUIRE(pass_batches(pass, t) == all);
    REQUIRE_THROWS_WITH(pass.rest_after(all.size() + 1, t.tokens_of(), t.cost_of()),
                        Contains("past the pass's"));
    REQUIRE(pass.rest_after(all.size(), t.tokens_of(), t.cost_of()).size() == 0);
}

TEST_CASE("keyed token pass: start refuses a rank not below R and a shape the planner refuses, "
          "leaving the pass as it was; a rest with nothing left is a pass of no micro-batches",
          "[keyed_token_epoch]") {
    const token_case c{100, 2, 64, 1, 2, 1};
    const tables t{token_lengths(c.n, c.max_tokens, 8), {}};
    const bcl::token_epoch_shape shape = shape_of(c, true, false);
    bcl::keyed_token_pass<> pass;
    pass.start(1, 0, true, shape, 1, false, 3, bcl::epoch_rest(c.n));
    const micro_list all = pass_batches(pass, t);
    const std::uint64_t digest = pass.digest();
    REQUIRE_THROWS_WITH(pass.start(1, 0, true, shape, 2, false, 3, bcl::epoch_rest(c.n)),
                        Contains("rank 2 of 2 ranks"));
    bcl::token_epoch_shape bad = shape;
    bad.budget.max_tokens = 0;
    REQUIRE_THROWS_AS(pass.start(1, 0, true, bad, 0, false, 3, bcl::epoch_rest(c.n)), bcl::error);
    REQUIRE(pass.digest() == digest);
    REQUIRE(pass_batches(pass, t) == all);
    const bcl::epoch_rest nothing = pass.rest_after(all.size(), t.tokens_of(), t.cost_of());
    bcl::keyed_token_pass<> done;
    done.start(1, 0, true, shape, 0, false, 3, nothing);
    REQUIRE(done.walked());
    REQUIRE(done.micro_batches(t.tokens_of(), t.cost_of()) == 0);
    REQUIRE_FALSE(done.micro_batch(0, t.tokens_of(), t.cost_of()).has_value());
    REQUIRE(done.point(0, t.tokens_of(), t.cost_of()).rest.size() == 0);
    REQUIRE(done.digest() != digest);
}
