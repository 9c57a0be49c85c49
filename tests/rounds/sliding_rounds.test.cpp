// bcl::detail::sliding_rounds, as a specification: the policy spelled "sliding". Its buffer holds
// buffer_windows windows of K*B records and each round takes K*B of them: first every record
// whose deadline (its first round plus max_age) requires it, then the rest, by single swaps from
// the oldest, toward K*B times the long-run mean cost plus 3% of the buffer's surplus over that
// mean. A record waits at most (max_age + 1) * K - 1 batches. Its settings are refused, naming
// the first offending option, when the buffer is empty, holds more than max_buffer records,
// cannot empty in max_age + 1 rounds, or allows a delay above max_delay batches.

#include "support/error_message.hpp"

#include <bcl/detail/rounds/round_settings.hpp>
#include <bcl/detail/rounds/sliding_rounds.hpp>

#include <catch2/catch.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

using bcl::detail::round_inputs;
using bcl::detail::round_settings;
using bcl::detail::sliding_rounds;
using Catch::Matchers::Contains;

TEST_CASE("sliding_rounds: a buffer of buffer_windows windows and a delay bound of "
          "(max_age + 1) * K - 1 batches, worked by hand",
          "[rounds][sliding_rounds]") {
    STATIC_REQUIRE(sliding_rounds::name == "sliding");
    CHECK_FALSE(sliding_rounds::summary.empty());
    // B = 4, K = 3, 2 windows, max_age 1: 24 records; a record first held in round r leaves by
    // round r + 1, at the latest in that round's last batch: 2 * 3 - 1 = 5 batches later.
    const sliding_rounds s{round_settings{4, 3, 2, 1}};
    CHECK(s.capacity() == 24);
    CHECK(s.max_delay() == 5);
    const sliding_rounds wide{round_settings{1, 8, 5, 9}};
    CHECK(wide.capacity() == 40);
    CHECK(wide.max_delay() == 79);
}

TEST_CASE("sliding_rounds: settings are accepted exactly when the buffer fits, can empty in "
          "max_age + 1 rounds and bounds the delay within the limit",
          "[rounds][sliding_rounds]") {
    for (std::size_t b = 1; b <= 3; ++b)
        for (std::size_t k = 1; k <= 4; ++k)
            for (std::size_t windows = 0; windows <= 4; ++windows)
                for (std::size_t age = 0; age <= 6; ++age)
                    for (const std::size_t max_buffer : {4U, 12U, 40U})
                        for (const std::size_t max_delay : {3U, 10U, 29U}) {
                            const round_settings s{b, k, windows, age};
                            // The rules, each counted out.
                            const bool some = windows >= 1;
                            const bool fits = windows * b * k <= max_buffer;
                            const bool empties = age + 1 >= windows;
                            const bool bounded = (age + 1) * k <= max_delay;
                            INFO("B " << b << ", K " << k << ", windows " << windows << ", age "
                                      << age << ", limits " << max_buffer << ", " << max_delay);
                            const std::string message = bcl_test::bcl_error_message(
                                [&] { sliding_rounds::validate(s, max_buffer, max_delay); });
                            if (some && fits && empties && bounded)
                                REQUIRE(message == "<no exception>");
                            else if (!some)
                                REQUIRE_THAT(message,
                                             Contains("buffer_windows must be at least 1"));
                            else if (!fits)
                                REQUIRE_THAT(message,
                                             Contains("exceeds the largest buffer of " +
                                                      std::to_string(max_buffer) + " records"));
                            else if (!empties)
                                REQUIRE_THAT(message, Contains("max_age must be at least "
                                                               "buffer_windows - 1"));
                            else
                                REQUIRE_THAT(message,
                                             Contains("max_age is too large (" +
                                                      std::to_string(age) + ")") &&
                                                 Contains("at most " + std::to_string(max_delay) +
                                                          " batches"));
                        }
}

TEST_CASE("sliding_rounds: a round worked by hand takes the due record, then swaps toward the "
          "target",
          "[rounds][sliding_rounds]") {
    // B = 1, K = 3, 2 windows, max_age 2: a buffer of 6, rounds of 3. Arrivals 0..5 are first
    // held in round 0 (deadline 2), 6..8 in round 1 (deadline 3), 9..11 in round 2 (deadline 4).
    // Round 2 holds 5 (deadline now), 7, 8 and 9, 10, 11: 5 is due; 7, 8 can still leave in
    // round 3, and 9, 10, 11 in rounds 3 and 4.
    sliding_rounds s{round_settings{1, 3, 2, 2}};
    s.reserve(6);
    const std::vector<double> costs{10.0, 1.0, 2.0, 3.5, 4.25, 6.0};
    const std::vector<std::uint64_t> arrivals{5, 7, 8, 9, 10, 11};
    std::vector<std::uint8_t> chosen(6, 0);
    // Long-run mean 5: target 3 * 5 + 0.03 * (26.75 - 6 * 5) = 14.9025. From the oldest three
    // (13) the best single swap is 2 for 4.25 (15.25, 0.3475 off; 2 for 3.5 gives 14.5, 0.4025
    // off), and from there no swap comes closer.
    s.choose(round_inputs{costs, arrivals, 2, false, 5.0, 3}, chosen);
    CHECK(chosen == std::vector<std::uint8_t>{1, 1, 0, 0, 1, 0});
    // Long-run mean 4.97: target 14.91 - 0.03 * 3.07 = 14.8179, nearer 14.5 (2 for 3.5) than
    // 15.25 (2 for 4.25); without the 3% feedback 14.91 would be nearer 15.25.
    STATIC_REQUIRE(sliding_rounds::surplus_feedback == 0.03);
    s.choose(round_inputs{costs, arrivals, 2, false, 4.97, 3}, chosen);
    CHECK(chosen == std::vector<std::uint8_t>{1, 1, 0, 1, 0, 0});
    // Long-run mean 1: target 3 + 0.03 * (26.75 - 6) = 3.6225, far below what 5 alone costs.
    // Due, it stays, and no swap of the others comes closer; with a max_age of 3 nothing is due
    // yet, and the best swap sends it back (10 for 3.5: 6.5).
    s.choose(round_inputs{costs, arrivals, 2, false, 1.0, 3}, chosen);
    CHECK(chosen == std::vector<std::uint8_t>{1, 1, 1, 0, 0, 0});
    sliding_rounds patient{round_settings{1, 3, 2, 3}};
    patient.reserve(6);
    patient.choose(round_inputs{costs, arrivals, 2, false, 1.0, 3}, chosen);
    CHECK(chosen == std::vector<std::uint8_t>{0, 1, 1, 1, 0, 0});
    // Once the input has ended the target is the share of what is held, 26.75 / 2 = 13.375:
    // the oldest three (13) stay, as every swap adds at least 1.5.
    s.choose(round_inputs{costs, arrivals, 2, true, 5.0, 3}, chosen);
    CHECK(chosen == std::vector<std::uint8_t>{1, 1, 1, 0, 0, 0});
    // With a max_age of 1 (buffer_windows - 1: first in, first out), round 2 holds 6..11 and
    // 6, 7, 8 are due now: the three oldest, however far the target.
    sliding_rounds fifo{round_settings{1, 3, 2, 1}};
    fifo.reserve(6);
    const std::vector<std::uint64_t> later{6, 7, 8, 9, 10, 11};
    fifo.choose(round_inputs{costs, later, 2, false, 100.0, 3}, chosen);
    CHECK(chosen == std::vector<std::uint8_t>{1, 1, 1, 0, 0, 0});
}
