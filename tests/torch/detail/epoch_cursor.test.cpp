// bcl::torch::detail::epoch_cursor, the epoch protocol both libtorch samplers keep, as a
// specification: reset() starts the epoch set_epoch() chose, else the next one if the epoch under
// way started, else the same one again; epoch() is the chosen one or the one under way; every
// epoch is below 2^63 where it enters; and the four values an archive holds read back as the
// cursor, anything else refused. The samplers' own specs check that they follow it.

#include <bcl/error.hpp>
#include <bcl/torch/detail/epoch_cursor.hpp>

#include <catch2/catch.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

namespace {

using bcl::torch::detail::epoch_cursor;
using Catch::Matchers::Contains;
using int64s = std::vector<std::int64_t>;

constexpr const char* who = "a sampler";
constexpr std::size_t largest = (std::size_t{1} << 63) - 1;

// Where `c` stands: the epoch under way, whether it started, the chosen one.
void require_at(const epoch_cursor& c, std::size_t current, bool started,
                std::optional<std::size_t> chosen) {
    CHECK(c.current() == current);
    CHECK(c.started() == started);
    CHECK(c.chosen() == chosen);
    CHECK(c.epoch() == (chosen ? *chosen : current));
}

} // namespace

TEST_CASE("torch epoch cursor: a fresh cursor is at epoch 0, and a reset() before anything "
          "started keeps it there (a loader's first begin() does not skip epoch 0)",
          "[torch][epoch][cursor]") {
    epoch_cursor c;
    require_at(c, 0, false, std::nullopt);
    CHECK(c.next_epoch() == 0);
    CHECK(c.reset(who) == 0);
    require_at(c, 0, false, std::nullopt);
    const epoch_cursor at_five(5, who, "the epoch");
    require_at(at_five, 5, false, std::nullopt);
}

TEST_CASE("torch epoch cursor: an epoch that started is followed by the next one",
          "[torch][epoch][cursor]") {
    epoch_cursor c(4, who, "the epoch");
    c.mark_started();
    c.mark_started(); // as often as batches are handed out: one flag
    require_at(c, 4, true, std::nullopt);
    CHECK(c.next_epoch() == 5);
    CHECK(c.reset(who) == 5);
    require_at(c, 5, false, std::nullopt);
    CHECK(c.reset(who) == 5); // nothing started in epoch 5
}

TEST_CASE("torch epoch cursor: set_epoch() chooses the epoch the next reset() starts, started or "
          "not, and leaves the epoch under way as it is until then",
          "[torch][epoch][cursor]") {
    const bool started = GENERATE(false, true);
    CAPTURE(started);
    epoch_cursor c(2, who, "the epoch");
    if (started) c.mark_started();
    c.set_epoch(9, who);
    require_at(c, 2, started, 9);
    c.set_epoch(7, who); // the last choice counts
    require_at(c, 2, started, 7);
    CHECK(c.next_epoch() == 7);
    CHECK(c.reset(who) == 7);
    require_at(c, 7, false, std::nullopt);
    // The epoch under way chosen again: it starts over (a started epoch is not skipped).
    c.mark_started();
    c.set_epoch(7, who);
    CHECK(c.reset(who) == 7);
    require_at(c, 7, false, std::nullopt);
    // An earlier epoch may be chosen.
    c.set_epoch(0, who);
    CHECK(c.reset(who) == 0);
}

TEST_CASE("torch epoch cursor: an epoch of 2^63 or more is refused where it enters, changing "
          "nothing; the largest one is an epoch",
          "[torch][epoch][cursor]") {
    epoch_cursor c(3, who, "the epoch");
    c.mark_started();
    CHECK_THROWS_AS(c.set_epoch(std::size_t{1} << 63, who), bcl::error);
    CHECK_THROWS_WITH(c.set_epoch(std::size_t{1} << 63, who),
                      "a sampler: the epoch must be below 2^63 (got 9223372036854775808)");
    require_at(c, 3, true, std::nullopt);
    CHECK_THROWS_WITH(epoch_cursor(std::size_t{1} << 63, who, "the inner sampler's epoch"),
                      Contains("the inner sampler's epoch must be below 2^63"));

    c.set_epoch(largest, who);
    CHECK(c.reset(who) == largest);
    CHECK(c.reset(who) == largest); // not started: the same epoch again
    c.mark_started();
    CHECK_THROWS_WITH(c.reset(who), "a sampler: the next epoch must be below 2^63 (got "
                                    "9223372036854775808)");
    require_at(c, largest, true, std::nullopt); // unchanged
    c.set_epoch(1, who);                        // a choice moves on from there
    CHECK(c.reset(who) == 1);
}

TEST_CASE("torch epoch cursor: its four values (the epoch under way, started, chosen, the chosen "
          "epoch) read back as the same cursor; any other values are refused",
          "[torch][epoch][cursor][resume]") {
    epoch_cursor plain(6, who, "the epoch");
    CHECK(plain.to_values() == std::array<std::int64_t, 4>{6, 0, 0, 0});
    epoch_cursor chosen = plain;
    chosen.mark_started();
    chosen.set_epoch(largest, who);
    CHECK(chosen.to_values() ==
          std::array<std::int64_t, 4>{6, 1, 1, static_cast<std::int64_t>(largest)});
    for (const epoch_cursor& c : {plain, chosen}) {
        const std::array<std::int64_t, 4> values = c.to_values();
        const std::optional<epoch_cursor> back = epoch_cursor::from_values(values);
        REQUIRE(back.has_value());
        CHECK(*back == c);
    }
    // Three values (an earlier layout), five, a flag of 2 or -1, a negative epoch, a chosen
    // epoch without its flag or a negative one.
    const int64s bad =
        GENERATE(int64s{}, int64s{6, 1, 0}, int64s{6, 1, 0, 0, 0}, int64s{6, 2, 0, 0},
                 int64s{6, 0, -1, 0}, int64s{-6, 0, 0, 0}, int64s{6, 1, 0, 3}, int64s{6, 1, 1, -3});
    CAPTURE(bad);
    CHECK_FALSE(epoch_cursor::from_values(bad).has_value());
}
