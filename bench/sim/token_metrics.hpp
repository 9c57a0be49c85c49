#pragma once
// The metrics of micro-batch mode (--max-tokens): a step is micro-steps, micro-batch j of every
// rank running together, each as long as its slowest rank's micro-batch.

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace bcl_sim {

/// What one micro-batch of one rank holds.
struct micro_load {
    double tokens = 0.0;
    double cost = 0.0;
    std::uint32_t pieces = 0; ///< records (or pieces of records) in it; 0: a padding micro-batch
    std::uint32_t heavy = 0;  ///< of those, the ones above T/2 tokens
};

/// One step as a policy runs it: ranks[r][j] is rank r's j-th micro-batch.
struct token_step {
    std::vector<std::vector<micro_load>> ranks;
};

/// The metrics of one policy in micro-batch mode.
struct token_metrics {
    /// Per micro-step: the sum over micro-steps of the mean rank's micro-batch cost over the sum
    /// of the slowest rank's.
    double efficiency = 1.0;
    /// WLB-LLM's imbalance degree: the slowest rank's micro-batch cost over the mean rank's, per
    /// micro-step, averaged over the micro-steps (those that cost something).
    double imbalance = 1.0;
    std::size_t steps = 0;
    std::size_t micro_steps = 0;       ///< micro-batches per rank, all steps together
    std::size_t micro_steps_bound = 0; ///< the sum of the planning units' token bounds
    /// The share of steps whose micro-batch count is at most ceil(step tokens / (R*T)) + 1.
    double steps_within_one_of_bound = 1.0;
    std::uint64_t over_budget = 0;  ///< micro-batches above T tokens
    std::uint64_t padding = 0;      ///< empty micro-batches (a rank idles through them)
    double peak_micro_tokens = 0.0; ///< the most tokens of one micro-batch
    double useful = 0.0;            ///< the sum of every micro-batch's cost
    double time = 0.0;              ///< the sum over micro-steps of the slowest rank's cost
    std::uint64_t records = 0;      ///< records trained (set by the run, not by add())
    /// How fair a sample of its window each step is, over windows of K (--lookahead) steps from
    /// step 0, full windows only: the mean over windows of the most records a step trains over
    /// the fewest (1 is even; fixed-size steps are 1).
    double step_records_spread = 1.0;
    /// The mean over windows of how many more records above T/2 its fullest step holds than the
    /// window's even share, ceil(h / K) (0 is even).
    double step_heavy_excess = 0.0;
    /// The mean over windows of the dearest step's cost (the sum of its micro-batches' costs
    /// over every rank) over the cheapest's.
    double step_cost_spread = 1.0;
    /// The mean over windows of the largest relative gap between a step's tokens and the
    /// window's mean step (0 is even; 0.1: every step within 10% of the mean).
    double step_tokens_gap = 0.0;
    std::size_t windows = 0; ///< the full windows those four are over
};

/// Streams the steps of a policy into token_metrics, and checks on every step what a trainer
/// needs: every rank runs the same number of micro-batches (or the ranks hang), and, for a policy
/// that promises it, none of them empty. A violation is a std::logic_error naming the policy and
/// step: a bug in the policy, never a result.
class token_metrics_accumulator {
public:
    /// `ranks` R, `max_tokens` T; `allow_padding`: whether the policy may give a rank an empty
    /// micro-batch (a padding one).
    token_metrics_accumulator(std::string_view policy, std::size_t ranks, double max_tokens,
                              bool allow_padding, std::size_t window = 1)
        : m_policy(policy), m_ranks(ranks), m_max_tokens(max_tokens),
          m_allow_padding(allow_padding), m_window(window == 0 ? 1 : window) {}

    /// One step, the `index`-th of the run.
    void add(const token_step& step, std::size_t index) {
        if (step.ranks.size() != m_ranks)
            throw std::logic_error(fmt::format("policy {}, step {}: {} ranks' micro-batches for {} "
                                               "ranks",
                                               m_policy, index, step.ranks.size(), m_ranks));
        const std::size_t count = step.ranks.front().size();
        double step_tokens = 0.0;
        std::uint64_t step_records = 0;
        std::uint64_t step_heavy = 0;
        double step_cost = 0.0;
        for (std::size_t r = 0; r < m_ranks; ++r) {
            if (step.ranks[r].size() != count)
                throw std::logic_error(fmt::format(
                    "policy {}, step {}: rank 0 runs {} micro-batches and rank {} runs {}; every "
                    "rank must run as many (a trainer would hang)",
                    m_policy, index, count, r, step.ranks[r].size()));
            for (const micro_load& mb : step.ranks[r]) {
                if (mb.pieces == 0 && !m_allow_padding)
                    throw std::logic_error(fmt::format("policy {}, step {}: rank {} has an empty "
                                                       "micro-batch",
                                                       m_policy, index, r));
                step_tokens += mb.tokens;
                step_records += mb.pieces;
                step_heavy += mb.heavy;
                step_cost += mb.cost;
                m_out.padding += mb.pieces == 0 ? 1 : 0;
                m_out.over_budget += mb.tokens > m_max_tokens ? 1 : 0;
                m_out.peak_micro_tokens = std::max(m_out.peak_micro_tokens, mb.tokens);
            }
        }
        for (std::size_t j = 0; j < count; ++j) {
            double sum = 0.0;
            double most = 0.0;
            for (std::size_t r = 0; r < m_ranks; ++r) {
                sum += step.ranks[r][j].cost;
                most = std::max(most, step.ranks[r][j].cost);
            }
            m_out.useful += sum;
            m_out.time += most;
            if (sum > 0.0) {
                m_imbalance += most / (sum / static_cast<double>(m_ranks));
                ++m_costly;
            }
        }
        ++m_out.steps;
        m_out.micro_steps += count;
        const double bound = std::ceil(step_tokens / (static_cast<double>(m_ranks) * m_max_tokens));
        m_within += static_cast<double>(count) <= bound + 1.0 ? 1 : 0;
        add_to_window(step_records, step_heavy, step_cost, step_tokens);
    }

    /// The token bound of a planning unit (a step, a pool or a window) whose steps were added.
    void add_bound(std::size_t bound) noexcept { m_out.micro_steps_bound += bound; }

    [[nodiscard]] token_metrics result() const {
        token_metrics m = m_out;
        const double r = static_cast<double>(m_ranks);
        m.efficiency = m.time > 0.0 ? m.useful / (r * m.time) : 1.0;
        m.imbalance = m_costly > 0 ? m_imbalance / static_cast<double>(m_costly) : 1.0;
        m.steps_within_one_of_bound =
            m.steps > 0 ? static_cast<double>(m_within) / static_cast<double>(m.steps) : 1.0;
        if (m_out.windows > 0) {
            const auto w = static_cast<double>(m_out.windows);
            m.step_records_spread = m_spread_sum / w;
            m.step_heavy_excess = m_excess_sum / w;
            m.step_cost_spread = m_cost_spread_sum / w;
            m.step_tokens_gap = m_tokens_gap_sum / w;
        }
        return m;
    }

private:
    // Tallies a step into the current window, and a full window into the step-mixing figures.
    void add_to_window(std::uint64_t records, std::uint64_t heavy, double cost, double tokens) {
        m_window_tokens.push_back(tokens);
        m_window_records.push_back(records);
        m_window_heavy.push_back(heavy);
        m_window_cost.push_back(cost);
        if (m_window_records.size() < m_window) return;
        const auto [fewest, most] =
            std::minmax_element(m_window_records.begin(), m_window_records.end());
        std::uint64_t heavy_sum = 0;
        for (const std::uint64_t h : m_window_heavy) heavy_sum += h;
        const std::uint64_t share = (heavy_sum + m_window - 1) / m_window;
        const std::uint64_t fullest =
            *std::max_element(m_window_heavy.begin(), m_window_heavy.end());
        const auto [cheapest, dearest] =
            std::minmax_element(m_window_cost.begin(), m_window_cost.end());
        if (*fewest > 0 && *cheapest > 0.0) {
            m_spread_sum += static_cast<double>(*most) / static_cast<double>(*fewest);
            m_excess_sum += static_cast<double>(fullest > share ? fullest - share : 0);
            m_cost_spread_sum += *dearest / *cheapest;
            double mean = 0.0;
            for (const double t : m_window_tokens) mean += t;
            mean /= static_cast<double>(m_window);
            double gap = 0.0;
            for (const double t : m_window_tokens) gap = std::max(gap, std::abs(t / mean - 1.0));
            m_tokens_gap_sum += gap;
            ++m_out.windows;
        }
        m_window_tokens.clear();
        m_window_records.clear();
        m_window_heavy.clear();
        m_window_cost.clear();
    }

    std::string m_policy;
    std::size_t m_ranks;
    double m_max_tokens;
    bool m_allow_padding;
    token_metrics m_out;
    double m_imbalance = 0.0; // the sum of max/mean over costly micro-steps
    std::size_t m_costly = 0; // micro-steps that cost something
    std::size_t m_within = 0; // steps within one micro-step of their bound
    std::size_t m_window;     // K: the steps of a window for the step-mixing figures
    std::vector<std::uint64_t> m_window_records; // by step of the current window
    std::vector<std::uint64_t> m_window_heavy;
    std::vector<double> m_window_cost;
    std::vector<double> m_window_tokens;
    double m_spread_sum = 0.0;      // the sum over full windows of most / fewest records a step
    double m_excess_sum = 0.0;      // of the fullest step's heavy records above the even share
    double m_cost_spread_sum = 0.0; // of the dearest step's cost over the cheapest's
    double m_tokens_gap_sum = 0.0;  // of the largest relative gap of a step's tokens to the mean
};

} // namespace bcl_sim
