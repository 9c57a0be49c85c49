// The lookahead policies' rounds, bcl::detail::tumbling_rounds and bcl::detail::sliding_rounds, as
// bcl::detail::make_round_policy makes them from bcl::options: each policy's buffer capacity and
// delay bound; the sliding options it rejects; which saved buffers each could hold; and which
// records a sliding round takes: every record whose deadline has come (a record's first round is
// 0 for the first `capacity` arrivals, then one more per K*B arrivals; its deadline is that plus
// max_age), exactly `take` of them, toward the buffer's share of its cost once the input ended.

#include <bcl/detail/rounds/round_policy.hpp>
#include <bcl/detail/rounds/round_settings.hpp>
#include <bcl/detail/rounds/sliding_rounds.hpp>
#include <bcl/detail/rounds/tumbling_rounds.hpp>
#include <bcl/error.hpp>
#include <bcl/options.hpp>
#include <bcl/validate.hpp>

#include <catch2/catch.hpp>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <random>
#include <span>
#include <variant>
#include <vector>

namespace {

using bcl::detail::round_inputs;
using bcl::detail::sliding_rounds;
using bcl::detail::tumbling_rounds;
using Catch::Matchers::Contains;

struct shape {
    std::size_t b, k, buffer_windows, max_age;
};

bcl::options options_of(const shape& s, bcl::lookahead_policy policy) {
    return {.batch_size = s.b,
            .lookahead = s.k,
            .policy = policy,
            .buffer_windows = s.buffer_windows,
            .max_age = s.max_age};
}

sliding_rounds sliding_of(const shape& s) {
    return std::get<sliding_rounds>(
        bcl::detail::make_round_policy(options_of(s, bcl::lookahead_policy::sliding)));
}

/// Each arrival's first round, by simulating the buffer: a push that finds it full (`capacity`
/// records) runs a round first, which takes K*B records.
std::vector<std::uint64_t> first_rounds(std::size_t arrivals, std::size_t capacity,
                                        std::size_t window) {
    std::vector<std::uint64_t> first(arrivals);
    std::size_t held = 0;
    std::uint64_t rounds = 0;
    for (std::size_t a = 0; a < arrivals; ++a) {
        if (held == capacity) {
            ++rounds;
            held -= window;
        }
        first[a] = rounds;
        ++held;
    }
    return first;
}

const shape round_shapes[] = {{2, 2, 2, 2}, {2, 2, 2, 1}, {3, 2, 3, 5}, {1, 4, 3, 2},
                              {4, 3, 2, 4}, {1, 1, 4, 3}, {2, 3, 1, 0}};

} // namespace

TEST_CASE("Tumbling holds one window and delays a record at most K - 1 batches; sliding holds "
          "buffer_windows windows and delays at most (max_age + 1) * K - 1",
          "[tumbling-rounds][sliding-rounds]") {
    for (const shape& s : round_shapes) {
        INFO("B=" << s.b << " K=" << s.k << " buffer_windows=" << s.buffer_windows
                  << " max_age=" << s.max_age);
        const bcl::options tumbling = options_of(s, bcl::lookahead_policy::tumbling);
        const auto t = bcl::detail::make_round_policy(tumbling);
        REQUIRE(std::holds_alternative<tumbling_rounds>(t));
        CHECK(std::get<tumbling_rounds>(t).capacity() == s.b * s.k);
        CHECK(std::get<tumbling_rounds>(t).max_delay() == s.k - 1);
        CHECK(bcl::buffer_capacity(tumbling) == s.b * s.k);
        CHECK(bcl::max_delay_bound(tumbling) == s.k - 1);

        const bcl::options sliding = options_of(s, bcl::lookahead_policy::sliding);
        const auto r = bcl::detail::make_round_policy(sliding);
        REQUIRE(std::holds_alternative<sliding_rounds>(r));
        CHECK(std::get<sliding_rounds>(r).capacity() == s.buffer_windows * s.b * s.k);
        CHECK(std::get<sliding_rounds>(r).max_delay() == (s.max_age + 1) * s.k - 1);
        CHECK(bcl::buffer_capacity(sliding) == s.buffer_windows * s.b * s.k);
        CHECK(bcl::max_delay_bound(sliding) == (s.max_age + 1) * s.k - 1);
    }
}

TEST_CASE("make_round_policy rejects a policy that is not one of lookahead_policy's values",
          "[tumbling-rounds][sliding-rounds]") {
    bcl::options opt{.batch_size = 2};
    opt.policy = static_cast<bcl::lookahead_policy>(7);
    CHECK_THROWS_WITH(bcl::detail::make_round_policy(opt), Contains("policy") && Contains("7"));
}

TEST_CASE("Sliding rejects an empty buffer, a buffer or delay bound over the limits, and a "
          "max_age too short to empty a full buffer",
          "[sliding-rounds]") {
    // B = 2, K = 3: a window of 6, a buffer of 4 windows = 24 records, a delay bound of
    // (3 + 1) * 3 = 12 batches.
    const shape ok{2, 3, 4, 3};
    CHECK_NOTHROW(sliding_rounds::validate(sliding_of(ok).settings, 24, 12));
    CHECK_THROWS_WITH(sliding_rounds::validate(sliding_of(ok).settings, 23, 100),
                      Contains("buffer_windows * batch_size * lookahead = 4 * 2 * 3") &&
                          Contains("largest buffer of 23"));
    CHECK_THROWS_WITH(sliding_rounds::validate(sliding_of(ok).settings, 100, 11),
                      Contains("max_age is too large (3)") && Contains("at most 11"));

    CHECK_THROWS_WITH(sliding_rounds::validate(sliding_of({2, 3, 0, 3}).settings, 100, 100),
                      Contains("buffer_windows must be at least 1 (got 0)"));
    CHECK_NOTHROW(sliding_rounds::validate(sliding_of({2, 3, 4, 3}).settings, 100,
                                           100)); // max_age = buffer_windows - 1
    CHECK_THROWS_WITH(sliding_rounds::validate(sliding_of({2, 3, 4, 2}).settings, 100, 100),
                      Contains("max_age must be at least buffer_windows - 1 = 3 (got 2)"));

    // Tumbling has nothing of its own to check.
    const auto t = bcl::detail::make_round_policy(options_of(ok, bcl::lookahead_policy::tumbling));
    CHECK_NOTHROW(tumbling_rounds::validate(std::get<tumbling_rounds>(t).settings, 0, 0));

    // Through bcl::validate, with the library's limits.
    bcl::options huge = options_of(ok, bcl::lookahead_policy::sliding);
    huge.max_age = bcl::max_delay_limit;
    CHECK_THROWS_AS(bcl::validate(huge), bcl::error);
    huge = options_of(ok, bcl::lookahead_policy::sliding);
    huge.buffer_windows = bcl::max_window_records;
    huge.max_age = bcl::max_window_records;
    CHECK_THROWS_WITH(bcl::validate(huge), Contains("largest buffer"));
    // ... but tumbling ignores the sliding options.
    huge.policy = bcl::lookahead_policy::tumbling;
    CHECK_NOTHROW(bcl::validate(huge));
}

TEST_CASE("A tumbling buffer after r rounds holds exactly the records pushed since, in order",
          "[tumbling-rounds]") {
    for (const shape& s : round_shapes) {
        const std::size_t window = s.b * s.k;
        const auto t = std::get<tumbling_rounds>(
            bcl::detail::make_round_policy(options_of(s, bcl::lookahead_policy::tumbling)));
        for (std::uint64_t round = 0; round < 4; ++round) {
            // After `round` rounds of `window` records each, the buffer's slot i holds arrival
            // round * window + i, and nothing else.
            std::vector<std::uint64_t> holds(window);
            for (std::size_t i = 0; i < window; ++i) holds[i] = round * window + i;
            for (std::size_t slot = 0; slot < window; ++slot)
                for (std::uint64_t arrival = 0; arrival < 6 * window; ++arrival) {
                    INFO("round " << round << " slot " << slot << " arrival " << arrival);
                    REQUIRE(t.may_hold(arrival, slot, round) == (holds[slot] == arrival));
                }
        }
    }
}

TEST_CASE("A sliding buffer after r rounds may hold a record only up to its deadline",
          "[sliding-rounds]") {
    for (const shape& s : round_shapes) {
        INFO("B=" << s.b << " K=" << s.k << " buffer_windows=" << s.buffer_windows
                  << " max_age=" << s.max_age);
        const sliding_rounds r = sliding_of(s);
        const std::size_t window = s.b * s.k;
        const std::size_t n = (s.buffer_windows + 6) * window;
        const std::vector<std::uint64_t> first = first_rounds(n, s.buffer_windows * window, window);
        for (std::uint64_t a = 0; a < n; ++a) {
            const std::uint64_t deadline = first[a] + s.max_age;
            for (std::uint64_t round = 0; round <= deadline + 3; ++round) {
                INFO("arrival " << a << " round " << round);
                REQUIRE(r.may_hold(a, 0, round) == (round <= deadline));
            }
        }
    }
}

TEST_CASE("Tumbling would take the oldest records", "[tumbling-rounds]") {
    const auto t = std::get<tumbling_rounds>(bcl::detail::make_round_policy(
        bcl::options{.batch_size = 2, .lookahead = 2, .policy = bcl::lookahead_policy::tumbling}));
    const std::vector<double> costs{5, 1, 4, 2, 3};
    const std::vector<std::uint64_t> arrivals{0, 1, 2, 3, 4};
    std::vector<std::uint8_t> chosen(5, 7);
    t.choose(round_inputs{costs, arrivals, 0, false, 3.0, 3}, chosen);
    CHECK(chosen == std::vector<std::uint8_t>{1, 1, 1, 0, 0});
}

TEST_CASE("A sliding round takes exactly K*B records, among them every one whose deadline "
          "requires it, and no record leaves after its deadline",
          "[sliding-rounds]") {
    std::mt19937_64 gen(3);
    std::lognormal_distribution<double> draw(0.0, 1.5);
    for (const shape& s : round_shapes) {
        if (s.buffer_windows < 2) continue; // a round then takes the whole buffer: no choice
        INFO("B=" << s.b << " K=" << s.k << " buffer_windows=" << s.buffer_windows
                  << " max_age=" << s.max_age);
        sliding_rounds policy = sliding_of(s);
        const std::size_t window = s.b * s.k;
        const std::size_t capacity = s.buffer_windows * window;
        policy.reserve(capacity);
        const std::size_t n = 40 * window + 3;
        const std::vector<std::uint64_t> first = first_rounds(n, capacity, window);

        std::vector<double> costs;
        std::vector<std::uint64_t> arrivals;
        double total = 0.0;
        std::uint64_t round = 0;
        std::size_t rounds_with_due = 0;
        std::size_t rounds_with_choice = 0;
        // Runs one round that cannot take the whole buffer and checks what it chose.
        const auto run_round = [&](bool finished, std::uint64_t pushed) {
            const std::size_t held = costs.size();
            const round_inputs in{
                costs, arrivals, round, finished, total / static_cast<double>(pushed), window};
            std::vector<std::uint8_t> chosen(held, 0xAA);
            policy.choose(in, chosen);

            // The due records, by brute force: the records up to position p all have deadlines
            // at most deadline_p, and the rounds after this one up to that deadline take at most
            // (deadline_p - round) * K*B of them, so this round must take the rest.
            std::size_t due = 0;
            for (std::size_t p = 0; p < held; ++p) {
                const std::uint64_t deadline = first[arrivals[p]] + s.max_age;
                const std::uint64_t later = deadline > round ? (deadline - round) * window : 0;
                if (p + 1 > later) due = std::max<std::size_t>(due, p + 1 - later);
            }
            due = std::min(due, window);
            std::size_t taken = 0;
            for (std::size_t p = 0; p < held; ++p) {
                INFO("round " << round << ", position " << p << " of " << held << ", due " << due);
                REQUIRE((chosen[p] == 0 || chosen[p] == 1));
                taken += chosen[p];
                if (p < due) REQUIRE(chosen[p] == 1);
                // The plainest consequence: a record at its deadline leaves now.
                if (first[arrivals[p]] + s.max_age <= round) REQUIRE(chosen[p] == 1);
            }
            REQUIRE(taken == window);
            rounds_with_due += due > 0 ? 1 : 0;
            rounds_with_choice += due < window ? 1 : 0;

            std::vector<double> kept_costs;
            std::vector<std::uint64_t> kept_arrivals;
            for (std::size_t p = 0; p < held; ++p) {
                if (chosen[p]) {
                    REQUIRE(round <= first[arrivals[p]] + s.max_age); // leaves by its deadline
                } else {
                    kept_costs.push_back(costs[p]);
                    kept_arrivals.push_back(arrivals[p]);
                }
            }
            costs = kept_costs;
            arrivals = kept_arrivals;
            ++round;
        };

        for (std::uint64_t a = 0; a < n; ++a) {
            if (costs.size() == capacity) run_round(false, a);
            const double c = draw(gen);
            costs.push_back(c);
            arrivals.push_back(a);
            total += c;
        }
        // The drain: rounds of K*B until the rest fits in one, which takes it all.
        while (costs.size() > window) run_round(true, n);
        for (const std::uint64_t a : arrivals) CHECK(round <= first[a] + s.max_age);
        CHECK(rounds_with_due > 0);
        // At the smallest max_age the deadlines leave no choice: first in, first out.
        if (s.max_age + 1 == s.buffer_windows)
            CHECK(rounds_with_choice == 0);
        else
            CHECK(rounds_with_choice > 0);
    }
}

TEST_CASE("Once the input has ended a sliding round aims at its share of the buffer's cost; "
          "before, at take times the long-run mean plus a share of the buffer's surplus",
          "[sliding-rounds]") {
    // B = 2, K = 2: a round takes 4 of the 8 buffered records, four of cost 1 then four of cost 3
    // (16 in all), none of them due yet. A round's total is 4 + 2j for j records of cost 3.
    const sliding_rounds base = sliding_of({2, 2, 2, 2});
    const std::vector<double> costs{1, 1, 1, 1, 3, 3, 3, 3};
    const std::vector<std::uint64_t> arrivals{0, 1, 2, 3, 4, 5, 6, 7};
    const auto chosen_total = [&](bool finished, double mean) {
        sliding_rounds r = base;
        std::vector<std::uint8_t> chosen(costs.size(), 0);
        r.choose(round_inputs{costs, arrivals, 0, finished, mean, 4}, chosen);
        double total = 0.0;
        std::size_t taken = 0;
        for (std::size_t i = 0; i < costs.size(); ++i) {
            total += chosen[i] ? costs[i] : 0.0;
            taken += chosen[i];
        }
        CHECK(taken == 4);
        return total;
    };
    // The achievable total nearest to `target`.
    const auto nearest = [](double target) {
        double best = 4.0;
        for (double t = 4.0; t <= 12.0; t += 2.0)
            if (std::abs(t - target) < std::abs(best - target)) best = t;
        return best;
    };

    // Finished: the share of what is held, 16 * 4 / 8 = 8, whatever the long-run mean.
    for (const double mean : {0.0, 1.0, 2.6, 1000.0}) {
        INFO("mean " << mean);
        CHECK(chosen_total(true, mean) == 8.0);
    }
    // Not finished: 4 * mean + surplus_feedback * (16 - 8 * mean).
    for (const double mean : {1.0, 2.26, 2.5, 2.9}) {
        INFO("mean " << mean);
        const double target = 4.0 * mean + sliding_rounds::surplus_feedback * (16.0 - 8.0 * mean);
        CHECK(chosen_total(false, mean) == nearest(target));
    }
    // By hand, with the documented feedback of 3%: at mean 2.26 the target is
    // 9.04 - 0.03 * 2.08 = 8.9776, nearer 8 than 10 (without feedback, 9.04 is nearer 10).
    STATIC_REQUIRE(sliding_rounds::surplus_feedback == 0.03);
    CHECK(chosen_total(false, 2.26) == 8.0);
}
