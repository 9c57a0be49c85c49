// bcl::detail::tumbling_rounds, as a specification: the paper's policy, spelled "tumbling". Its
// buffer holds exactly one window of K*B records and each round takes all of it, so a record
// leaves among its own window's K batches and waits at most K - 1 batches; it has no settings of
// its own to check; a saved buffer after r rounds may hold exactly the records pushed since, slot
// i arrival r*K*B + i; asked to choose fewer than it holds, it takes the oldest.

#include <bcl/detail/rounds/round_settings.hpp>
#include <bcl/detail/rounds/tumbling_rounds.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

using bcl::detail::round_inputs;
using bcl::detail::round_settings;
using bcl::detail::tumbling_rounds;

TEST_CASE("tumbling_rounds: one window of buffer, and a delay of at most K - 1 batches, reached",
          "[rounds][tumbling_rounds]") {
    STATIC_REQUIRE(tumbling_rounds::name == "tumbling");
    CHECK_FALSE(tumbling_rounds::summary.empty());
    for (std::size_t b = 1; b <= 4; ++b)
        for (std::size_t k = 1; k <= 5; ++k) {
            // A sliding option set to anything changes nothing here.
            const tumbling_rounds t{round_settings{b, k, 7, 9}};
            INFO("B " << b << ", K " << k);
            CHECK(t.capacity() == b * k);
            // The delay by brute force: window w's records would have been in batches wK .. wK +
            // K - 1 (arrival / B) and leave in any of them, in any order; the worst is the
            // window's first record in its last batch.
            std::size_t worst = 0;
            for (std::size_t arrival = 0; arrival < 3 * b * k; ++arrival) {
                const std::size_t window = arrival / (b * k);
                const std::size_t would = arrival / b;
                for (std::size_t leaves = window * k; leaves < window * k + k; ++leaves) {
                    REQUIRE(leaves + k > would); // a batch of its own window
                    worst = std::max(worst, leaves > would ? leaves - would : 0);
                }
            }
            CHECK(t.max_delay() == worst);
            CHECK(t.max_delay() == k - 1);
            CHECK_NOTHROW(tumbling_rounds::validate(t.settings, 0, 0));
        }
}

TEST_CASE("tumbling_rounds: a saved buffer may hold only the records of its round, each in its "
          "arrival's slot",
          "[rounds][tumbling_rounds]") {
    const tumbling_rounds t{round_settings{.batch_size = 3, .lookahead = 2}};
    // After 2 rounds of 6 records, slots 0..5 hold arrivals 12..17.
    for (std::size_t slot = 0; slot < 6; ++slot) {
        CHECK(t.may_hold(12 + slot, slot, 2));
        CHECK_FALSE(t.may_hold(12 + slot, slot, 1)); // a record of the next window
        CHECK_FALSE(t.may_hold(12 + slot, slot, 3)); // one that should have left
        CHECK_FALSE(t.may_hold(13 + slot, slot, 2)); // out of order
    }
}

TEST_CASE("tumbling_rounds: choosing takes the oldest records, all of the buffer when asked",
          "[rounds][tumbling_rounds]") {
    const std::vector<double> costs{9, 1, 8, 2, 7, 3};
    const std::vector<std::uint64_t> arrivals{0, 1, 2, 3, 4, 5};
    for (std::size_t take = 0; take <= costs.size(); ++take) {
        std::vector<std::uint8_t> chosen(costs.size(), 0x55);
        tumbling_rounds::choose(round_inputs{costs, arrivals, 0, false, 5.0, take}, chosen);
        for (std::size_t i = 0; i < chosen.size(); ++i) {
            INFO("take " << take << ", slot " << i);
            CHECK(chosen[i] == (i < take ? 1 : 0));
        }
    }
}
