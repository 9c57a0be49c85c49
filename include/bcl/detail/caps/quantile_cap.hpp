#pragma once
// The cap kind cap_kind::quantile: a quantile of the estimates seen so far, read from a streaming
// sketch.

#include <bcl/detail/config.hpp>

#include <bcl/detail/caps/quantile_sketch.hpp>
#include <bcl/detail/number_text.hpp>
#include <bcl/detail/saved_part.hpp>
#include <bcl/error.hpp>
#include <bcl/options.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace bcl::detail {

/// A quantile cap (see no_cap for what a cap kind provides): its prior during the warm-up
/// (+infinity without one), then the quantile of every uncapped estimate added so far, read when
/// the warm-up ends and then every `refresh` records: a read walks the sketch's buckets, and a
/// p99 moves slowly anyway. Reading the cap changes nothing; add() records what a record brought,
/// so a record that is then rejected leaves the cap as it was.
class quantile_cap {
public:
    static constexpr std::string_view name = "quantile"; ///< cap_kind's spelling
    static constexpr std::uint64_t refresh = 64;

    explicit quantile_cap(const cap_options& cap) noexcept
        : m_quantile(cap.quantile), m_warmup(cap_warmup(cap)),
          m_prior(cap.prior > 0.0 ? cap.prior : HUGE_VAL) {}

    static void validate(const cap_options& cap) {
        if (!(cap.quantile > 0.0 && cap.quantile < 1.0))
            throw error("bcl::options::cap.quantile must be in (0, 1) (got " +
                        number_text(cap.quantile) + ")");
        if (!(cap.prior >= 0.0 && cap.prior < HUGE_VAL))
            throw error("bcl::options::cap.prior must be finite and >= 0 (got " +
                        number_text(cap.prior) + ")");
    }

    [[nodiscard]] double current() const noexcept {
        const std::uint64_t seen = m_sketch.count();
        if (seen < m_warmup) return m_prior;
        if (seen == m_warmup || (seen - m_warmup) % refresh == 0)
            return m_sketch.quantile(m_quantile);
        return m_last;
    }
    void add(double uncapped, double cap) noexcept {
        m_last = cap;
        m_sketch.add(uncapped);
    }
    /// Settled once a cap is in force: the records of the warm-up are not what later rounds hold.
    [[nodiscard]] bool settled() const noexcept { return current() < HUGE_VAL; }
    /// Every record of every epoch went through the sketch.
    [[nodiscard]] static std::uint64_t sketched(std::uint64_t records) noexcept { return records; }
    /// The exact nearest-rank quantile of `costs`: the value of rank ceil(q * n), 1-based. The
    /// sketch reads rank floor(q * (n - 1)), 0-based, which can be one rank lower (q = 0.995,
    /// n = 100: the 99th value against the 100th), so its estimate is within 1% of this value
    /// or of its neighbour below.
    [[nodiscard]] double stream_level(std::span<const double> costs) const {
        std::vector<double> sorted(costs.begin(), costs.end());
        const auto n = static_cast<double>(sorted.size());
        const auto rank = std::clamp<std::size_t>(
            static_cast<std::size_t>(std::ceil(m_quantile * n)), 1, sorted.size());
        const auto at = sorted.begin() + static_cast<std::ptrdiff_t>(rank - 1);
        std::nth_element(sorted.begin(), at, sorted.end());
        return *at;
    }

    [[nodiscard]] const quantile_sketch& sketch() const noexcept { return m_sketch; }
    [[nodiscard]] double last() const noexcept { return m_last; }

    /// Its part of a saved state: the cap last read and the sketch.
    struct saved {
        double quantile_cap = HUGE_VAL; // the cap in force (infinite before the warm-up ends)
        quantile_sketch sketch;

        template <class Io, class Part>
        static void fields(Io& io, Part& s) {
            io.field("the quantile cap", s.quantile_cap);
            io.field("the quantile sketch", s.sketch);
        }
        /// Whether the sketch holds as many estimates as records went through it is the
        /// snapshot's to check (the cap kind in force, the records of every epoch).
        void check() const { check_saved(quantile_cap >= 0.0, "an invalid quantile cap"); }
    };
    void save_into(saved& s) const {
        s.sketch = m_sketch;
        s.quantile_cap = m_last;
    }
    void restore_from(const saved& s) noexcept {
        m_sketch = s.sketch;
        m_last = s.quantile_cap;
    }

private:
    double m_quantile;
    std::uint64_t m_warmup;
    double m_prior;           // the cap during the warm-up
    quantile_sketch m_sketch; // every uncapped estimate
    double m_last = HUGE_VAL; // the cap last read
};

} // namespace bcl::detail
