#pragma once
// Aligned heavy slots: under costliest-first emission, a round's costliest batches are built to
// a level every rank estimates alike, so the heavy batches of all ranks weigh the same.

#include <bcl/detail/config.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>

namespace bcl::detail {

/// When single records cost more than a batch's share, no partition hides them: the pack that
/// holds one is heavy, and under costliest-first emission it leaves first, in the same step as
/// every other rank's costliest batch. That step waits for the rank whose heavy record happened
/// to be largest, while the ranks whose rounds were light spread their cost evenly and leave their
/// first step half idle.
///
/// So every rank builds its first `slots` batches to a level it expects the heavy batches of any
/// rank to reach: target s is the largest s-th costliest record of the last `window` rounds
/// (capped at the outlier cap in force; every rank sees the same distribution, so every rank
/// estimates about the same level, without communication). A slot is shaped only when its target
/// is above `engage` times the mean batch cost, and so is the window's 70th percentile of s-th
/// costliest records (many rounds hold such a record): on light and medium tails nothing
/// changes. Then pack s takes
/// the round's s-th costliest record and B-1 others whose costs bring it to the target (the same
/// selection the sliding policy uses for its rounds), and the partitioner balances the rest. A rank
/// whose round has no heavy record thereby puts more of its round into its first batches and less
/// into the others, which then weigh what the other ranks' do: every step's slowest rank is closer
/// to its mean (docs/alignment.md has the argument and the measurements).
///
/// State: the last `window` rounds' top records per slot (saved with the balancer). Per round
/// O(n) to find the top records and O(1) to update each window's maximum, but for the rare round
/// in which the maximum leaves the window (then a scan of the window).
class heavy_slots {
public:
    static constexpr std::size_t slots = 2;    ///< batches shaped per round, the costliest
    static constexpr std::size_t window = 128; ///< rounds whose top records are remembered
    static constexpr double engage = 1.2;      ///< shaped above this many mean batch costs

    /// Targets for the next round, 0 for a slot left to the partitioner: the window's largest
    /// s-th costliest record, capped at `cap`, if above engage * `mean_batch`. None before the
    /// window has seen a quarter of its rounds.
    [[nodiscard]] std::array<double, slots> targets(double mean_batch, double cap) const noexcept {
        std::array<double, slots> t{};
        if (m_seen < window / 4) return t;
        for (std::size_t s = 0; s < slots; ++s) {
            const double level = std::min(largest(s), cap);
            if (level > engage * mean_batch && typical(s) > engage * mean_batch) t[s] = level;
        }
        return t;
    }

    /// A full round was formed from `costs`: its top records join the windows.
    void observe(std::span<const double> costs) noexcept {
        std::array<double, slots> top{};
        for (const double c : costs) {
            if (c <= top[slots - 1]) continue;
            std::size_t at = slots - 1;
            for (; at > 0 && c > top[at - 1]; --at) top[at] = top[at - 1];
            top[at] = c;
        }
        const std::size_t at = m_seen % window;
        for (std::size_t s = 0; s < slots; ++s) {
            const bool max_leaves = m_recent[s][at] == m_largest[s];
            m_recent[s][at] = top[s];
            if (top[s] >= m_largest[s])
                m_largest[s] = top[s];
            else if (max_leaves)
                m_largest[s] = *std::max_element(m_recent[s].begin(), m_recent[s].end());
        }
        ++m_seen;
    }

    /// The cost model changed (calibration) and a heavy record now costs `ratio` times what it
    /// did: the remembered records are rescaled rather than forgotten.
    /// No record is remembered above `limit` (bcl::max_estimate: what a record may cost).
    void rescale(double ratio, double limit) noexcept {
        for (std::size_t s = 0; s < slots; ++s) {
            for (double& x : m_recent[s]) x = std::min(x * ratio, limit);
            m_largest[s] = std::min(m_largest[s] * ratio, limit);
        }
    }

    /// What a saved state holds: the rounds observed and the window (oldest first).
    [[nodiscard]] std::uint64_t seen() const noexcept { return m_seen; }
    [[nodiscard]] std::span<const double> recent(std::size_t s) const noexcept {
        return {m_recent[s].data(), window};
    }
    void restore(std::uint64_t seen, std::size_t s, std::span<const double> recent) noexcept {
        m_seen = seen;
        std::copy(recent.begin(), recent.end(), m_recent[s].begin());
        m_largest[s] = *std::max_element(m_recent[s].begin(), m_recent[s].end());
    }

private:
    [[nodiscard]] double largest(std::size_t s) const noexcept { return m_largest[s]; }

    // The 70th percentile of the window's s-th costliest records. Shaping pays only where many
    // rounds of every rank hold a record heavier than a batch's share (a long tail): where only
    // the rare round does (a medium tail), building every round's first batches up to the rare
    // level costs more than the alignment gains. Measured (R=8 B=16 K=8, 2000 steps, sliding):
    // lognormal(6,1) 0.749 without this condition, 0.896 with it (shuffled emission: 0.886);
    // Mooncake 0.882 without, 0.869 with; the median instead of the 70th percentile loses
    // Mooncake (0.850), the 85th loses lognormal(6,1.5) less but Mooncake tumbling more.
    [[nodiscard]] double typical(std::size_t s) const noexcept {
        std::array<double, window> values = m_recent[s];
        const auto kept = static_cast<std::ptrdiff_t>(std::min<std::uint64_t>(m_seen, window));
        auto* const middle = values.begin() + (kept - 1) * 7 / 10;
        std::nth_element(values.begin(), middle, values.begin() + kept);
        return *middle;
    }

    std::uint64_t m_seen = 0;
    std::array<std::array<double, window>, slots> m_recent{}; // a ring: round r at r % window
    std::array<double, slots> m_largest{};                    // the maximum of each window
};

} // namespace bcl::detail
