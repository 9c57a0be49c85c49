#pragma once
// A small, fully specified random generator, so a seed gives the same batches on every platform
// (std::shuffle and std::uniform_int_distribution are implementation-defined).

#include <bcl/detail/config.hpp>

#include <cstddef>
#include <cstdint>
#include <utility>

namespace bcl::detail {

/// SplitMix64's output function (its finalizer): a bijection of 64 bits in which every input bit
/// moves about half of the output bits. The plans' digests and the generator below share it.
[[nodiscard]] constexpr std::uint64_t mix64(std::uint64_t z) noexcept {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/// SplitMix64 (Steele, Lea and Flood, 2014): one 64-bit word of state, passes BigCrush.
class splitmix64 {
public:
    explicit constexpr splitmix64(std::uint64_t seed) noexcept : m_state(seed) {}

    constexpr std::uint64_t next() noexcept { return mix64(m_state += 0x9e3779b97f4a7c15ULL); }

    /// Uniform in [0, bound) for bound >= 1, by rejection so no value is favoured.
    constexpr std::uint64_t below(std::uint64_t bound) noexcept {
        const std::uint64_t limit = -bound % bound; // 2^64 mod bound
        for (;;) {
            const std::uint64_t x = next();
            if (x >= limit) return x % bound;
        }
    }

    [[nodiscard]] constexpr std::uint64_t state() const noexcept { return m_state; }

private:
    std::uint64_t m_state;
};

/// Fisher-Yates shuffle of [first, first + n) driven by `rng`.
template <class T>
constexpr void shuffle(T* first, std::size_t n, splitmix64& rng) noexcept {
    for (std::size_t i = n; i > 1; --i) {
        const auto j = static_cast<std::size_t>(rng.below(i));
        std::swap(first[i - 1], first[j]);
    }
}

} // namespace bcl::detail
