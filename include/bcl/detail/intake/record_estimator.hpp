#pragma once
// Estimating one record: its cost and memory, checked, capped (or truncated), and the budget.

#include <bcl/detail/config.hpp>

#include <bcl/calibrated_cost.hpp>
#include <bcl/cost_check.hpp>
#include <bcl/cost_estimator.hpp>
#include <bcl/detail/intake/outlier_cap.hpp>
#include <bcl/detail/number_text.hpp>
#include <bcl/error.hpp>
#include <bcl/options.hpp>
#include <bcl/record_model.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>

namespace bcl::detail {

/// What balancing needs of a record, from the user's estimator.
struct record_estimate {
    double cost;     ///< what balancing uses: capped when the record was capped
    double memory;   ///< 0 without a memory estimator
    double uncapped; ///< the first estimate, which feeds a quantile cap
    double cap;      ///< the cap in force for this record (+infinity for none)
    bool capped;
};

/// Owns the user's estimator and turns a record into a record_estimate. Every value the estimator
/// returns is checked: NaN, negative or above bcl::max_estimate is a bcl::error naming the record
/// position and the value; so is a record whose memory alone is over the budget (B times its
/// memory under padded batching, where it is padded to the batch's largest). Changes nothing but
/// (under a truncating cap) the record itself, so a throw leaves the balancer as it was.
template <class Record, class Estimator>
class record_estimator {
public:
    static constexpr bool tracks_memory = memory_estimator<Estimator, Record>;
    static constexpr bool truncating = truncating_estimator<Estimator, Record>;
    static constexpr bool calibrating = calibratable_estimator<Estimator, Record>;
    /// Features a calibrating estimator gives each record (0 otherwise).
    static constexpr std::size_t feature_count = [] {
        if constexpr (calibrating)
            return Estimator::feature_count;
        else
            return std::size_t{0};
    }();
    using features_type = std::array<double, feature_count>;

    /// Throws bcl::error if the options ask for what the estimator cannot do.
    record_estimator(Estimator estimator, const options& opt)
        : m_estimator(std::move(estimator)), m_budget(opt.memory_budget),
          m_padding(opt.batching == batch_cost::padded ? static_cast<double>(opt.batch_size) : 1.0),
          m_truncate(opt.cap.kind != cap_kind::none && opt.cap.action == cap_action::truncate),
          m_cost_only(!tracks_memory && opt.cap.kind == cap_kind::none &&
                      opt.memory_budget <= 0.0) {
        if (m_truncate && !truncating)
            throw error("bcl::options::cap.action is truncate, but the estimator has no "
                        "truncate(record, cap); attach one with bcl::with_truncation");
        if (m_budget > 0.0 && !tracks_memory)
            throw error("bcl::options::memory_budget is set, but the estimator has no "
                        "memory(record); attach one with bcl::with_memory");
    }

    /// A calibrating estimator: the features of the record estimated last, the coefficients in
    /// force, and the prior.
    [[nodiscard]] const features_type& last_features() const noexcept { return m_features; }
    [[nodiscard]] features_type coefficients() const requires calibrating {
        return m_estimator.coefficients();
    }
    [[nodiscard]] features_type prior() const requires calibrating { return m_estimator.prior(); }
    void set_coefficients(const features_type& c) requires calibrating {
        m_estimator.set_coefficients(c);
    }
    /// The checked features of a record (restoring a state recomputes those of held records).
    /// Only the features are checked: the record's cost under today's coefficients may be above
    /// bcl::max_estimate (its estimate in the buffer is then capped there), as it was accepted
    /// under the coefficients in force when it was pushed.
    [[nodiscard]] features_type features_of(const Record& r,
                                            std::uint64_t position) requires calibrating {
        features_type x = m_estimator.features(r);
        check_features(x, position);
        return x;
    }

    /// Record `position` (the count of records accepted before it), under `cap`.
    record_estimate operator()(Record& r, const outlier_cap& cap, std::uint64_t position) {
        record_estimate e{checked_cost(r, position), 0.0, 0.0, HUGE_VAL, false};
        e.uncapped = e.cost;
        if (m_cost_only) [[likely]]
            return e; // no cap, no memory: the estimate is the cost, and nothing else is looked at
        e.cap = cap.current();
        if (e.cost > e.cap) {
            e.capped = true;
            if constexpr (truncating) {
                if (m_truncate) {
                    m_estimator.truncate(r, e.cap);
                    e.cost = checked_cost(r, position);
                }
            }
            e.cost = std::min(e.cost, e.cap);
        }
        e.memory = checked_memory(r, position);
        if (m_budget > 0.0 && e.memory * m_padding > m_budget) [[unlikely]]
            throw_over_budget(e.memory, position);
        return e;
    }

private:
    // The throws live in their own functions so the per-record path stays small.
    [[noreturn]] void throw_over_budget(double memory, std::uint64_t position) const {
        throw error("bcl::balancer: record " + std::to_string(position) + " alone needs memory " +
                    number_text(memory) +
                    (m_padding > 1.0 ? ", padded to a batch of " + number_text(m_padding) +
                                           " records " + number_text(memory * m_padding)
                                     : std::string()) +
                    ", over the batch budget of " + number_text(m_budget));
    }

    [[noreturn]] static void throw_bad(const std::string& what, double value,
                                       std::uint64_t position) {
        throw_invalid_cost(
            "bcl::balancer: record " + std::to_string(position) + " has " + what + " ", value);
    }

    static void check_features(const features_type& x, std::uint64_t position) {
        for (std::size_t j = 0; j < feature_count; ++j)
            if (!valid_cost(x[j])) [[unlikely]]
                throw_bad("feature " + std::to_string(j), x[j], position);
    }

    double checked_cost(const Record& r, std::uint64_t position) {
        double cost = 0.0;
        if constexpr (calibrating) {
            // The cost from the features, so each record's features are read once.
            m_features = m_estimator.features(r);
            check_features(m_features, position);
            const features_type c = m_estimator.coefficients();
            for (std::size_t j = 0; j < feature_count; ++j) cost += c[j] * m_features[j];
        } else {
            cost = static_cast<double>(std::invoke(m_estimator, r));
        }
        if (valid_cost(cost)) [[likely]]
            return cost;
        throw_bad("cost estimate", cost, position);
    }

    double checked_memory(const Record& r, std::uint64_t position) {
        if constexpr (tracks_memory) {
            const auto memory = static_cast<double>(m_estimator.memory(r));
            if (valid_cost(memory)) [[likely]]
                return memory;
            throw_bad("memory estimate", memory, position);
        } else {
            (void)r;
            (void)position;
            return 0.0;
        }
    }

    Estimator m_estimator;
    features_type m_features{}; // a calibrating estimator's features of the last record
    double m_budget;
    double m_padding; // B under padded batching (a record's memory counts B times), else 1
    bool m_truncate;
    bool m_cost_only; // no cap and no memory estimate: only the cost is estimated
};

} // namespace bcl::detail
