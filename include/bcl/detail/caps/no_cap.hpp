#pragma once
// The cap kind cap_kind::none: no record is capped.

#include <bcl/detail/config.hpp>

#include <bcl/options.hpp>

#include <cmath>
#include <cstdint>
#include <span>
#include <string_view>

namespace bcl::detail {

/// A cap kind is a component constructible from cap_options with: its `name` (how tools and
/// bindings spell it), validate(cap) (a bcl::error
/// naming the field of its own that is out of range), current() (the cap for the next record,
/// +infinity for none), add(uncapped, cap) (a record was accepted), settled() (the cap is what
/// later records will see: the heavy slots learn only then), sketched(records) (how many
/// estimates a saved quantile sketch must hold), stream_level(costs) (the cap a whole stream of
/// known costs would be clipped at, for bcl::stream_mean_cost); and, only if it keeps state, its
/// part of a saved state (`saved`, with its fields, as quantile_cap's) and save_into /
/// restore_from. cap_kinds.hpp lists them.
struct no_cap {
    static constexpr std::string_view name = "none"; ///< cap_kind's spelling (bcl::cap_kind_names)

    no_cap() = default;
    explicit no_cap(const cap_options& /*cap*/) noexcept {}
    static void validate(const cap_options& /*cap*/) noexcept {}
    [[nodiscard]] static double current() noexcept { return HUGE_VAL; }
    static void add(double /*uncapped*/, double /*cap*/) noexcept {}
    [[nodiscard]] static bool settled() noexcept { return true; }
    [[nodiscard]] static std::uint64_t sketched(std::uint64_t /*records*/) noexcept { return 0; }
    [[nodiscard]] static double stream_level(std::span<const double> /*costs*/) noexcept {
        return HUGE_VAL;
    }
};

} // namespace bcl::detail
