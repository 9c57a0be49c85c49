#pragma once
// The outlier cap: the largest estimate a record may bring to balancing, of the kind
// options::cap names (detail/caps/: none, fixed, quantile).

#include <bcl/detail/config.hpp>

#include <bcl/detail/caps/cap_kinds.hpp>
#include <bcl/detail/caps/quantile_sketch.hpp>
#include <bcl/detail/saved_part.hpp>
#include <bcl/detail/variant_of.hpp>
#include <bcl/options.hpp>

#include <cstdint>
#include <type_traits>
#include <variant>

namespace bcl::detail {

/// The cap in force for each record in turn (options::cap), from its kind's component. Reading
/// the cap changes nothing; add() records what a record brought, so a record that is then
/// rejected leaves the cap as it was.
///
/// The simulator's baselines truncate their records by this same rule, so that every policy runs
/// on the same records.
class outlier_cap {
public:
    static constexpr std::uint64_t refresh = quantile_cap::refresh;

    /// `cap` valid (bcl::validate).
    explicit outlier_cap(const cap_options& cap) : m_kind(make_cap_kind(cap)) {}

    /// The cap for the next record: +infinity for none (yet).
    [[nodiscard]] double current() const noexcept {
        return visit_held(m_kind, [](const auto& kind) { return kind.current(); });
    }

    /// A record was accepted: its uncapped estimate, and the cap current() gave for it.
    void add(double uncapped, double cap) noexcept {
        visit_held(m_kind, [&](auto& kind) { kind.add(uncapped, cap); });
    }

    /// Whether the cap in force is the one later records will see (the heavy slots learn only
    /// then): always, but for a quantile cap still in its warm-up without a prior.
    [[nodiscard]] bool settled() const noexcept {
        return visit_held(m_kind, [](const auto& kind) { return kind.settled(); });
    }

    /// A quantile cap's sketch (an empty one for the other kinds, which sketch nothing).
    [[nodiscard]] const quantile_sketch& sketch() const noexcept {
        static const quantile_sketch none;
        const auto* quantile = std::get_if<quantile_cap>(&m_kind);
        return quantile != nullptr ? quantile->sketch() : none;
    }

    /// Its part of a saved state: every cap kind's (cap_kinds_part), of which the kind in force
    /// writes and reads its own.
    using saved = cap_kinds_saved;
    void save_into(saved& s) const {
        visit_held(m_kind, [&](const auto& kind) {
            if constexpr (keeps_state<std::remove_cvref_t<decltype(kind)>>) kind.save_into(s);
        });
    }
    void restore_from(const saved& s) noexcept {
        visit_held(m_kind, [&](auto& kind) {
            if constexpr (keeps_state<std::remove_cvref_t<decltype(kind)>>) kind.restore_from(s);
        });
    }

private:
    cap_kinds m_kind;
};

} // namespace bcl::detail
