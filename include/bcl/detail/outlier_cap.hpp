#pragma once
// The outlier cap: the largest estimate a record may bring to balancing, fixed or read from a
// streaming quantile of the estimates seen so far.

#include <bcl/detail/config.hpp>

#include <bcl/detail/quantile_sketch.hpp>
#include <bcl/options.hpp>

#include <cmath>
#include <cstdint>

namespace bcl::detail {

/// The cap in force for each record in turn (options::cap). A fixed cap is its value; a quantile
/// cap is its prior during its warm-up (+infinity without one), then the quantile of every
/// uncapped estimate added so far, read when the warm-up ends and then every `refresh` records: a
/// read walks the sketch's buckets, and a p99 moves slowly anyway. Reading the cap changes nothing;
/// add() records what a record brought, so a record that is then rejected leaves the cap as it was.
///
/// The simulator's baselines truncate their records by this same rule, so that every policy runs
/// on the same records.
class outlier_cap {
public:
    static constexpr std::uint64_t refresh = 64;

    explicit outlier_cap(const cap_options& cap)
        : m_cap(cap), m_warmup(cap_warmup(cap)), m_prior(cap.prior > 0.0 ? cap.prior : HUGE_VAL) {}

    /// The cap for the next record: +infinity for none (yet).
    [[nodiscard]] double current() const noexcept {
        if (m_cap.kind == cap_kind::fixed) return m_cap.value;
        if (m_cap.kind != cap_kind::quantile) return HUGE_VAL;
        const std::uint64_t seen = m_sketch.count();
        if (seen < m_warmup) return m_prior;
        if (seen == m_warmup || (seen - m_warmup) % refresh == 0)
            return m_sketch.quantile(m_cap.quantile);
        return m_last;
    }

    /// A record was accepted: its uncapped estimate, and the cap current() gave for it.
    void add(double uncapped, double cap) noexcept {
        if (m_cap.kind != cap_kind::quantile) return;
        m_last = cap;
        m_sketch.add(uncapped);
    }

    /// What a saved state holds of it.
    [[nodiscard]] const quantile_sketch& sketch() const noexcept { return m_sketch; }
    [[nodiscard]] double last() const noexcept { return m_last; }
    void restore(const quantile_sketch& sketch, double last) noexcept {
        m_sketch = sketch;
        m_last = last;
    }

private:
    cap_options m_cap;
    std::uint64_t m_warmup;
    double m_prior;           // the cap during the warm-up
    quantile_sketch m_sketch; // every uncapped estimate, for a quantile cap
    double m_last = HUGE_VAL; // the quantile cap last read
};

} // namespace bcl::detail
