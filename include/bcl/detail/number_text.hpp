#pragma once
// Numbers in error messages: the shortest text that reads back as the same double.

#include <bcl/detail/config.hpp>

#include <charconv>
#include <string>

namespace bcl::detail {

[[nodiscard]] inline std::string number_text(double x) {
    char text[32];
    const auto written = std::to_chars(text, text + sizeof text, x);
    return std::string(text, written.ptr);
}

} // namespace bcl::detail
