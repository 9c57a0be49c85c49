#pragma once
// The omnibal peer of stage mode: OmniBal's balanced dynamic mini-batch (Yao et al., ICML 2025,
// arXiv 2407.20761; the data side of its code, ModelTC/OmniBal: BalancedDataset._random_groups,
// iter_random_groups and test_balanced_dynamic_batch.search_arguments), with the one change the
// simulator's contract needs: every group holds exactly B records.
//
// What OmniBal does. Every record carries two numbers, its vision input (vit_num: the images or
// tiles its ViT runs) and its language-model tokens (token_num). Iterative Sampling and Filtering
// (ISF) shuffles the records and walks them, adding each to the open group; when the next record
// would take the group's vision sum above Q_v or its token sum above Q_t, the group closes and
// the record opens the next one (a record alone above a cap is skipped). A closed group is kept
// when it is full (vision sum equal to Q_v, or tokens at least Q_t - 128); the records of the
// others are shuffled and grouped again, up to iter_time rounds (50 in its example), and what is
// left is grouped once more and kept as it comes. Each group is one rank's mini-batch of a step,
// groups dealt to ranks by a random sampler. (Q_v, Q_t) are searched offline along a line
// through the data's mean (vit_bs += 1, llm_len += its mean tokens per image) for groups of about
// the target mini-batch size, and scored by the data's pad ratio plus its vision and language
// "dist ratios": per step, sum over ranks of (max - x) / (R * max), averaged over steps.
//
// What is modelled here, on each unit (a held batch, or a stream's window) of G = R*M or R*K
// groups of B:
//   - the numbers: vision = the record's patches, tokens = its language-model tokens, OmniBal's
//     own quantities (counts), not the stage costs;
//   - the walk, the caps, the skip of a record alone above a cap, the filter with the threshold
//     Q - Q/32 (128 of its 4096) on both numbers (vision counts are integers in OmniBal, where
//     "equal to Q_v" is its test; patches are not), the rounds (50) and the last unfiltered
//     grouping, exactly;
//   - the change: a group also closes when it holds B records, and only a group of B is kept;
//     a group closed early goes back to the pool; the last grouping cuts what is left into
//     groups of B in a shuffled order (a record ISF would drop, alone above a cap, lands there:
//     every record is placed);
//   - the search: (Q_v, Q_t) = (1 + s) * the unit's mean group (its line through the mean), s
//     in {0, 1/32, 1/16, 1/8, 1/4, 1/2}, the s of the least vision + language dist ratio kept
//     (the pad ratio is 0: a rank's group is one packed sequence). OmniBal searches once per
//     data set; searching every unit is more adaptive than it is;
//   - the deal: the unit's groups in a random order, R a micro-step.
// Not modelled: its varying group sizes (the contract is B records a rank), its data-set-wide
// scope (here a unit's records), its dummy images for text-only records, and the model and
// memory sides of OmniBal (pipeline partition search, recomputation), which are not data
// balancing.

#include "random.hpp"

#include <bcl/global_plan.hpp>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <numeric>
#include <span>
#include <vector>

namespace bcl_sim {

/// OmniBal's ISF, with groups of exactly B records (see the header's comment).
class omnibal_grouper {
public:
    static constexpr std::size_t rounds = 50;           ///< iter_time of OmniBal's example
    static constexpr double threshold_gap = 1.0 / 32.0; ///< 128 tokens below a cap of 4096
    static constexpr std::array<double, 6> slacks{0.0, 1.0 / 32, 1.0 / 16, 1.0 / 8, 1.0 / 4, 0.5};

    /// Groups the unit's records (vision[i], tokens[i]: record i's numbers; R*steps*B of them)
    /// into R*steps groups of B and deals them: out[i] = {micro-step, rank} of record i. `key`
    /// seeds the shuffles. O(slacks * rounds * n).
    void plan(std::span<const double> vision, std::span<const double> tokens, std::size_t ranks,
              std::size_t steps, std::size_t batch, std::uint64_t key,
              std::span<bcl::plan_slot> out) {
        const std::size_t groups = ranks * steps;
        double best_score = std::numeric_limits<double>::infinity();
        for (std::size_t k = 0; k < slacks.size(); ++k) {
            const std::uint64_t slack_key = stream_word(key, k);
            isf(vision, tokens, groups, batch, slacks[k], slack_key);
            deal(groups, stream_word(slack_key, rounds + 1));
            const double score =
                dist_ratio(vision, ranks, steps, batch) + dist_ratio(tokens, ranks, steps, batch);
            if (score < best_score) { // ties to the smaller slack
                best_score = score;
                m_best = m_order;
                m_best_slack = slacks[k];
            }
        }
        for (std::size_t g = 0; g < groups; ++g)
            for (std::size_t j = 0; j < batch; ++j)
                out[m_best[g * batch + j]] = {static_cast<std::uint32_t>(g / ranks),
                                              static_cast<std::uint32_t>(g % ranks)};
    }

    /// The slack s of the last plan.
    [[nodiscard]] double chosen_slack() const noexcept { return m_best_slack; }

private:
    // ISF with groups of B: m_order becomes the records group by group (group g at
    // [g*B, (g+1)*B)), in the order the groups were kept.
    void isf(std::span<const double> vision, std::span<const double> tokens, std::size_t groups,
             std::size_t batch, double slack, std::uint64_t key) {
        const std::size_t n = vision.size();
        const double g = static_cast<double>(groups);
        const double cap_v = (1.0 + slack) * std::accumulate(vision.begin(), vision.end(), 0.0) / g;
        const double cap_t = (1.0 + slack) * std::accumulate(tokens.begin(), tokens.end(), 0.0) / g;
        // A number that is 0 everywhere says nothing of fullness.
        const double full_v =
            cap_v > 0.0 ? cap_v * (1.0 - threshold_gap) : std::numeric_limits<double>::infinity();
        const double full_t =
            cap_t > 0.0 ? cap_t * (1.0 - threshold_gap) : std::numeric_limits<double>::infinity();
        m_order.clear();
        m_pool.resize(n);
        std::iota(m_pool.begin(), m_pool.end(), std::uint32_t{0});
        for (std::size_t round = 0; round < rounds && !m_pool.empty(); ++round) {
            splitmix rng(stream_word(key, round));
            shuffle(std::span<std::uint32_t>(m_pool), rng);
            m_rest.clear();
            m_open.clear();
            double sum_v = 0.0;
            double sum_t = 0.0;
            for (const std::uint32_t i : m_pool) {
                if (vision[i] > cap_v || tokens[i] > cap_t) { // alone above a cap: skipped
                    m_rest.push_back(i);
                    continue;
                }
                if (!m_open.empty() && (sum_v + vision[i] > cap_v || sum_t + tokens[i] > cap_t)) {
                    // Closed by a cap before it holds B: back to the pool.
                    m_rest.insert(m_rest.end(), m_open.begin(), m_open.end());
                    m_open.clear();
                    sum_v = sum_t = 0.0;
                }
                m_open.push_back(i);
                sum_v += vision[i];
                sum_t += tokens[i];
                if (m_open.size() == batch) {
                    std::vector<std::uint32_t>& into =
                        sum_v >= full_v || sum_t >= full_t ? m_order : m_rest;
                    into.insert(into.end(), m_open.begin(), m_open.end());
                    m_open.clear();
                    sum_v = sum_t = 0.0;
                }
            }
            m_rest.insert(m_rest.end(), m_open.begin(), m_open.end());
            m_pool.swap(m_rest);
        }
        // The last grouping, unfiltered: what is left, shuffled, in groups of B.
        splitmix rng(stream_word(key, rounds));
        shuffle(std::span<std::uint32_t>(m_pool), rng);
        m_order.insert(m_order.end(), m_pool.begin(), m_pool.end());
    }

    // The random sampler: the groups of m_order in a random order.
    void deal(std::size_t groups, std::uint64_t key) {
        m_perm.resize(groups);
        std::iota(m_perm.begin(), m_perm.end(), std::uint32_t{0});
        splitmix rng(key);
        shuffle(std::span<std::uint32_t>(m_perm), rng);
        const std::size_t batch = m_order.size() / groups;
        m_dealt.resize(m_order.size());
        for (std::size_t g = 0; g < groups; ++g)
            std::copy_n(m_order.begin() + static_cast<std::ptrdiff_t>(m_perm[g] * batch), batch,
                        m_dealt.begin() + static_cast<std::ptrdiff_t>(g * batch));
        m_order.swap(m_dealt);
    }

    // OmniBal's dist ratio of one number over the dealt groups: per micro-step, the sum over
    // ranks of (max - x) / max(R * max, 1), averaged over micro-steps.
    [[nodiscard]] double dist_ratio(std::span<const double> value, std::size_t ranks,
                                    std::size_t steps, std::size_t batch) {
        m_sums.resize(ranks);
        double sum = 0.0;
        for (std::size_t t = 0; t < steps; ++t) {
            for (std::size_t r = 0; r < ranks; ++r) {
                double s = 0.0;
                for (std::size_t j = 0; j < batch; ++j)
                    s += value[m_order[(t * ranks + r) * batch + j]];
                m_sums[r] = s;
            }
            const double top = *std::max_element(m_sums.begin(), m_sums.end());
            double waste = 0.0;
            for (const double s : m_sums) waste += top - s;
            sum += waste / std::max(top * static_cast<double>(ranks), 1.0);
        }
        return sum / static_cast<double>(steps);
    }

    std::vector<std::uint32_t> m_order, m_pool, m_rest, m_open, m_perm, m_dealt, m_best;
    std::vector<double> m_sums;
    double m_best_slack = 0.0;
};

} // namespace bcl_sim
