// bcl::detail::ready_batches, as a specification: a round's records move (never copied) from the
// buffer to their batches, batch after batch in emission order, in the order they are placed
// within a batch; pack p leaves as batch rank[p] with its cost and memory; pop() hands the
// batches out in order, the round's last batch short when the round holds fewer than a multiple
// of B; the waiting records, arrivals, costs and memory are always those not yet handed out; a
// saved part restored elsewhere hands out the same batches; a saved part with a negative or
// non-finite cost or memory is refused.

#include "support/error_message.hpp"

#include <bcl/detail/emission/ready_batches.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <numeric>
#include <random>
#include <span>
#include <vector>

namespace {

using record = std::unique_ptr<int>; // move-only: a copy would not compile
using bcl::detail::ready_batches;

std::vector<record> records_of(const std::vector<int>& values) {
    std::vector<record> out;
    for (const int v : values) out.push_back(std::make_unique<int>(v));
    return out;
}

std::vector<int> values_of(std::span<const record> batch) {
    std::vector<int> out;
    for (const record& r : batch) out.push_back(r ? *r : -1);
    return out;
}

} // namespace

TEST_CASE("ready_batches: a round worked by hand, batches in emission order with their costs",
          "[emission][ready_batches]") {
    // B = 2, three packs: pack 0 leaves third, pack 1 first, pack 2 second.
    ready_batches<record> ready;
    ready.reserve(6, 3);
    const std::vector<std::uint32_t> rank{2, 0, 1};
    const std::vector<double> cost{5.0, 7.0, 9.0};
    const std::vector<double> memory{50.0, 70.0, 90.0};
    ready.start(rank, cost, memory);
    // Buffer slots 0..5 hold 10..15, arrived at 100..105. The round places record i (buffer slot
    // 5 - i) into batch batch_of[i].
    std::vector<record> buffered = records_of({10, 11, 12, 13, 14, 15});
    const std::vector<std::uint64_t> arrivals{100, 101, 102, 103, 104, 105};
    const std::vector<std::uint32_t> batch_of{1, 0, 2, 1, 0, 2};
    std::vector<std::uint32_t> seen;
    ready.place(
        6, 2, buffered, arrivals, [](std::size_t i) { return static_cast<std::uint32_t>(5 - i); },
        [&](std::size_t i) { return batch_of[i]; },
        [&](std::size_t i, std::uint32_t slot, std::uint32_t batch) {
            CHECK(slot == 5 - i);
            CHECK(batch == batch_of[i]);
            seen.push_back(static_cast<std::uint32_t>(i));
        });
    CHECK(seen == std::vector<std::uint32_t>{0, 1, 2, 3, 4, 5});
    for (const record& r : buffered) CHECK(r == nullptr); // moved out, every one

    // Batch 0: records 1 and 4 (slots 4, 1); batch 1: records 0, 3 (slots 5, 2); batch 2: records
    // 2, 5 (slots 3, 0). Costs by emission: pack 1's 7, pack 2's 9, pack 0's 5.
    CHECK(ready.waiting() == 3);
    CHECK(ready.waiting_records(2) == 6);
    CHECK(std::vector<std::uint64_t>(ready.waiting_arrivals(2).begin(),
                                     ready.waiting_arrivals(2).end()) ==
          std::vector<std::uint64_t>{104, 101, 105, 102, 103, 100});
    const auto first = ready.pop(2);
    CHECK(values_of(first.records) == std::vector<int>{14, 11});
    CHECK(first.cost == 7.0);
    CHECK(first.memory == 70.0);
    CHECK(ready.next() == 1);
    CHECK(ready.waiting_records(2) == 4);
    CHECK(values_of(ready.waiting_span(2)) == std::vector<int>{15, 12, 13, 10});
    CHECK(std::vector<double>(ready.waiting_costs().begin(), ready.waiting_costs().end()) ==
          std::vector<double>{9.0, 5.0});
    const auto second = ready.pop(2);
    CHECK(values_of(second.records) == std::vector<int>{15, 12});
    CHECK(second.cost == 9.0);
    const auto third = ready.pop(2);
    CHECK(values_of(third.records) == std::vector<int>{13, 10});
    CHECK(third.cost == 5.0);
    CHECK(third.memory == 50.0);
    CHECK(ready.waiting() == 0);
    CHECK(ready.waiting_records(2) == 0);
}

TEST_CASE("ready_batches: round after round, each batch holds its records in placing order, the "
          "last batch short, whether the storage is reused or gathered anew",
          "[emission][ready_batches]") {
    std::mt19937_64 gen(17);
    for (const std::size_t b : {1U, 3U, 4U}) {
        const std::size_t k = 4;
        ready_batches<record> ready;
        ready.reserve(k * b, k);
        int next_value = 0;
        for (int round = 0; round < 30; ++round) {
            // Mostly full windows (the storage reused in place); now and then a short round.
            const std::size_t n = round % 7 == 6 ? 1 + gen() % (k * b) : k * b;
            const std::size_t packs = (n + b - 1) / b;
            INFO("B " << b << ", round " << round << ", n " << n);
            std::vector<std::uint32_t> rank(packs);
            std::iota(rank.begin(), rank.end(), 0U);
            // The short pack (if any) is the last pack and leaves last; the others in any order.
            std::shuffle(rank.begin(), rank.end() - (n % b != 0 ? 1 : 0), gen);
            std::vector<double> cost(packs);
            for (std::size_t p = 0; p < packs; ++p) cost[p] = static_cast<double>(p) + 0.5;
            ready.start(rank, cost, {});

            // Pack of record i: B of each, the last pack the rest, in a shuffled order of records.
            std::vector<std::uint32_t> pack_of(n);
            for (std::size_t i = 0; i < n; ++i) pack_of[i] = static_cast<std::uint32_t>(i / b);
            std::shuffle(pack_of.begin(), pack_of.end(), gen);
            std::vector<std::uint32_t> slot_of(n);
            std::iota(slot_of.begin(), slot_of.end(), 0U);
            std::shuffle(slot_of.begin(), slot_of.end(), gen);
            std::vector<int> values(n);
            for (int& v : values) v = next_value++;
            std::vector<record> buffered = records_of(values);
            std::vector<std::uint64_t> arrivals(n);
            for (std::size_t s = 0; s < n; ++s)
                arrivals[s] = 1000 + static_cast<std::uint64_t>(values[s]);

            // The reference: batch r is pack rank^-1(r); its records in increasing i.
            std::vector<std::vector<int>> want(packs);
            for (std::size_t i = 0; i < n; ++i)
                want[rank[pack_of[i]]].push_back(values[slot_of[i]]);

            ready.place(
                n, b, buffered, arrivals, [&](std::size_t i) { return slot_of[i]; },
                [&](std::size_t i) { return rank[pack_of[i]]; },
                [](std::size_t, std::uint32_t, std::uint32_t) {});
            REQUIRE(ready.waiting() == packs);
            for (std::size_t r = 0; r < packs; ++r) {
                const std::vector<std::uint64_t> left(ready.waiting_arrivals(b).begin(),
                                                      ready.waiting_arrivals(b).end());
                const auto h = ready.pop(b);
                const std::vector<int> got = values_of(h.records);
                REQUIRE(got == want[r]);
                REQUIRE(h.records.size() == (r + 1 < packs || n % b == 0 ? b : n % b));
                REQUIRE(h.memory == 0.0);
                for (std::size_t j = 0; j < got.size(); ++j)
                    REQUIRE(left[j] == 1000 + static_cast<std::uint64_t>(got[j]));
                // The handed-out cost is the pack's that leaves r-th.
                const auto p = static_cast<std::size_t>(
                    std::find(rank.begin(), rank.end(), static_cast<std::uint32_t>(r)) -
                    rank.begin());
                REQUIRE(h.cost == cost[p]);
            }
            REQUIRE(ready.waiting_records(b) == 0);
        }
    }
}

TEST_CASE("ready_batches: the saved part of a round mid-way restores to the same batches",
          "[emission][ready_batches]") {
    ready_batches<record> ready;
    ready.reserve(6, 3);
    ready.start(std::vector<std::uint32_t>{0, 1, 2}, std::vector<double>{1.0, 2.0, 3.0},
                std::vector<double>{4.0, 5.0, 6.0});
    std::vector<record> buffered = records_of({20, 21, 22, 23, 24});
    const std::vector<std::uint64_t> arrivals{7, 8, 9, 10, 11};
    ready.place(
        5, 2, buffered, arrivals, [](std::size_t i) { return static_cast<std::uint32_t>(i); },
        [](std::size_t i) { return static_cast<std::uint32_t>(i / 2); },
        [](std::size_t, std::uint32_t, std::uint32_t) {});
    (void)ready.pop(2);

    bcl::detail::ready_batches_saved saved;
    ready.save_into(saved, 2);
    CHECK(saved.waiting_batch_costs == std::vector<double>{2.0, 3.0});
    CHECK(saved.waiting_batch_memory == std::vector<double>{5.0, 6.0});
    CHECK(saved.waiting_arrivals == std::vector<std::uint64_t>{9, 10, 11});
    CHECK(saved.waiting_records() == 3);
    CHECK_NOTHROW(saved.check());

    // The state carries the waiting records themselves (the balancer's pending records).
    std::vector<record> pending;
    for (record& r : ready.waiting_span(2)) pending.push_back(std::move(r));
    ready_batches<record> restored;
    restored.reserve(6, 3);
    restored.restore_from(saved, pending.begin());
    CHECK(restored.waiting() == 2);
    CHECK(std::vector<std::uint64_t>(restored.waiting_arrivals(2).begin(),
                                     restored.waiting_arrivals(2).end()) ==
          std::vector<std::uint64_t>{9, 10, 11});
    const auto a = restored.pop(2);
    CHECK(values_of(a.records) == std::vector<int>{22, 23});
    CHECK(a.cost == 2.0);
    CHECK(a.memory == 5.0);
    const auto b = restored.pop(2);
    CHECK(values_of(b.records) == std::vector<int>{24});
    CHECK(b.cost == 3.0);
    CHECK(restored.waiting() == 0);

    restored.clear();
    CHECK(restored.waiting() == 0);
    CHECK(restored.waiting_records(2) == 0);
    CHECK(restored.waiting_memory().empty());
}

TEST_CASE("ready_batches: a saved part with a negative or non-finite batch cost or memory is "
          "refused",
          "[emission][ready_batches]") {
    for (const double bad : {-1.0, HUGE_VAL, std::nan("")}) {
        INFO("value " << bad);
        bcl::detail::ready_batches_saved costly;
        costly.waiting_batch_costs = {1.0, bad};
        CHECK_THAT(bcl_test::bcl_error_message([&] { costly.check(); }),
                   Catch::Contains("invalid batch cost"));
        bcl::detail::ready_batches_saved heavy;
        heavy.waiting_batch_costs = {1.0, 2.0};
        heavy.waiting_batch_memory = {bad, 2.0};
        CHECK_THAT(bcl_test::bcl_error_message([&] { heavy.check(); }),
                   Catch::Contains("invalid batch memory"));
    }
}
