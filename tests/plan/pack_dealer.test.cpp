// bcl::detail::plan::pack_dealer, as a specification: deal() puts the records at the given places
// into `full` packs of `size` and the short packs of `short_size`, every record once, each pack's
// load the sum of its records' costs and its members in ascending place; it follows LPT's rule
// (the records, dearest first, each to the lightest pack with a free slot, ties to the lower id),
// checked against that rule written again here; refine() keeps all of that, never raises a
// class's heaviest pack nor lowers its lightest, and never raises the sum of squared loads;
// heaviest_first() lists a range of packs by load as a plain sort does.

#include "support/distributions.hpp"

#include <bcl/detail/plan/pack_dealer.hpp>

#include <catch2/catch.hpp>
#include <fmt/core.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

namespace {

using bcl::detail::plan::pack_dealer;

/// A dealing to check: costs by place (descending), the places dealt (ascending) and the shape.
struct dealing {
    std::vector<std::uint64_t> cost;
    std::vector<std::uint32_t> places;
    std::size_t full = 0;
    std::size_t short_packs = 0;
    std::size_t size = 0;
    std::size_t short_size = 0;

    [[nodiscard]] std::size_t packs() const { return full + short_packs; }
    [[nodiscard]] std::size_t size_of(std::size_t p) const { return p < full ? size : short_size; }
};

/// Case i: up to 12 full packs of up to 9, a short class every other case, costs of several
/// shapes (ties, zeros, a wide spread), and every third case a subset of the places (as after
/// levelling).
dealing dealing_case_of(std::uint64_t i) {
    std::mt19937_64 gen(bcl_test::case_seed(i));
    dealing d;
    d.full = 1 + gen() % 12;
    d.size = 1 + gen() % 9;
    d.short_packs = i % 2 == 1 && d.size > 1 ? 1 + gen() % 4 : 0;
    d.short_size = d.short_packs > 0 ? 1 + gen() % (d.size - 1) : 0;
    const std::size_t dealt = d.full * d.size + d.short_packs * d.short_size;
    const std::size_t n = i % 3 == 0 ? dealt + gen() % (dealt + 1) : dealt;
    const std::uint64_t spread = i % 4 == 0 ? 4 : i % 4 == 1 ? 1000 : std::uint64_t{1} << 40;
    d.cost.resize(n);
    for (std::uint64_t& c : d.cost) c = gen() % spread;
    std::sort(d.cost.begin(), d.cost.end(), std::greater<>{});
    std::vector<std::uint32_t> all(n);
    for (std::size_t at = 0; at < n; ++at) all[at] = static_cast<std::uint32_t>(at);
    std::shuffle(all.begin(), all.end(), gen);
    d.places.assign(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(dealt));
    std::sort(d.places.begin(), d.places.end());
    return d;
}

void deal(pack_dealer& dealer, const dealing& d) {
    dealer.deal(d.places, d.cost, d.full, d.short_packs, d.size, d.short_size);
}

/// Case i, dealt by `dealer`.
dealing dealt_case(pack_dealer& dealer, std::uint64_t i) {
    dealing d = dealing_case_of(i);
    deal(dealer, d);
    return d;
}

/// "" if the dealer's packs have the dealing's sizes, hold every dealt place once and nothing
/// else, list their members in ascending place, and have loads that are their members' sums;
/// otherwise the first violation.
std::string check_packs(const pack_dealer& dealer, const dealing& d) {
    if (dealer.packs() != d.packs() || dealer.full_packs() != d.full)
        return fmt::format("{} packs ({} full), expected {} ({})", dealer.packs(),
                           dealer.full_packs(), d.packs(), d.full);
    std::vector<int> seen(d.cost.size(), 0);
    for (std::size_t p = 0; p < d.packs(); ++p) {
        const auto members = dealer.members(p);
        if (members.size() != d.size_of(p))
            return fmt::format("pack {} holds {}, expected {}", p, members.size(), d.size_of(p));
        std::uint64_t sum = 0;
        for (std::size_t k = 0; k < members.size(); ++k) {
            if (k > 0 && members[k - 1] >= members[k])
                return fmt::format("pack {}'s members are not in ascending place", p);
            ++seen[members[k]];
            sum += d.cost[members[k]];
        }
        if (dealer.load(p) != sum)
            return fmt::format("pack {} has load {}, its members sum to {}", p, dealer.load(p),
                               sum);
    }
    std::vector<int> expected(d.cost.size(), 0);
    for (const std::uint32_t at : d.places) expected[at] = 1;
    if (seen != expected) return "the packs do not hold each dealt place exactly once";
    return {};
}

/// LPT's rule written again: each record, dearest first (ascending place), to the pack with a
/// free slot of least (load, id). Returns the members of each pack in the order they came.
std::vector<std::vector<std::uint32_t>> naive_lpt(const dealing& d) {
    std::vector<std::vector<std::uint32_t>> packs(d.packs());
    std::vector<std::uint64_t> load(d.packs(), 0);
    for (const std::uint32_t at : d.places) {
        std::size_t best = d.packs();
        for (std::size_t p = 0; p < d.packs(); ++p)
            if (packs[p].size() < d.size_of(p) && (best == d.packs() || load[p] < load[best]))
                best = p;
        packs[best].push_back(at);
        load[best] += d.cost[at];
    }
    return packs;
}

std::vector<std::uint64_t> loads_of(const pack_dealer& dealer) {
    std::vector<std::uint64_t> load(dealer.packs());
    for (std::size_t p = 0; p < load.size(); ++p) load[p] = dealer.load(p);
    return load;
}

} // namespace

TEST_CASE("pack_dealer: deal() fills every pack to its size with each dealt record once, loads "
          "the sums of the members",
          "[plan][pack_dealer]") {
    pack_dealer dealer; // one dealer for every case: nothing of a former dealing may remain
    for (std::uint64_t i = 0; i < 300; ++i) {
        const dealing d = dealt_case(dealer, i);
        INFO(fmt::format("case {}: {} full of {}, {} short of {}, {} of {} places", i, d.full,
                         d.size, d.short_packs, d.short_size, d.places.size(), d.cost.size()));
        CHECK(check_packs(dealer, d) == "");
    }
}

TEST_CASE("pack_dealer: deal() gives each record, dearest first, to the lightest pack with a free "
          "slot, ties to the lower id",
          "[plan][pack_dealer]") {
    pack_dealer dealer;
    for (std::uint64_t i = 0; i < 300; ++i) {
        const dealing d = dealt_case(dealer, i);
        INFO("case " << i);
        const std::vector<std::vector<std::uint32_t>> expected = naive_lpt(d);
        for (std::size_t p = 0; p < d.packs(); ++p) {
            const auto members = dealer.members(p);
            CHECK(std::vector<std::uint32_t>(members.begin(), members.end()) == expected[p]);
        }
    }
    // By hand: 9, 7, 4, 4, 1, 0 into 2 packs of 3. 9 -> 0 (a tie: the lower id); 7 -> 1;
    // 4 -> 1 (7 < 9); 4 -> 0 (9 < 11); 1 -> 1 (11 < 13), now full; 0 -> 0: {9, 4, 0} and
    // {7, 4, 1}.
    const dealing d{{9, 7, 4, 4, 1, 0}, {0, 1, 2, 3, 4, 5}, 2, 0, 3, 0};
    deal(dealer, d);
    CHECK(dealer.load(0) == 13);
    CHECK(dealer.load(1) == 12);
    CHECK(std::vector<std::uint32_t>(dealer.members(0).begin(), dealer.members(0).end()) ==
          std::vector<std::uint32_t>{0, 3, 5});
}

TEST_CASE("pack_dealer: refine() keeps the packs whole and never raises a class's heaviest pack, "
          "nor lowers its lightest, nor raises the sum of squared loads",
          "[plan][pack_dealer]") {
    pack_dealer dealer;
    std::size_t lowered = 0; // cases where refining lowered a heaviest pack: it does something
    for (std::uint64_t i = 0; i < 300; ++i) {
        const dealing d = dealt_case(dealer, i);
        INFO("case " << i);
        const std::vector<std::uint64_t> before = loads_of(dealer);
        dealer.refine(4);
        REQUIRE(check_packs(dealer, d) == "");
        const std::vector<std::uint64_t> after = loads_of(dealer);
        for (const auto& [first, last] :
             {std::pair{std::size_t{0}, d.full}, std::pair{d.full, d.packs()}}) {
            if (first == last) continue;
            const auto b0 = before.begin() + static_cast<std::ptrdiff_t>(first);
            const auto b1 = before.begin() + static_cast<std::ptrdiff_t>(last);
            const auto a0 = after.begin() + static_cast<std::ptrdiff_t>(first);
            const auto a1 = after.begin() + static_cast<std::ptrdiff_t>(last);
            CHECK(*std::max_element(a0, a1) <= *std::max_element(b0, b1));
            CHECK(*std::min_element(a0, a1) >= *std::min_element(b0, b1));
            lowered += *std::max_element(a0, a1) < *std::max_element(b0, b1) ? 1 : 0;
            // The sum of squares, exactly, where it fits in 64 bits (loads below 2^28).
            if (*std::max_element(b0, b1) < (std::uint64_t{1} << 28)) {
                const auto squares = [](auto from, auto to) {
                    std::uint64_t sum = 0;
                    for (; from != to; ++from) sum += *from * *from;
                    return sum;
                };
                CHECK(squares(a0, a1) <= squares(b0, b1));
            }
        }
    }
    CHECK(lowered > 0);
}

TEST_CASE("pack_dealer: heaviest_first() lists a range of packs by load, heaviest first, equal "
          "loads in descending id",
          "[plan][pack_dealer]") {
    pack_dealer dealer;
    for (std::uint64_t i = 0; i < 200; ++i) {
        const dealing d = dealt_case(dealer, i);
        dealer.refine(4);
        for (const auto& [first, last] :
             {std::pair{std::size_t{0}, d.full}, std::pair{d.full, d.packs()},
              std::pair{std::size_t{0}, d.packs()}}) {
            std::vector<std::uint32_t> expected;
            for (std::size_t p = first; p < last; ++p)
                expected.push_back(static_cast<std::uint32_t>(p));
            std::sort(expected.begin(), expected.end(), [&](std::uint32_t a, std::uint32_t b) {
                return dealer.load(a) > dealer.load(b) ||
                       (dealer.load(a) == dealer.load(b) && a > b);
            });
            std::vector<std::uint32_t> got(last - first, 0xdeadbeef);
            dealer.heaviest_first(first, last, got);
            INFO("case " << i << ": packs [" << first << ", " << last << ")");
            CHECK(got == expected);
        }
    }
}
