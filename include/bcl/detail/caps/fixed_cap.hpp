#pragma once
// The cap kind cap_kind::fixed: cap_options::value, for every record.

#include <bcl/detail/config.hpp>

#include <bcl/detail/number_text.hpp>
#include <bcl/error.hpp>
#include <bcl/options.hpp>

#include <cmath>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace bcl::detail {

/// A fixed cap (see no_cap for what a cap kind provides).
class fixed_cap {
public:
    static constexpr std::string_view name = "fixed"; ///< cap_kind's spelling

    explicit fixed_cap(const cap_options& cap) noexcept : m_value(cap.value) {}

    static void validate(const cap_options& cap) {
        if (!(cap.value > 0.0 && cap.value < HUGE_VAL))
            throw error("bcl::options::cap.value must be finite and > 0 for a fixed cap (got " +
                        number_text(cap.value) + ")");
    }
    [[nodiscard]] double current() const noexcept { return m_value; }
    static void add(double /*uncapped*/, double /*cap*/) noexcept {}
    [[nodiscard]] static bool settled() noexcept { return true; }
    [[nodiscard]] static std::uint64_t sketched(std::uint64_t /*records*/) noexcept { return 0; }
    [[nodiscard]] double stream_level(std::span<const double> /*costs*/) const noexcept {
        return m_value;
    }

private:
    double m_value;
};

} // namespace bcl::detail
