#pragma once
// The order in which a round's batches leave (options::emission, options::largest_first).

#include <bcl/detail/config.hpp>

#include <bcl/detail/random.hpp>
#include <bcl/options.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace bcl::detail {

/// Ranks a round's packs for emission. The full packs leave costliest first (emission_order::
/// costliest_first; ties by pack id), or in a seeded random order (shuffled); the short pack of
/// the final round, if any (always the last pack), leaves last. With options::largest_first, the
/// first round's largest full pack (by memory, or by cost without a memory estimate) leaves
/// first, so an out-of-memory shows in the first step rather than hours later: costliest first,
/// the packs it passes keep their order; shuffled, it trades places with the pack that was to
/// leave first. The random state is the only state kept.
class batch_order {
public:
    explicit batch_order(const options& opt)
        : m_rng(opt.seed), m_shuffle(opt.emission == emission_order::shuffled),
          m_largest_first(opt.largest_first) {}

    void reserve(std::size_t packs) {
        m_rank.reserve(packs);
        m_by_place.reserve(packs);
    }

    /// Ranks `packs` packs (the last one short if `has_short`) of round number `round`: `cost` is
    /// each pack's estimated cost, `size` its memory (or its cost) for largest_first. rank()[p] is
    /// then pack p's place. Allocates nothing once reserved for the round's packs.
    void order(std::size_t packs, bool has_short, std::uint64_t round, std::span<const double> cost,
               std::span<const double> size) {
        const std::size_t full_packs = packs - (has_short ? 1 : 0);
        const bool largest_first = m_largest_first && round == 0 && full_packs > 0;
        const auto largest = [&] {
            return static_cast<std::uint32_t>(
                std::max_element(size.begin(),
                                 size.begin() + static_cast<std::ptrdiff_t>(full_packs)) -
                size.begin());
        };
        m_rank.resize(packs);
        if (m_shuffle) {
            for (std::size_t p = 0; p < packs; ++p) m_rank[p] = static_cast<std::uint32_t>(p);
            shuffle(m_rank.data(), full_packs, m_rng);
            if (largest_first) // trades places with the pack that was to leave first
                std::swap(m_rank[largest()], *std::find(m_rank.begin(), m_rank.end(), 0U));
            return;
        }
        m_by_place.resize(packs);
        for (std::size_t p = 0; p < packs; ++p) m_by_place[p] = static_cast<std::uint32_t>(p);
        // Insertion sort: a round has K packs, a handful.
        const auto costlier = [&](std::uint32_t a, std::uint32_t b) {
            return cost[a] > cost[b] || (cost[a] == cost[b] && a < b);
        };
        for (std::size_t i = 1; i < full_packs; ++i)
            for (std::size_t j = i; j > 0 && costlier(m_by_place[j], m_by_place[j - 1]); --j)
                std::swap(m_by_place[j], m_by_place[j - 1]);
        if (largest_first) { // moved to the front; the packs it passes keep their order
            const auto at = std::find(m_by_place.begin(), m_by_place.end(), largest());
            std::rotate(m_by_place.begin(), at, at + 1);
        }
        for (std::size_t place = 0; place < packs; ++place)
            m_rank[m_by_place[place]] = static_cast<std::uint32_t>(place);
    }

    [[nodiscard]] std::span<const std::uint32_t> rank() const noexcept { return m_rank; }

    /// The random state, for a saved state.
    [[nodiscard]] std::uint64_t random_state() const noexcept { return m_rng.state(); }
    void restore(std::uint64_t random_state) noexcept { m_rng = splitmix64(random_state); }
    /// Its part of a saved state: the random generator's state (any value is one).
    struct saved {
        std::uint64_t rng_state = 0;

        template <class Io, class Part>
        static void fields(Io& io, Part& s) {
            io.field("the random state", s.rng_state);
        }
    };
    void save_into(saved& s) const noexcept { s.rng_state = random_state(); }
    void restore_from(const saved& s) noexcept { restore(s.rng_state); }

private:
    splitmix64 m_rng;
    bool m_shuffle;
    bool m_largest_first;
    std::vector<std::uint32_t> m_by_place; // place -> pack
    std::vector<std::uint32_t> m_rank;     // pack -> place in emission order
};

} // namespace bcl::detail
