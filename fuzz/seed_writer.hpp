#pragma once
// How bcl-fuzz-make-corpus writes its seeds: each a sequence of the decisions a harness reads
// (fuzz_support.hpp, calibration_input.hpp), appended in the order it reads them. A seed states
// the options it asks for; expect_options() and expect_setup() read a written seed back with
// the harness's own reader and stop the program unless it asks for exactly those, so a seed
// cannot drift from what its name says when a reader changes.

#include "calibration_input.hpp"
#include "fuzz_support.hpp"

#include <bcl/options.hpp>

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

namespace bcl_fuzz {

// Appends decisions in the order the harnesses read them.
class seed {
public:
    seed& byte(std::uint8_t v) {
        m_bytes.push_back(v);
        return *this;
    }
    seed& u16(std::uint16_t v) {
        return byte(static_cast<std::uint8_t>(v & 0xffU)).byte(static_cast<std::uint8_t>(v >> 8));
    }
    seed& raw(const std::string& bytes) {
        m_bytes.insert(m_bytes.end(), bytes.begin(), bytes.end());
        return *this;
    }
    // A value as pick_value reads it: 0..15 in one byte, else a multiple of 1/64 up to 1023, or
    // one of pick_value's special codes.
    seed& value(double v) {
        if (v >= 0.0 && v < 16.0 && v == static_cast<double>(static_cast<int>(v)))
            return byte(static_cast<std::uint8_t>(v));
        return byte(112).u16(static_cast<std::uint16_t>(v * 64.0));
    }
    seed& special(std::uint8_t code) { return byte(code); }

    // Options as pick_options reads them.
    struct opts {
        std::uint8_t batch_size = 4, lookahead = 2;
        bool sliding = false, drop_last = false, shuffle = true, largest_first = false;
        bool memory = false, truncate = false;
        std::uint8_t buffer_windows = 2, max_age = 2;
        std::uint16_t seed = 7;
        std::uint8_t cap = 0;    // 0 none, 1 fixed (value 6), 2 quantile p90 warm-up 5
        std::uint8_t budget = 0; // a memory budget of this much, below 64 (0: none)
    };
    seed& options(const opts& o) {
        byte(static_cast<std::uint8_t>(o.batch_size - 1))
            .byte(static_cast<std::uint8_t>(o.lookahead - 1));
        byte(static_cast<std::uint8_t>((o.sliding ? 1 : 0) | (o.drop_last ? 2 : 0) |
                                       (o.shuffle ? 4 : 0) | (o.largest_first ? 8 : 0) |
                                       (o.memory ? 16 : 0) | (o.truncate ? 32 : 0)));
        byte(static_cast<std::uint8_t>(o.buffer_windows - 1));
        byte(static_cast<std::uint8_t>(o.max_age -
                                       (o.buffer_windows - 1))); // age % 4 over the minimum
        u16(o.seed);
        // The cap byte: its value mod 3 is the kind (0 none, 1 fixed, 2 quantile), and for a
        // quantile (byte >> 2) % 16 indexes the quantiles: 5 is a quantile cap at [1] = 0.9.
        if (o.cap == 0) byte(0);
        if (o.cap == 1) byte(1).value(6.0);
        if (o.cap == 2) byte(5).byte(5); // warm-up 5
        if (o.budget == 0) return byte(0);
        return byte(static_cast<std::uint8_t>(128 | o.budget));
    }
    // A push as the balancer target reads it: op, cost, extras (memory in the top nibble).
    seed& push(double cost, std::uint8_t memory = 1, bool by_copy = false) {
        byte(by_copy ? 1 : 0).value(cost);
        return byte(static_cast<std::uint8_t>(memory << 4));
    }
    seed& push_special(std::uint8_t code) { return byte(0).special(code).byte(0x10); }
    // The same record `times` times (2..32), each followed by a drain.
    seed& push_repeated(std::uint8_t times, std::uint8_t code) {
        return byte(248).byte(static_cast<std::uint8_t>(times - 2)).special(code).byte(0x10);
    }
    seed& pop() { return byte(150); }
    seed& drain() { return byte(180); }
    seed& finish() { return byte(200); }
    seed& restore(std::uint8_t how) { return byte(210).byte(how); }
    seed& save_only() { return byte(245); }

    [[nodiscard]] const std::vector<std::uint8_t>& bytes() const { return m_bytes; }

private:
    std::vector<std::uint8_t> m_bytes;
};

/// The options a seed::opts asks for, set field by field (not through the harness's reader).
inline bcl::options intended(const seed::opts& o) {
    bcl::options x;
    x.batch_size = o.batch_size;
    x.lookahead = o.lookahead;
    x.policy = o.sliding ? bcl::lookahead_policy::sliding : bcl::lookahead_policy::tumbling;
    x.drop_last = o.drop_last;
    x.emission = o.shuffle ? bcl::emission_order::shuffled : bcl::emission_order::costliest_first;
    x.largest_first = o.largest_first;
    x.cap.action = o.truncate ? bcl::cap_action::truncate : bcl::cap_action::clip;
    x.buffer_windows = o.buffer_windows;
    x.max_age = o.max_age;
    x.seed = o.seed;
    if (o.cap == 1) x.cap = {.kind = bcl::cap_kind::fixed, .value = 6.0, .action = x.cap.action};
    if (o.cap == 2)
        x.cap = {
            .kind = bcl::cap_kind::quantile, .quantile = 0.9, .warmup = 5, .action = x.cap.action};
    x.memory_budget = o.budget;
    return x;
}

/// Stops the program unless `what` reads `got` where it should read `want`.
inline void expect_same(const std::string& what, const std::string& got, const std::string& want) {
    if (got != want) fail(what + " reads\n    " + got + "\n  instead of\n    " + want);
}

/// Reads the options at the front of `bytes` as pick_options does; they must be `o`'s.
inline void expect_options(const std::string& name, std::span<const std::uint8_t> bytes,
                           const seed::opts& o) {
    byte_source in(bytes);
    bool memory = false;
    const bcl::options got = pick_options(in, memory);
    expect_same("seed " + name, describe(got) + (memory ? " with memory" : ""),
                describe(intended(o)) + (o.memory ? " with memory" : ""));
}

/// What a calibration target's seed asks for before its operations (calibration_input.hpp).
struct calibration_seed {
    std::uint8_t batch_size = 4, lookahead = 2;
    bool sliding = false, drop_last = false, shuffled = false, padded = false;
    bool full = false, truncate = false;
    std::uint8_t cap = 0;    // 0 none, 1 fixed (value 40), 2 quantile p90 warm-up 5
    std::uint8_t budget = 0; // full only: a memory budget of this much, below 64 (0: none)
    double forgetting = 0.99;
    double prior_weight = 0.01;
    std::size_t horizon = 32;
    double outlier_threshold = 3.0;
    coefficient_array prior{0.0, 1.0, 0.0};
    coefficient_array truth{1.0, 1.0, 0.0};
};

/// The smallest byte from which `read` gives `want` (the byte, then zeros): a value's code in
/// the harness's own table, so a seed names values and not codes. Stops the program if none does.
template <class T, class Read>
std::uint8_t code_of(const T& want, Read&& read) {
    for (unsigned b = 0; b < 256; ++b) {
        const T got = read(static_cast<std::uint8_t>(b));
        if constexpr (std::is_same_v<T, double>) {
            if (same_bits(got, want)) return static_cast<std::uint8_t>(b);
        } else if (got == want) {
            return static_cast<std::uint8_t>(b);
        }
    }
    fail("no byte the harness reads as " + std::to_string(want));
}

/// The setup a calibration_seed asks for, set field by field.
inline setup intended(const calibration_seed& c) {
    setup s;
    bcl::options& x = s.opt;
    x.batch_size = c.batch_size;
    x.lookahead = c.lookahead;
    x.policy = c.sliding ? bcl::lookahead_policy::sliding : bcl::lookahead_policy::tumbling;
    x.drop_last = c.drop_last;
    x.emission = c.shuffled ? bcl::emission_order::shuffled : bcl::emission_order::costliest_first;
    x.batching = c.padded ? bcl::batch_cost::padded : bcl::batch_cost::packed;
    const bcl::cap_action action = c.truncate ? bcl::cap_action::truncate : bcl::cap_action::clip;
    x.buffer_windows = 2;
    x.max_age = 2;
    x.seed = 11;
    if (c.cap == 1) x.cap = {.kind = bcl::cap_kind::fixed, .value = 40.0, .action = action};
    if (c.cap == 2)
        x.cap = {.kind = bcl::cap_kind::quantile, .quantile = 0.9, .warmup = 5, .action = action};
    x.memory_budget = c.budget;
    x.calibration = {c.forgetting, c.prior_weight, c.horizon, c.outlier_threshold};
    s.full = c.full;
    s.prior = c.prior;
    s.truth = c.truth;
    return s;
}

/// The decisions before the operations, as pick_setup reads them.
inline seed calibration_setup(const calibration_seed& c) {
    seed s;
    s.byte(static_cast<std::uint8_t>(c.batch_size - 1))
        .byte(static_cast<std::uint8_t>(c.lookahead - 1));
    s.byte(static_cast<std::uint8_t>((c.sliding ? 1 : 0) | (c.drop_last ? 2 : 0) |
                                     (c.shuffled ? 4 : 0) | (c.full ? 16 : 0) |
                                     (c.truncate ? 32 : 0) | (c.padded ? 64 : 0)));
    s.byte(1).byte(1).u16(11); // buffer_windows 2, max_age 2, seed 11
    if (c.cap == 0) s.byte(0);
    if (c.cap == 1) s.byte(1).value(40.0);
    if (c.cap == 2) s.byte(5).byte(5); // 5 % 3 = 2: quantile, (5 >> 2) % 16 = 1: 0.9; warm-up 5
    if (c.full) s.byte(c.budget == 0 ? 0 : static_cast<std::uint8_t>(128 | c.budget));
    // pick_calibration reads four bytes: forgetting, prior weight, horizon, outlier threshold.
    const auto setting = [](std::size_t at) {
        return [at](std::uint8_t b) {
            std::uint8_t bytes[4] = {};
            bytes[at] = b;
            byte_source in(bytes);
            return pick_calibration(in);
        };
    };
    s.byte(code_of(c.forgetting, [&](std::uint8_t b) { return setting(0)(b).forgetting; }));
    s.byte(code_of(c.prior_weight, [&](std::uint8_t b) { return setting(1)(b).prior_weight; }));
    s.byte(code_of(c.horizon, [&](std::uint8_t b) { return setting(2)(b).horizon; }));
    s.byte(code_of(c.outlier_threshold,
                   [&](std::uint8_t b) { return setting(3)(b).outlier_threshold; }));
    const auto coefficient = [](std::uint8_t b) {
        const std::uint8_t bytes[1] = {b};
        byte_source in(bytes);
        return pick_coefficient(in);
    };
    for (const double p : c.prior) s.byte(code_of(p, coefficient));
    for (const double t : c.truth) s.byte(code_of(t, coefficient));
    return s;
}

/// Reads a calibration seed's setup as the harness does; it must be the one `c` asks for.
inline void expect_setup(const std::string& name, std::span<const std::uint8_t> bytes,
                         const calibration_seed& c) {
    byte_source in(bytes);
    expect_same("seed " + name, describe(pick_setup(in)), describe(intended(c)));
}

} // namespace bcl_fuzz
