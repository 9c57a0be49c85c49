// bcl/partition/detail/target_selection.hpp, as a specification: target_selector chooses `count`
// of the buffered items, always including the first `forced`, with a total close to `target`. It
// starts from the oldest items and makes the best single swaps until the total is within
// tolerance() (a thousandth of the target per chosen item), no swap brings it closer, or
// max_swaps were made; it returns the chosen total. So it is never further from the target than
// the oldest items were, and when it stops outside the tolerance, no single swap of a free chosen
// item for an unchosen one helps. Checked by hand and by trying every single swap.

#include "../../support/distributions.hpp"

#include <bcl/partition/detail/target_selection.hpp>

#include <catch2/catch.hpp>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <random>
#include <utility>
#include <vector>

namespace {

using bcl::detail::target_selector;

struct selection {
    std::vector<std::uint8_t> chosen;
    double total = 0.0;
};

selection select(target_selector& s, const std::vector<double>& costs, std::size_t forced,
                 std::size_t count, double target) {
    selection out;
    out.chosen.assign(costs.size(), 7); // not 0 or 1: every flag must be written
    out.total = s(costs, forced, count, target, out.chosen);
    return out;
}

} // namespace

TEST_CASE("target_selection: the tolerance is a thousandth of the target per chosen item",
          "[partition][target_selection]") {
    CHECK(target_selector::tolerance(15.0, 3) == Approx(0.005));
    CHECK(target_selector::tolerance(-15.0, 3) == Approx(0.005));
    CHECK(target_selector::tolerance(10.0, 0) == Approx(0.01)); // no items: as if one
    STATIC_REQUIRE(target_selector::max_swaps == 64);
}

TEST_CASE("target_selection: hand-worked selections", "[partition][target_selection]") {
    target_selector s;
    SECTION("one swap of a 1 for the 9 reaches the target exactly") {
        // Oldest three: 5 + 1 + 1 = 7, target 15: swapping a 1 for the 9 gives 15.
        const std::vector<double> costs{5, 1, 1, 1, 9, 3};
        const selection got = select(s, costs, 1, 3, 15.0);
        CHECK(got.total == 15.0);
        CHECK(got.chosen[0] == 1);
        CHECK(got.chosen[4] == 1);
        CHECK(got.chosen[1] + got.chosen[2] == 1);
        CHECK(got.chosen[3] == 0);
        CHECK(got.chosen[5] == 0);
    }
    SECTION("a total already within tolerance keeps the oldest items") {
        // 30 against 30.009: 0.009 is within 0.001 * 30.009 / 3 = 0.010003, though a swap of a
        // 10 for the 10.009 would hit the target exactly.
        const std::vector<double> costs{10, 10, 10, 10.009, 1};
        const selection got = select(s, costs, 0, 3, 30.009);
        CHECK(got.chosen == std::vector<std::uint8_t>{1, 1, 1, 0, 0});
        CHECK(got.total == 30.0);
    }
    SECTION("forced items stay, however far they put the total") {
        const std::vector<double> costs{100, 1, 1, 1};
        const selection got = select(s, costs, 1, 2, 2.0);
        CHECK(got.chosen[0] == 1);
        CHECK(got.total == 101.0);
    }
    SECTION("nothing to choose: all forced, or all items") {
        const std::vector<double> costs{4, 8, 15, 16};
        CHECK(select(s, costs, 2, 2, 100.0).chosen == std::vector<std::uint8_t>{1, 1, 0, 0});
        CHECK(select(s, costs, 0, 4, 1.0).total == 43.0);
    }
}

TEST_CASE("target_selection: count items, the forced ones among them, a total no further from the "
          "target than the oldest, and no single swap left that helps",
          "[partition][target_selection]") {
    target_selector s; // one selector over buffers of every size, as sliding rounds use it
    std::mt19937_64 gen(29);
    for (const auto& dist : bcl_test::all_distributions())
        for (int rep = 0; rep < 40; ++rep) {
            const std::size_t n = 2 + gen() % 40;
            const std::size_t count = 1 + gen() % (n - 1);
            const std::size_t forced = gen() % (count + 1);
            const std::vector<double> costs = dist.generate(n, gen());
            double oldest = 0.0;
            double all = 0.0;
            for (std::size_t i = 0; i < n; ++i) {
                if (i < count) oldest += costs[i];
                all += costs[i];
            }
            // Targets around the mean share, and far outside what any choice reaches.
            const double mean_share = all * static_cast<double>(count) / static_cast<double>(n);
            for (const double target : {mean_share, 0.5 * mean_share, 3.0 * all, 0.0}) {
                const selection got = select(s, costs, forced, count, target);
                INFO(dist.name << " n=" << n << " count=" << count << " forced=" << forced
                               << " target=" << target);
                std::size_t chosen = 0;
                double total = 0.0;
                bool flags_ok = true;
                for (std::size_t i = 0; i < n; ++i) {
                    flags_ok = flags_ok && got.chosen[i] <= 1 && (i >= forced || got.chosen[i]);
                    chosen += got.chosen[i];
                    total += got.chosen[i] ? costs[i] : 0.0;
                }
                CHECK(flags_ok);
                CHECK(chosen == count);
                CHECK(got.total == Approx(total).margin(1e-9));
                const double miss = std::abs(target - total);
                CHECK(miss <= std::abs(target - oldest) * (1 + 1e-12) + 1e-9);
                if (miss <= target_selector::tolerance(target, count) + 1e-9) continue;
                bool swap_helps = false;
                for (std::size_t i = forced; i < n; ++i)
                    for (std::size_t j = forced; j < n; ++j)
                        if (got.chosen[i] && !got.chosen[j])
                            swap_helps =
                                swap_helps || std::abs(target - (total - costs[i] + costs[j])) <
                                                  miss - 1e-9 * (1 + std::abs(target));
                CHECK_FALSE(swap_helps);
            }
        }
}

TEST_CASE("target_selection: a copied selector chooses as the original does",
          "[partition][target_selection]") {
    target_selector original;
    original.reserve(100);
    const std::vector<double> costs = bcl_test::lognormal_costs(60, 5);
    const selection first = select(original, costs, 3, 20, 9000.0);
    target_selector copy = original; // scratch is not copied: the copy makes its own room
    const selection second = select(copy, costs, 3, 20, 9000.0);
    CHECK(second.chosen == first.chosen);
    CHECK(second.total == first.total);
    target_selector moved = std::move(copy);
    CHECK(select(moved, costs, 3, 20, 9000.0).chosen == first.chosen);
}
