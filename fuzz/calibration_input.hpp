#pragma once
// bcl-fuzz-calibration's estimators and the choices it reads from its input
// (calibration.fuzz.cpp); make_corpus.cpp reads its seeds back with the same functions to check
// them. An input starts with its setup (pick_setup): the options (as pick_options reads them,
// but with the target's own max_age and cap choices, a mean cost, and a memory budget only with
// the full estimator), the calibration settings (pick_calibration), then the prior's three
// coefficients and the hidden true cost model's three (pick_coefficient). Then come the
// operations, whose records have a length (pick_sample) and whose odd times come from odd_time.

#include "fuzz_support.hpp"

#include <bcl/calibrated_cost.hpp>
#include <bcl/detail/calibration/batch_calibration.hpp>
#include <bcl/options.hpp>
#include <bcl/validate.hpp>

#include <array>
#include <bit>
#include <cfloat>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>

namespace bcl_fuzz {

using coefficient_array = std::array<double, 3>;

/// The stock calibrated estimator: a + b L + c L^2 of a record's length (rec::cost).
using stock_estimator = bcl::calibrated_cost<3, bcl::quadratic_features<cost_fn>>;

/// The same cost, with a memory estimate and a truncation: a memory budget and a truncating cap
/// work together with calibration.
struct full_estimator {
    static constexpr std::size_t feature_count = 3;
    stock_estimator cost;

    [[nodiscard]] coefficient_array features(const rec& r) const { return cost.features(r); }
    [[nodiscard]] double operator()(const rec& r) const { return cost(r); }
    [[nodiscard]] const coefficient_array& coefficients() const noexcept {
        return cost.coefficients();
    }
    [[nodiscard]] const coefficient_array& prior() const noexcept { return cost.prior(); }
    void set_coefficients(const coefficient_array& c) noexcept { cost.set_coefficients(c); }
    [[nodiscard]] double memory(const rec& r) const { return memory_fn{}(r); }
    void truncate(rec& r, double cap) const { truncate_fn{}(r, cap); }
};

static_assert(bcl::calibratable_estimator<stock_estimator, rec>);
static_assert(bcl::calibratable_estimator<full_estimator, rec>);

/// Throws bcl::error for a prior calibrated_cost refuses.
inline stock_estimator make_estimator(const coefficient_array& prior, const stock_estimator*) {
    return bcl::calibrated_affine_quadratic(prior[0], prior[1], prior[2], cost_fn{});
}
inline full_estimator make_estimator(const coefficient_array& prior, const full_estimator*) {
    return full_estimator{
        bcl::calibrated_affine_quadratic(prior[0], prior[1], prior[2], cost_fn{})};
}

inline std::string text(const coefficient_array& c) {
    return text(c[0]) + ", " + text(c[1]) + ", " + text(c[2]);
}

/// A prior or true coefficient: mostly valid ones on the edges (0, tiny, huge finite), sometimes
/// any bit pattern (which may be invalid: calibrated_cost must refuse it).
inline double pick_coefficient(byte_source& in) {
    constexpr double table[] = {0.0,   1.0,  0.5, 1.0 / 24576.0, 2.0,  1e-300, DBL_MIN, 1e300,
                                1e100, 1e-9, 3.0, 1e6,           1e-3, 1e-12,  1e-200,  1e-6};
    const std::uint8_t k = in.byte();
    if (k < 16) return 0.0; // zeros are common: one or two of the three features unused
    if (k < 232) return table[k % 16];
    if (k < 240) return std::numeric_limits<double>::denorm_min() * static_cast<double>(k - 231);
    if (k < 248) return pick_value(in);
    return std::bit_cast<double>(in.u64());
}

/// A record's length: small integers (ties), multiples of 1/64, the edge values (0, -0,
/// subnormals, DBL_MAX, NaN, infinities, negatives), lengths whose square is near the largest
/// accepted estimate (1e120), and any bit pattern.
inline double pick_length(byte_source& in) {
    static const double large[] = {1e60,
                                   std::nextafter(1e60, 0.0),
                                   std::nextafter(1e60, HUGE_VAL),
                                   3e59,
                                   1e59,
                                   1e40,
                                   1e30,
                                   1e20,
                                   1e9,
                                   1e6,
                                   65536.0,
                                   4096.0,
                                   1e-300,
                                   1e-160,
                                   1e-100,
                                   1e-10};
    const std::uint8_t k = in.byte();
    if (k < 128) return static_cast<double>(k % 32);
    if (k < 176) return static_cast<double>(in.u16()) / 64.0;
    if (k < 200) return edge_values[k - 176];
    if (k < 216) return large[k - 200];
    if (k < 240) return static_cast<double>(1U << (k - 216)); // up to 2^23
    return std::bit_cast<double>(in.u64());
}
/// A record whose cost estimator reads a length (pick_length), truncated to half of it.
inline rec pick_sample(byte_source& in, std::uint64_t id) {
    return pick_record(in, id, pick_length, [](double length) { return std::floor(length / 2.0); });
}

/// A measured time that is not a multiple of the truth: 0, -0, tiny, huge finite, invalid.
inline double odd_time(std::uint8_t k, byte_source& in) {
    constexpr double table[] = {0.0,
                                -0.0,
                                std::numeric_limits<double>::denorm_min(),
                                DBL_MIN,
                                1e-300,
                                DBL_MAX,
                                1e300,
                                1e150,
                                std::numeric_limits<double>::quiet_NaN(),
                                HUGE_VAL,
                                -HUGE_VAL,
                                -1.0,
                                -std::numeric_limits<double>::denorm_min(),
                                1e-9,
                                1.0,
                                3600.0};
    if (k % 32 < 16) return table[k % 16];
    return pick_value(in);
}

/// The calibration settings: mostly valid extremes, now and then an invalid one (the balancer
/// must refuse it).
inline bcl::calibration_options pick_calibration(byte_source& in) {
    static const double forgetting[] = {0.99,
                                        1.0,
                                        0.5,
                                        0.9,
                                        1e-300,
                                        std::numeric_limits<double>::denorm_min(),
                                        std::nextafter(1.0, 0.0),
                                        0.999,
                                        0.1,
                                        1e-9,
                                        0.75,
                                        0.0 /* invalid */,
                                        0.99,
                                        1.0,
                                        0.95,
                                        1.5 /* invalid */};
    static const double prior_weight[] = {0.01,
                                          0.0,
                                          1e12,
                                          1.0,
                                          1e-300,
                                          100.0,
                                          1e-6,
                                          0.01,
                                          1e6,
                                          0.1,
                                          1e11,
                                          0.0,
                                          0.5,
                                          1e-12,
                                          -1.0 /* invalid */,
                                          std::nextafter(1e12, HUGE_VAL) /* invalid */};
    constexpr double threshold[] = {3.0,     1e-300,  std::numeric_limits<double>::denorm_min(),
                                    1e300,   DBL_MAX, 1.0,
                                    0.5,     3.0,     1e-9,
                                    10.0,    2.0,     1e6,
                                    0.01,    3.0,     0.0 /* invalid */,
                                    HUGE_VAL /* invalid */};
    bcl::calibration_options c;
    c.forgetting = forgetting[in.byte() % 16];
    c.prior_weight = prior_weight[in.byte() % 16];
    const std::uint8_t h = in.byte();
    if (h < 250) {
        c.horizon = 1 + h % 50 + (h >= 200 ? 250U : 0U); // 1..50, or 251..300
    } else {
        constexpr std::size_t edges[] = {256,
                                         300,
                                         1,
                                         2,
                                         0 /* invalid */,
                                         bcl::detail::max_calibration_horizon + 1 /* invalid */};
        c.horizon = edges[h - 250];
    }
    c.outlier_threshold = threshold[in.byte() % 16];
    return c;
}

inline bool valid_calibration(const bcl::calibration_options& c) {
    return c.forgetting > 0.0 && c.forgetting <= 1.0 && c.prior_weight >= 0.0 &&
           c.prior_weight <= 1e12 && c.horizon >= 1 && c.horizon <= (std::size_t{1} << 20) &&
           c.outlier_threshold > 0.0 && c.outlier_threshold < HUGE_VAL;
}

/// A prior calibrated_cost accepts: finite coefficients >= 0 (at most 1e300), not all zero.
inline bool valid_prior(const coefficient_array& p) {
    bool any = false;
    for (const double x : p) {
        if (!(x >= 0.0 && x <= 1e300)) return false;
        any = any || x > 0.0;
    }
    return any;
}

/// What an input chooses before its operations.
struct setup {
    bcl::options opt;
    bool full = false; // the estimator with memory and truncation
    coefficient_array prior{};
    coefficient_array truth{}; // the hidden cost model the times come from
};

inline setup pick_setup(byte_source& in) {
    setup s;
    bcl::options& opt = s.opt;
    opt.batch_size = 1 + in.byte() % 16;
    opt.lookahead = 1 + in.byte() % 8;
    const std::uint8_t flags = in.byte();
    s.full = apply_flags(opt, flags);
    if (!s.full) opt.cap.action = bcl::cap_action::clip; // truncation needs the full estimator
    opt.buffer_windows = 1 + in.byte() % 4;
    opt.max_age = opt.buffer_windows - 1 + in.byte() % 4;
    opt.seed = in.u16();
    if ((flags & 128U) != 0) opt.mean_cost = pick_value(in);
    const std::uint8_t cap = in.byte();
    opt.cap.kind = cap_kind_of(cap);
    if (opt.cap.kind == bcl::cap_kind::fixed) opt.cap.value = pick_value(in);
    if (opt.cap.kind == bcl::cap_kind::quantile) {
        constexpr double quantiles[] = {0.5,  0.9, 0.99, 0.75, 0.25, 0.999, 0.01, 1e-9, 0.6,
                                        0.95, 0.8, 0.3,  0.1,  0.05, 0.7,   0.0 /* invalid */};
        opt.cap.quantile = quantiles[(cap >> 2) % 16];
        opt.cap.warmup = in.byte() % 16; // 0 is the default ceil(10 / (1 - q))
        if ((cap & 0x80U) != 0) opt.cap.prior = pick_value(in);
    }
    if (s.full) pick_budget(in, opt);
    opt.calibration = pick_calibration(in);
    for (double& p : s.prior) p = pick_coefficient(in);
    for (double& t : s.truth) t = pick_coefficient(in);
    return s;
}

/// The setup in one line, for describe_inputs.
inline std::string describe(const setup& s) {
    return describe(s.opt) + (s.full ? " (full estimator)" : " (stock estimator)") + " prior " +
           text(s.prior) + " truth " + text(s.truth);
}

} // namespace bcl_fuzz
