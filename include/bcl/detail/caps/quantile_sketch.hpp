#pragma once
// A streaming quantile estimator with a relative-accuracy guarantee and a fixed memory bound.

#include <bcl/detail/config.hpp>

#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>

namespace bcl::detail {

/// Estimates quantiles of a stream of non-negative values with relative error at most `accuracy`
/// (1% here): the estimate q̂ of any quantile q satisfies |q̂ - x_q| <= 0.01 * x_q, where x_q is a
/// value of the stream at that rank. Values are counted in logarithmic buckets of ratio
/// gamma = (1 + a) / (1 - a), the idea of DDSketch (Masson, Rim and Lee, VLDB 2019).
///
/// Memory is fixed: 2048 buckets of 8 bytes (16 KiB), which at 1% covers a dynamic range of
/// gamma^2047, about 1e17 (e.g. 1e-6 to 1e11); values beyond it are counted in the end buckets, so
/// a quantile that falls there is clamped to the covered range (1e-6 to about 6e11). Zeros are
/// counted separately.
/// add() is O(1) and never allocates; quantile() is O(buckets).
///
/// No Debian-packaged, header-only quantile sketch fits the library's standard-library-only rule,
/// hence this small one.
class quantile_sketch {
public:
    static constexpr double accuracy = 0.01;
    static constexpr std::size_t bucket_count = 2048;
    /// Smallest non-zero value resolved; smaller ones share the first bucket.
    static constexpr double min_value = 1e-6;

    void add(double x) noexcept {
        ++m_count;
        if (!(x > 0.0)) {
            ++m_zeros;
            return;
        }
        ++m_buckets[index_of(x)];
    }

    [[nodiscard]] std::uint64_t count() const noexcept { return m_count; }

    /// The counts themselves, so a balancer can save and restore its sketch exactly.
    [[nodiscard]] const std::array<std::uint64_t, bucket_count>& buckets() const noexcept {
        return m_buckets;
    }
    [[nodiscard]] std::uint64_t zeros() const noexcept { return m_zeros; }
    [[nodiscard]] static quantile_sketch
    from_counts(const std::array<std::uint64_t, bucket_count>& buckets,
                std::uint64_t zeros) noexcept {
        quantile_sketch s;
        s.m_buckets = buckets;
        s.m_zeros = zeros;
        s.m_count = zeros;
        for (const std::uint64_t b : buckets) s.m_count += b;
        return s;
    }

    /// The q-quantile (0 <= q <= 1) of the values added so far; 0 if none were.
    [[nodiscard]] double quantile(double q) const noexcept {
        if (m_count == 0) return 0.0;
        if (q < 0.0) q = 0.0;
        if (q > 1.0) q = 1.0;
        // Rank of the wanted value among m_count values, 0-based: floor(q * (n - 1)), the lower
        // of the two values a quantile between ranks falls on.
        const auto rank = static_cast<std::uint64_t>(q * static_cast<double>(m_count - 1));
        if (rank < m_zeros) return 0.0;
        std::uint64_t seen = m_zeros;
        for (std::size_t i = 0; i < bucket_count; ++i) {
            seen += m_buckets[i];
            if (seen > rank) return value_of(i);
        }
        return value_of(bucket_count - 1);
    }

private:
    static constexpr double gamma = (1.0 + accuracy) / (1.0 - accuracy);

    [[nodiscard]] static std::size_t index_of(double x) noexcept {
        if (x <= min_value) return 0;
        const double i = std::ceil(std::log(x / min_value) / std::log(gamma));
        if (!(i < static_cast<double>(bucket_count - 1))) return bucket_count - 1;
        return static_cast<std::size_t>(i);
    }
    // Bucket i holds (min * gamma^(i-1), min * gamma^i]; its representative 2 g^i / (g + 1) is
    // within `accuracy` of every value in it.
    [[nodiscard]] static double value_of(std::size_t i) noexcept {
        return min_value * 2.0 * std::pow(gamma, static_cast<double>(i)) / (gamma + 1.0);
    }

    std::array<std::uint64_t, bucket_count> m_buckets{};
    std::uint64_t m_zeros = 0;
    std::uint64_t m_count = 0;
};

} // namespace bcl::detail
