#pragma once
// The simulator's random numbers: SplitMix64, stream keys by domain, shuffles, normals.

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>
#include <utility>

namespace bcl_sim {

// ---------------------------------------------------------------------------------------------
// Random numbers: fully specified, so a seed gives the same run on every platform.
// ---------------------------------------------------------------------------------------------

inline constexpr std::uint64_t golden_gamma = 0x9e3779b97f4a7c15ULL;

/// The SplitMix64 output function (Steele, Lea, Flood 2014): a bijection on 64-bit words.
[[nodiscard]] constexpr std::uint64_t mix64(std::uint64_t z) noexcept {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/// Domains keep the streams of different purposes apart even under the same seed.
enum class domain : std::uint64_t {
    synthetic = 1, ///< per-rank synthetic length streams
    file = 2,      ///< per-epoch shuffles of a workload file
    pilot = 3,     ///< the sample that estimates a synthetic distribution's p99
    bcl = 4,       ///< per-rank seeds of bcl balancers
    timing = 6,    ///< per-rank noise of the batch times calibrating balancers observe
    stages = 7,    ///< stage mode's records (--stages) and OmniBal's shuffles there
};

/// Key of stream `index` of `dom` under `seed`. For a fixed seed and domain, distinct indices give
/// distinct keys (mix64 is a bijection).
[[nodiscard]] constexpr std::uint64_t stream_key(std::uint64_t seed, domain dom,
                                                 std::uint64_t index) noexcept {
    return mix64(mix64(seed ^ mix64(static_cast<std::uint64_t>(dom))) + index * golden_gamma);
}

/// Word `counter` of the stream keyed `key`: the counter-th output of SplitMix64 started at
/// `key`. Random access, so rank r's i-th record is computed without generating the ones before.
[[nodiscard]] constexpr std::uint64_t stream_word(std::uint64_t key,
                                                  std::uint64_t counter) noexcept {
    return mix64(key + (counter + 1) * golden_gamma);
}

/// Uniform in [0, 1) from the top 53 bits.
[[nodiscard]] constexpr double unit_interval(std::uint64_t w) noexcept {
    return static_cast<double>(w >> 11) * 0x1.0p-53;
}

/// Uniform in (0, 1] from the top 53 bits (safe to take the log of).
[[nodiscard]] constexpr double unit_interval_open0(std::uint64_t w) noexcept {
    return static_cast<double>((w >> 11) + 1) * 0x1.0p-53;
}

/// A sequential SplitMix64 generator for shuffles.
class splitmix {
public:
    explicit constexpr splitmix(std::uint64_t key) noexcept : m_state(key) {}
    constexpr std::uint64_t next() noexcept { return mix64(m_state += golden_gamma); }
    /// Uniform in [0, bound) for bound >= 1, by rejection so no value is favoured.
    constexpr std::uint64_t below(std::uint64_t bound) noexcept {
        const std::uint64_t limit = (std::uint64_t{0} - bound) % bound; // 2^64 mod bound
        for (;;) {
            const std::uint64_t x = next();
            if (x >= limit) return x % bound;
        }
    }

private:
    std::uint64_t m_state;
};

/// Fisher-Yates shuffle driven by `rng`.
template <class T>
void shuffle(std::span<T> items, splitmix& rng) noexcept {
    for (std::size_t i = items.size(); i > 1; --i) {
        const auto j = static_cast<std::size_t>(rng.below(i));
        std::swap(items[i - 1], items[j]);
    }
}

/// Standard normal by Box-Muller from two words.
[[nodiscard]] inline double standard_normal(std::uint64_t w1, std::uint64_t w2) noexcept {
    constexpr double two_pi = 6.283185307179586476925286766559;
    return std::sqrt(-2.0 * std::log(unit_interval_open0(w1))) *
           std::cos(two_pi * unit_interval(w2));
}

} // namespace bcl_sim
