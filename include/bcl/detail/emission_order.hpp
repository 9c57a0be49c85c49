#pragma once
// The order in which a round's batches leave.

#include <bcl/detail/config.hpp>

#include <bcl/detail/random.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace bcl::detail {

/// Ranks a round's packs for emission. The full packs leave in a seeded random order (so the
/// heaviest is not always first; options::shuffle_packs), the short pack of the final round, if
/// any (always the last pack), leaves last. With options::largest_first, the first round's largest
/// pack (by memory, or by cost without a memory estimate) leaves first, so an out-of-memory shows
/// in the first step rather than hours later. The random state is the only state kept.
class emission_order {
public:
    emission_order(std::uint64_t seed, bool shuffle, bool largest_first)
        : m_rng(seed), m_shuffle(shuffle), m_largest_first(largest_first) {}

    void reserve(std::size_t packs) { m_rank.reserve(packs); }

    /// Ranks `packs` packs (the last one short if `has_short`) of round number `round`; `size` is
    /// each pack's memory or cost, for largest_first. rank()[p] is then pack p's place.
    void order(std::size_t packs, bool has_short, std::uint64_t round,
               std::span<const double> size) {
        const std::size_t full_packs = packs - (has_short ? 1 : 0);
        m_rank.resize(packs);
        for (std::size_t p = 0; p < packs; ++p) m_rank[p] = static_cast<std::uint32_t>(p);
        if (m_shuffle) shuffle(m_rank.data(), full_packs, m_rng);
        if (m_largest_first && round == 0 && full_packs > 0) {
            const auto largest = static_cast<std::size_t>(
                std::max_element(size.begin(),
                                 size.begin() + static_cast<std::ptrdiff_t>(full_packs)) -
                size.begin());
            const auto first = static_cast<std::size_t>(
                std::find(m_rank.begin(), m_rank.end(), 0U) - m_rank.begin());
            std::swap(m_rank[largest], m_rank[first]);
        }
    }

    [[nodiscard]] std::span<const std::uint32_t> rank() const noexcept { return m_rank; }

    /// The random state, for a saved state.
    [[nodiscard]] std::uint64_t random_state() const noexcept { return m_rng.state(); }
    void restore(std::uint64_t random_state) noexcept { m_rng = splitmix64(random_state); }

private:
    splitmix64 m_rng;
    bool m_shuffle;
    bool m_largest_first;
    std::vector<std::uint32_t> m_rank; // pack -> place in emission order
};

} // namespace bcl::detail
