// bcl/partition/detail/capped_lpt.hpp, as a specification: capped_lpt deals a ranked window into a
// freshly reset pack_table, each item (dearest first) to the lightest pack with a free slot, ties
// to the lowest pack id, a full pack counting as infinitely heavy. It finds that pack by a linear
// scan up to 24 packs, groups of 8 up to 256 and a winner tree above; all three make the same
// choices, and one object serves windows of any size in any order.

#include "../../support/distributions.hpp"

#include <bcl/partition/detail/capped_lpt.hpp>
#include <bcl/partition/detail/pack_table.hpp>
#include <bcl/partition/detail/ranked_costs.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace {

using bcl::detail::capped_lpt;
using bcl::detail::pack_table;
using bcl::detail::ranked_costs;

/// The pack of every rank, read off the table.
std::vector<std::uint32_t> pack_of_rank(const pack_table& packs, std::size_t n) {
    std::vector<std::uint32_t> out(n, 0xffffffffU);
    for (std::size_t p = 0; p < packs.packs(); ++p)
        for (std::uint32_t s = 0; s < packs.count(p); ++s)
            out[packs.members(p)[s]] = static_cast<std::uint32_t>(p);
    return out;
}

/// Capped LPT over costs already sorted high to low, the plain way; the pack of every rank.
std::vector<std::uint32_t> plain_capped_lpt(const std::vector<double>& desc,
                                            bcl::pack_shape shape) {
    const std::size_t n = desc.size();
    std::vector<double> load(shape.packs, 0.0);
    std::vector<std::size_t> count(shape.packs, 0);
    std::vector<std::uint32_t> out(n);
    for (std::size_t r = 0; r < n; ++r) {
        std::size_t best = shape.packs;
        for (std::size_t p = 0; p < shape.packs; ++p) {
            const std::size_t room =
                p + 1 < shape.packs ? shape.pack_size : n - (shape.packs - 1) * shape.pack_size;
            if (count[p] < room && (best == shape.packs || load[p] < load[best])) best = p;
        }
        out[r] = static_cast<std::uint32_t>(best);
        load[best] += desc[r];
        ++count[best];
    }
    return out;
}

struct dealt {
    std::vector<std::uint32_t> pack_of_rank;
    std::vector<double> desc;
};

dealt capped_deal(capped_lpt& lpt, ranked_costs& ranked, pack_table& packs,
                  const std::vector<double>& costs, bcl::pack_shape shape) {
    ranked.assign(costs, "test");
    packs.reset(shape, costs.size());
    lpt.reserve(shape.packs);
    lpt(ranked, packs);
    return {pack_of_rank(packs, costs.size()),
            std::vector<double>(ranked.desc().begin(), ranked.desc().end())};
}

} // namespace

TEST_CASE("capped_lpt: equal costs go round the packs, rank r to pack r mod K, on every search "
          "path",
          "[partition][capped_lpt]") {
    // All loads tie after every round of K, so each round fills packs 0, 1, ..., K-1 in turn.
    capped_lpt lpt;
    ranked_costs ranked;
    pack_table packs;
    for (const std::size_t k : {1U, 7U, 24U, 25U, 100U, 256U, 257U, 600U}) {
        const std::size_t b = 3;
        const dealt d = capped_deal(lpt, ranked, packs, std::vector<double>(k * b, 2.5), {k, b});
        INFO("K=" << k);
        bool all = true;
        for (std::size_t r = 0; r < k * b; ++r) all = all && d.pack_of_rank[r] == r % k;
        CHECK(all);
    }
}

TEST_CASE("capped_lpt: zero costs fill pack 0 first, then pack 1, and so on: full packs count "
          "as infinitely heavy",
          "[partition][capped_lpt]") {
    // Every load stays 0, so the lowest pack with a free slot takes each item: rank r -> r / B.
    capped_lpt lpt;
    ranked_costs ranked;
    pack_table packs;
    for (const std::size_t k : {2U, 24U, 25U, 256U, 257U, 513U})
        for (const std::size_t b : {1U, 4U}) {
            const std::size_t n = k * b - (b > 1 ? 2 : 0); // a short last pack too
            const dealt d = capped_deal(lpt, ranked, packs, std::vector<double>(n, 0.0), {k, b});
            INFO("K=" << k << " B=" << b);
            bool all = true;
            for (std::size_t r = 0; r < n; ++r) all = all && d.pack_of_rank[r] == r / b;
            CHECK(all);
        }
}

TEST_CASE("capped_lpt: the scan, the groups and the winner tree make the plain rule's choices, "
          "whatever window came before",
          "[partition][capped_lpt]") {
    capped_lpt lpt; // one object, windows of shrinking and growing K
    ranked_costs ranked;
    pack_table packs;
    std::uint64_t counter = 13000;
    for (const std::size_t k : {300U, 5U, 257U, 24U, 256U, 25U, 1U, 33U})
        for (const std::size_t b : {1U, 3U, 8U})
            for (const auto& dist : bcl_test::all_distributions()) {
                const std::size_t n = k * b - (b > 2 ? 2 : 0);
                const std::vector<double> costs = dist.generate(n, bcl_test::case_seed(++counter));
                const dealt d = capped_deal(lpt, ranked, packs, costs, {k, b});
                INFO("K=" << k << " B=" << b << " " << dist.name);
                CHECK(d.pack_of_rank == plain_capped_lpt(d.desc, {k, b}));
                // The table holds what was dealt: members ascending, loads their sums.
                bool consistent = true;
                for (std::size_t p = 0; p < k; ++p) {
                    double sum = 0.0;
                    for (std::uint32_t s = 0; s < packs.count(p); ++s) {
                        sum += d.desc[packs.members(p)[s]];
                        if (s > 0 && packs.members(p)[s - 1] >= packs.members(p)[s])
                            consistent = false;
                    }
                    consistent = consistent && sum == Approx(packs.load(p)) &&
                                 packs.count(p) == packs.capacity(p);
                }
                CHECK(consistent);
            }
}
