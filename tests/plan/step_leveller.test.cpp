// bcl::detail::plan::step_leveller, as a specification: over costs in cost order (place 0 the
// dearest), it forms a step only while the dearest free record with the B-1 cheapest free ones
// is above the mean pack of the records left; every levelled step has R packs of exactly B
// records, the first holding the dearest record left; a pack's load is the sum of its records;
// no record is taken twice, and rest() is every record not taken, in ascending place. A worked
// example checks the fills themselves.

#include "support/distributions.hpp"
#include "support/plan_checks.hpp"

#include <bcl/detail/plan/step_leveller.hpp>

#include <catch2/catch.hpp>
#include <fmt/core.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

using namespace bcl_test;

namespace {

using bcl::detail::plan::step_leveller;

/// Whole-number costs from a distribution, in cost order (descending).
std::vector<std::uint64_t> costs_in_order(const distribution& d, std::size_t n,
                                          std::uint64_t seed) {
    return in_cost_order(d.generate(n, seed), seed).cost;
}

/// A window for the leveller: R, B, the full steps it may level, and n records (a short last
/// step's records beside them on odd cases).
struct leveller_window {
    std::size_t ranks = 0;
    std::size_t batch = 0;
    std::size_t steps = 0;
    std::size_t n = 0;
};

leveller_window leveller_case(std::uint64_t i, bcl::plan_shape largest) {
    const window_case w = window_case_of(i, largest);
    return {w.shape.ranks, w.shape.batch, w.n / w.shape.ranks / w.shape.batch, w.n};
}

std::uint64_t sum_of(const std::vector<std::uint64_t>& cost) {
    std::uint64_t sum = 0;
    for (const std::uint64_t c : cost) sum += c;
    return sum;
}

/// "" if the `formed` levelled steps of `ranks` packs of `batch` hold each record at most once,
/// exactly `batch` records per pack, loads that are the sums, the first pack of each step the
/// dearest record not taken by an earlier step, and rest() the records not taken, ascending;
/// otherwise the first violation.
std::string check_levelled(const step_leveller& l, const std::vector<std::uint64_t>& cost,
                           std::size_t ranks, std::size_t batch, std::size_t formed) {
    const std::size_t packs = formed * ranks;
    std::vector<std::size_t> count(packs, 0);
    std::vector<std::uint64_t> sum(packs, 0);
    std::vector<std::uint32_t> rest;
    std::vector<std::size_t> dearest(packs, cost.size()); // a pack's lowest place
    for (std::size_t at = 0; at < cost.size(); ++at) {
        const std::uint32_t p = l.pack_of(at);
        if (p == step_leveller::none) {
            rest.push_back(static_cast<std::uint32_t>(at));
            continue;
        }
        if (p >= packs) return fmt::format("place {} is in pack {} of {}", at, p, packs);
        ++count[p];
        sum[p] += cost[at];
        dearest[p] = std::min(dearest[p], at);
    }
    for (std::size_t p = 0; p < packs; ++p) {
        if (count[p] != batch)
            return fmt::format("pack {} holds {} records, expected {}", p, count[p], batch);
        if (l.load(p) != sum[p])
            return fmt::format("pack {} has load {}, its records sum to {}", p, l.load(p), sum[p]);
    }
    // Step t leads with the dearest record the steps before it left.
    std::size_t first_free = 0;
    for (std::size_t t = 0; t < formed; ++t) {
        if (dearest[t * ranks] != first_free)
            return fmt::format("step {}'s first pack does not hold place {}", t, first_free);
        while (first_free < cost.size() && l.pack_of(first_free) != step_leveller::none &&
               l.pack_of(first_free) < (t + 1) * ranks)
            ++first_free;
    }
    const auto got = l.rest();
    if (std::vector<std::uint32_t>(got.begin(), got.end()) != rest)
        return "rest() is not the records left, in ascending place";
    return {};
}

} // namespace

TEST_CASE("step_leveller: levelled steps hold exactly B records a pack, loads the sums, nothing "
          "taken twice, the rest ascending",
          "[plan][step_leveller]") {
    step_leveller l; // one leveller for every case: nothing of a former window may remain
    std::size_t windows_levelled = 0;
    for (std::uint64_t i = 0; i < 80; ++i) {
        const auto [ranks, batch, steps, n] =
            leveller_case(i, {.ranks = 6, .steps = 5, .batch = 8});
        for (const distribution& d : all_distributions()) {
            const std::vector<std::uint64_t> cost = costs_in_order(d, n, case_seed(i));
            INFO(fmt::format("{} case {}: R={} B={} steps={}", d.name, i, ranks, batch, steps));
            const std::size_t formed = l.level(cost, ranks, batch, steps, sum_of(cost));
            CHECK(formed <= steps);
            if (formed == 0) continue;
            ++windows_levelled;
            CHECK(check_levelled(l, cost, ranks, batch, formed) == "");
        }
    }
    CHECK(windows_levelled > 0);
}

TEST_CASE("step_leveller: the first step is formed when the dearest record with the B-1 cheapest "
          "is above the mean pack, and not when it is at or below it",
          "[plan][step_leveller]") {
    // The mean pack is total * B / n; the leveller compares in integers, so only cases clear of
    // the rounding are checked: above total * B / n forms, at or below (total - n + 1) * B / n
    // (at most floor(total / n) * B) does not.
    step_leveller l;
    std::size_t formed_some = 0;
    std::size_t formed_none = 0;
    for (std::uint64_t i = 0; i < 60; ++i) {
        const auto [ranks, batch, steps, n] =
            leveller_case(i + 500, {.ranks = 5, .steps = 4, .batch = 6});
        if (steps == 0) continue; // not one full step of R*B records: nothing to level
        for (const distribution& d : all_distributions()) {
            const std::vector<std::uint64_t> cost = costs_in_order(d, n, case_seed(i));
            const std::uint64_t total = sum_of(cost);
            std::uint64_t least = cost[0];
            for (std::size_t k = 1; k < batch; ++k) least += cost[n - k];
            INFO(fmt::format("{} case {}: R={} B={} n={} least {} total {}", d.name, i, ranks,
                             batch, n, least, total));
            const std::size_t formed = l.level(cost, ranks, batch, steps, total);
            if (least * n > total * batch) {
                CHECK(formed >= 1);
                formed_some += 1;
            } else if (total + 1 >= n && least * n <= (total + 1 - n) * batch) {
                CHECK(formed == 0);
                formed_none += 1;
            }
        }
    }
    CHECK(formed_some > 0);
    CHECK(formed_none > 0);
}

TEST_CASE("step_leveller: the dear record's step, filled up to its pack", "[plan][step_leveller]") {
    // R = 2, B = 2, costs 100, 50, 49, 10, 10, 3, 2, 1 (total 225; mean pack 56.25). 100 with the
    // cheapest, 1, is 101: too dear. The step's level is the dearer of 100 + 1 and 50 + 2 (the
    // second dear record with the next cheapest block): 101. Pack 0 takes 100, then the dearest
    // record within 101 - 100 = 1: the 1. Pack 1 takes the dearest record leaving room for the
    // cheapest free one (2): 50, then the dearest within 101 - 50 = 51: 49. Left: 10, 10, 3, 2,
    // total 25, mean pack 12.5; 10 + 2 = 12 is not above it, so no second step.
    const std::vector<std::uint64_t> cost{100, 50, 49, 10, 10, 3, 2, 1};
    step_leveller l;
    REQUIRE(l.level(cost, 2, 2, 2, 225) == 1);
    CHECK(l.pack_of(0) == 0);
    CHECK(l.pack_of(7) == 0);
    CHECK(l.pack_of(1) == 1);
    CHECK(l.pack_of(2) == 1);
    CHECK(l.load(0) == 101);
    CHECK(l.load(1) == 99);
    const auto rest = l.rest();
    CHECK(std::vector<std::uint32_t>(rest.begin(), rest.end()) ==
          std::vector<std::uint32_t>{3, 4, 5, 6});
    // Equal costs: no record is above the mean, nothing is levelled.
    const std::vector<std::uint64_t> equal(12, 7);
    CHECK(l.level(equal, 2, 3, 2, 84) == 0);
}
