#pragma once
// Bad input (input_error) and the parsing helpers of the `name:key=value,...` specs.

#include "length_file.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstddef>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>

namespace bcl_sim {

/// Bad input to the simulator: a flag value, a distribution or cost spec, a workload file. The
/// command-line tool reports it and exits with code 2.
class input_error : public std::runtime_error {
public:
    explicit input_error(const std::string& what) : std::runtime_error(what) {}
};

// The pieces of the `name:key=value,...` specs (--dist, --cost) and of other flag values.
namespace detail {

/// `s` without the spaces, tabs, carriage returns and newlines around it.
[[nodiscard]] inline std::string_view trim(std::string_view s) noexcept {
    return bcl_tools::detail::trim_line(s);
}

/// Parses all of `text` as a finite double; nothing else is accepted.
[[nodiscard]] inline std::optional<double> parse_number(std::string_view text) noexcept {
    double value = 0.0;
    const char* end = text.data() + text.size();
    const auto [ptr, ec] = std::from_chars(text.data(), end, value);
    if (text.empty() || ec != std::errc{} || ptr != end || !std::isfinite(value))
        return std::nullopt;
    return value;
}

struct param {
    std::string_view key;
    double* value;
};

/// Parses `key=value,key=value` into the named fields; unknown keys and bad numbers throw.
inline void parse_params(std::string_view what, std::string_view list,
                         std::span<const param> params) {
    std::string expected;
    for (const param& p : params) {
        if (!expected.empty()) expected += ", ";
        expected += p.key;
    }
    while (!list.empty()) {
        const std::size_t comma = list.find(',');
        const std::string_view item = list.substr(0, comma);
        list = comma == std::string_view::npos ? std::string_view{} : list.substr(comma + 1);
        const std::size_t eq = item.find('=');
        if (eq == std::string_view::npos)
            throw input_error(fmt::format("{}: '{}' is not of the form key=value (keys: {})", what,
                                          item, expected));
        const std::string_view key = trim(item.substr(0, eq));
        const std::string_view text = trim(item.substr(eq + 1));
        const auto it = std::find_if(params.begin(), params.end(),
                                     [&](const param& p) { return p.key == key; });
        if (it == params.end())
            throw input_error(
                fmt::format("{}: unknown parameter '{}' (expected {})", what, key, expected));
        const std::optional<double> value = parse_number(text);
        if (!value)
            throw input_error(
                fmt::format("{}: parameter {} = '{}' is not a finite number", what, key, text));
        *it->value = *value;
    }
}

inline void require(bool ok, std::string_view what, std::string_view rule) {
    if (!ok) throw input_error(fmt::format("{}: {}", what, rule));
}

} // namespace detail

} // namespace bcl_sim
