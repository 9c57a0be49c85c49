// bcl::detail::batch_calibration, as a specification: a round's batches sum their records'
// features (packed) or keep their costliest record's features times their size (padded); an
// emitted batch waits in a ledger over the calibration horizon for its time, and a time feeds the
// fit with that batch's features; a time that is negative or not finite, or of a batch not
// emitted, older than the horizon or already observed, is a bcl::error naming it that changes
// nothing; a new epoch empties the ledger; at a round boundary a refit goes to the estimator and
// re-estimates the buffer (capped) and rescales the heavy records, unless it is flat: its
// relative spread (high - low) / (high + low) over the round's costliest and cheapest records
// falls below flat_fit times the spread of the coefficients in force.

#include "support/error_message.hpp"

#include <bcl/detail/calibration/batch_calibration.hpp>
#include <bcl/options.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace {

using vec2 = std::array<double, 2>;
using calibration = bcl::detail::batch_calibration<2>;
using Catch::Matchers::Contains;

bcl::options options_with(std::size_t horizon, bcl::batch_cost batching = bcl::batch_cost::packed) {
    bcl::options o{.batch_size = 2};
    o.batching = batching;
    o.calibration.horizon = horizon;
    o.calibration.forgetting = 1.0;
    o.calibration.prior_weight = 0.0;
    return o;
}

/// The feature sums of emitted batch `index` as the ledger keeps them.
vec2 ledger_sums(const calibration& c, std::uint64_t emitted, std::uint64_t index,
                 std::size_t horizon) {
    const bcl::detail::calibration_snapshot s = c.save(emitted, 0, vec2{1.0, 1.0});
    const std::uint64_t first = emitted - std::min<std::uint64_t>(emitted, horizon);
    const auto k = static_cast<std::size_t>(index - first);
    return {s.ledger_sums[2 * k], s.ledger_sums[2 * k + 1]};
}

// Stand-ins for the balancer's estimator, buffer and heavy slots: they record what they are told.
struct fake_estimator {
    vec2 c;
    [[nodiscard]] vec2 coefficients() const { return c; }
    void set_coefficients(const vec2& next) { c = next; }
    // A record is its length; its features (1, L), whatever its arrival.
    [[nodiscard]] vec2 features_of(double length, std::uint64_t /*arrival*/) const {
        return {1.0, length};
    }
};
// A restored buffer: its records, and the features restore() computes again from them.
struct restored_buffer {
    std::vector<double> records;
    std::vector<std::uint64_t> arrival_positions;
    std::vector<vec2> features;
    [[nodiscard]] const std::vector<std::uint64_t>& arrivals() const { return arrival_positions; }
    template <class Features>
    void assign_features(Features f) {
        features.resize(records.size());
        for (std::size_t i = 0; i < records.size(); ++i) features[i] = f(records[i], i);
    }
};
struct fake_buffer {
    std::vector<vec2> features;
    std::vector<double> costs;
    void reestimate(const std::function<double(const vec2&)>& cost) {
        for (std::size_t i = 0; i < features.size(); ++i) costs[i] = cost(features[i]);
    }
};
struct fake_heavy {
    double ratio = 0.0;
    void rescale(double r, double /*limit*/) { ratio = r; }
};

} // namespace

TEST_CASE("batch_calibration: a packed batch's features are its records' sum; a padded batch's "
          "its costliest record's times its size",
          "[calibration][batch_calibration]") {
    for (const bool padded : {false, true}) {
        INFO((padded ? "padded" : "packed"));
        calibration c(options_with(8, padded ? bcl::batch_cost::padded : bcl::batch_cost::packed),
                      vec2{0.0, 1.0});
        c.reserve(2);
        c.start_round(2);
        // Batch 0: features (1, 2) at cost 2 and (1, 5) at cost 5; batch 1: (1, 3) at cost 3 and
        // (1, 1) at cost 1 and (1, 4) at cost 4.
        c.add(0, vec2{1.0, 2.0}, 2.0);
        c.add(1, vec2{1.0, 3.0}, 3.0);
        c.add(0, vec2{1.0, 5.0}, 5.0);
        c.add(1, vec2{1.0, 1.0}, 1.0);
        c.add(1, vec2{1.0, 4.0}, 4.0);
        c.finish_round();
        c.emitted(0, 1);
        c.emitted(1, 0);
        // Packed: (2, 7) and (3, 8). Padded: 2 * (1, 5) and 3 * (1, 4).
        CHECK(ledger_sums(c, 2, 0, 8) == (padded ? vec2{3.0, 12.0} : vec2{3.0, 8.0}));
        CHECK(ledger_sums(c, 2, 1, 8) == (padded ? vec2{2.0, 10.0} : vec2{2.0, 7.0}));
        // The round's costliest record's features.
        CHECK(c.top_features() == vec2{1.0, 5.0});
    }
}

TEST_CASE("batch_calibration: a time feeds the fit with its batch's features",
          "[calibration][batch_calibration]") {
    calibration c(options_with(8), vec2{0.0, 1.0});
    c.reserve(1);
    c.start_round(1);
    c.add(0, vec2{1.0, 2.0}, 2.0);
    c.add(0, vec2{1.0, 6.0}, 6.0);
    c.finish_round();
    c.emitted(0, 0);
    // The batch's features (2, 8), its time 4, and no fit yet: weight 1 / 16, so the normal
    // vector is (2, 8) * 4 / 16 and the matrix's corner (2 * 2) / 16.
    c.observe(0, 4.0, 1);
    CHECK(c.fit().observed == 1);
    CHECK(c.fit().normal_vector == vec2{0.5, 2.0});
    CHECK(c.fit().normal_matrix[0] == 0.25);
    CHECK(c.save(1, 1, vec2{0.0, 1.0}).ledger_state == std::vector<std::uint8_t>{2});
}

TEST_CASE("batch_calibration: bad times are errors naming the batch, and change nothing",
          "[calibration][batch_calibration]") {
    const std::size_t horizon = 4;
    calibration c(options_with(horizon), vec2{0.0, 1.0});
    c.reserve(6);
    c.start_round(6);
    for (std::size_t p = 0; p < 6; ++p) c.add(p, vec2{1.0, static_cast<double>(p + 1)}, 1.0);
    c.finish_round();
    for (std::uint64_t i = 0; i < 6; ++i) c.emitted(i, static_cast<std::size_t>(i));
    c.observe(5, 1.0, 6);
    const auto before = c.save(6, 6, vec2{0.0, 1.0});
    const auto refuses = [&](std::uint64_t index, double seconds, const char* why) {
        INFO("batch " << index << ", time " << seconds);
        CHECK_THAT(bcl_test::bcl_error_message([&] { c.observe(index, seconds, 6); }),
                   Contains("batch " + std::to_string(index)) && Contains(why));
        const auto after = c.save(6, 6, vec2{0.0, 1.0});
        CHECK(after.numbers == before.numbers);
        CHECK(after.counts == before.counts);
        CHECK(after.ledger_state == before.ledger_state);
    };
    refuses(3, -1.0, "a time must be finite and >= 0");
    refuses(3, HUGE_VAL, "a time must be finite and >= 0");
    refuses(3, std::nan(""), "a time must be finite and >= 0");
    refuses(6, 1.0, "has not been emitted (6 batches so far)");
    // 6 emitted, horizon 4: batches 2 to 5 are kept; 1 is older.
    refuses(1, 1.0, "older than the calibration horizon of 4 batches");
    refuses(5, 1.0, "already observed");
    CHECK_NOTHROW(c.observe(2, 1.0, 6));
    CHECK(c.fit().observed == 2);
}

TEST_CASE("batch_calibration: a new epoch empties the ledger and keeps the fit",
          "[calibration][batch_calibration]") {
    calibration c(options_with(4), vec2{0.0, 1.0});
    c.reserve(2);
    c.start_round(2);
    c.add(0, vec2{1.0, 2.0}, 2.0);
    c.add(1, vec2{1.0, 3.0}, 3.0);
    c.finish_round();
    c.emitted(0, 0);
    c.emitted(1, 1);
    c.observe(0, 2.0, 2);
    const auto fitted = c.fit().normal_vector;
    c.next_epoch();
    // Batch 1 was awaiting its time; in the new epoch no batch is.
    CHECK_THROWS_AS(c.observe(1, 3.0, 2), bcl::error);
    CHECK(c.fit().normal_vector == fitted);
    CHECK(c.fit().observed == 1);
}

TEST_CASE("batch_calibration: the relative spread of a round's costliest and cheapest records, "
          "worked by hand",
          "[calibration][batch_calibration]") {
    calibration c(options_with(4), vec2{1.0, 1.0});
    c.reserve(2);
    CHECK(c.relative_spread(vec2{1.0, 1.0}) == 0.0); // before any round
    c.start_round(2);
    c.add(0, vec2{1.0, 9.0}, 10.0);
    c.add(0, vec2{1.0, 4.0}, 5.0);
    c.add(1, vec2{1.0, 1.0}, 2.0);
    // Costliest (1, 9), cheapest (1, 1). (1, 1): 10 and 2, (10 - 2) / 12 = 2/3. (0, 1): 9 and 1,
    // 8 / 10. (1, 0): 1 and 1, 0. (0, 0): both 0, so 0.
    CHECK(c.relative_spread(vec2{1.0, 1.0}) == Approx(2.0 / 3.0));
    CHECK(c.relative_spread(vec2{0.0, 1.0}) == Approx(0.8));
    CHECK(c.relative_spread(vec2{1.0, 0.0}) == 0.0);
    CHECK(c.relative_spread(vec2{0.0, 0.0}) == 0.0);
}

TEST_CASE("batch_calibration: a refit goes to the estimator, re-estimates the buffer under the "
          "cap and rescales the heavy records; a flat refit is not applied",
          "[calibration][batch_calibration]") {
    // Records of lengths 1, 9 (batch 0) and 3 (batch 1), features (1, L), prior (1, 1).
    const auto round_of = [](calibration& c) {
        c.reserve(2);
        for (const double l : {1.0, 9.0, 3.0}) c.count_record(vec2{1.0, l});
        c.start_round(2);
        c.add(0, vec2{1.0, 1.0}, 2.0);
        c.add(0, vec2{1.0, 9.0}, 10.0);
        c.add(1, vec2{1.0, 3.0}, 4.0);
        c.finish_round();
        c.emitted(0, 0);
        c.emitted(1, 1);
    };
    {
        // Times 2 per unit of length: batch sums (2, 10) and (1, 3) take 20 and 6; the two
        // equations give theta = (0, 2) exactly. Rescaled so the mean record (1, 13/3) costs
        // what the prior says, 16/3: applied = (0, 2 * (16/3) / (26/3)) = (0, 16/13).
        calibration c(options_with(4), vec2{1.0, 1.0});
        round_of(c);
        c.observe(0, 20.0, 2);
        c.observe(1, 6.0, 2);
        fake_estimator estimator{{1.0, 1.0}};
        fake_buffer buffer{{{1.0, 5.0}, {1.0, 100.0}}, {0.0, 0.0}};
        fake_heavy heavy;
        c.apply_refit(estimator, buffer, heavy, 50.0);
        CHECK(estimator.c[0] == Approx(0.0).margin(1e-9));
        CHECK(estimator.c[1] == Approx(16.0 / 13.0).epsilon(1e-9));
        // Re-estimated: 5 * 16/13, and 100 * 16/13 capped at 50.
        CHECK(buffer.costs[0] == Approx(80.0 / 13.0).epsilon(1e-9));
        CHECK(buffer.costs[1] == 50.0);
        // The costliest record, (1, 9), cost 10 before and 144/13 after.
        CHECK(heavy.ratio == Approx(144.0 / 130.0).epsilon(1e-9));
        CHECK(c.summary(estimator.c).has_fit);
        CHECK(c.summary(estimator.c).times_observed == 2);
    }
    {
        // Times of 5 for both: the best non-negative fit is a constant, theta = (3, 0) (relative
        // least squares over u = (2/5, 2), (1/5, 3/5) on the support {0}: (3/5) / (1/5)), which
        // tells no record apart: the coefficients in force stay, nothing is re-estimated.
        calibration c(options_with(4), vec2{1.0, 1.0});
        round_of(c);
        c.observe(0, 5.0, 2);
        c.observe(1, 5.0, 2);
        fake_estimator estimator{{1.0, 1.0}};
        fake_buffer buffer{{{1.0, 5.0}}, {-1.0}};
        fake_heavy heavy;
        c.apply_refit(estimator, buffer, heavy, HUGE_VAL);
        CHECK(c.fit().fitted[0] == Approx(3.0).epsilon(1e-9));
        CHECK(c.fit().fitted[1] == Approx(0.0).margin(1e-9));
        CHECK(estimator.c == vec2{1.0, 1.0});
        CHECK(buffer.costs[0] == -1.0);
        CHECK(heavy.ratio == 0.0);
    }
}

TEST_CASE("batch_calibration: a saved calibration restored elsewhere continues alike",
          "[calibration][batch_calibration]") {
    const std::size_t horizon = 3;
    calibration a(options_with(horizon), vec2{0.0, 1.0});
    a.reserve(4);
    a.start_round(4);
    for (std::size_t p = 0; p < 4; ++p) {
        a.count_record(vec2{1.0, static_cast<double>(p + 2)});
        a.add(p, vec2{1.0, static_cast<double>(p + 2)}, static_cast<double>(p + 2));
    }
    a.finish_round();
    for (std::uint64_t i = 0; i < 3; ++i) a.emitted(i, static_cast<std::size_t>(i));
    a.observe(1, 3.0, 3);
    // Three emitted, batch 3 still waiting; batch 1 observed, 0 and 2 awaiting.
    const bcl::detail::calibration_snapshot s = a.save(3, 3, vec2{0.0, 1.0});
    CHECK(s.ledger_state == std::vector<std::uint8_t>{1, 2, 1});
    CHECK(s.waiting_sums == std::vector<double>{1.0, 5.0});
    bcl::detail::calibration_saved part{s};
    CHECK_NOTHROW(part.check());

    calibration b(options_with(horizon), vec2{0.0, 1.0});
    b.reserve(4);
    fake_estimator estimator{{9.0, 9.0}};
    restored_buffer buffer{{7.0, 2.0}, {10, 11}, {}};
    b.restore(s, 3, estimator, buffer);
    CHECK(estimator.c == vec2{0.0, 1.0});
    CHECK(buffer.features == std::vector<vec2>{{1.0, 7.0}, {1.0, 2.0}});
    CHECK(b.save(3, 0, vec2{0.0, 1.0}).numbers == s.numbers);
    // Both take batch 2's time and refuse batch 1's again.
    a.observe(2, 4.0, 3);
    b.observe(2, 4.0, 3);
    CHECK(b.save(3, 0, vec2{0.0, 1.0}).numbers == a.save(3, 0, vec2{0.0, 1.0}).numbers);
    CHECK_THROWS_AS(b.observe(1, 3.0, 3), bcl::error);

    // A saved part that no calibration could have written is refused.
    bcl::detail::calibration_saved bad{s};
    bad.calibration.ledger_state[0] = 3;
    CHECK_THAT(bcl_test::bcl_error_message([&] { bad.check(); }),
               Contains("calibration ledger entry of no known state"));
    bad = bcl::detail::calibration_saved{s};
    bad.calibration.applied = {0.0, 0.0};
    CHECK_THAT(bcl_test::bcl_error_message([&] { bad.check(); }),
               Contains("calibrated coefficients that are all zero"));
}
