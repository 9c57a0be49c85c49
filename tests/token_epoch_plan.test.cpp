// bcl::token_epoch_planner, as a specification: an epoch's order walked in stream windows of K
// steps of M micro-batches of at most T tokens; over all ranks every record of the order exactly
// once (and the order's first records again where the epoch's end repeats them), as many
// micro-batches on every rank in every step, the same digest on every rank; a tail too short to
// plan alone joins the window before it; an epoch no plan fills is refused, or ends with empty
// micro-batches or repeated records as asked, planning only its last window again.

#include "support/distributions.hpp"
#include "support/epoch_reference.hpp"

#include <bcl/token_epoch_plan.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <numeric>
#include <random>
#include <span>
#include <vector>

namespace {

using bcl_test::index_list;

std::vector<double> token_epoch_shape_of(std::size_t n, std::uint64_t seed) {
    const auto& list = bcl_test::all_distributions();
    return list[seed % list.size()].generate(n, seed);
}

} // namespace

namespace {

// Every rank's token share of one epoch, checked against the contract: as many micro-batches on
// every rank in every step (a multiple of m), none empty, at most T tokens each, the same digest
// on every rank, and over all ranks every record of the order exactly once.
void check_token_epoch(const std::vector<std::uint64_t>& tokens, const index_list& order,
                       const bcl::token_budget& b, std::size_t micro, std::size_t lookahead) {
    bcl::token_epoch_planner planner;
    std::vector<bcl::token_epoch_share<std::size_t>> shares(b.ranks);
    for (std::size_t r = 0; r < b.ranks; ++r)
        planner.share<std::size_t>(tokens, {}, order, b, micro, lookahead, r, {}, shares[r]);
    std::vector<std::size_t> seen;
    for (const auto& s : shares) {
        REQUIRE(s.digest == shares[0].digest);
        REQUIRE(s.steps == shares[0].steps);
        REQUIRE(s.micro_batches() == shares[0].micro_batches());
        REQUIRE(s.micro_batches() == s.micro_steps);
        for (std::size_t step = 0; step + 1 < s.steps.size(); ++step)
            REQUIRE((s.steps[step + 1] - s.steps[step]) % b.multiple_of == 0);
        for (std::size_t i = 0; i < s.micro_batches(); ++i) {
            const auto batch = s.micro_batch(i);
            REQUIRE_FALSE(batch.empty());
            std::uint64_t sum = 0;
            for (const std::size_t index : batch) sum += tokens[index];
            REQUIRE(sum <= b.max_tokens);
            seen.insert(seen.end(), batch.begin(), batch.end());
        }
    }
    std::vector<std::size_t> expected(order.begin(), order.end());
    std::sort(expected.begin(), expected.end());
    std::sort(seen.begin(), seen.end());
    REQUIRE(seen == expected);
}

} // namespace

TEST_CASE("token epoch: over all ranks every record of the order comes out once, in "
          "micro-batches of at most T tokens, as many on every rank in every step",
          "[epoch_plan][tokens]") {
    std::size_t planned = 0;
    for (std::uint64_t seed = 0; seed < 120; ++seed) {
        std::mt19937_64 gen(seed);
        const bcl::token_budget b{
            .ranks = 1 + gen() % 5, .max_tokens = 64 + gen() % 4000, .multiple_of = 1 + gen() % 2};
        const std::size_t micro = b.multiple_of * (1 + gen() % 3);
        const std::size_t lookahead = 1 + gen() % 3;
        // Records of at most T/4 tokens: every tail of R*m records or more plans, so every epoch
        // of that many does; the count is any, so that the epoch's tail is any size.
        const std::size_t n = b.ranks * b.multiple_of + gen() % 700;
        std::vector<std::uint64_t> tokens(n);
        const std::vector<double> shape = token_epoch_shape_of(n, seed);
        const double top = std::max(1e-300, *std::max_element(shape.begin(), shape.end()));
        for (std::size_t i = 0; i < n; ++i)
            tokens[i] = 1 + static_cast<std::uint64_t>(shape[i] / top *
                                                       static_cast<double>(b.max_tokens / 4 - 1));
        const index_list order = bcl_test::reference_order(n, seed, 0, true);
        INFO("seed " << seed << ", " << n << " records, R " << b.ranks << ", T " << b.max_tokens
                     << ", m " << b.multiple_of << ", M " << micro << ", K " << lookahead);
        check_token_epoch(tokens, order, b, micro, lookahead);
        ++planned;
    }
    REQUIRE(planned == 120);
}

TEST_CASE("token epoch: a tail too short to plan alone joins the window before it; an epoch "
          "no plan can fill is refused",
          "[epoch_plan][tokens]") {
    const bcl::token_budget b{.ranks = 2, .max_tokens = 10, .multiple_of = 1};
    // A window holds 20 tokens: 6, 6, 4, 4 fill it; the last record (3 tokens) cannot give both
    // ranks a micro-batch alone, so it is planned with them, two micro-steps.
    const std::vector<std::uint64_t> tokens{6, 6, 4, 4, 3};
    const index_list order{0, 1, 2, 3, 4};
    check_token_epoch(tokens, order, b, 1, 1);
    bcl::token_epoch_planner planner;
    bcl::token_epoch_share<std::size_t> share;
    planner.share<std::size_t>(tokens, {}, order, b, 1, 1, 0, {}, share);
    CHECK(share.windows == 1);
    CHECK(share.micro_steps == 2);
    // Three records of T tokens each on two ranks: each is a micro-batch of its own, and the
    // ranks cannot run as many. The share is left as it was.
    const std::vector<std::uint64_t> full{10, 10, 10};
    REQUIRE_THROWS_AS(
        planner.share<std::size_t>(full, {}, index_list{0, 1, 2}, b, 1, 1, 0, {}, share),
        bcl::error);
    CHECK(share.micro_steps == 2);
}

TEST_CASE("token epoch: an epoch no plan fills ends with empty micro-batches, or with the "
          "order's first records again, as asked",
          "[epoch_plan][tokens]") {
    const bcl::token_budget b{.ranks = 2, .max_tokens = 10, .multiple_of = 1};
    const std::vector<std::uint64_t> full{10, 10, 10};
    const index_list order{2, 0, 1};
    bcl::token_epoch_planner planner;
    // Empty micro-batches: two micro-steps, one of them empty on one rank; no record twice.
    bcl::token_plan_options empty;
    empty.allow_empty_micro_batches = true;
    std::vector<bcl::token_epoch_share<std::size_t>> shares(2);
    std::vector<std::size_t> seen;
    for (std::size_t r = 0; r < 2; ++r) {
        planner.share<std::size_t>(full, {}, order, b, 1, 1, r, empty, shares[r]);
        CHECK(shares[r].micro_batches() == 2);
        CHECK(shares[r].padding == 1);
        CHECK(shares[r].repeated == 0);
        seen.insert(seen.end(), shares[r].records.begin(), shares[r].records.end());
    }
    CHECK(shares[0].digest == shares[1].digest);
    std::sort(seen.begin(), seen.end());
    CHECK(seen == std::vector<std::size_t>{0, 1, 2});
    // Repeated records: the order's first (dataset index 2) again, both ranks two micro-batches.
    seen.clear();
    for (std::size_t r = 0; r < 2; ++r) {
        planner.share<std::size_t>(full, {}, order, b, 1, 1, r, {}, shares[r],
                                   "bcl::token_epoch_planner", true);
        CHECK(shares[r].micro_batches() == 2);
        CHECK(shares[r].repeated == 1);
        CHECK(shares[r].padding == 0);
        for (std::size_t i = 0; i < shares[r].micro_batches(); ++i)
            CHECK(shares[r].micro_batch(i).size() == 1);
        seen.insert(seen.end(), shares[r].records.begin(), shares[r].records.end());
    }
    std::sort(seen.begin(), seen.end());
    CHECK(seen == std::vector<std::size_t>{0, 1, 2, 2});
}

TEST_CASE("token epoch: repeated records are the fewest that plan, on random epochs that need "
          "them",
          "[epoch_plan][tokens]") {
    // Records of nearly T tokens on R ranks, a count that is not a multiple of R: the epoch's end
    // needs padding. The fewest of the order's first records that plan are repeated: one fewer
    // does not plan (checked by planning the padded order without repeats).
    std::mt19937_64 gen(37);
    bcl::token_epoch_planner planner;
    bcl::token_epoch_planner check;
    std::size_t repeated_epochs = 0;
    for (std::size_t trial = 0; trial < 60; ++trial) {
        const std::size_t r = 2 + gen() % 4;
        const std::size_t n = r * (2 + gen() % 6) + 1 + gen() % (r - 1);
        const bcl::token_budget b{.ranks = r, .max_tokens = 100, .multiple_of = 1};
        std::vector<std::uint64_t> tokens(n);
        for (auto& t : tokens) t = 51 + gen() % 50; // two never share a micro-batch
        index_list order(n);
        std::iota(order.begin(), order.end(), std::size_t{0});
        std::shuffle(order.begin(), order.end(), gen);
        bcl::token_epoch_share<std::size_t> share;
        planner.share<std::size_t>(tokens, {}, order, b, 1, 2, 0, {}, share,
                                   "bcl::token_epoch_planner", true);
        CAPTURE(trial, r, n, share.repeated);
        REQUIRE(share.repeated > 0);
        REQUIRE((n + share.repeated) % r == 0);
        // One fewer repeated record leaves the order unplannable.
        index_list shorter = order;
        shorter.insert(shorter.end(), order.begin(),
                       order.begin() + static_cast<std::ptrdiff_t>(share.repeated - 1));
        bcl::token_epoch_share<std::size_t> none;
        REQUIRE_THROWS_AS(check.share<std::size_t>(tokens, {}, shorter, b, 1, 2, 0, {}, none),
                          bcl::error);
        ++repeated_epochs;
    }
    CHECK(repeated_epochs == 60);
}

TEST_CASE("token epoch: plan() hands each window in turn, the order's records in order, and a "
          "rank's share is its slots of those windows",
          "[token_epoch_plan]") {
    std::mt19937_64 gen(8);
    std::vector<std::uint64_t> tokens(3000);
    for (auto& t : tokens) t = 1 + gen() % 4000;
    index_list order(tokens.size());
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = (i * 7919) % order.size();
    const bcl::token_budget b{.ranks = 4, .max_tokens = 8192, .multiple_of = 2};
    bcl::token_epoch_planner planner;
    std::vector<std::size_t> walked;
    std::vector<std::vector<std::size_t>> by_rank(b.ranks);
    std::uint64_t digest = 0;
    const std::size_t repeated = planner.plan<std::size_t>(
        tokens, {}, order, b, 2, 4, {},
        [&](std::span<const std::size_t> window, std::span<const bcl::micro_slot> slots,
            const bcl::token_plan_summary& s) {
            REQUIRE(window.size() == slots.size());
            REQUIRE(s.records == slots.size());
            walked.insert(walked.end(), window.begin(), window.end());
            digest = bcl::token_plan_digest(slots, digest);
            for (std::size_t i = 0; i < slots.size(); ++i)
                by_rank[slots[i].rank].push_back(window[i]);
        });
    CHECK(repeated == 0);
    CHECK(walked == std::vector<std::size_t>(order.begin(), order.end()));
    for (std::size_t r = 0; r < b.ranks; ++r) {
        bcl::token_epoch_share<std::size_t> share;
        planner.share<std::size_t>(tokens, {}, order, b, 2, 4, r, {}, share);
        CHECK(share.digest == digest);
        std::vector<std::size_t> kept(share.records.begin(), share.records.end());
        std::sort(kept.begin(), kept.end());
        std::sort(by_rank[r].begin(), by_rank[r].end());
        CHECK(kept == by_rank[r]);
    }
    // What on_window throws propagates.
    CHECK_THROWS_AS(planner.plan<std::size_t>(tokens, {}, order, b, 2, 4, {},
                                              [](auto, auto, const auto&) { throw 7; }),
                    int);
}
