#pragma once
// What the bcl fuzz targets share: a reader that turns the fuzzer's bytes into choices, the
// record type and estimators they feed to the balancer, how a violated property is reported, and
// the one-line account of an input's setup the replay driver prints on request.
//
// Every choice reads from the front of the input and reads zeros once the input is used up, so
// an input is a plain sequence of decisions (make_corpus.cpp writes seeds that way) and a
// truncated input is still a valid, shorter run.

#include <bcl/detail/state/bytes.hpp>
#include <bcl/error.hpp>
#include <bcl/options.hpp>
#include <bcl/record_model.hpp>

#include <algorithm>
#include <bit>
#include <cfloat>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <span>
#include <string>
#include <vector>

namespace bcl_fuzz {

/// Reports a broken property and aborts, which libFuzzer records as a crash with its input.
[[noreturn]] inline void fail(const std::string& what) {
    std::fprintf(stderr, "bcl-fuzz: PROPERTY VIOLATED: %s\n", what.c_str());
    std::fflush(stderr);
    std::abort();
}

inline void require(bool holds, const std::string& what) {
    if (!holds) fail(what);
}

/// require() with a message built only when the property is broken: for the checks made at
/// every operation.
template <class Describe>
void check(bool holds, Describe&& describe) {
    if (!holds) fail(describe());
}

/// Set by the replay driver's --describe: the harnesses then print what they read from each
/// input (its options, and the state target's mode and mutations), so a seed can be checked to
/// ask for what its name says. Never set under libFuzzer.
inline bool describe_inputs = false;

/// Prints describe()'s line when describe_inputs is set; the text is built only then.
template <class Describe>
void note(Describe&& describe) {
    if (describe_inputs) std::printf("  %s\n", std::string(describe()).c_str());
}

inline bool same_bits(double a, double b) noexcept {
    return std::bit_cast<std::uint64_t>(a) == std::bit_cast<std::uint64_t>(b);
}

/// A double in full: every bit of it shows.
inline std::string text(double x) {
    char out[32];
    std::snprintf(out, sizeof out, "%.17g", x);
    return out;
}

/// Replaces the checksum at the end of a saved state's bytes (or appends one to bytes that
/// have none, or are shorter than one) with the right one for the rest.
inline void reseal(std::string& bytes, bool has_checksum = true) {
    if (has_checksum && bytes.size() >= 8) bytes.resize(bytes.size() - 8);
    const std::uint64_t sum = bcl::detail::fnv1a(bytes);
    for (int i = 0; i < 8; ++i) bytes.push_back(static_cast<char>((sum >> (8 * i)) & 0xffU));
}

/// The fuzzer's bytes, read front to back; zeros once they run out.
class byte_source {
public:
    explicit byte_source(std::span<const std::uint8_t> bytes) : m_bytes(bytes) {}

    [[nodiscard]] bool empty() const noexcept { return m_pos >= m_bytes.size(); }
    [[nodiscard]] std::span<const std::uint8_t> rest() const noexcept {
        return m_bytes.subspan(std::min(m_pos, m_bytes.size()));
    }
    std::uint8_t byte() noexcept { return m_pos < m_bytes.size() ? m_bytes[m_pos++] : 0; }
    std::uint16_t u16() noexcept {
        const auto lo = byte();
        return static_cast<std::uint16_t>(lo | (byte() << 8));
    }
    std::uint64_t u64() noexcept {
        std::uint64_t v = 0;
        for (int i = 0; i < 8; ++i) v |= std::uint64_t{byte()} << (8 * i);
        return v;
    }

private:
    std::span<const std::uint8_t> m_bytes;
    std::size_t m_pos = 0;
};

/// Costs (and memory estimates) on the edges: valid (0, -0, subnormals, 1e300, DBL_MAX, values
/// whose sums overflow to +inf) and invalid (NaN, infinities, negatives).
inline const double edge_values[] = {
    0.0,
    -0.0,
    std::numeric_limits<double>::denorm_min(),
    3.0 * std::numeric_limits<double>::denorm_min(),
    DBL_MIN,
    DBL_MIN / 2.0, // subnormal
    1e300,
    DBL_MAX,
    DBL_MAX / 2.0,
    DBL_MAX / 3.0,
    1e308,
    1e-300,
    std::nextafter(DBL_MAX, 0.0),
    4503599627370496.0, // 2^52: +1 is exact, +0.5 is not
    9007199254740993.0, // rounds to 2^53
    1e16,
    std::numeric_limits<double>::quiet_NaN(),
    HUGE_VAL,
    -HUGE_VAL,
    -1.0,
    -std::numeric_limits<double>::denorm_min(),
    -DBL_MAX,
    std::bit_cast<double>(std::uint64_t{0x7ff0000000000001}), // signalling NaN
    std::bit_cast<double>(std::uint64_t{0xfff8000000000000}), // negative NaN
};
/// Around the largest estimate the balancer accepts (1e120), and below it.
inline const double large_values[] = {
    1e120, std::nextafter(1e120, 0.0), std::nextafter(1e120, HUGE_VAL), 1e119, 5e119, 1e118, 1e100,
    1e60};

/// A value for a cost (or a memory estimate), chosen by one byte and sometimes a few more: mostly
/// small integers (so ties are common), then multiples of 1/64, then edge_values, fractions of
/// DBL_MAX (a few of them sum to +inf), large_values, multiples of 1e300, and finally any bit
/// pattern at all.
inline double pick_value(byte_source& in) {
    const std::uint8_t kind = in.byte();
    if (kind < 112) return static_cast<double>(kind % 16);
    if (kind < 176) return static_cast<double>(in.u16()) / 64.0;
    if (kind < 200) return edge_values[kind - 176];
    if (kind < 216) return DBL_MAX / static_cast<double>(kind - 198);
    if (kind < 224) return large_values[kind - 216];
    if (kind < 232) return static_cast<double>(kind - 223) * 1e300;
    return std::bit_cast<double>(in.u64());
}

/// What the fuzzed estimators throw for a record marked to fail: not a bcl::error, and the
/// balancer must let it through unchanged.
struct estimator_failure {};

/// A record: who it is (its push attempt number) and what its estimators will say about it.
/// `cost` is what the cost estimator reads: the cost itself, or, for the calibration target, the
/// length its calibrated cost is quadratic in.
struct rec {
    std::uint64_t id = 0;
    double cost = 0.0;
    double memory = 0.0;
    double truncated_cost = 0.0; // the cost after truncate(record, cap)
    bool estimator_throws = false;
};

/// The same record, bit for bit.
inline bool same_record(const rec& a, const rec& b) noexcept {
    return a.id == b.id && same_bits(a.cost, b.cost) && same_bits(a.memory, b.memory) &&
           same_bits(a.truncated_cost, b.truncated_cost) &&
           a.estimator_throws == b.estimator_throws;
}

struct cost_fn {
    double operator()(const rec& r) const {
        if (r.estimator_throws) throw estimator_failure{};
        return r.cost;
    }
};
struct memory_fn {
    double operator()(const rec& r) const { return r.memory; }
};
struct truncate_fn {
    void operator()(rec& r, double /*cap*/) const { r.cost = r.truncated_cost; }
};

/// The two estimators the targets use: cost and truncation, with or without a memory estimate
/// (whether a balancer tracks memory is part of its type).
using plain_estimator = bcl::truncating_cost<cost_fn, truncate_fn>;
using memory_estimator =
    bcl::truncating_cost<bcl::memory_aware_cost<cost_fn, memory_fn>, truncate_fn>;

inline plain_estimator make_estimator(const plain_estimator*) {
    return bcl::with_truncation(cost_fn{}, truncate_fn{});
}
inline memory_estimator make_estimator(const memory_estimator*) {
    return bcl::with_truncation(bcl::with_memory(cost_fn{}, memory_fn{}), truncate_fn{});
}

/// A record whose cost comes from `pick(in)`, then one byte of extras: its memory (pick_value,
/// or the byte's top nibble), its cost after truncation (`pick(in)`, or `halve(cost)`), and,
/// for about one in 64, an estimator that throws.
template <class Pick, class Halve>
rec pick_record(byte_source& in, std::uint64_t id, Pick&& pick, Halve&& halve) {
    rec r;
    r.id = id;
    r.cost = pick(in);
    const std::uint8_t extras = in.byte();
    r.memory = (extras & 1U) != 0 ? pick_value(in) : static_cast<double>(extras >> 4);
    r.truncated_cost = (extras & 2U) != 0 ? pick(in) : halve(r.cost);
    r.estimator_throws = (extras & 0x0cU) == 0x0cU && (extras & 0xf0U) == 0xf0U;
    return r;
}

/// A record whose estimates come from the input (mostly valid ones, see pick_value).
inline rec pick_record(byte_source& in, std::uint64_t id) {
    return pick_record(in, id, pick_value, [](double cost) { return cost / 2.0; });
}

/// The options one byte of flags sets (both targets read it alike): bit 0 sliding, 1 drop_last,
/// 2 shuffled emission, 3 largest_first, 5 a truncating cap, 6 padded batches. Returns bit 4,
/// whether the estimator has a memory estimate.
inline bool apply_flags(bcl::options& opt, std::uint8_t flags) {
    opt.policy =
        (flags & 1U) != 0 ? bcl::lookahead_policy::sliding : bcl::lookahead_policy::tumbling;
    opt.drop_last = (flags & 2U) != 0;
    opt.emission =
        (flags & 4U) != 0 ? bcl::emission_order::shuffled : bcl::emission_order::costliest_first;
    opt.batching = (flags & 64U) != 0 ? bcl::batch_cost::padded : bcl::batch_cost::packed;
    opt.largest_first = (flags & 8U) != 0;
    opt.cap.action = (flags & 32U) != 0 ? bcl::cap_action::truncate : bcl::cap_action::clip;
    return (flags & 16U) != 0;
}

/// The cap kind a byte picks: its value mod 3 is none, fixed or quantile (both targets).
inline bcl::cap_kind cap_kind_of(std::uint8_t cap) noexcept {
    constexpr bcl::cap_kind kinds[] = {bcl::cap_kind::none, bcl::cap_kind::fixed,
                                       bcl::cap_kind::quantile};
    return kinds[cap % 3];
}

/// A memory budget, from one byte (and a value if its bit 6 is set): none below 128.
inline void pick_budget(byte_source& in, bcl::options& opt) {
    const std::uint8_t budget = in.byte();
    if (budget >= 128) opt.memory_budget = (budget & 64U) != 0 ? pick_value(in) : (budget & 63U);
}

/// Options from the input: mostly small, valid ones, sometimes extreme or invalid (a balancer
/// must refuse those with a bcl::error).
inline bcl::options pick_options(byte_source& in, bool& memory) {
    bcl::options opt;
    opt.batch_size = 1 + in.byte() % 16;
    opt.lookahead = 1 + in.byte() % 8;
    memory = apply_flags(opt, in.byte());
    opt.buffer_windows = 1 + in.byte() % 4;
    const std::uint8_t age = in.byte();
    if (age < 240) {
        opt.max_age = opt.buffer_windows - 1 + age % 4;
    } else {
        constexpr std::size_t extreme_ages[] = {0,
                                                1,
                                                255,
                                                65535,
                                                1U << 20,
                                                1U << 24,
                                                (1U << 26) - 1,
                                                1U << 26,
                                                (1U << 26) + 1,
                                                SIZE_MAX,
                                                SIZE_MAX / 2,
                                                1U << 22,
                                                1U << 23,
                                                100000,
                                                3,
                                                16};
        opt.max_age = extreme_ages[age - 240];
    }
    opt.seed = in.u16();
    const std::uint8_t cap = in.byte();
    opt.cap.kind = cap_kind_of(cap);
    if (opt.cap.kind == bcl::cap_kind::fixed) opt.cap.value = pick_value(in);
    if (opt.cap.kind == bcl::cap_kind::quantile) {
        constexpr double quantiles[] = {0.5, 0.9, 0.99, 0.75, 0.25, 0.999, 0.01, 1e-9,
                                        0.0, 1.0, -0.5, 1.5,  0.6,  0.95,  0.8,  0.3};
        opt.cap.quantile = quantiles[(cap >> 2) % 16];
        opt.cap.warmup = in.byte() % 40;
    }
    pick_budget(in, opt);
    return opt;
}

/// The options in one line, each field that differs from bcl::options{} (the calibration
/// settings as well), for describe_inputs.
inline std::string describe(const bcl::options& o) {
    const bcl::options d;
    std::string out = "B=" + std::to_string(o.batch_size) + " K=" + std::to_string(o.lookahead);
    const auto add = [&out](const std::string& field) { out += " " + field; };
    add(o.policy == bcl::lookahead_policy::sliding ? "sliding" : "tumbling");
    if (o.policy == bcl::lookahead_policy::sliding)
        add("buffer_windows=" + std::to_string(o.buffer_windows) +
            " max_age=" + std::to_string(o.max_age));
    if (o.drop_last) add("drop_last");
    add(o.emission == bcl::emission_order::shuffled ? "shuffled" : "costliest_first");
    if (o.batching == bcl::batch_cost::padded) add("padded");
    if (o.largest_first) add("largest_first");
    add("seed=" + std::to_string(o.seed));
    if (!same_bits(o.mean_cost, d.mean_cost)) add("mean_cost=" + text(o.mean_cost));
    const bcl::cap_options& c = o.cap;
    const char* action = c.action == bcl::cap_action::truncate ? " truncate" : " clip";
    if (c.kind == bcl::cap_kind::none) add("cap=none");
    if (c.kind == bcl::cap_kind::fixed) add("cap=fixed(" + text(c.value) + action + ")");
    if (c.kind == bcl::cap_kind::quantile)
        add("cap=quantile(q=" + text(c.quantile) + " warmup=" + std::to_string(c.warmup) +
            " prior=" + text(c.prior) + action + ")");
    if (c.kind != bcl::cap_kind::none && c.kind != bcl::cap_kind::fixed &&
        c.kind != bcl::cap_kind::quantile)
        add("cap=" + std::to_string(static_cast<int>(c.kind)));
    if (!same_bits(o.memory_budget, d.memory_budget)) add("memory_budget=" + text(o.memory_budget));
    const bcl::calibration_options& k = o.calibration;
    const bcl::calibration_options dk = d.calibration;
    if (!same_bits(k.forgetting, dk.forgetting) || !same_bits(k.prior_weight, dk.prior_weight) ||
        k.horizon != dk.horizon || !same_bits(k.outlier_threshold, dk.outlier_threshold))
        add("calibration(forgetting=" + text(k.forgetting) +
            " prior_weight=" + text(k.prior_weight) + " horizon=" + std::to_string(k.horizon) +
            " outlier_threshold=" + text(k.outlier_threshold) + ")");
    return out;
}

} // namespace bcl_fuzz
