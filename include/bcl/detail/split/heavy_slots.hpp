#pragma once
// Aligned heavy slots: under costliest-first emission, a round's costliest batches are built to
// a level every rank estimates alike, so the heavy batches of all ranks weigh the same.

#include <bcl/detail/config.hpp>

#include <bcl/cost_estimator.hpp>
#include <bcl/detail/saved_part.hpp>
#include <bcl/options.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace bcl::detail {

/// When single records cost more than a batch's share, no partition hides them: the pack that
/// holds one is heavy, and under costliest-first emission it leaves first, in the same step as
/// every other rank's costliest batch. That step waits for the rank whose heavy record happened
/// to be largest, while the ranks whose rounds were light spread their cost evenly and leave their
/// first step half idle.
///
/// So every rank builds its first `slots` batches to a level it expects the heavy batches of any
/// rank to reach: target s is the largest s-th costliest record of the last `rounds_remembered`
/// rounds (capped at the outlier cap in force; every rank sees the same distribution, so every rank
/// estimates about the same level, without communication). A slot is shaped only when its target
/// is above `engage` times the mean batch cost, and so is the 70th percentile of s-th
/// costliest records (many rounds hold such a record): on light and medium tails nothing
/// changes. Then pack s takes
/// the round's s-th costliest record and B-1 others whose costs bring it to the target (the same
/// selection the sliding policy uses for its rounds), and the partitioner balances the rest. A rank
/// whose round has no heavy record thereby puts more of its round into its first batches and less
/// into the others, which then weigh what the other ranks' do: every step's slowest rank is closer
/// to its mean (docs/alignment.md has the argument and the measurements).
///
/// State: the last `rounds_remembered` rounds' top records per slot (saved with the balancer).
/// Per round O(n) to find the top records and O(1) to update each slot's maximum, but for the
/// rare round in which the maximum is forgotten (then a scan of the remembered rounds).
class heavy_slots {
public:
    static constexpr std::size_t slots = 2; ///< batches shaped per round, the costliest
    static constexpr std::size_t rounds_remembered = 128; ///< rounds whose top records are kept
    static constexpr double engage = 1.2; ///< shaped above this many mean batch costs

    /// Slots that always shape (given targets) and learn from every round they are shown.
    heavy_slots() = default;
    /// The balancer's: only costliest-first emission of packed batches lines heavy batches up
    /// across ranks, so only then are slots shaped.
    explicit heavy_slots(const options& opt) noexcept
        : m_engaged(opt.emission == emission_order::costliest_first &&
                    opt.batching == batch_cost::packed) {}

    /// The targets of a round (see targets()): none unless the slots are engaged and the round
    /// is `full` (K batches of B: the drain's rounds are not shaped).
    [[nodiscard]] std::array<double, slots> round_targets(bool full, double mean_batch,
                                                          double cap) const noexcept {
        return m_engaged && full ? targets(mean_batch, cap) : std::array<double, slots>{};
    }

    /// A round of `costs` was formed: a full one is remembered (see observe()) when the
    /// slots are engaged and the outlier cap has settled (outlier_cap::settled: the records of
    /// a quantile cap's warm-up are not what later rounds hold).
    void learn(std::span<const double> costs, bool full, bool cap_settled) noexcept {
        if (m_engaged && full && cap_settled) observe(costs);
    }

    /// Targets for the next round, 0 for a slot left to the partitioner: the rounds_remembered's
    /// largest s-th costliest record, capped at `cap`, if above engage * `mean_batch`. None before
    /// the rounds_remembered has seen a quarter of its rounds.
    [[nodiscard]] std::array<double, slots> targets(double mean_batch, double cap) const noexcept {
        std::array<double, slots> t{};
        if (m_seen < rounds_remembered / 4) return t;
        for (std::size_t s = 0; s < slots; ++s) {
            const double level = std::min(largest(s), cap);
            if (level > engage * mean_batch && typical(s) > engage * mean_batch) t[s] = level;
        }
        return t;
    }

    /// A full round was formed from `costs`: its top records are remembered.
    void observe(std::span<const double> costs) noexcept {
        std::array<double, slots> top{};
        for (const double c : costs) {
            if (c <= top[slots - 1]) continue;
            std::size_t at = slots - 1;
            for (; at > 0 && c > top[at - 1]; --at) top[at] = top[at - 1];
            top[at] = c;
        }
        const std::size_t at = m_seen % rounds_remembered;
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

    /// What a saved state holds: the rounds observed and the rounds_remembered (oldest first).
    [[nodiscard]] std::uint64_t seen() const noexcept { return m_seen; }
    [[nodiscard]] std::span<const double> recent(std::size_t s) const noexcept {
        return {m_recent[s].data(), rounds_remembered};
    }
    void restore(std::uint64_t seen, std::size_t s, std::span<const double> recent) noexcept {
        m_seen = seen;
        std::copy(recent.begin(), recent.end(), m_recent[s].begin());
        m_largest[s] = *std::max_element(m_recent[s].begin(), m_recent[s].end());
    }

    /// Its part of a saved state: the full rounds observed and, per slot, the top records of the
    /// last of them it remembers (oldest first).
    struct saved {
        std::uint64_t heavy_seen = 0;
        std::array<std::vector<double>, slots> heavy_recent;

        template <class Io, class Part>
        static void fields(Io& io, Part& s) {
            io.field("the heavy slots' round count", s.heavy_seen);
            const auto remembered =
                static_cast<std::size_t>(std::min<std::uint64_t>(s.heavy_seen, rounds_remembered));
            for (auto& recent : s.heavy_recent)
                io.items("the heavy slots' records", recent, remembered);
        }
        /// (Whether it saw no more rounds than ran is the snapshot's to check.)
        void check() const {
            for (const std::vector<double>& recent : heavy_recent)
                for (const double x : recent)
                    check_saved(x >= 0.0 && x <= max_estimate,
                                "an invalid record of the heavy slots");
        }
    };
    void save_into(saved& s) const {
        s.heavy_seen = m_seen;
        const auto remembered =
            static_cast<std::ptrdiff_t>(std::min<std::uint64_t>(m_seen, rounds_remembered));
        for (std::size_t slot = 0; slot < slots; ++slot)
            s.heavy_recent[slot].assign(m_recent[slot].begin(),
                                        m_recent[slot].begin() + remembered);
    }
    void restore_from(const saved& s) noexcept {
        for (std::size_t slot = 0; slot < slots; ++slot)
            restore(s.heavy_seen, slot, s.heavy_recent[slot]);
    }

private:
    [[nodiscard]] double largest(std::size_t s) const noexcept { return m_largest[s]; }

    // The 70th percentile of the rounds_remembered's s-th costliest records. Shaping pays only
    // where many rounds of every rank hold a record heavier than a batch's share (a long tail):
    // where only the rare round does (a medium tail), building every round's first batches up to
    // the rare level costs more than the alignment gains. Measured (R=8 B=16 K=8, 2000 steps,
    // sliding): lognormal(6,1) 0.749 without this condition, 0.896 with it (shuffled emission:
    // 0.886); Mooncake 0.882 without, 0.869 with; the median instead of the 70th percentile loses
    // Mooncake (0.850), the 85th loses lognormal(6,1.5) less but Mooncake tumbling more.
    [[nodiscard]] double typical(std::size_t s) const noexcept {
        std::array<double, rounds_remembered> values = m_recent[s];
        const auto kept =
            static_cast<std::ptrdiff_t>(std::min<std::uint64_t>(m_seen, rounds_remembered));
        auto* const middle = values.begin() + (kept - 1) * 7 / 10;
        std::nth_element(values.begin(), middle, values.begin() + kept);
        return *middle;
    }

    std::uint64_t m_seen = 0;
    std::array<std::array<double, rounds_remembered>, slots>
        m_recent{};                        // a ring: round r at r % rounds_remembered
    std::array<double, slots> m_largest{}; // each slot's largest remembered record
    bool m_engaged = true; // costliest-first emission of packed batches: slots are shaped
};

} // namespace bcl::detail
