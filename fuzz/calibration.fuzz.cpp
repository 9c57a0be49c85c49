// bcl-fuzz-calibration: a balancer over a calibrated cost (bcl::calibrated_affine_quadratic, or
// an estimator of the same features that also has a memory estimate and a truncation), fed
// adversarial record lengths and measured batch times. The input chooses the options (including
// extreme valid calibration settings), the prior, a hidden "true" cost model the times come from
// (calibration_input.hpp), and then a sequence of operations: push, pop, finish, observe (an
// index recent, at the horizon's edge, ancient, in the future or already observed; a time that
// is true, noisy, a spike, 0, tiny, huge, NaN, infinite or negative), save and restore (through
// the bytes or not), and restores of saved bytes with one byte flipped. balancer_driver.hpp runs
// the balancer against a reference fed exactly the operations that succeeded, never saved or
// restored, and checks what it checks for every target (the same batches in the same order, in
// the middle of a fit too; batch sizes and count; each record once; the delay bound; a failed
// operation changes nothing). Checked here besides:
//   - observe() accepts exactly the times the documentation says it accepts (finite, >= 0, of an
//     emitted batch within the horizon, not yet observed), times_observed counts them, and a
//     refused time leaves save().to_bytes() as it was;
//   - calibration(): every coefficient finite and >= 0, not all zero, the prior in force until a
//     fit, and the coefficients change only at a round boundary; the same as the reference's,
//     bit for bit, and unchanged by a save and restore;
//   - a flipped byte with a stale checksum is refused; with the checksum recomputed, the state is
//     refused or restores into a balancer that keeps the contract (batch sizes, each record once,
//     finite non-negative coefficients).

#include "balancer_driver.hpp"
#include "calibration_input.hpp"
#include "fuzz_support.hpp"

#include <bcl/calibrated_cost.hpp>
#include <bcl/detail/state/bytes.hpp>
#include <bcl/error.hpp>
#include <bcl/options.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace {

using namespace bcl_fuzz;

// What the hidden cost model says a batch took.
double true_time(const coefficient_array& t, std::span<const rec> batch) {
    double time = 0.0;
    for (const rec& r : batch) time += t[0] + r.cost * (t[1] + t[2] * r.cost);
    return time;
}

bool same_bits(const coefficient_array& a, const coefficient_array& b) {
    for (std::size_t j = 0; j < a.size(); ++j)
        if (!bcl_fuzz::same_bits(a[j], b[j])) return false;
    return true;
}
bool same_summary(const bcl::calibration_summary<3>& a, const bcl::calibration_summary<3>& b) {
    return same_bits(a.fitted, b.fitted) && same_bits(a.applied, b.applied) &&
           a.times_observed == b.times_observed && a.times_downweighted == b.times_downweighted &&
           a.has_fit == b.has_fit;
}
bool finite_non_negative(const coefficient_array& c) {
    return std::all_of(c.begin(), c.end(), [](double x) { return std::isfinite(x) && x >= 0.0; });
}

template <class Estimator>
class calibration_run : public balancer_driver<calibration_run<Estimator>, Estimator> {
    using driver = balancer_driver<calibration_run<Estimator>, Estimator>;
    using driver::batches;
    using driver::opt;
    using driver::reference;
    using driver::subject;

public:
    using typename driver::balancer_t;
    using typename driver::batch;

    calibration_run(const setup& s, std::unique_ptr<balancer_t> the_subject,
                    std::unique_ptr<balancer_t> the_reference)
        : driver(s.opt, std::move(the_subject), std::move(the_reference)), m_setup(s),
          m_last(this->subject().calibration()) {
        check_calibration(-1, "at construction");
    }

    // The operations, by the input's first byte; the calibration is checked after each.
    void step(byte_source& in) {
        const std::uint8_t op = in.byte();
        if (op < 80) {
            this->push(in, (op & 1U) != 0);
        } else if (op < 96) {
            this->push_repeated(in);
        } else if (op < 128) {
            this->pop_once();
        } else if (op < 144) {
            this->pop_available();
        } else if (op < 148) {
            this->finish();
        } else if (op < 200) {
            observe_one(in);
        } else if (op < 216) {
            observe_all(in);
        } else if (op < 228) {
            save_and_restore(in.byte());
        } else if (op < 232) {
            this->save_only();
        } else {
            corrupted_restore(in);
        }
        check_calibration(op);
    }

    [[nodiscard]] rec pick(byte_source& in, std::uint64_t id) const { return pick_sample(in, id); }

    [[nodiscard]] Estimator make_estimator() const {
        return bcl_fuzz::make_estimator(m_setup.prior, static_cast<const Estimator*>(nullptr));
    }

    void conclude() {
        const bool drained = this->drain();
        this->note_run();
        note([&] {
            const bcl::calibration_summary<3> c = subject().calibration();
            return "calibration: " + std::to_string(c.times_observed) + " times (" +
                   std::to_string(c.times_downweighted) + " downweighted), " +
                   (c.has_fit ? "fitted " + text(c.fitted) + ", applied " + text(c.applied)
                              : std::string("no fit")) +
                   ", " + std::to_string(m_corrupted) + " corrupted restores";
        });
        if (!drained) return;
        check_calibration(-1, "after the drain");
        this->check_output();
    }

    void save_and_restore(std::uint8_t how) {
        const bcl::calibration_summary<3> summary = subject().calibration();
        driver::save_and_restore(how);
        require(same_summary(subject().calibration(), summary),
                "calibration() changed across save and restore");
    }

private:
    // ---- times ----

    double pick_time(byte_source& in, const batch* emitted) {
        const std::uint8_t k = in.byte();
        if (emitted == nullptr) return odd_time(k, in);
        if (k >= 232) return odd_time(static_cast<std::uint8_t>(k - 232), in);
        const double truth = true_time(m_setup.truth, *emitted);
        if (k < 128) return truth;
        if (k < 200) return truth * (1.0 + static_cast<double>(k - 128) / 720.0); // up to +10%
        if (k < 216) return truth * (1.0 - static_cast<double>(k - 199) / 40.0);  // down to -40%
        return truth * static_cast<double>(k - 214) * 3.0; // a spike: 6x to 54x
    }

    // Whether batch i's time was accepted (i below the number of batches emitted).
    std::uint8_t& observed(std::uint64_t i) {
        m_observed.resize(batches().size(), 0);
        return m_observed[i];
    }

    // Whether observe(index, seconds) must succeed, from what the documentation promises.
    [[nodiscard]] bool acceptable(std::uint64_t index, double seconds) {
        const std::uint64_t emitted = batches().size();
        return seconds >= 0.0 && seconds < HUGE_VAL && index < emitted &&
               emitted - index <= opt().calibration.horizon && observed(index) == 0;
    }

    std::uint64_t pick_index(byte_source& in) {
        const std::uint64_t emitted = batches().size();
        const std::uint64_t horizon = opt().calibration.horizon;
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
                if (observed(i) != 0 && skip-- == 0) return i;
            return emitted == 0 ? 0 : emitted - 1;
        }
        default:
            return in.u64();
        }
    }

    void observe_one(byte_source& in) {
        const std::uint64_t index = pick_index(in);
        const batch* emitted = index < batches().size() ? &batches()[index] : nullptr;
        observe(index, pick_time(in, emitted));
    }

    // Every batch within the horizon not yet observed gets a time, newest or oldest first.
    void observe_all(byte_source& in) {
        const std::uint8_t how = in.byte();
        const std::uint64_t emitted = batches().size();
        const std::uint64_t first =
            emitted - std::min<std::uint64_t>(emitted, opt().calibration.horizon);
        for (std::uint64_t n = first; n < emitted; ++n) {
            const std::uint64_t i = (how & 1U) != 0 ? n : emitted - 1 - (n - first);
            if (observed(i) != 0) continue;
            const batch& b = batches()[i];
            observe(i, (how & 2U) != 0 ? pick_time(in, &b) : true_time(m_setup.truth, b));
        }
    }

    void observe(std::uint64_t index, double seconds) {
        const bool expected = acceptable(index, seconds);
        const auto what = [&] {
            return "observe(" + std::to_string(index) + ", " + text(seconds) + ") with " +
                   std::to_string(batches().size()) + " batches emitted, horizon " +
                   std::to_string(opt().calibration.horizon);
        };
        // Saved only when the call must fail (a call that must succeed and fails is a finding
        // whatever it changed).
        const std::string before = expected ? std::string() : subject().save().to_bytes();
        try {
            subject().observe(index, seconds);
        } catch (const bcl::error& e) {
            if (expected) fail(what() + " failed: " + e.what());
            // (observe() touches no record, so the bytes are all it could have changed.)
            if (subject().save().to_bytes() != before)
                fail(what() + " failed with \"" + e.what() + "\" and changed the saved state");
            return;
        }
        if (!expected) fail(what() + " was accepted");
        try {
            reference().observe(index, seconds);
        } catch (const std::exception& e) {
            fail(what() + ": the reference failed it: " + e.what());
        }
        observed(index) = 1;
        ++m_times;
    }

    // ---- corrupted states ----

    // The subject's saved bytes with one byte flipped (in the calibration part, or anywhere),
    // restored into a new balancer; the subject itself goes on untouched.
    void corrupted_restore(byte_source& in) {
        const typename balancer_t::state st = subject().save();
        std::string bytes = st.to_bytes();
        const std::uint8_t how = in.byte();
        const std::uint16_t where = in.u16();
        const auto mask = static_cast<std::uint8_t>(in.byte() | ((how & 0x80U) != 0 ? 0x80U : 1U));
        const bcl::detail::calibration_snapshot& c = st.snapshot.calibration;
        // The calibration part is the last before the checksum: a count, the numbers, the
        // counts, the coefficients, the waiting sums, the ledger's size and entries.
        const std::size_t calibration_bytes =
            8 * (1 + c.numbers.size() + bcl::detail::calibration_counts::fields + c.applied.size() +
                 c.waiting_sums.size() + 1 + c.ledger_state.size() + c.ledger_sums.size());
        require(bytes.size() >= calibration_bytes + 8, "a saved state shorter than its parts");
        const std::size_t at =
            (how & 1U) != 0 ? bytes.size() - 8 - calibration_bytes + where % calibration_bytes
                            : where % bytes.size();
        bytes[at] = static_cast<char>(static_cast<std::uint8_t>(bytes[at]) ^ mask);
        const bool resealed = (how & 2U) != 0;
        if (resealed) reseal(bytes);
        std::optional<balancer_t> restored;
        try {
            auto corrupted = balancer_t::state::from_bytes(bytes, st.pending);
            restored.emplace(make_estimator(), opt(), std::move(corrupted));
        } catch (const bcl::error&) {
            return;
        }
        require(resealed, "a state with byte " + std::to_string(at) +
                              " flipped and a stale checksum was accepted");
        ++m_corrupted;
        // A restored state that may differ from any real one must still keep the contract, and
        // its coefficients stay finite and >= 0 while it takes the batches' true times.
        balancer_t& b = *restored;
        const auto check_coefficients = [&b](const char* when) {
            const bcl::calibration_summary<3> s = b.calibration();
            require(finite_non_negative(s.applied) && finite_non_negative(s.fitted),
                    std::string("a restored corrupted state has coefficients ") + text(s.applied) +
                        " (fitted " + text(s.fitted) + ") " + when);
        };
        check_coefficients("after the restore");
        std::vector<std::uint64_t> ids;
        for (const rec& r : st.pending) ids.push_back(r.id);
        drain_restored(b, ids, this->next_id(), in.byte(), 1.0, [&](std::span<const rec> got) {
            const double t = true_time(m_setup.truth, got);
            try {
                if (t >= 0.0 && t < HUGE_VAL) b.observe(b.stats().batches - 1, t);
            } catch (const bcl::error&) {
                // A flipped ledger entry may say it was observed already.
            }
            check_coefficients("while draining");
        });
    }

    // ---- the calibration ----

    // `when` names the moment: an operation's code, or -1 and a text.
    void check_calibration(int op, const char* when = "") {
        const auto at = [&] {
            return op < 0 ? std::string(when) : "after operation " + std::to_string(op);
        };
        const bcl::calibration_summary<3> s = subject().calibration();
        const bcl::calibration_summary<3> r = reference().calibration();
        check(finite_non_negative(s.applied) && finite_non_negative(s.fitted), [&] {
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
        const std::uint64_t windows = subject().stats().windows;
        if (windows == m_windows)
            check(same_bits(s.applied, m_last.applied) && same_bits(s.fitted, m_last.fitted) &&
                      s.has_fit == m_last.has_fit,
                  [&] { return "the coefficients changed without a round " + at(); });
        m_last = s;
        m_windows = windows;
    }

    setup m_setup;
    std::vector<std::uint8_t> m_observed; // per emitted batch: its time was accepted
    std::uint64_t m_times = 0;            // times accepted
    bcl::calibration_summary<3> m_last;   // at the last check
    std::uint64_t m_windows = 0;          // rounds run at the last check
    std::size_t m_corrupted = 0;          // corrupted states restored
};

template <class Estimator>
void run(const setup& s, byte_source& in) {
    std::optional<Estimator> estimator;
    try {
        estimator.emplace(make_estimator(s.prior, static_cast<const Estimator*>(nullptr)));
    } catch (const bcl::error&) {
        require(!valid_prior(s.prior), "calibrated_cost refused the valid prior " + text(s.prior));
        return;
    }
    require(valid_prior(s.prior), "calibrated_cost accepted the invalid prior " + text(s.prior));
    auto subject = make_balancer(*estimator, s.opt);
    if (!subject) return; // invalid options are refused: fine
    require(valid_calibration(s.opt.calibration),
            "a balancer accepted invalid calibration options");
    auto reference = make_balancer(*estimator, s.opt);
    require(reference != nullptr, "the options were accepted once and refused the second time");
    calibration_run<Estimator>(s, std::move(subject), std::move(reference)).run(in);
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    byte_source in(std::span<const std::uint8_t>(data, size));
    const setup s = pick_setup(in);
    note([&] { return describe(s); });
    // Nothing is caught here: an exception that escapes (anything but a bcl::error, which the
    // operations catch) ends in std::terminate at the throw, so the report shows where it came
    // from.
    if (s.full)
        run<full_estimator>(s, in);
    else
        run<stock_estimator>(s, in);
    return 0;
}
