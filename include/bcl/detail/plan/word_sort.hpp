#pragma once
// Internal: sorting 64-bit words whose low bits are already in order, by a stable LSD radix sort.

#include <bcl/detail/config.hpp>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace bcl::detail::plan {

/// Sorts words ascending, where each word is a key above `low_bits` bits that the caller has
/// already put in ascending order (an index or a pack id, written in that order). The global
/// plan packs (key, index) into one word this way, so a sort of plain integers, all distinct, is
/// the strict total order "key, then index": any correct sort gives the same result, and this
/// one is a stable LSD radix sort over the key's bytes only. Bytes that every word shares are
/// skipped (their histogram has one full bucket), so small keys take few passes. Windows of at
/// most 256 words go to std::sort (the words are distinct, so the order is the same).
///
/// O(n) per pass, at most ceil((64 - low_bits) / 8) passes; the scratch is kept, so once it has
/// seen its largest input it allocates nothing.
class word_sort {
public:
    void operator()(std::span<std::uint64_t> words, unsigned low_bits) {
        const std::size_t n = words.size();
        if (n <= small) {
            std::sort(words.begin(), words.end());
            return;
        }
        m_tmp.resize(n);
        // One pass over the words counts every digit's histogram.
        const unsigned digits = (64 - low_bits + 7) / 8;
        for (unsigned d = 0; d < digits; ++d) m_count[d].fill(0);
        for (const std::uint64_t w : words)
            for (unsigned d = 0; d < digits; ++d) ++m_count[d][digit(w, low_bits, d)];
        std::uint64_t* from = words.data();
        std::uint64_t* to = m_tmp.data();
        for (unsigned d = 0; d < digits; ++d) {
            std::array<std::size_t, 256>& count = m_count[d];
            if (count[digit(from[0], low_bits, d)] == n) continue; // one bucket: nothing moves
            std::size_t sum = 0;
            for (std::size_t& c : count) {
                const std::size_t here = c;
                c = sum;
                sum += here;
            }
            for (std::size_t i = 0; i < n; ++i) to[count[digit(from[i], low_bits, d)]++] = from[i];
            std::swap(from, to);
        }
        if (from != words.data()) std::copy(from, from + n, words.data());
    }

    /// Sizes the scratch for n words now.
    void reserve(std::size_t n) { m_tmp.reserve(n); }

private:
    static constexpr std::size_t small = 256;

    [[nodiscard]] static std::size_t digit(std::uint64_t w, unsigned low_bits,
                                           unsigned d) noexcept {
        const unsigned shift = low_bits + 8 * d;
        return static_cast<std::size_t>((w >> shift) & 0xffU);
    }

    std::vector<std::uint64_t> m_tmp;
    std::array<std::array<std::size_t, 256>, 8> m_count{};
};

} // namespace bcl::detail::plan
