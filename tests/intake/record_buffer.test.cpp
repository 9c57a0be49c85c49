// bcl::detail::record_buffer: the records a balancer holds, in arrival order, each with its cost,
// memory estimate (when tracked) and arrival position side by side. push appends, drop_newest
// drops the most recent, clear empties; gather lists the chosen slots (their costs, memory and
// slot numbers in slot order); compact drops exactly the chosen records and keeps the others in
// arrival order; assign replaces the contents.

#include <bcl/detail/intake/record_buffer.hpp>
#include <bcl/detail/intake/record_estimator.hpp>

#include <catch2/catch.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <random>
#include <span>
#include <vector>

namespace {

/// A move-only record, so the buffer is seen to move records and never copy them.
using record = std::unique_ptr<int>;
using move_only_buffer = bcl::detail::record_buffer<record, true>;

// Record i of a test: id i, cost 10 + i, memory 100 + i, arrival 3 * i + 5 (gaps, as a sliding
// buffer's arrivals have after a round).
double cost_of_record(std::size_t i) {
    return 10.0 + static_cast<double>(i);
}
double memory_of_record(std::size_t i) {
    return 100.0 + static_cast<double>(i);
}
std::uint64_t arrival_of(std::size_t i) {
    return 3 * i + 5;
}

template <class Buffer>
void fill(Buffer& b, std::size_t n) {
    b.reserve(n);
    for (std::size_t i = 0; i < n; ++i)
        b.push(std::make_unique<int>(static_cast<int>(i)),
               {cost_of_record(i), memory_of_record(i), 0.0, 0.0, false}, arrival_of(i));
}

/// The ids of the held records, and that each slot's cost, memory and arrival are its record's.
template <class Buffer>
std::vector<int> ids_checked(const Buffer& b, bool tracks_memory = true) {
    std::vector<int> ids;
    REQUIRE(b.costs().size() == b.size());
    REQUIRE(b.arrivals().size() == b.size());
    REQUIRE(b.memory().size() == (tracks_memory ? b.size() : 0));
    for (std::size_t slot = 0; slot < b.size(); ++slot) {
        const auto id = static_cast<std::size_t>(*b.records()[slot]);
        REQUIRE(b.costs()[slot] == cost_of_record(id));
        REQUIRE(b.arrivals()[slot] == arrival_of(id));
        if (tracks_memory) REQUIRE(b.memory()[slot] == memory_of_record(id));
        ids.push_back(static_cast<int>(id));
    }
    return ids;
}

std::vector<int> up_to(int n) {
    std::vector<int> ids;
    for (int i = 0; i < n; ++i) ids.push_back(i);
    return ids;
}

} // namespace

TEST_CASE("push appends a record with its cost, memory and arrival; drop_newest drops the most "
          "recent; clear empties",
          "[record-buffer]") {
    move_only_buffer b;
    CHECK(b.empty());
    fill(b, 9);
    CHECK(b.size() == 9);
    CHECK_FALSE(b.empty());
    CHECK(ids_checked(b) == up_to(9));

    b.drop_newest(3);
    CHECK(b.size() == 6);
    CHECK(ids_checked(b) == up_to(6));
    b.drop_newest(0);
    CHECK(ids_checked(b) == up_to(6));

    b.clear();
    CHECK(b.empty());
    CHECK(ids_checked(b).empty());
}

TEST_CASE("A buffer without memory tracking keeps no memory estimates", "[record-buffer]") {
    bcl::detail::record_buffer<record, false> b;
    fill(b, 5);
    CHECK(ids_checked(b, false) == up_to(5));
    b.drop_newest(2);
    CHECK(ids_checked(b, false) == up_to(3));
}

TEST_CASE("gather lists the chosen slots in slot order with their costs and memory, and compact "
          "drops exactly those, keeping arrival order",
          "[record-buffer]") {
    std::mt19937_64 gen(11);
    for (std::size_t trial = 0; trial < 200; ++trial) {
        const std::size_t n = 1 + trial % 23;
        // Which slots are chosen: none, all, the oldest, the newest, or a random subset.
        std::vector<std::uint8_t> pick(n, 0);
        switch (trial % 5) {
        case 0:
            break;
        case 1:
            pick.assign(n, 1);
            break;
        case 2:
            pick[0] = 1;
            break;
        case 3:
            pick[n - 1] = 1;
            break;
        default:
            for (auto& p : pick) p = static_cast<std::uint8_t>(gen() % 2);
        }
        INFO("trial " << trial << ", " << n << " records");

        move_only_buffer b;
        fill(b, n);
        std::span<std::uint8_t> chosen = b.chosen();
        REQUIRE(chosen.size() == n);
        std::size_t take = 0;
        for (std::size_t i = 0; i < n; ++i) {
            chosen[i] = pick[i];
            take += pick[i];
        }
        b.gather(take);

        std::vector<std::uint32_t> slots;
        std::vector<double> costs;
        std::vector<double> memory;
        std::vector<int> kept;
        for (std::size_t i = 0; i < n; ++i) {
            if (pick[i]) {
                slots.push_back(static_cast<std::uint32_t>(i));
                costs.push_back(cost_of_record(i));
                memory.push_back(memory_of_record(i));
            } else {
                kept.push_back(static_cast<int>(i));
            }
        }
        CHECK(std::vector<std::uint32_t>(b.round_slots().begin(), b.round_slots().end()) == slots);
        CHECK(std::vector<double>(b.round_costs().begin(), b.round_costs().end()) == costs);
        CHECK(std::vector<double>(b.round_memory().begin(), b.round_memory().end()) == memory);
        // gather reads, it does not move anything.
        CHECK(ids_checked(b) == up_to(static_cast<int>(n)));

        // The round moves its records out; compact then closes the gaps.
        std::vector<record> taken;
        for (const std::uint32_t slot : b.round_slots())
            taken.push_back(std::move(b.records()[slot]));
        b.compact();
        CHECK(ids_checked(b) == kept);
        for (std::size_t j = 0; j < taken.size(); ++j)
            CHECK(*taken[j] == static_cast<int>(slots[j]));
    }
}

TEST_CASE("Rounds of gather and compact leave every record once, in arrival order",
          "[record-buffer]") {
    // A buffer refilled after each round, as the sliding policy does: what is left is always the
    // records pushed and not yet taken, oldest first.
    std::mt19937_64 gen(5);
    move_only_buffer b;
    b.reserve(16);
    std::vector<int> expected;
    std::size_t pushed = 0;
    for (int round = 0; round < 50; ++round) {
        while (b.size() < 16) {
            b.push(std::make_unique<int>(static_cast<int>(pushed)),
                   {cost_of_record(pushed), memory_of_record(pushed), 0.0, 0.0, false},
                   arrival_of(pushed));
            expected.push_back(static_cast<int>(pushed));
            ++pushed;
        }
        std::span<std::uint8_t> chosen = b.chosen();
        std::size_t take = 0;
        std::vector<int> left;
        for (std::size_t i = 0; i < chosen.size(); ++i) {
            chosen[i] = take < 8 && gen() % 2 == 0 ? 1 : 0;
            take += chosen[i];
            if (!chosen[i]) left.push_back(expected[i]);
        }
        b.gather(take);
        for (const std::uint32_t slot : b.round_slots()) b.records()[slot].reset();
        b.compact();
        expected = left;
        REQUIRE(ids_checked(b) == expected);
    }
}

TEST_CASE("assign replaces the contents with the given records, costs, memory and arrivals",
          "[record-buffer]") {
    move_only_buffer b;
    fill(b, 4);
    std::vector<record> saved;
    std::vector<double> costs;
    std::vector<double> memory;
    std::vector<std::uint64_t> arrivals;
    for (const std::size_t id : {7U, 9U, 12U}) {
        saved.push_back(std::make_unique<int>(static_cast<int>(id)));
        costs.push_back(cost_of_record(id));
        memory.push_back(memory_of_record(id));
        arrivals.push_back(arrival_of(id));
    }
    // A state's pending records hold the waiting batches first: the buffer's come after them.
    std::vector<record> pending;
    pending.push_back(std::make_unique<int>(-1));
    for (record& r : saved) pending.push_back(std::move(r));
    b.assign(pending.begin() + 1, costs, memory, arrivals);
    CHECK(ids_checked(b) == std::vector<int>{7, 9, 12});
    CHECK(*pending[0] == -1);
    for (std::size_t i = 1; i < pending.size(); ++i) CHECK(pending[i] == nullptr); // moved from
}
