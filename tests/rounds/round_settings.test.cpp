// bcl::detail::round_settings and bcl::detail::round_inputs, as a specification: the settings a
// lookahead policy reads are bcl::options' batch size B, lookahead K, buffer_windows and max_age,
// and a window is B * K records (a constant expression); with no settings given it is the
// smallest shape, one record a batch and one batch a window, with a buffer of one window. The
// inputs of a round start empty: no costs, round 0, the input not ended, a mean of 0 and nothing
// to take.

#include <bcl/detail/rounds/round_policy.hpp>
#include <bcl/detail/rounds/round_settings.hpp>
#include <bcl/options.hpp>

#include <catch2/catch.hpp>

#include <cstddef>

using bcl::detail::round_inputs;
using bcl::detail::round_settings;

TEST_CASE("round_settings: a window is B * K records, with defaults of one record in one batch",
          "[rounds][round_settings]") {
    STATIC_REQUIRE(round_settings{}.window() == 1);
    STATIC_REQUIRE(round_settings{}.buffer_windows == 1);
    STATIC_REQUIRE(round_settings{}.max_age == 0);
    STATIC_REQUIRE(round_settings{.batch_size = 32, .lookahead = 8}.window() == 256);
    for (std::size_t b = 1; b <= 9; ++b)
        for (std::size_t k = 1; k <= 9; ++k) {
            // Counted out: K batches of B records each.
            std::size_t records = 0;
            for (std::size_t batch = 0; batch < k; ++batch) records += b;
            CHECK(round_settings{.batch_size = b, .lookahead = k, .buffer_windows = 5}.window() ==
                  records);
        }
}

TEST_CASE("round_settings: a policy's settings are the options' own", "[rounds][round_settings]") {
    const bcl::options opt{.batch_size = 3,
                           .lookahead = 5,
                           .policy = bcl::lookahead_policy::sliding,
                           .buffer_windows = 4,
                           .max_age = 6};
    const round_settings s = bcl::detail::round_settings_of(opt);
    CHECK(s.batch_size == 3);
    CHECK(s.lookahead == 5);
    CHECK(s.buffer_windows == 4);
    CHECK(s.max_age == 6);
    CHECK(s.window() == 15);
}

TEST_CASE("round_settings: a round's inputs start empty", "[rounds][round_settings]") {
    const round_inputs in{};
    CHECK(in.costs.empty());
    CHECK(in.arrivals.empty());
    CHECK(in.round == 0);
    CHECK_FALSE(in.finished);
    CHECK(in.arrival_mean == 0.0);
    CHECK(in.take == 0);
}
