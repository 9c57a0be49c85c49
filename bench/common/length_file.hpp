#pragma once
// The one reader of length files (bench/workloads/*.txt and any file of that form): bcl-sim,
// bcl-mpi-bench, bcl-bench, bcl-torch-train and the examples all read them through it, so a
// file is accepted or refused alike everywhere, with the same message. Standard library only.

#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

namespace bcl_tools {

/// A length file that cannot be read, or holds a line that is not a length.
class length_file_error : public std::runtime_error {
public:
    explicit length_file_error(const std::string& what) : std::runtime_error(what) {}
};

/// The largest length a file may hold: 2^31 tokens.
inline constexpr std::uint64_t max_file_length = std::uint64_t{1} << 31U;

namespace detail {

[[nodiscard]] inline std::string_view trim_line(std::string_view s) noexcept {
    const auto space = [](char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; };
    while (!s.empty() && space(s.front())) s.remove_prefix(1);
    while (!s.empty() && space(s.back())) s.remove_suffix(1);
    return s;
}

/// `text` as a decimal number, if it is one: digits, a sign, a point and an exponent only (no
/// hexadecimal, inf or nan), all of it read, finite.
[[nodiscard]] inline bool decimal_number(std::string_view text, double& value) {
    for (const char c : text)
        if ((c < '0' || c > '9') && c != '+' && c != '-' && c != '.' && c != 'e' && c != 'E')
            return false;
    // strtod rather than std::from_chars for doubles, which libc++ 16 lacks.
    const std::string copy(text);
    char* end = nullptr;
    value = std::strtod(copy.c_str(), &end);
    return !copy.empty() && end == copy.c_str() + copy.size() && std::isfinite(value);
}

} // namespace detail

/// The lengths in the file at `path`, in file order: one per line, spaces, tabs and a carriage
/// return around it ignored, blank lines skipped. A length is a whole number from 0 to
/// max_file_length, written as a number ("1000", "1e3" and "1000.0" are all 1000). Throws
/// length_file_error naming the file, and for a bad line its number and text, for a file that
/// cannot be opened or read, a line that is not a number, a negative, fractional or too large
/// length, or a file without any length: a fraction or a runaway exponent in a file is reported,
/// not rounded.
[[nodiscard]] inline std::vector<std::uint64_t> read_length_file(const std::string& path) {
    std::ifstream in(path);
    if (!in) throw length_file_error(path + ": cannot open the file");
    std::vector<std::uint64_t> lengths;
    std::string line;
    for (std::size_t number = 1; std::getline(in, line); ++number) {
        const std::string_view text = detail::trim_line(line);
        if (text.empty()) continue;
        const std::string where = path + ":" + std::to_string(number) + ": ";
        std::uint64_t whole = 0;
        const char* end = text.data() + text.size();
        if (const auto [stop, ec] = std::from_chars(text.data(), end, whole);
            ec == std::errc{} && stop == end && whole <= max_file_length) {
            lengths.push_back(whole);
            continue;
        }
        double value = 0.0;
        if (!detail::decimal_number(text, value))
            throw length_file_error(where + "'" + std::string(text) +
                                    "' is not a number (expected one length per line)");
        if (value < 0)
            throw length_file_error(where + "negative length " + std::string(text) +
                                    " (lengths must be >= 0)");
        if (value != std::floor(value) || value > static_cast<double>(max_file_length))
            throw length_file_error(
                where + "length " + std::string(text) + " is " +
                (value > static_cast<double>(max_file_length) ? "above 2^31"
                                                              : "not a whole number") +
                "; a length is a token count, a whole number from 0 to 2^31 = " +
                std::to_string(max_file_length));
        lengths.push_back(static_cast<std::uint64_t>(value));
    }
    if (in.bad()) throw length_file_error(path + ": read error");
    if (lengths.empty()) throw length_file_error(path + ": no lengths in the file");
    return lengths;
}

} // namespace bcl_tools
