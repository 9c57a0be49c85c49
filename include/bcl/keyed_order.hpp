#pragma once
// An epoch's order of the dataset indices as a keyed bijection over [0, N): the index at any
// position computed on its own from (seed, epoch), so that an epoch of a billion records is
// drawn window by window and never stored, the same on every rank, platform and language.

#include <bcl/detail/config.hpp>

#include <bcl/detail/random.hpp>

#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <span>
#include <type_traits>

namespace bcl {

/// A keyed permutation of [0, n): position p holds the index at(p). How: a Feistel network over
/// the w-bit words (w = bit_width(n - 1), at least 2), cut into halves of floor(w/2) and
/// ceil(w/2) bits, six rounds, each round's function SplitMix64's finalizer of the half and a
/// round key drawn from (seed, epoch); cycle walking keeps it in [0, n): a word at or above n
/// passes through the network again until it lands below n (fewer than 2^w / n passes on
/// average, 2 at most but for n < 4, and every pass a bijection of the words, so the walk is a
/// bijection of [0, n)). Integer operations only: the same order everywhere. O(1) memory; at()
/// costs a few tens of nanoseconds.
class keyed_order {
public:
    static constexpr std::size_t rounds = 6;

    /// The order of epoch `epoch` of a dataset of `n` indices, keyed by `seed`.
    constexpr keyed_order(std::uint64_t n, std::uint64_t seed, std::uint64_t epoch) noexcept
        : m_size(n) {
        const auto width = static_cast<unsigned>(n <= 4 ? 2 : std::bit_width(n - 1));
        m_left_bits = width / 2;
        m_right_bits = width - m_left_bits;
        // A stream of round keys of its own for each (seed, epoch), apart from the shuffles'.
        detail::splitmix64 keys(detail::mix64(seed ^ 0x6b657965646f7264ULL) ^
                                detail::mix64(epoch + 0x9e3779b97f4a7c15ULL));
        for (std::uint64_t& k : m_keys) k = keys.next();
    }

    /// N, the indices ordered.
    [[nodiscard]] constexpr std::uint64_t size() const noexcept { return m_size; }

    /// The index at position `p` (below size()).
    [[nodiscard]] constexpr std::uint64_t at(std::uint64_t p) const noexcept {
        std::uint64_t x = permute(p);
        while (x >= m_size) x = permute(x);
        return x;
    }

    /// out[k] = at(first + k) for each k (first + out.size() at most size()).
    template <class Index>
    constexpr void fill(std::uint64_t first, std::span<Index> out) const noexcept {
        static_assert(std::is_integral_v<Index>, "dataset indices are integers");
        for (std::size_t k = 0; k < out.size(); ++k) out[k] = static_cast<Index>(at(first + k));
    }

private:
    // One pass of the network over a w-bit word: each round the right half's function, cut to
    // the left half's width, goes into the left half, and the halves trade places (their widths
    // too; after an even number of rounds they are back).
    [[nodiscard]] constexpr std::uint64_t permute(std::uint64_t word) const noexcept {
        unsigned left_bits = m_left_bits;
        unsigned right_bits = m_right_bits;
        std::uint64_t left = word >> right_bits;
        std::uint64_t right = word & ((std::uint64_t{1} << right_bits) - 1);
        for (const std::uint64_t key : m_keys) {
            const std::uint64_t mixed = detail::mix64(right ^ key) >> (64 - left_bits);
            const std::uint64_t next_left = right;
            right = left ^ mixed;
            left = next_left;
            const unsigned bits = left_bits;
            left_bits = right_bits;
            right_bits = bits;
        }
        return (left << right_bits) | right;
    }

    std::uint64_t m_size;
    unsigned m_left_bits = 1;
    unsigned m_right_bits = 1;
    std::array<std::uint64_t, rounds> m_keys{};
};

} // namespace bcl
