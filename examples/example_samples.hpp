#pragma once
// The lengths files that examples 03 and 04 read: one token count per line, as in
// bench/workloads/. Each example turns the counts into its own records.

#include <charconv>
#include <cstddef>
#include <fstream>
#include <stdexcept>
#include <string>
#include <system_error>
#include <vector>

namespace bcl_examples {

/// The token counts in the file at `path`, in file order: one per line, each a whole number up
/// to 2^24 (an example's record may hold its tokens). Throws std::runtime_error with one line
/// naming the file, and the line number and text of the first line that is not such a number;
/// also for a file that cannot be opened or holds no lines.
inline std::vector<std::size_t> read_token_counts(const std::string& path) {
    std::ifstream in(path);
    if (!in) throw std::runtime_error(path + ": cannot open the file");
    std::vector<std::size_t> counts;
    std::string line;
    for (int number = 1; std::getline(in, line); ++number) {
        std::size_t length = 0;
        const char* end = line.data() + line.size();
        const auto [stop, error] = std::from_chars(line.data(), end, length);
        if (error != std::errc{} || stop != end || length > (std::size_t{1} << 24))
            throw std::runtime_error(path + ":" + std::to_string(number) + ": '" + line +
                                     "' is not a token count (a whole number up to 2^24)");
        counts.push_back(length);
    }
    if (counts.empty()) throw std::runtime_error(path + ": no lengths in the file");
    return counts;
}

} // namespace bcl_examples
