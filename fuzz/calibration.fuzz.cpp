// bcl-fuzz-calibration: a balancer over a calibrated cost (bcl::calibrated_affine_quadratic, or
// an estimator of the same features that also has a memory estimate and a truncation), fed
// adversarial record lengths and measured batch times. The input chooses the options (including
// extreme valid calibration settings), the prior, a hidden "true" cost model the times come from,
// and then a sequence of operations: push, pop, finish, observe (an index recent, at the horizon's
// edge, ancient, in the future or already observed; a time that is true, noisy, a spike, 0, tiny,
// huge, NaN, infinite or negative), save and restore (through the bytes or not), and restores of
// saved bytes with one byte flipped. A reference balancer is fed exactly the operations that
// succeeded, and is never saved or restored. Checked:
//   - the same batches as the reference, in the same order (determinism and exact resume, in the
//     middle of a fit too), of B records each but a short last one, every accepted record once;
//   - observe() accepts exactly the times the documentation says it accepts (finite, >= 0, of an
//     emitted batch within the horizon, not yet observed), and times_observed counts them;
//   - every error is a bcl::error (or the estimator's own exception, unchanged), and a failed
//     operation changes nothing: save().to_bytes() equals what it was, and the reference's;
//   - calibration(): every coefficient finite and >= 0, the prior in force until a fit, and the
//     coefficients change only at a round boundary; the same as the reference's, bit for bit;
//   - a flipped byte with a stale checksum is refused; with the checksum recomputed, the state is
//     refused or restores into a balancer that keeps the contract (batch sizes, each record once,
//     finite non-negative coefficients).

#include "fuzz_support.hpp"

#include <bcl/balancer.hpp>
#include <bcl/calibrated_cost.hpp>
#include <bcl/detail/batch_calibration.hpp>
#include <bcl/detail/bytes.hpp>
#include <bcl/error.hpp>
#include <bcl/options.hpp>

#include <array>
#include <bit>
#include <cfloat>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <limits>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace {

using bcl_fuzz::byte_source;
using bcl_fuzz::estimator_failure;
using bcl_fuzz::fail;
using bcl_fuzz::require;

using coefficient_array = std::array<double, 3>;

/// A record: who it is (its push attempt number), its length (the feature the cost is quadratic
/// in), and what the other estimators say about it.
struct sample {
    std::uint64_t id = 0;
    double length = 0.0;
    double memory = 0.0;
    double truncated_length = 0.0; // the length after truncate(record, cap)
    bool estimator_throws = false;
};

struct length_of {
    double operator()(const sample& s) const {
        if (s.estimator_throws) throw estimator_failure{};
        return s.length;
    }
};

/// The stock calibrated estimator: a + b L + c L^2.
using stock_estimator = bcl::calibrated_cost<3, bcl::quadratic_features<length_of>>;

/// The same cost, with a memory estimate and a truncation: a memory budget and a truncating cap
/// work together with calibration.
struct full_estimator {
    static constexpr std::size_t feature_count = 3;
    stock_estimator cost;

    [[nodiscard]] coefficient_array features(const sample& s) const { return cost.features(s); }
    [[nodiscard]] double operator()(const sample& s) const { return cost(s); }
    [[nodiscard]] const coefficient_array& coefficients() const noexcept {
        return cost.coefficients();
    }
    [[nodiscard]] const coefficient_array& prior() const noexcept { return cost.prior(); }
    void set_coefficients(const coefficient_array& c) noexcept { cost.set_coefficients(c); }
    [[nodiscard]] double memory(const sample& s) const { return s.memory; }
    void truncate(sample& s, double /*cap*/) const { s.length = s.truncated_length; }
};

static_assert(bcl::calibratable_estimator<stock_estimator, sample>);
static_assert(bcl::calibratable_estimator<full_estimator, sample>);

stock_estimator make_estimator(const coefficient_array& prior, const stock_estimator*) {
    return bcl::calibrated_affine_quadratic(prior[0], prior[1], prior[2], length_of{});
}
full_estimator make_estimator(const coefficient_array& prior, const full_estimator*) {
    return full_estimator{
        bcl::calibrated_affine_quadratic(prior[0], prior[1], prior[2], length_of{})};
}

bool same_bits(double a, double b) {
    return std::bit_cast<std::uint64_t>(a) == std::bit_cast<std::uint64_t>(b);
}
bool same_bits(const coefficient_array& a, const coefficient_array& b) {
    for (std::size_t j = 0; j < a.size(); ++j)
        if (!same_bits(a[j], b[j])) return false;
    return true;
}
bool same_summary(const bcl::calibration_summary<3>& a, const bcl::calibration_summary<3>& b) {
    return same_bits(a.fitted, b.fitted) && same_bits(a.applied, b.applied) &&
           a.times_observed == b.times_observed && a.times_downweighted == b.times_downweighted &&
           a.has_fit == b.has_fit;
}
bool same_sample(const sample& a, const sample& b) {
    return a.id == b.id && same_bits(a.length, b.length) && same_bits(a.memory, b.memory) &&
           same_bits(a.truncated_length, b.truncated_length) &&
           a.estimator_throws == b.estimator_throws;
}

// require() with a message built only when the property is broken: for the checks made at
// every operation.
template <class Describe>
void check(bool holds, Describe&& describe) {
    if (!holds) fail(describe());
}

std::string text(double x) {
    char out[32];
    std::snprintf(out, sizeof out, "%.17g", x);
    return out;
}
std::string text(const coefficient_array& c) {
    return text(c[0]) + ", " + text(c[1]) + ", " + text(c[2]);
}

// ---------------------------------------------------------------------------------------------
// Choices read from the input.

/// A prior or true coefficient: mostly valid ones on the edges (0, tiny, huge finite), sometimes
/// any bit pattern (which may be invalid: calibrated_cost must refuse it).
double pick_coefficient(byte_source& in) {
    constexpr double table[] = {0.0,   1.0,  0.5, 1.0 / 24576.0, 2.0,  1e-300, DBL_MIN, 1e300,
                                1e100, 1e-9, 3.0, 1e6,           1e-3, 1e-12,  1e-200,  1e-6};
    const std::uint8_t k = in.byte();
    if (k < 16) return 0.0; // zeros are common: one or two of the three features unused
    if (k < 232) return table[k % 16];
    if (k < 240) return std::numeric_limits<double>::denorm_min() * static_cast<double>(k - 231);
    if (k < 248) return bcl_fuzz::pick_value(in);
    return std::bit_cast<double>(in.u64());
}

/// A record's length: small integers (ties), multiples of 1/64, the edge values (0, -0,
/// subnormals, DBL_MAX, NaN, infinities, negatives), lengths whose square is near the largest
/// accepted estimate (1e120), and any bit pattern.
double pick_length(byte_source& in) {
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
    if (k < 200) return bcl_fuzz::edge_values[k - 176];
    if (k < 216) return large[k - 200];
    if (k < 240) return static_cast<double>(1U << (k - 216)); // up to 2^23
    return std::bit_cast<double>(in.u64());
}

sample pick_sample(byte_source& in, std::uint64_t id) {
    sample s;
    s.id = id;
    s.length = pick_length(in);
    const std::uint8_t extras = in.byte();
    s.memory = (extras & 1U) != 0 ? bcl_fuzz::pick_value(in) : static_cast<double>(extras >> 4);
    s.truncated_length = (extras & 2U) != 0 ? pick_length(in) : std::floor(s.length / 2.0);
    s.estimator_throws = (extras & 0x0cU) == 0x0cU && (extras & 0xf0U) == 0xf0U;
    return s;
}

/// A measured time that is not a multiple of the truth: 0, -0, tiny, huge finite, invalid.
double odd_time(std::uint8_t k, byte_source& in) {
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
    return bcl_fuzz::pick_value(in);
}

/// The calibration settings: mostly valid extremes, now and then an invalid one (the balancer
/// must refuse it).
bcl::calibration_options pick_calibration(byte_source& in) {
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

bool valid_calibration(const bcl::calibration_options& c) {
    return c.forgetting > 0.0 && c.forgetting <= 1.0 && c.prior_weight >= 0.0 &&
           c.prior_weight <= 1e12 && c.horizon >= 1 && c.horizon <= (std::size_t{1} << 20) &&
           c.outlier_threshold > 0.0 && c.outlier_threshold < HUGE_VAL;
}

/// A prior calibrated_cost accepts: finite coefficients >= 0 (at most 1e300), not all zero.
bool valid_prior(const coefficient_array& p) {
    bool any = false;
    for (const double x : p) {
        if (!(x >= 0.0 && x <= 1e300)) return false;
        any = any || x > 0.0;
    }
    return any;
}

struct setup {
    bcl::options opt;
    bool full = false; // the estimator with memory and truncation
    coefficient_array prior{};
    coefficient_array truth{}; // the hidden cost model the times come from
};

setup pick_setup(byte_source& in) {
    setup s;
    bcl::options& opt = s.opt;
    opt.batch_size = 1 + in.byte() % 16;
    opt.lookahead = 1 + in.byte() % 8;
    const std::uint8_t flags = in.byte();
    opt.policy =
        (flags & 1U) != 0 ? bcl::lookahead_policy::sliding : bcl::lookahead_policy::tumbling;
    opt.drop_last = (flags & 2U) != 0;
    opt.emission =
        (flags & 4U) != 0 ? bcl::emission_order::shuffled : bcl::emission_order::costliest_first;
    opt.largest_first = (flags & 8U) != 0;
    s.full = (flags & 16U) != 0;
    opt.cap.action =
        s.full && (flags & 32U) != 0 ? bcl::cap_action::truncate : bcl::cap_action::clip;
    opt.batching = (flags & 64U) != 0 ? bcl::batch_cost::padded : bcl::batch_cost::packed;
    opt.buffer_windows = 1 + in.byte() % 4;
    opt.max_age = opt.buffer_windows - 1 + in.byte() % 4;
    opt.seed = in.u16();
    if ((flags & 128U) != 0) opt.mean_cost = bcl_fuzz::pick_value(in);
    const std::uint8_t cap = in.byte();
    switch (cap % 3) {
    case 0:
        opt.cap.kind = bcl::cap_kind::none;
        break;
    case 1:
        opt.cap.kind = bcl::cap_kind::fixed;
        opt.cap.value = bcl_fuzz::pick_value(in);
        break;
    default: {
        opt.cap.kind = bcl::cap_kind::quantile;
        constexpr double quantiles[] = {0.5,  0.9, 0.99, 0.75, 0.25, 0.999, 0.01, 1e-9, 0.6,
                                        0.95, 0.8, 0.3,  0.1,  0.05, 0.7,   0.0 /* invalid */};
        opt.cap.quantile = quantiles[(cap >> 2) % 16];
        opt.cap.warmup = in.byte() % 16; // 0 is the default ceil(10 / (1 - q))
        if ((cap & 0x80U) != 0) opt.cap.prior = bcl_fuzz::pick_value(in);
        break;
    }
    }
    if (s.full) {
        const std::uint8_t budget = in.byte();
        if (budget >= 128)
            opt.memory_budget = (budget & 64U) != 0 ? bcl_fuzz::pick_value(in) : (budget & 63U);
    }
    opt.calibration = pick_calibration(in);
    for (double& p : s.prior) p = pick_coefficient(in);
    for (double& t : s.truth) t = pick_coefficient(in);
    return s;
}

// ---------------------------------------------------------------------------------------------

template <class Estimator>
class calibration_run {
public:
    using balancer_t = bcl::balancer<sample, Estimator>;
    using batch = std::vector<std::uint64_t>;

    calibration_run(const setup& s, std::unique_ptr<balancer_t> subject,
                    std::unique_ptr<balancer_t> reference)
        : m_setup(s), m_opt(s.opt), m_subject(std::move(subject)),
          m_reference(std::move(reference)), m_last(m_subject->calibration()) {
        check_calibration(-1, "at construction");
    }

    void step(byte_source& in) {
        const std::uint8_t op = in.byte();
        if (op < 80) {
            push(pick_sample(in, m_next_id++), (op & 1U) != 0);
        } else if (op < 96) {
            push_repeated(in);
        } else if (op < 128) {
            pop_once();
        } else if (op < 144) {
            pop_available();
        } else if (op < 148) {
            finish();
        } else if (op < 200) {
            observe_one(in);
        } else if (op < 216) {
            observe_all(in);
        } else if (op < 228) {
            save_and_restore(in.byte());
        } else if (op < 232) {
            save_only();
        } else {
            corrupted_restore(in);
        }
        check_calibration(op);
    }

    // finish(), drain, and check the whole output.
    void conclude() {
        finish();
        for (std::size_t guard = 0; guard <= m_accepted + 1; ++guard) {
            std::optional<batch> got;
            try {
                got = pop_subject();
            } catch (const bcl::error& e) {
                // A round no split fits within the memory budget: the reference must be stuck
                // the same way.
                bool reference_failed = false;
                try {
                    (void)m_reference->pop();
                } catch (const bcl::error&) {
                    reference_failed = true;
                }
                require(reference_failed, "the drain failed where the reference's did not");
                expect_same_state("after a pop() while draining that failed with: ", e);
                return;
            }
            compare_with_reference(got);
            if (!got) break;
        }
        check_calibration(-1, "after the drain");
        check_output();
    }

private:
    [[nodiscard]] Estimator make() const {
        return make_estimator(m_setup.prior, static_cast<const Estimator*>(nullptr));
    }

    // ---- records in and batches out ----

    void push_repeated(byte_source& in) {
        const std::size_t times = 2 + in.byte() % 31;
        const sample s = pick_sample(in, 0);
        for (std::size_t i = 0; i < times; ++i) {
            sample copy = s;
            copy.id = m_next_id++;
            push(copy, false);
            pop_available();
        }
    }

    void push(const sample& s, bool by_copy) {
        m_arrival.push_back(not_accepted);
        const bool could_push = m_subject->can_push();
        const std::uint64_t windows = m_subject->stats().windows;
        try {
            if (by_copy) {
                m_subject->push(s);
            } else {
                sample moved = s;
                m_subject->push(std::move(moved));
            }
        } catch (const bcl::error& e) {
            expect_same_state("after a push() that failed with: ", e);
            return;
        } catch (const estimator_failure&) {
            require(s.estimator_throws,
                    "estimator_failure from a record whose estimator does not throw");
            expect_same_state("after a push() whose estimator threw");
            return;
        }
        require(could_push, "push() accepted a record although can_push() was false");
        require(!s.estimator_throws, "push() succeeded although the estimator threw");
        check(std::isfinite(s.length) && s.length >= 0.0,
              [&] { return "push() accepted a record of length " + text(s.length); });
        try {
            m_reference->push(sample(s));
        } catch (const std::exception& e) {
            fail(std::string("the reference failed a push() the subject accepted: ") + e.what());
        }
        m_arrival[s.id] = m_accepted++;
        require(m_subject->stats().windows - windows <= 1, "one push() ran more than one round");
    }

    void pop_once() {
        std::optional<batch> got;
        try {
            got = pop_subject();
        } catch (const bcl::error& e) {
            expect_same_state("after a pop() that failed with: ", e);
            return;
        }
        compare_with_reference(got);
    }

    void pop_available() {
        for (std::size_t guard = 0; guard <= m_opt.lookahead + 1; ++guard) {
            std::optional<batch> got;
            try {
                got = pop_subject();
            } catch (const bcl::error& e) {
                expect_same_state("after a pop() that failed with: ", e);
                return;
            }
            compare_with_reference(got);
            if (!got) return;
        }
    }

    void finish() {
        try {
            m_subject->finish();
        } catch (const bcl::error& e) {
            expect_same_state("after a finish() that failed with: ", e);
            return;
        }
        try {
            m_reference->finish();
        } catch (const std::exception& e) {
            fail(std::string("the reference failed a finish() the subject did: ") + e.what());
        }
    }

    std::optional<batch> pop_subject() {
        const auto got = m_subject->pop();
        if (!got) return std::nullopt;
        batch ids;
        std::vector<double> lengths;
        for (const sample& s : *got) {
            ids.push_back(s.id);
            lengths.push_back(s.length);
        }
        m_pending_lengths = std::move(lengths);
        return ids;
    }

    void compare_with_reference(const std::optional<batch>& got) {
        std::optional<typename balancer_t::batch_type> expected;
        try {
            expected = m_reference->pop();
        } catch (const std::exception& e) {
            fail(std::string("the reference failed a pop() the subject did: ") + e.what());
        }
        require(got.has_value() == expected.has_value(),
                got ? "pop() returned a batch where the reference returned none"
                    : "pop() returned no batch where the reference returned one");
        if (!got) return;
        require(got->size() == expected->size(),
                "pop() returned a batch of " + std::to_string(got->size()) +
                    " records, the reference one of " + std::to_string(expected->size()));
        for (std::size_t i = 0; i < got->size(); ++i)
            check((*got)[i] == (*expected)[i].id &&
                      same_bits(m_pending_lengths[i], (*expected)[i].length),
                  [&] {
                      return "batch " + std::to_string(m_batches.size()) +
                             " differs from the reference's at position " + std::to_string(i);
                  });
        require(same_bits(m_subject->last_batch_cost(), m_reference->last_batch_cost()),
                "last_batch_cost() differs from the reference's");
        m_emitted += got->size();
        m_batches.push_back(*got);
        m_lengths.push_back(std::move(m_pending_lengths));
        m_observed.push_back(0);
        check(m_subject->stats().batches == m_batches.size(), [&] {
            return "stats().batches is " + std::to_string(m_subject->stats().batches) + " after " +
                   std::to_string(m_batches.size()) + " batches";
        });
    }

    // ---- times ----

    // What the hidden cost model says batch `index` took.
    [[nodiscard]] double true_time(const std::vector<double>& lengths) const {
        const coefficient_array& t = m_setup.truth;
        double time = 0.0;
        for (const double length : lengths) time += t[0] + length * (t[1] + t[2] * length);
        return time;
    }

    double pick_time(byte_source& in, const std::vector<double>* lengths) {
        const std::uint8_t k = in.byte();
        if (lengths == nullptr) return odd_time(k, in);
        if (k >= 232) return odd_time(static_cast<std::uint8_t>(k - 232), in);
        const double truth = true_time(*lengths);
        if (k < 128) return truth;
        if (k < 200) return truth * (1.0 + static_cast<double>(k - 128) / 720.0); // up to +10%
        if (k < 216) return truth * (1.0 - static_cast<double>(k - 199) / 40.0);  // down to -40%
        return truth * static_cast<double>(k - 214) * 3.0; // a spike: 6x to 54x
    }

    // Whether observe(index, seconds) must succeed, from what the documentation promises.
    [[nodiscard]] bool acceptable(std::uint64_t index, double seconds) const {
        const std::uint64_t emitted = m_batches.size();
        return seconds >= 0.0 && seconds < HUGE_VAL && index < emitted &&
               emitted - index <= m_opt.calibration.horizon && m_observed[index] == 0;
    }

    std::uint64_t pick_index(byte_source& in) {
        const std::uint64_t emitted = m_batches.size();
        const std::uint64_t horizon = m_opt.calibration.horizon;
        const std::uint8_t how = in.byte();
        const std::uint64_t k = in.byte();
        switch (how % 8) {
        case 0:
        case 1:
        case 2: // recent
            return emitted == 0 ? 0 : emitted - 1 - k % std::min(emitted, horizon);
        case 3: // in the future: not emitted yet
            return emitted + k % 4;
        case 4: // at the horizon's edge: the oldest accepted one, or the newest refused one
            return emitted >= horizon + (k & 1U) ? emitted - horizon - (k & 1U) : k % 4;
        case 5: // ancient
            return emitted > horizon + k ? emitted - horizon - 1 - k : k;
        case 6: { // one already observed, if any
            std::uint64_t skip = k;
            for (std::uint64_t i = emitted; i-- > 0;)
                if (m_observed[i] != 0 && skip-- == 0) return i;
            return emitted == 0 ? 0 : emitted - 1;
        }
        default:
            return in.u64();
        }
    }

    void observe_one(byte_source& in) {
        const std::uint64_t index = pick_index(in);
        const std::vector<double>* lengths = index < m_lengths.size() ? &m_lengths[index] : nullptr;
        observe(index, pick_time(in, lengths));
    }

    // Every batch within the horizon not yet observed gets a time, newest or oldest first.
    void observe_all(byte_source& in) {
        const std::uint8_t how = in.byte();
        const std::uint64_t emitted = m_batches.size();
        const std::uint64_t first =
            emitted - std::min<std::uint64_t>(emitted, m_opt.calibration.horizon);
        for (std::uint64_t n = first; n < emitted; ++n) {
            const std::uint64_t i = (how & 1U) != 0 ? n : emitted - 1 - (n - first);
            if (m_observed[i] != 0) continue;
            observe(i, (how & 2U) != 0 ? pick_time(in, &m_lengths[i]) : true_time(m_lengths[i]));
        }
    }

    void observe(std::uint64_t index, double seconds) {
        const bool expected = acceptable(index, seconds);
        const auto what = [&] {
            return "observe(" + std::to_string(index) + ", " + text(seconds) + ") with " +
                   std::to_string(m_batches.size()) + " batches emitted, horizon " +
                   std::to_string(m_opt.calibration.horizon);
        };
        // Saved only when the call must fail (a call that must succeed and fails is a finding
        // whatever it changed).
        const std::string before = expected ? std::string() : m_subject->save().to_bytes();
        try {
            m_subject->observe(index, seconds);
        } catch (const bcl::error& e) {
            if (expected) fail(what() + " failed: " + e.what());
            // (observe() touches no record, so the bytes are all it could have changed.)
            if (m_subject->save().to_bytes() != before)
                fail(what() + " failed with \"" + e.what() + "\" and changed the saved state");
            return;
        }
        if (!expected) fail(what() + " was accepted");
        try {
            m_reference->observe(index, seconds);
        } catch (const std::exception& e) {
            fail(what() + ": the reference failed it: " + e.what());
        }
        m_observed[index] = 1;
        ++m_times;
    }

    // ---- saving and restoring ----

    void save_and_restore(std::uint8_t how) {
        const bool take = (how & 1U) != 0;
        const bool through_bytes = (how & 2U) != 0;
        const bcl::calibration_summary<3> summary = m_subject->calibration();
        typename balancer_t::state st =
            take ? std::move(*m_subject).take_state() : m_subject->save();
        const std::string bytes = st.to_bytes();
        try {
            if (through_bytes) st = balancer_t::state::from_bytes(bytes, std::move(st.pending));
            m_subject.reset();
            m_subject = std::make_unique<balancer_t>(make(), m_opt, std::move(st));
        } catch (const std::exception& e) {
            fail(std::string("a saved state did not restore: ") + e.what());
        }
        require(m_subject->save().to_bytes() == bytes,
                "a restored balancer saves a different state than the one it was restored from");
        require(same_summary(m_subject->calibration(), summary),
                "calibration() changed across save and restore");
        expect_same_state("after save and restore");
    }

    void save_only() {
        const typename balancer_t::state st = m_subject->save();
        require(st.pending.size() == m_subject->buffered(),
                "save() holds " + std::to_string(st.pending.size()) + " records, buffered() says " +
                    std::to_string(m_subject->buffered()));
        try {
            (void)balancer_t::state::from_bytes(st.to_bytes(), st.pending);
        } catch (const std::exception& e) {
            fail(std::string("the bytes of a saved state do not read back: ") + e.what());
        }
    }

    // The subject's saved bytes with one byte flipped (in the calibration part, or anywhere),
    // restored into a new balancer; the subject itself goes on untouched.
    void corrupted_restore(byte_source& in) {
        const typename balancer_t::state st = m_subject->save();
        std::string bytes = st.to_bytes();
        const std::uint8_t how = in.byte();
        const std::uint16_t where = in.u16();
        const auto mask = static_cast<std::uint8_t>(in.byte() | ((how & 0x80U) != 0 ? 0x80U : 1U));
        const bcl::detail::calibration_snapshot& c = st.snapshot.calibration;
        // The calibration part is the last before the checksum: a count, the numbers, the
        // counts, the coefficients, the waiting sums, the ledger's size and entries.
        const std::size_t calibration_bytes =
            8 * (1 + c.numbers.size() + c.counts.size() + c.applied.size() + c.waiting_sums.size() +
                 1 + c.ledger_state.size() + c.ledger_sums.size());
        require(bytes.size() >= calibration_bytes + 8, "a saved state shorter than its parts");
        const std::size_t at =
            (how & 1U) != 0 ? bytes.size() - 8 - calibration_bytes + where % calibration_bytes
                            : where % bytes.size();
        bytes[at] = static_cast<char>(static_cast<std::uint8_t>(bytes[at]) ^ mask);
        const bool reseal = (how & 2U) != 0;
        if (reseal) {
            bytes.resize(bytes.size() - 8);
            const std::uint64_t sum = bcl::detail::fnv1a(bytes);
            for (int i = 0; i < 8; ++i)
                bytes.push_back(static_cast<char>((sum >> (8 * i)) & 0xffU));
        }
        std::optional<balancer_t> restored;
        try {
            auto corrupted = balancer_t::state::from_bytes(bytes, st.pending);
            restored.emplace(make(), m_opt, std::move(corrupted));
        } catch (const bcl::error&) {
            return;
        }
        require(reseal, "a state with byte " + std::to_string(at) +
                            " flipped and a stale checksum was accepted");
        drain_corrupted(*restored, st.pending, in.byte());
    }

    // A restored state that may differ from any real one must still keep the contract.
    void drain_corrupted(balancer_t& b, const std::vector<sample>& pending, std::uint8_t pushes) {
        const std::size_t batch_size = m_opt.batch_size;
        std::vector<bool> seen(pending.size() + pushes, false);
        std::vector<std::uint64_t> index_of(m_next_id + pushes, UINT64_MAX);
        for (std::size_t i = 0; i < pending.size(); ++i) index_of[pending[i].id] = i;
        std::size_t out = 0;
        bool short_seen = false;
        const auto check_coefficients = [&](const char* when) {
            const bcl::calibration_summary<3> s = b.calibration();
            for (std::size_t j = 0; j < 3; ++j)
                require(std::isfinite(s.applied[j]) && s.applied[j] >= 0.0 &&
                            std::isfinite(s.fitted[j]) && s.fitted[j] >= 0.0,
                        std::string("a restored corrupted state has coefficients ") +
                            text(s.applied) + " (fitted " + text(s.fitted) + ") " + when);
        };
        const auto pop_all = [&] {
            std::size_t pops = 0;
            while (auto got = b.pop()) {
                require(++pops <= pending.size() + pushes + 2, "pop() keeps returning batches");
                require(!short_seen, "a batch came out after a short one");
                require(!got->empty() && got->size() <= batch_size,
                        "a batch of " + std::to_string(got->size()) + " records, batch size " +
                            std::to_string(batch_size));
                if (got->size() < batch_size) short_seen = true;
                std::vector<double> lengths;
                for (const sample& s : *got) {
                    const std::uint64_t i = s.id < index_of.size() ? index_of[s.id] : UINT64_MAX;
                    check(i < seen.size() && !seen[i], [&] {
                        return "record " + std::to_string(s.id) + " came out twice or was never in";
                    });
                    seen[i] = true;
                    lengths.push_back(s.length);
                }
                out += got->size();
                // Its time, as a trainer would report it.
                const double t = true_time(lengths);
                try {
                    if (t >= 0.0 && t < HUGE_VAL) b.observe(b.stats().batches - 1, t);
                } catch (const bcl::error&) {
                    // A flipped ledger entry may say it was observed already.
                }
                check_coefficients("while draining");
            }
        };
        std::size_t pushed = 0;
        try {
            check_coefficients("after the restore");
            pop_all();
            for (std::size_t i = 0; i < pushes && b.can_push(); ++i) {
                const std::uint64_t id = m_next_id + i;
                index_of[id] = pending.size() + i;
                b.push(sample{id, static_cast<double>((i * 5) % 11), 1.0, 1.0, false});
                ++pushed;
                pop_all();
            }
            const std::uint64_t dropped_before = b.stats().records_dropped;
            b.finish();
            const std::uint64_t dropped = b.stats().records_dropped - dropped_before;
            pop_all();
            require(b.buffered() == 0,
                    std::to_string(b.buffered()) + " records left after the drain");
            require(out + dropped == pending.size() + pushed,
                    std::to_string(out) + " records out and " + std::to_string(dropped) +
                        " dropped, of " + std::to_string(pending.size()) + " restored and " +
                        std::to_string(pushed) + " pushed");
        } catch (const bcl::error&) {
            // A restored state may still be refused later (a memory budget no split meets).
        }
    }

    // ---- the checks ----

    // `when` names the moment: an operation's code, or -1 and a text.
    void check_calibration(int op, const char* when = "") {
        const auto at = [&] {
            return op < 0 ? std::string(when) : "after operation " + std::to_string(op);
        };
        const bcl::calibration_summary<3> s = m_subject->calibration();
        const bcl::calibration_summary<3> r = m_reference->calibration();
        for (std::size_t j = 0; j < 3; ++j)
            check(std::isfinite(s.applied[j]) && s.applied[j] >= 0.0 &&
                      std::isfinite(s.fitted[j]) && s.fitted[j] >= 0.0,
                  [&] {
                      return "calibration() has coefficients " + text(s.applied) + " (fitted " +
                             text(s.fitted) + ") " + at();
                  });
        bool any = false;
        for (const double a : s.applied) any = any || a > 0.0;
        check(any, [&] {
            return "calibration() has coefficients that are all zero (fitted " + text(s.fitted) +
                   ") " + at();
        });
        check(same_summary(s, r),
              [&] { return "calibration() differs from the reference's " + at(); });
        check(s.times_observed == m_times, [&] {
            return "calibration().times_observed is " + std::to_string(s.times_observed) +
                   " after " + std::to_string(m_times) + " accepted times " + at();
        });
        check(s.times_downweighted <= s.times_observed,
              [&] { return "more times downweighted than observed " + at(); });
        if (!s.has_fit)
            check(same_bits(s.applied, m_setup.prior) && same_bits(s.fitted, coefficient_array{}),
                  [&] {
                      return "without a fit, calibration() is not the prior (" + text(s.applied) +
                             ") " + at();
                  });
        const std::uint64_t windows = m_subject->stats().windows;
        if (windows == m_windows)
            check(same_bits(s.applied, m_last.applied) && same_bits(s.fitted, m_last.fitted) &&
                      s.has_fit == m_last.has_fit,
                  [&] { return "the coefficients changed without a round " + at(); });
        m_last = s;
        m_windows = windows;
    }

    void expect_same_state(const char* when, const bcl::error& e) {
        expect_same_state((when + std::string(e.what())).c_str());
    }
    void expect_same_state(const char* when) {
        const typename balancer_t::state mine = m_subject->save();
        const typename balancer_t::state theirs = m_reference->save();
        require(mine.to_bytes() == theirs.to_bytes(),
                std::string("the saved state differs from the reference's ") + when);
        require(mine.pending.size() == theirs.pending.size(),
                std::string("the pending records differ from the reference's ") + when);
        for (std::size_t i = 0; i < mine.pending.size(); ++i)
            check(same_sample(mine.pending[i], theirs.pending[i]), [&] {
                return "pending record " + std::to_string(i) + " differs from the reference's " +
                       when;
            });
        require(m_subject->can_push() == m_reference->can_push() &&
                    m_subject->finished() == m_reference->finished(),
                std::string("can_push() or finished() differs from the reference's ") + when);
    }

    void check_output() const {
        const std::size_t b = m_opt.batch_size;
        const std::size_t n = m_accepted;
        const std::size_t expected_batches = m_opt.drop_last ? n / b : (n + b - 1) / b;
        require(m_batches.size() == expected_batches,
                std::to_string(m_batches.size()) + " batches for " + std::to_string(n) +
                    " records of batch size " + std::to_string(b) + ", expected " +
                    std::to_string(expected_batches));
        for (std::size_t j = 0; j < m_batches.size(); ++j) {
            const bool last = j + 1 == m_batches.size();
            const std::size_t expected_size = last && !m_opt.drop_last && n % b != 0 ? n % b : b;
            check(m_batches[j].size() == expected_size, [&] {
                return "batch " + std::to_string(j) + " has " +
                       std::to_string(m_batches[j].size()) + " records, expected " +
                       std::to_string(expected_size);
            });
        }
        std::vector<bool> seen(m_arrival.size(), false);
        for (const batch& ids : m_batches)
            for (const std::uint64_t id : ids) {
                check(id < m_arrival.size() && m_arrival[id] != not_accepted, [&] {
                    return "record " + std::to_string(id) + " was never accepted but came out";
                });
                check(!seen[id],
                      [&] { return "record " + std::to_string(id) + " came out twice"; });
                seen[id] = true;
            }
        const std::size_t dropped = m_opt.drop_last ? n % b : 0;
        require(m_emitted + dropped == n, std::to_string(m_emitted) + " records out and " +
                                              std::to_string(dropped) + " dropped of " +
                                              std::to_string(n));
        require(m_subject->buffered() == 0, "records still buffered after the drain");
    }

    static constexpr std::uint64_t not_accepted = UINT64_MAX;

    setup m_setup;
    bcl::options m_opt;
    std::unique_ptr<balancer_t> m_subject;
    std::unique_ptr<balancer_t> m_reference;
    std::vector<std::uint64_t> m_arrival; // per push attempt: arrival position, or not_accepted
    std::vector<batch> m_batches;         // the subject's batches, as record ids
    std::vector<std::vector<double>> m_lengths; // and their records' lengths
    std::vector<double> m_pending_lengths;      // of the batch just popped
    std::vector<std::uint8_t> m_observed;       // per emitted batch: its time was accepted
    std::uint64_t m_next_id = 0;
    std::uint64_t m_accepted = 0;
    std::size_t m_emitted = 0;
    std::uint64_t m_times = 0;          // times accepted
    bcl::calibration_summary<3> m_last; // at the last check
    std::uint64_t m_windows = 0;        // rounds run at the last check
};

template <class Estimator>
void run(const setup& s, byte_source& in) {
    using balancer_t = bcl::balancer<sample, Estimator>;
    std::optional<Estimator> estimator;
    try {
        estimator.emplace(make_estimator(s.prior, static_cast<const Estimator*>(nullptr)));
    } catch (const bcl::error&) {
        require(!valid_prior(s.prior), "calibrated_cost refused the valid prior " + text(s.prior));
        return;
    }
    require(valid_prior(s.prior), "calibrated_cost accepted the invalid prior " + text(s.prior));
    std::unique_ptr<balancer_t> subject;
    try {
        subject = std::make_unique<balancer_t>(*estimator, s.opt);
    } catch (const bcl::error&) {
        return; // invalid options are refused: fine
    }
    require(valid_calibration(s.opt.calibration),
            "a balancer accepted invalid calibration options");
    auto reference = std::make_unique<balancer_t>(*estimator, s.opt);
    calibration_run<Estimator> r(s, std::move(subject), std::move(reference));
    constexpr int max_steps = 4096;
    for (int i = 0; i < max_steps && !in.empty(); ++i) r.step(in);
    r.conclude();
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    byte_source in(std::span<const std::uint8_t>(data, size));
    const setup s = pick_setup(in);
    // Nothing is caught here: an exception that escapes (anything but a bcl::error, which the
    // operations catch) ends in std::terminate at the throw, so the report shows where it came
    // from.
    if (s.full)
        run<full_estimator>(s, in);
    else
        run<stock_estimator>(s, in);
    return 0;
}
