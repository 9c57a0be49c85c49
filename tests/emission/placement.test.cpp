// Step 5 of a round, bcl::detail::place_round: every record of the round moves from the buffer
// to the batch its pack leaves as, exactly once, in buffer order within a batch; each record's
// delay is counted and each is shown to the calibration with its batch and buffer slot.

#include <bcl/detail/emission/delay_tally.hpp>
#include <bcl/detail/emission/placement.hpp>
#include <bcl/detail/emission/ready_batches.hpp>
#include <bcl/detail/intake/record_buffer.hpp>
#include <bcl/detail/rounds/round_policy.hpp>
#include <bcl/statistics.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

namespace {

// A calibration that writes down what it is shown.
struct calibration_log {
    std::size_t rounds = 0;
    std::size_t finished = 0;
    std::vector<std::pair<std::size_t, std::uint32_t>> added; // (batch, slot)
    void start_round(std::size_t /*packs*/) { ++rounds; }
    template <class Buffer>
    void add(std::size_t batch, const Buffer& /*buffer*/, std::uint32_t slot) {
        added.emplace_back(batch, slot);
    }
    void finish_round() { ++finished; }
};

struct round_fixture {
    static constexpr std::size_t b = 2;
    bcl::detail::record_buffer<int, false> buffer;
    bcl::detail::ready_batches<int> ready;
    bcl::detail::delay_tally delays;
    bcl::statistics stats;

    explicit round_fixture(std::size_t records) {
        buffer.reserve(records);
        ready.reserve(records, records / b + 1);
        delays.reserve(16, stats);
        for (std::size_t i = 0; i < records; ++i)
            buffer.push(static_cast<int>(100 + i), {1.0, 0.0, 1.0, HUGE_VAL, false}, i);
    }
};

} // namespace

TEST_CASE("A round of the whole buffer places record i into the batch of its pack's rank",
          "[placement]") {
    round_fixture f(6);
    bcl::detail::round_records r;
    r.take = 6;
    r.whole_buffer = true;
    r.packs = 3;
    const std::vector<std::uint32_t> pack_of{2, 0, 1, 2, 0, 1};
    const std::vector<std::uint32_t> rank{1, 2, 0}; // pack 0 leaves second, pack 2 first
    const std::vector<double> pack_cost{2.0, 2.0, 2.0};
    f.ready.start(rank, pack_cost, {});
    auto counter = f.delays.start(0, r.packs, 0, round_fixture::b, f.stats);
    calibration_log log;
    bcl::detail::place_round(f.ready, f.buffer, r, round_fixture::b, pack_of, rank, counter, log);
    f.delays.finish(f.stats);

    // Batch 0 is pack 2 (records 0 and 3), batch 1 pack 0 (1, 4), batch 2 pack 1 (2, 5).
    const std::vector<std::vector<int>> expected{{100, 103}, {101, 104}, {102, 105}};
    for (const auto& batch : expected) {
        const auto out = f.ready.pop(round_fixture::b);
        CHECK(std::vector<int>(out.records.begin(), out.records.end()) == batch);
    }
    CHECK(log.rounds == 1);
    CHECK(log.finished == 1);
    REQUIRE(log.added.size() == 6);
    CHECK(log.added[0] == std::pair<std::size_t, std::uint32_t>{0, 0});
    CHECK(log.added[1] == std::pair<std::size_t, std::uint32_t>{1, 1});
    // Records 0-1 arrived in batch 0, 2-3 in 1, 4-5 in 2: record 1 leaves in batch 1 (delay 1),
    // record 2 in batch 2 (delay 1), the rest no later than their own batch.
    CHECK(f.stats.max_delay_batches == 1);
}

TEST_CASE("A round of chosen records places them from their buffer slots", "[placement]") {
    round_fixture f(6);
    std::span<std::uint8_t> chosen = f.buffer.chosen();
    const std::vector<std::uint8_t> picks{0, 1, 0, 1, 1, 1};
    std::copy(picks.begin(), picks.end(), chosen.begin());
    f.buffer.gather(4);
    bcl::detail::round_records r;
    r.take = 4;
    r.whole_buffer = false;
    r.packs = 2;
    // The round's records are slots 1, 3, 4, 5: items 1 and 2 go to pack 0, items 0 and 3 to 1.
    const std::vector<std::uint32_t> pack_of{1, 0, 0, 1};
    const std::vector<std::uint32_t> rank{0, 1};
    const std::vector<double> pack_cost{2.0, 2.0};
    f.ready.start(rank, pack_cost, {});
    auto counter = f.delays.start(0, r.packs, 1, round_fixture::b, f.stats);
    calibration_log log;
    bcl::detail::place_round(f.ready, f.buffer, r, round_fixture::b, pack_of, rank, counter, log);
    f.delays.finish(f.stats);
    const auto first = f.ready.pop(round_fixture::b);
    CHECK(std::vector<int>(first.records.begin(), first.records.end()) ==
          std::vector<int>{103, 104});
    const auto second = f.ready.pop(round_fixture::b);
    CHECK(std::vector<int>(second.records.begin(), second.records.end()) ==
          std::vector<int>{101, 105});
    REQUIRE(log.added.size() == 4);
    CHECK(log.added[0] == std::pair<std::size_t, std::uint32_t>{1, 1}); // slots, not positions
    CHECK(log.added[1] == std::pair<std::size_t, std::uint32_t>{0, 3});
    f.buffer.release_round(false);
    CHECK(f.buffer.size() == 2);
}
