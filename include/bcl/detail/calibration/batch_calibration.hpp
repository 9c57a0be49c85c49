#pragma once
// What a calibrating balancer keeps between emitting a batch and hearing how long it took: each
// round's batch feature sums, the emitted batches still awaiting their times (a ring over the
// calibration horizon), and the fit those times feed.

#include <bcl/detail/config.hpp>

#include <bcl/calibrated_cost.hpp>
#include <bcl/cost_estimator.hpp>
#include <bcl/detail/calibration/calibration_saved.hpp>
#include <bcl/detail/calibration/cost_fit.hpp>
#include <bcl/detail/number_text.hpp>
#include <bcl/detail/saved_part.hpp>
#include <bcl/error.hpp>
#include <bcl/options.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

namespace bcl::detail {

/// The calibration of a balancer whose estimator does not calibrate: nothing kept, every step a
/// no-op, so that a balancer runs the same code with either (batch_calibration's interface).
struct no_calibration {
    void reserve(std::size_t /*lookahead*/) noexcept {}
    template <class Features>
    void count_record(const Features& /*x*/) noexcept {}
    void next_epoch() noexcept {}
    void start_round(std::size_t /*packs*/) noexcept {}
    template <class Buffer>
    void add(std::size_t /*batch*/, const Buffer& /*buffer*/, std::uint32_t /*slot*/) noexcept {}
    void finish_round() noexcept {}
    void emitted(std::uint64_t /*index*/, std::size_t /*batch*/) noexcept {}
    template <class Estimator, class Buffer, class Heavy>
    void apply_refit(Estimator& /*estimator*/, Buffer& /*buffer*/, Heavy& /*heavy*/,
                     double /*cap*/) noexcept {}
    using saved = calibration_saved;
    template <class Estimator>
    void save_into(saved& /*s*/, std::uint64_t /*emitted_count*/, std::size_t /*next_batch*/,
                   const Estimator& /*estimator*/) const noexcept {}
    template <class Estimator, class Buffer>
    void restore_from(const saved& /*s*/, std::uint64_t /*emitted_count*/, Estimator& /*estimator*/,
                      Buffer& /*buffer*/) noexcept {}
};

/// Calibration for an estimator of N features; see cost_fit for the fit.
template <std::size_t N>
class batch_calibration {
public:
    using vec = std::array<double, N>;
    static constexpr std::uint8_t awaiting = 1;
    static constexpr std::uint8_t observed = 2;

    batch_calibration(const options& opt, const vec& prior)
        : m_fit(opt.calibration, prior), m_horizon(opt.calibration.horizon),
          m_padded(opt.batching == batch_cost::padded) {}

    void reserve(std::size_t lookahead) {
        m_batch_sums.reserve(lookahead);
        m_batch_top.reserve(lookahead);
        m_batch_count.reserve(lookahead);
        m_ring_sums.assign(m_horizon, vec{});
        m_ring_state.assign(m_horizon, 0);
    }

    void count_record(const vec& x) noexcept { m_fit.count_record(x); }

    /// A new epoch (balancer::next_epoch): its batches count from 0 again, so the ledger of
    /// batches awaiting their times is emptied; the fit stays.
    void next_epoch() noexcept {
        std::fill(m_ring_state.begin(), m_ring_state.end(), std::uint8_t{0});
        start_round(0);
    }

    /// A round of `packs` batches begins (capacity reserved: cannot throw).
    void start_round(std::size_t packs) noexcept {
        m_batch_sums.assign(packs, vec{});
        m_batch_top.assign(packs, -1.0);
        m_batch_count.assign(packs, 0);
        m_top_cost = -1.0;
        m_bottom_cost = HUGE_VAL;
    }

    /// The buffered record at `slot` joins batch `batch` (its features and cost as kept there).
    template <class Buffer>
    void add(std::size_t batch, const Buffer& buffer, std::uint32_t slot) noexcept {
        add(batch, buffer.feature_values()[slot], buffer.costs()[slot]);
    }

    /// A record of features x and estimated cost `cost` joins batch `batch`. Packed batches sum
    /// their records' features; a padded batch costs its size times its costliest record, so it
    /// keeps that record's features (scaled by the size in finish_round).
    void add(std::size_t batch, const vec& x, double cost) noexcept {
        ++m_batch_count[batch];
        if (cost > m_top_cost) {
            m_top_cost = cost;
            m_top_features = x;
        }
        if (cost < m_bottom_cost) {
            m_bottom_cost = cost;
            m_bottom_features = x;
        }
        if (!m_padded) {
            for (std::size_t j = 0; j < N; ++j) m_batch_sums[batch][j] += x[j];
        } else if (cost > m_batch_top[batch]) {
            m_batch_top[batch] = cost;
            m_batch_sums[batch] = x;
        }
    }

    void finish_round() noexcept {
        if (!m_padded) return;
        for (std::size_t p = 0; p < m_batch_sums.size(); ++p)
            for (double& x : m_batch_sums[p]) x *= static_cast<double>(m_batch_count[p]);
    }

    /// Batch `batch` of the round left as emitted batch number `index`.
    void emitted(std::uint64_t index, std::size_t batch) noexcept {
        const auto slot = static_cast<std::size_t>(index % m_horizon);
        m_ring_sums[slot] = m_batch_sums[batch];
        m_ring_state[slot] = awaiting;
    }

    /// The measured time of emitted batch `index`, `emitted_count` batches having left. Throws
    /// bcl::error (changing nothing) for a time that is negative or not finite, a batch not yet
    /// emitted, older than the horizon, or already observed.
    void observe(std::uint64_t index, double seconds, std::uint64_t emitted_count) {
        const auto slot = static_cast<std::size_t>(index % m_horizon);
        const bool fine = seconds >= 0.0 && seconds < HUGE_VAL && index < emitted_count &&
                          emitted_count - index <= m_horizon && m_ring_state[slot] == awaiting;
        if (!fine) [[unlikely]]
            throw_bad_time(index, seconds, emitted_count);
        m_ring_state[slot] = observed;
        m_fit.add(m_ring_sums[slot], seconds);
    }

    bool refit(vec& applied) noexcept { return m_fit.refit(applied); }

    /// The round boundary: if times came since the last refit, the new coefficients go to the
    /// estimator and re-estimate the buffered records (from their stored features, capped at
    /// `cap`); the heavy slots' remembered records are rescaled as the round's costliest record
    /// is (heavy records look alike), rather than forgotten.
    ///
    /// A fit that (nearly) stops telling the round's records apart, where the coefficients in
    /// force do, is not applied: times that do not follow the work (a rank reporting the time of
    /// something else, or times that fall as the work grows) fit to a constant, which balances
    /// nothing. "Nearly": the spread it gives the round's cheapest and costliest records falls
    /// below flat_fit times the spread they had. The balancer then keeps the coefficients it had.
    template <class Estimator, class Buffer, class Heavy>
    void apply_refit(Estimator& estimator, Buffer& buffer, Heavy& heavy, double cap) noexcept {
        const vec old = estimator.coefficients();
        vec c = old;
        if (!refit(c)) return;
        const double spread_before = relative_spread(old);
        if (spread_before > 0.0 && relative_spread(c) < flat_fit * spread_before) return;
        estimator.set_coefficients(c);
        const double limit = std::min(cap, max_estimate);
        buffer.reestimate([&](const vec& x) { return std::min(dot(c, x), limit); });
        const double before = dot(old, m_top_features);
        const double after = dot(c, m_top_features);
        if (before > 0.0 && after > 0.0 && after / before < HUGE_VAL)
            heavy.rescale(after / before, max_estimate);
    }

    /// A refit whose estimates spread less than this fraction of the spread of the coefficients
    /// in force is taken for a constant. 1e-3: an honest fit of a cost that grows with the
    /// record spreads its estimates as a prior that grows with it does, within a small factor,
    /// and the fits of inverted times are exact constants (spread 0).
    static constexpr double flat_fit = 1e-3;

    /// (costliest - cheapest) / (costliest + cheapest) of the estimates coefficients `c` give the
    /// round's cheapest and costliest records (as the coefficients in force ranked them); 0
    /// before a round, or for estimates that are both 0.
    [[nodiscard]] double relative_spread(const vec& c) const noexcept {
        if (m_top_cost < 0.0) return 0.0;
        const double high = dot(c, m_top_features);
        const double low = dot(c, m_bottom_features);
        const double sum = high + low;
        return sum > 0.0 && sum < HUGE_VAL ? std::abs(high - low) / sum : 0.0;
    }

    /// What the fit has learned (balancer::calibration()), `applied` the coefficients in force.
    [[nodiscard]] calibration_summary<N> summary(const vec& applied) const noexcept {
        const auto& fit = m_fit.save();
        return {fit.fitted, applied, fit.observed, fit.downweighted, fit.has_fit};
    }

    /// The features of the last round's costliest record (what heavy records look like).
    [[nodiscard]] const vec& top_features() const noexcept { return m_top_features; }
    [[nodiscard]] const typename cost_fit<N>::numbers& fit() const noexcept { return m_fit.save(); }

    [[nodiscard]] calibration_snapshot save(std::uint64_t emitted_count, std::size_t next_batch,
                                            const vec& applied) const {
        calibration_snapshot s;
        s.features = N;
        const typename cost_fit<N>::numbers& n = m_fit.save();
        s.numbers.assign(n.normal_matrix.begin(), n.normal_matrix.end());
        s.numbers.insert(s.numbers.end(), n.normal_vector.begin(), n.normal_vector.end());
        s.numbers.insert(s.numbers.end(), n.fitted.begin(), n.fitted.end());
        s.numbers.insert(s.numbers.end(), n.feature_totals.begin(), n.feature_totals.end());
        s.numbers.push_back(n.effective_count);
        s.numbers.push_back(n.error_scale);
        s.counts = {n.feature_records, n.observed, n.downweighted, n.has_fit ? 1U : 0U,
                    n.stale ? 1U : 0U};
        s.applied.assign(applied.begin(), applied.end());
        for (std::size_t p = next_batch; p < m_batch_sums.size(); ++p)
            s.waiting_sums.insert(s.waiting_sums.end(), m_batch_sums[p].begin(),
                                  m_batch_sums[p].end());
        for (std::uint64_t i = first_kept(emitted_count); i < emitted_count; ++i) {
            const auto slot = static_cast<std::size_t>(i % m_horizon);
            s.ledger_state.push_back(m_ring_state[slot]);
            s.ledger_sums.insert(s.ledger_sums.end(), m_ring_sums[slot].begin(),
                                 m_ring_sums[slot].end());
        }
        return s;
    }

    /// Its part of a saved state (see save()), the coefficients in force the estimator's.
    using saved = calibration_saved;
    template <class Estimator>
    void save_into(saved& s, std::uint64_t emitted_count, std::size_t next_batch,
                   const Estimator& estimator) const {
        s.calibration = save(emitted_count, next_batch, estimator.coefficients());
    }
    template <class Estimator, class Buffer>
    void restore_from(const saved& s, std::uint64_t emitted_count, Estimator& estimator,
                      Buffer& buffer) {
        restore(s.calibration, emitted_count, estimator, buffer);
    }

    /// Restores what save() wrote (checked by calibration_saved::check and the snapshot): the
    /// estimator's coefficients, and the features of the buffered records, computed again from
    /// them (a pure function of the record).
    template <class Estimator, class Buffer>
    void restore(const calibration_snapshot& s, std::uint64_t emitted_count, Estimator& estimator,
                 Buffer& buffer) {
        vec c{};
        std::copy(s.applied.begin(), s.applied.end(), c.begin());
        estimator.set_coefficients(c);
        restore_fit(s, emitted_count);
        buffer.assign_features([&](const auto& record, std::size_t i) {
            return estimator.features_of(record, buffer.arrivals()[i]);
        });
    }

private:
    static double dot(const vec& a, const vec& b) noexcept {
        double s = 0.0;
        for (std::size_t j = 0; j < N; ++j) s += a[j] * b[j];
        return s;
    }

    void restore_fit(const calibration_snapshot& s, std::uint64_t emitted_count) noexcept {
        typename cost_fit<N>::numbers n;
        auto at = s.numbers.begin();
        for (double& x : n.normal_matrix) x = *at++;
        for (double& x : n.normal_vector) x = *at++;
        for (double& x : n.fitted) x = *at++;
        for (double& x : n.feature_totals) x = *at++;
        n.effective_count = *at++;
        n.error_scale = *at;
        n.feature_records = s.counts.feature_records;
        n.observed = s.counts.observed;
        n.downweighted = s.counts.downweighted;
        n.has_fit = s.counts.has_fit != 0;
        n.stale = s.counts.stale != 0;
        m_fit.restore(n);
        start_round(s.waiting_sums.size() / N);
        for (std::size_t p = 0; p < m_batch_sums.size(); ++p)
            std::copy_n(s.waiting_sums.begin() + static_cast<std::ptrdiff_t>(p * N), N,
                        m_batch_sums[p].begin());
        std::size_t k = 0;
        for (std::uint64_t i = first_kept(emitted_count); i < emitted_count; ++i, ++k) {
            const auto slot = static_cast<std::size_t>(i % m_horizon);
            m_ring_state[slot] = s.ledger_state[k];
            std::copy_n(s.ledger_sums.begin() + static_cast<std::ptrdiff_t>(k * N), N,
                        m_ring_sums[slot].begin());
        }
    }

    // Why observe() refused a time; off the per-batch path.
    [[noreturn]] void throw_bad_time(std::uint64_t index, double seconds,
                                     std::uint64_t emitted_count) const {
        const std::string what = "bcl::balancer::observe: batch " + std::to_string(index);
        if (!(seconds >= 0.0 && seconds < HUGE_VAL))
            throw error(what + " has time " + number_text(seconds) +
                        "; a time must be finite and >= 0");
        if (index >= emitted_count)
            throw error(what + " has not been emitted (" + std::to_string(emitted_count) +
                        " batches so far)");
        if (emitted_count - index > m_horizon)
            throw error(what + " is older than the calibration horizon of " +
                        std::to_string(m_horizon) + " batches (" + std::to_string(emitted_count) +
                        " emitted); raise options::calibration.horizon");
        throw error(what + " was already observed");
    }

    [[nodiscard]] std::uint64_t first_kept(std::uint64_t emitted_count) const noexcept {
        return emitted_count - std::min<std::uint64_t>(emitted_count, m_horizon);
    }

    cost_fit<N> m_fit;
    std::size_t m_horizon;
    bool m_padded;
    std::vector<vec> m_batch_sums;            // this round's batches, by emission position
    std::vector<double> m_batch_top;          // padded: the costliest record's cost so far
    std::vector<std::uint32_t> m_batch_count; // records per batch
    double m_top_cost = -1.0;                 // the round's costliest record so far
    vec m_top_features{};                     // and its features
    double m_bottom_cost = HUGE_VAL;          // the round's cheapest record so far
    vec m_bottom_features{};                  // and its features
    std::vector<vec> m_ring_sums;             // emitted batch i at i % horizon
    std::vector<std::uint8_t> m_ring_state;   // 0 never used, then awaiting or observed
};

/// The calibration of a balancer whose estimator gives `Features` features per record: a
/// batch_calibration, or no_calibration for none.
template <std::size_t Features>
using calibration_for =
    std::conditional_t<Features == 0, no_calibration, batch_calibration<Features>>;

/// The calibration a balancer with these options starts from: the estimator's prior.
template <std::size_t Features, class Estimator>
[[nodiscard]] calibration_for<Features> make_calibration(const options& opt,
                                                         const Estimator& estimator) {
    if constexpr (Features == 0)
        return {};
    else
        return calibration_for<Features>(opt, estimator.prior());
}

} // namespace bcl::detail
