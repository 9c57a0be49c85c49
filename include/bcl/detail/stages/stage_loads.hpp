#pragma once
// Internal: the loads of R ranks (or micro-batches) in D stages, with each stage's three largest
// kept, so that the objective (the sum over stages of the largest load) of a move or a swap
// between two ranks is found in O(D): the largest load but those two is one of the three.

#include <bcl/detail/config.hpp>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace bcl::detail::stages {

/// Loads by rank and stage, integers, and each stage's three largest.
class stage_loads {
public:
    /// All loads 0, for `ranks` ranks of `stages` stages.
    void reset(std::size_t ranks, std::size_t stages) {
        m_ranks = ranks;
        m_stages = stages;
        m_load.assign(ranks * stages, 0);
    }
    /// Adds `costs` (D of them) to rank r's loads. index() must run before the queries below.
    void add(std::size_t r, std::span<const std::uint64_t> costs) noexcept {
        for (std::size_t s = 0; s < m_stages; ++s) m_load[r * m_stages + s] += costs[s];
    }
    /// Takes `costs` from rank r's loads (each at most the load).
    void take(std::size_t r, std::span<const std::uint64_t> costs) noexcept {
        for (std::size_t s = 0; s < m_stages; ++s) m_load[r * m_stages + s] -= costs[s];
    }
    [[nodiscard]] std::uint64_t at(std::size_t r, std::size_t s) const noexcept {
        return m_load[r * m_stages + s];
    }

    /// Finds each stage's three largest loads and their ranks (ties to the lower rank). O(R*D).
    void index() {
        m_top.assign(m_stages, {});
        for (std::size_t s = 0; s < m_stages; ++s) {
            auto& top = m_top[s];
            for (std::size_t r = 0; r < m_ranks; ++r) {
                const std::uint64_t load = m_load[r * m_stages + s];
                for (std::size_t k = 0; k < top.size(); ++k)
                    if (!top[k].used || load > top[k].load) {
                        for (std::size_t j = top.size() - 1; j > k; --j) top[j] = top[j - 1];
                        top[k] = {load, static_cast<std::uint32_t>(r), true};
                        break;
                    }
            }
        }
    }
    /// Whether rank r holds the largest load of some stage: only a change to such a rank can
    /// lower the objective.
    [[nodiscard]] bool slowest(std::size_t r) const noexcept {
        return std::ranges::any_of(
            m_top, [r](const auto& top) { return top[0].used && top[0].rank == r; });
    }
    /// The largest load of stage s on a rank other than p and q.
    [[nodiscard]] std::uint64_t largest_but(std::size_t s, std::size_t p,
                                            std::size_t q) const noexcept {
        for (const entry& e : m_top[s])
            if (e.used && e.rank != p && e.rank != q) return e.load;
        return 0;
    }
    /// The sum over stages of the largest load.
    [[nodiscard]] std::uint64_t objective() const noexcept {
        std::uint64_t sum = 0;
        for (const auto& top : m_top) sum += top[0].used ? top[0].load : 0;
        return sum;
    }
    /// The objective were ranks p and q (p != q) to change, all others staying: `after_p(s)`
    /// and `after_q(s)` are the two ranks' loads of stage s after the change (a record moved
    /// from one to the other, or two swapped). O(D).
    template <class AfterP, class AfterQ>
    [[nodiscard]] std::uint64_t objective_after(std::size_t p, std::size_t q, AfterP&& after_p,
                                                AfterQ&& after_q) const {
        std::uint64_t sum = 0;
        for (std::size_t s = 0; s < m_stages; ++s) {
            const std::uint64_t lp = after_p(s);
            const std::uint64_t lq = after_q(s);
            const std::uint64_t rest = largest_but(s, p, q);
            sum += lp > lq ? (lp > rest ? lp : rest) : (lq > rest ? lq : rest);
        }
        return sum;
    }

private:
    struct entry {
        std::uint64_t load = 0;
        std::uint32_t rank = 0;
        bool used = false;
    };
    std::size_t m_ranks = 0;
    std::size_t m_stages = 1;
    std::vector<std::uint64_t> m_load; // by rank, then stage
    std::vector<std::array<entry, 3>> m_top;
};

} // namespace bcl::detail::stages
