// bcl::detail::batch_order: the order a round's packs leave in. rank() is a permutation of the
// packs; the short pack, if any, is last; costliest first, the full packs leave by descending
// cost (ties by pack id); shuffled, the order is a seeded random one (the same seed, the same
// orders; another seed, others), each full pack equally likely at each place; largest_first moves
// the largest full pack of the first round only to the front; and a restored random state
// continues the same sequence.

#include <bcl/detail/emission/batch_order.hpp>
#include <bcl/options.hpp>

#include <catch2/catch.hpp>

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace {

using bcl::detail::batch_order;
using rank_list = std::vector<std::uint32_t>;

batch_order make(std::uint64_t seed, bool shuffle, bool largest_first) {
    bcl::options opt{.batch_size = 1, .seed = seed, .largest_first = largest_first};
    opt.emission = shuffle ? bcl::emission_order::shuffled : bcl::emission_order::costliest_first;
    return batch_order(opt);
}

/// The places of the packs of a round; `size` is both each pack's cost and its size for
/// largest_first (all equal when not given).
rank_list order(batch_order& e, std::size_t packs, bool has_short, std::uint64_t round,
                std::span<const double> size = {}) {
    std::vector<double> flat(packs, 1.0);
    if (size.empty()) size = flat;
    e.order(packs, has_short, round, size, size);
    return {e.rank().begin(), e.rank().end()};
}

bool is_permutation_of_packs(const rank_list& r) {
    std::vector<int> seen(r.size(), 0);
    for (const std::uint32_t place : r) {
        if (place >= r.size() || seen[place]++ != 0) return false;
    }
    return true;
}

rank_list identity_ranks(std::size_t packs) {
    rank_list r(packs);
    for (std::size_t p = 0; p < packs; ++p) r[p] = static_cast<std::uint32_t>(p);
    return r;
}

} // namespace

TEST_CASE("rank() is a permutation of the packs, with the short pack last", "[emission-order]") {
    for (const bool shuffle : {false, true})
        for (const bool largest_first : {false, true}) {
            batch_order e = make(42, shuffle, largest_first);
            for (std::uint64_t round = 0; round < 40; ++round) {
                const std::size_t packs = 1 + round % 9;
                const bool has_short = round % 2 == 1;
                std::vector<double> size(packs);
                for (std::size_t p = 0; p < packs; ++p)
                    size[p] = static_cast<double>((p * 7 + round) % 11);
                const rank_list r = order(e, packs, has_short, round, size);
                INFO("round " << round << ", " << packs << " packs, shuffle " << shuffle
                              << ", largest_first " << largest_first);
                REQUIRE(r.size() == packs);
                REQUIRE(is_permutation_of_packs(r));
                if (has_short) REQUIRE(r[packs - 1] == packs - 1);
            }
        }
}

TEST_CASE("Costliest first, the full packs leave by descending cost, ties in pack order, the "
          "short pack last whatever its cost",
          "[emission-order]") {
    batch_order e = make(7, false, false);
    // Equal costs: pack order.
    for (std::uint64_t round = 0; round < 4; ++round)
        for (const bool has_short : {false, true})
            CHECK(order(e, 6, has_short, round) == identity_ranks(6));
    // Costs 3, 9, 4, 9, 1 and a short pack of 50: places 3, 0, 2, 1, 4 and 5 (pack 1 before pack
    // 3, their tie broken by id; the short pack last although it is the costliest).
    const std::vector<double> cost{3, 9, 4, 9, 1, 50};
    CHECK(order(e, 6, true, 5, cost) == rank_list{3, 0, 2, 1, 4, 5});
    // Without a short pack, 50 leaves first.
    CHECK(order(e, 6, false, 6, cost) == rank_list{4, 1, 3, 2, 5, 0});
    CHECK(e.random_state() == 7); // nothing was drawn
}

TEST_CASE("Shuffled orders are a function of the seed, and differ between seeds",
          "[emission-order]") {
    batch_order a = make(1234, true, false);
    batch_order b = make(1234, true, false);
    batch_order c = make(1235, true, false);
    std::size_t differing = 0;
    bool any_not_identity = false;
    for (std::uint64_t round = 0; round < 20; ++round) {
        const rank_list ra = order(a, 8, false, round);
        CHECK(order(b, 8, false, round) == ra);
        differing += order(c, 8, false, round) != ra ? 1 : 0;
        any_not_identity = any_not_identity || ra != identity_ranks(8);
    }
    // Two independent orders of 8 packs agree with chance 1/40320 a round.
    CHECK(differing >= 19);
    CHECK(any_not_identity);
}

TEST_CASE("Shuffled, every full pack is about equally likely at every place", "[emission-order]") {
    // 4 full packs and a short one over 8000 rounds: each (pack, place) pair of the full packs
    // is expected 2000 times, with a standard deviation of about 39.
    batch_order e = make(99, true, false);
    std::vector<std::vector<int>> count(4, std::vector<int>(4, 0));
    for (std::uint64_t round = 0; round < 8000; ++round) {
        const rank_list r = order(e, 5, true, round);
        REQUIRE(r[4] == 4);
        for (std::size_t p = 0; p < 4; ++p) ++count[p][r[p]];
    }
    for (std::size_t p = 0; p < 4; ++p)
        for (std::size_t place = 0; place < 4; ++place) {
            INFO("pack " << p << " place " << place);
            CHECK(count[p][place] > 2000 - 250);
            CHECK(count[p][place] < 2000 + 250);
        }
}

TEST_CASE("largest_first puts the largest full pack first in the first round only",
          "[emission-order]") {
    // The short pack (the last) is the largest of all, but it is not a full pack: it stays last.
    const std::vector<double> size{3, 9, 4, 1, 20};
    for (const bool shuffle : {false, true}) {
        INFO("shuffle " << shuffle);
        batch_order with = make(5, shuffle, true);
        batch_order without = make(5, shuffle, false);
        for (std::uint64_t round = 0; round < 6; ++round) {
            const rank_list r = order(with, 5, true, round, size);
            const rank_list plain = order(without, 5, true, round, size);
            INFO("round " << round);
            REQUIRE(is_permutation_of_packs(r));
            CHECK(r[4] == 4);
            if (round == 0 && shuffle) {
                // Pack 1 (size 9) first; it trades places with the pack that was first.
                CHECK(r[1] == 0);
                rank_list swapped = plain;
                for (std::size_t p = 0; p < 5; ++p)
                    if (plain[p] == 0) swapped[p] = plain[1];
                swapped[1] = 0;
                CHECK(r == swapped);
            } else if (round == 0) {
                // Costliest first, with memory the same as cost the largest is already first.
                CHECK(r[1] == 0);
                CHECK(r == plain);
            } else {
                // Later rounds are exactly what they would have been without it.
                CHECK(r == plain);
            }
        }
    }
}

TEST_CASE("Costliest first with largest_first: the largest pack by memory leaves first in the "
          "first round, the others keep their order by cost",
          "[emission-order]") {
    batch_order e = make(1, false, true);
    const std::vector<double> cost{5, 8, 2, 7};
    const std::vector<double> memory{1, 1, 9, 1};
    e.order(4, false, 0, cost, memory);
    // By cost the packs leave as 1, 3, 0, 2 (8, 7, 5, 2); pack 2 (memory 9) moves to the front:
    // 2, 1, 3, 0, so the places of packs 0..3 are 3, 1, 0, 2.
    CHECK(rank_list(e.rank().begin(), e.rank().end()) == rank_list{3, 1, 0, 2});
    // In a later round, by cost alone: places 2, 0, 3, 1.
    e.order(4, false, 1, cost, memory);
    CHECK(rank_list(e.rank().begin(), e.rank().end()) == rank_list{2, 0, 3, 1});
}

TEST_CASE("largest_first in a first round without full packs changes nothing", "[emission-order]") {
    batch_order e = make(3, true, true);
    const std::vector<double> size{5};
    CHECK(order(e, 1, true, 0, size) == rank_list{0});
}

TEST_CASE("A restored random state continues the same sequence of orders", "[emission-order]") {
    batch_order original = make(2024, true, false);
    for (std::uint64_t round = 0; round < 7; ++round) order(original, 6, false, round);
    batch_order restored = make(1, true, false);
    restored.restore(original.random_state());
    for (std::uint64_t round = 7; round < 30; ++round) {
        const std::size_t packs = 2 + round % 6;
        CHECK(order(restored, packs, round % 3 == 0, round) ==
              order(original, packs, round % 3 == 0, round));
    }
}
