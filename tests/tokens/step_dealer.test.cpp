// bcl::detail::tokens::step_dealer, as a specification: a plan's micro-steps dealt to its steps
// (M a step, the last what is left) so that every step is a fair sample of the plan: records per
// step (most over fewest) within 0.1 of the best any deal reaches in 97% of small instances and
// within 0.25 in all, checked against every deal; no step more than one micro-step's heavy records
// above the even share; the layout's order kept within each step; the same deal for the same input.

#include "../support/case_count.hpp"

#include <bcl/detail/tokens/step_dealer.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

namespace {

using bcl::detail::tokens::micro_step_tally;
using bcl::detail::tokens::step_dealer;

std::size_t steps_of(std::size_t micro_steps, std::size_t per_step) {
    return (micro_steps + per_step - 1) / per_step;
}

/// The records of each step under `step_of`.
std::vector<std::uint64_t> dealer_step_records(const std::vector<micro_step_tally>& tally,
                                               const std::vector<std::size_t>& step_of,
                                               std::size_t steps) {
    std::vector<std::uint64_t> records(steps, 0);
    for (std::size_t k = 0; k < tally.size(); ++k) records[step_of[k]] += tally[k].records;
    return records;
}

double spread_of(const std::vector<std::uint64_t>& records) {
    const auto [fewest, most] = std::minmax_element(records.begin(), records.end());
    return *fewest == 0 ? std::numeric_limits<double>::infinity()
                        : static_cast<double>(*most) / static_cast<double>(*fewest);
}

/// The least most/fewest records a step of any deal of the micro-steps into steps of
/// `per_step` (the last what is left) reaches.
double brute_force_spread(const std::vector<micro_step_tally>& tally, std::size_t per_step) {
    const std::size_t s = tally.size();
    const std::size_t steps = steps_of(s, per_step);
    std::vector<std::size_t> step_of(s, 0);
    double best = std::numeric_limits<double>::infinity();
    for (;;) {
        std::vector<std::size_t> size(steps, 0);
        for (const std::size_t st : step_of) ++size[st];
        bool sized = true;
        for (std::size_t st = 0; st < steps; ++st)
            sized = sized && size[st] == std::min(per_step, s - st * per_step);
        if (sized) best = std::min(best, spread_of(dealer_step_records(tally, step_of, steps)));
        std::size_t i = 0;
        while (i < s && ++step_of[i] == steps) step_of[i++] = 0;
        if (i == s) break;
    }
    return best;
}

struct dealt {
    std::vector<std::size_t> step_of;
    std::vector<std::size_t> micro_of;
};

dealt deal_of(step_dealer& dealer, const std::vector<micro_step_tally>& tally,
              std::size_t per_step) {
    dealer.deal(tally, per_step);
    dealt d;
    for (std::size_t k = 0; k < tally.size(); ++k) {
        d.step_of.push_back(dealer.step_of(k));
        d.micro_of.push_back(dealer.micro_of(k));
    }
    return d;
}

/// Micro-steps as a layout gives them, dearest first: the first ones few records, heavy ones
/// among them, the later ones many light records.
std::vector<micro_step_tally> layout_like(std::mt19937_64& rng, std::size_t micro_steps,
                                          std::size_t ranks) {
    std::vector<micro_step_tally> tally(micro_steps);
    for (std::size_t k = 0; k < micro_steps; ++k) {
        const bool dear = k < micro_steps / 3;
        micro_step_tally& t = tally[k];
        t.records = ranks + (dear ? rng() % (ranks + 1) : rng() % (8 * ranks));
        t.heavy = dear ? rng() % (ranks + 1) : 0;
        t.tokens = t.records * (1 + rng() % 1000);
    }
    return tally;
}

/// Checks what every deal is: each step `per_step` micro-steps (the last what is left), each
/// micro-step one (step, micro-batch), the layout's order kept within a step.
void check_deal(const dealt& d, std::size_t micro_steps, std::size_t per_step) {
    const std::size_t steps = steps_of(micro_steps, per_step);
    std::vector<std::vector<bool>> seen(steps);
    for (std::size_t st = 0; st < steps; ++st)
        seen[st].assign(std::min(per_step, micro_steps - st * per_step), false);
    std::vector<std::size_t> last(steps, 0);
    std::vector<bool> any(steps, false);
    for (std::size_t k = 0; k < micro_steps; ++k) {
        REQUIRE(d.step_of[k] < steps);
        REQUIRE(d.micro_of[k] < seen[d.step_of[k]].size());
        REQUIRE_FALSE(seen[d.step_of[k]][d.micro_of[k]]);
        seen[d.step_of[k]][d.micro_of[k]] = true;
        // Within a step, a later micro-step of the layout has a later micro-batch.
        if (any[d.step_of[k]]) REQUIRE(d.micro_of[k] > last[d.step_of[k]]);
        any[d.step_of[k]] = true;
        last[d.step_of[k]] = d.micro_of[k];
    }
    for (const auto& step : seen)
        for (const bool filled : step) REQUIRE(filled);
}

/// The most heavy records a step holds beyond the even share ceil(h / K).
std::uint64_t heavy_excess(const std::vector<micro_step_tally>& tally, const dealt& d,
                           std::size_t steps) {
    std::vector<std::uint64_t> heavy(steps, 0);
    std::uint64_t h = 0;
    for (std::size_t k = 0; k < tally.size(); ++k) {
        heavy[d.step_of[k]] += tally[k].heavy;
        h += tally[k].heavy;
    }
    const std::uint64_t share = (h + steps - 1) / steps;
    const std::uint64_t fullest = *std::max_element(heavy.begin(), heavy.end());
    return fullest > share ? fullest - share : 0;
}

} // namespace

TEST_CASE("step_dealer gives every step its count of micro-steps and keeps the layout's order "
          "within each",
          "[tokens][step_dealer]") {
    std::mt19937_64 rng(3);
    step_dealer dealer;
    for (std::size_t trial = 0; trial < bcl_test::random_cases(400); ++trial) {
        const std::size_t per_step = 1 + rng() % 4;
        const std::size_t micro_steps = 1 + rng() % 40;
        const auto tally = layout_like(rng, micro_steps, 1 + rng() % 8);
        check_deal(deal_of(dealer, tally, per_step), micro_steps, per_step);
    }
}

TEST_CASE("step_dealer's records per step are within 0.1 of the best deal's, against every deal "
          "of small plans",
          "[tokens][step_dealer]") {
    std::mt19937_64 rng(11);
    step_dealer dealer;
    std::size_t cases = 0;
    std::size_t best_reached = 0;
    std::size_t within = 0;
    for (std::size_t trial = 0; trial < bcl_test::random_cases(300); ++trial) {
        const std::size_t per_step = 1 + rng() % 3;
        const std::size_t micro_steps = 2 + rng() % 8; // at most 9: 3^9 deals, or 9^9 of one
        if (steps_of(micro_steps, per_step) > 4) continue;
        const auto tally = layout_like(rng, micro_steps, 1 + rng() % 6);
        const dealt d = deal_of(dealer, tally, per_step);
        check_deal(d, micro_steps, per_step);
        const double ours =
            spread_of(dealer_step_records(tally, d.step_of, steps_of(micro_steps, per_step)));
        const double best = brute_force_spread(tally, per_step);
        CAPTURE(trial, micro_steps, per_step, ours, best);
        REQUIRE(ours <= best + 0.25);
        ++cases;
        within += ours <= best + 0.1;
        best_reached += ours <= best + 1e-12;
    }
    // Measured: 227 of 229 within 0.1, 223 at the best; a swap of two micro-steps cannot
    // always reach the best (some need three to move at once), hence the 0.25 above.
    CAPTURE(cases, within, best_reached);
    CHECK(within >= cases * 97 / 100);
    CHECK(cases >= bcl_test::random_cases(300) / 3);
    CHECK(best_reached >= cases * 8 / 10);
}

TEST_CASE("step_dealer holds no step more than one micro-step's heavy records above the even "
          "share",
          "[tokens][step_dealer]") {
    std::mt19937_64 rng(19);
    step_dealer dealer;
    for (std::size_t trial = 0; trial < bcl_test::random_cases(600); ++trial) {
        const std::size_t per_step = 1 + rng() % 6;
        const std::size_t micro_steps = 1 + rng() % 64;
        const std::size_t ranks = 1 + rng() % 16;
        const auto tally = layout_like(rng, micro_steps, ranks);
        const dealt d = deal_of(dealer, tally, per_step);
        std::uint64_t most = 0;
        for (const micro_step_tally& t : tally) most = std::max(most, t.heavy);
        CAPTURE(trial, micro_steps, per_step, ranks);
        REQUIRE(heavy_excess(tally, d, steps_of(micro_steps, per_step)) <= most);
    }
}

TEST_CASE("step_dealer on the layout's typical window: heavy micro-steps first are spread, one "
          "to a step",
          "[tokens][step_dealer]") {
    // Eight steps of two: the four dearest micro-steps hold 8 heavy records each (of 8 records),
    // the rest 40 light ones. Numbered as laid out, steps 0 and 1 would hold every heavy record.
    std::vector<micro_step_tally> tally(16);
    for (std::size_t k = 0; k < 16; ++k)
        tally[k] = k < 4 ? micro_step_tally{8, 8, 8 * 100000} : micro_step_tally{40, 0, 40 * 3000};
    step_dealer dealer;
    const dealt d = deal_of(dealer, tally, 2);
    check_deal(d, 16, 2);
    std::vector<std::uint64_t> heavy(8, 0);
    for (std::size_t k = 0; k < 16; ++k) heavy[d.step_of[k]] += tally[k].heavy;
    CHECK(*std::max_element(heavy.begin(), heavy.end()) == 8); // four steps hold one each
    // The best deal pairs each heavy micro-step with a light one: 48 and 80 records a step.
    CHECK(spread_of(dealer_step_records(tally, d.step_of, 8)) == Approx(80.0 / 48.0));
}

TEST_CASE("step_dealer on adversarial tallies: all equal, zeros, one giant, one step",
          "[tokens][step_dealer]") {
    step_dealer dealer;
    const std::vector<micro_step_tally> equal(12, micro_step_tally{5, 1, 50});
    const dealt e = deal_of(dealer, equal, 3);
    check_deal(e, 12, 3);
    CHECK(spread_of(dealer_step_records(equal, e.step_of, 4)) == 1.0);
    const std::vector<micro_step_tally> zeros(7, micro_step_tally{});
    check_deal(deal_of(dealer, zeros, 2), 7, 2);
    std::vector<micro_step_tally> giant(9, micro_step_tally{4, 0, 400});
    giant[0] = {std::uint64_t{1} << 29, 4, std::uint64_t{1} << 40}; // a plan holds 2^30 at most
    check_deal(deal_of(dealer, giant, 3), 9, 3);
    // One step: the layout's numbering, unchanged.
    const dealt one = deal_of(dealer, equal, 12);
    for (std::size_t k = 0; k < 12; ++k) {
        CHECK(one.step_of[k] == 0);
        CHECK(one.micro_of[k] == k);
    }
    // The same input, the same deal (scratch kept between deals changes nothing).
    std::mt19937_64 rng(5);
    const auto tally = layout_like(rng, 24, 4);
    const dealt first = deal_of(dealer, tally, 4);
    (void)deal_of(dealer, layout_like(rng, 30, 2), 3);
    const dealt again = deal_of(dealer, tally, 4);
    CHECK(first.step_of == again.step_of);
    CHECK(first.micro_of == again.micro_of);
}
