// bcl::detail::stages::cell_stages, as a specification: a micro-step's records moved and swapped
// between its micro-batches never raise the objective, keep every micro-batch at most T tokens
// and non-empty, leave frozen records and micro-batches above T where they were, and end where
// no single allowed move or swap lowers the objective (within the passes); one stage changes
// nothing; the same input, the same result.

#include <bcl/detail/stages/cell_stages.hpp>
#include <bcl/detail/stages/step_stages.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

namespace {

using bcl::detail::stages::cell_stages;
using bcl::detail::stages::stage_table;

std::uint64_t objective_of(const std::vector<std::uint32_t>& records,
                           const std::vector<std::uint32_t>& rank_of, std::size_t ranks,
                           const stage_table& t) {
    std::vector<std::uint64_t> load(ranks * t.stages, 0);
    for (std::size_t k = 0; k < records.size(); ++k)
        for (std::size_t s = 0; s < t.stages; ++s)
            load[rank_of[k] * t.stages + s] += t.of(records[k])[s];
    std::uint64_t sum = 0;
    for (std::size_t s = 0; s < t.stages; ++s) {
        std::uint64_t top = 0;
        for (std::size_t r = 0; r < ranks; ++r) top = std::max(top, load[r * t.stages + s]);
        sum += top;
    }
    return sum;
}

} // namespace

TEST_CASE("cell stages: never worse, budget and non-empty micro-batches kept, frozen records "
          "stay, no single allowed change left that helps",
          "[stages][cell_stages]") {
    std::mt19937_64 gen(9);
    cell_stages cells;
    for (int trial = 0; trial < 400; ++trial) {
        const std::size_t ranks = 2 + gen() % 5;
        const std::size_t d = 1 + gen() % 3;
        const std::size_t n = ranks * (1 + gen() % 4);
        const std::uint64_t max_tokens = 100;
        std::vector<double> costs(n * d);
        for (auto& c : costs) c = static_cast<double>(gen() % 1000);
        stage_table t;
        t.assign(costs, d);
        std::vector<std::uint64_t> tokens(n);
        std::vector<std::uint32_t> records(n), rank_of(n);
        std::vector<std::uint64_t> used(ranks, 0);
        for (std::size_t i = 0; i < n; ++i) {
            records[i] = static_cast<std::uint32_t>(i);
            rank_of[i] = static_cast<std::uint32_t>(i % ranks); // every micro-batch a record
            tokens[i] = 1 + gen() % 40;
            if (used[rank_of[i]] + tokens[i] > max_tokens) tokens[i] = 0;
            used[rank_of[i]] += tokens[i];
        }
        // A record alone above T: its micro-batch stays as it is.
        const bool oversized = trial % 9 == 4;
        if (oversized) {
            tokens[0] = 150;
            for (std::size_t i = ranks; i < n; i += ranks) { // to rank 1, taking no room
                rank_of[i] = 1;
                tokens[i] = 0;
            }
        }
        std::vector<bool> frozen(n, false);
        for (std::size_t i = 0; i < n; ++i) frozen[i] = trial % 4 == 1 && gen() % 3 == 0;
        const std::vector<std::uint32_t> before = rank_of;
        CAPTURE(trial, ranks, d, n);
        const cell_stages::outcome o =
            cells.improve(records, rank_of, tokens, frozen, ranks, max_tokens, t);
        REQUIRE(o.before == objective_of(records, before, ranks, t));
        REQUIRE(o.after == objective_of(records, rank_of, ranks, t));
        REQUIRE(o.after <= o.before);
        if (d == 1) REQUIRE(rank_of == before);
        std::vector<std::uint64_t> tok(ranks, 0);
        std::vector<std::size_t> count(ranks, 0);
        for (std::size_t i = 0; i < n; ++i) {
            tok[rank_of[i]] += tokens[i];
            ++count[rank_of[i]];
            if (frozen[i]) REQUIRE(rank_of[i] == before[i]);
        }
        for (std::size_t r = 0; r < ranks; ++r) {
            REQUIRE(count[r] >= 1);
            if (!(oversized && r == 0)) REQUIRE(tok[r] <= max_tokens);
        }
        if (oversized) REQUIRE(rank_of[0] == 0);
        std::vector<std::uint32_t> again = before;
        (void)cells.improve(records, again, tokens, frozen, ranks, max_tokens, t);
        REQUIRE(again == rank_of);
        // Given passes enough, no single allowed move or swap of a movable record lowers it.
        std::vector<std::uint32_t> settled = before;
        const std::uint64_t best =
            cells.improve(records, settled, tokens, frozen, ranks, max_tokens, t, 1000).after;
        const auto allowed = [&](const std::vector<std::uint32_t>& ranks_of) {
            std::vector<std::uint64_t> used_by(ranks, 0);
            std::vector<std::size_t> held(ranks, 0);
            for (std::size_t i = 0; i < n; ++i) {
                used_by[ranks_of[i]] += tokens[i];
                ++held[ranks_of[i]];
            }
            for (std::size_t r = 0; r < ranks; ++r)
                if (held[r] == 0 || (used_by[r] > max_tokens && !(oversized && r == 0)))
                    return false;
            return true;
        };
        const auto locked = [&](std::size_t i) {
            return frozen[i] || (oversized && settled[i] == 0);
        };
        for (std::size_t a = 0; a < n && d > 1; ++a) { // (one stage is left as it is)
            if (locked(a)) continue;
            for (std::uint32_t q = 0; q < ranks; ++q) { // moves
                std::vector<std::uint32_t> x = settled;
                x[a] = q;
                if (q == settled[a] || (oversized && q == 0) || !allowed(x)) continue;
                REQUIRE(objective_of(records, x, ranks, t) >= best);
            }
            for (std::size_t b2 = 0; b2 < n; ++b2) { // swaps
                if (locked(b2) || settled[b2] == settled[a]) continue;
                std::vector<std::uint32_t> x = settled;
                std::swap(x[a], x[b2]);
                if (!allowed(x)) continue;
                REQUIRE(objective_of(records, x, ranks, t) >= best);
            }
        }
    }
}
