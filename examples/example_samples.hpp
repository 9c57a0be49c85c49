#pragma once
// The length files the examples read: one token count per line, as in bench/workloads/, read by
// the one reader the tools share (bench/common/length_file.hpp). Each example turns the counts
// into its own records.

#include "length_file.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace bcl_examples {

/// The token counts in the file at `path`, in file order, each a whole number up to `max` (an
/// example's record may hold its tokens). Throws std::runtime_error (bcl_tools::length_file_error)
/// with one line naming the file, and the line number and text of the first line that is not a
/// length; also for a file that cannot be opened or holds no lengths, or a length above `max`.
inline std::vector<std::size_t> read_token_counts(const std::string& path,
                                                  std::uint64_t max = std::uint64_t{1} << 24U) {
    const std::vector<std::uint64_t> read = bcl_tools::read_length_file(path);
    const auto longest = std::max_element(read.begin(), read.end());
    if (*longest > max)
        throw bcl_tools::length_file_error(path + ": length number " +
                                           std::to_string(longest - read.begin() + 1) + " is " +
                                           std::to_string(*longest) + " tokens, more than the " +
                                           std::to_string(max) + " this example's records hold");
    return {read.begin(), read.end()};
}

/// A record's images by its position, from a fixed hash (the same on every platform): 30% text
/// alone, 55% one image, 15% three; 64 to 8192 patches an image. The vision-language examples
/// give the records of a length file these.
inline std::vector<std::uint32_t> images_of(std::uint64_t i) {
    std::uint64_t h = (i + 1) * 0x9E3779B97F4A7C15ULL;
    h ^= h >> 31;
    const std::uint64_t share = h % 100;
    const std::size_t count = share < 30 ? 0 : (share < 85 ? 1 : 3);
    std::vector<std::uint32_t> patches;
    for (std::size_t k = 0; k < count; ++k)
        patches.push_back(static_cast<std::uint32_t>(64 + (h >> (8 + 13 * k)) % 8129));
    return patches;
}

} // namespace bcl_examples
