#pragma once
// The baseline policies none, length_grouped and oracle (mffd is in mffd.hpp, verl_kk in
// verl_kk.hpp).

#include "policy_runner.hpp"
#include "random.hpp"

#include <bcl/partition/lpt_swap.hpp>
#include <bcl/partition/partitioner.hpp>
#include <bcl/statistics.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <utility>
#include <vector>

namespace bcl_sim {

// ---------------------------------------------------------------------------------------------
// The baselines: the batching policies in use today, and a coordinated oracle.
// ---------------------------------------------------------------------------------------------

/// `none`: consecutive fixed-count batches of each rank's stream (DistributedSampler + DataLoader).
class none_runner final : public policy_runner {
public:
    explicit none_runner(const sim_context& ctx) : m_ctx(ctx) {}
    void run(std::size_t first, std::size_t count, step_block out) override {
        const std::size_t R = m_ctx.ranks;
        const std::size_t B = m_ctx.batch;
        for (std::size_t s = first; s < first + count; ++s)
            for (std::size_t r = 0; r < R; ++r)
                for (std::size_t j = 0; j < B; ++j) {
                    const sample x = fetch(m_ctx, r, std::uint64_t{s} * B + j);
                    out.charge(s - first, r, R, x);
                    m_capped += x.capped ? 1 : 0;
                    observe(m_ctx, s, r, x.id);
                }
    }
    [[nodiscard]] policy_extras extras() const override {
        policy_extras e;
        e.capped = m_capped;
        return e;
    }

private:
    sim_context m_ctx;
    std::uint64_t m_capped = 0;
};

/// `length_grouped`: Hugging Face's group_by_length (LengthGroupedSampler, then accelerate's
/// batch sharding). The global sampler order is cut into megabatches of mult * B records
/// (mult = min(N / (4B), 50), at least 1, and 50 for an endless synthetic stream); each megabatch
/// is sorted by length, longest first (stably); per epoch, the longest record is swapped to the
/// front of the first megabatch. The result is cut into batches of B, and batch q goes to rank
/// q mod R in step q / R.
class length_grouped_runner final : public policy_runner {
public:
    explicit length_grouped_runner(const sim_context& ctx) : m_ctx(ctx) {
        const std::optional<std::uint64_t> n = ctx.source->dataset_size();
        std::uint64_t mult = 50;
        if (n) mult = std::clamp<std::uint64_t>(*n / (4 * std::uint64_t{ctx.batch}), 1, 50);
        m_megabatch = mult * ctx.batch;
        m_epoch = ctx.source->global_epoch();
    }

    void run(std::size_t first, std::size_t count, step_block out) override {
        const std::size_t R = m_ctx.ranks;
        const std::size_t B = m_ctx.batch;
        const std::uint64_t step_records = std::uint64_t{R} * B;
        fill_to((first + count) * step_records);
        for (std::size_t s = first; s < first + count; ++s)
            for (std::size_t r = 0; r < R; ++r) {
                const std::uint64_t begin = (std::uint64_t{s} * R + r) * B; // grouped position
                for (std::size_t j = 0; j < B; ++j) {
                    const sample& x = m_items[static_cast<std::size_t>(begin + j - m_base)];
                    out.charge(s - first, r, R, x);
                    m_capped += x.capped ? 1 : 0;
                    observe(m_ctx, s, r, x.id);
                    const std::uint64_t arrival = arrival_step(m_ctx, x.id / R);
                    if (s > arrival)
                        m_max_delay = std::max<std::uint64_t>(m_max_delay, s - arrival);
                }
            }
        // Drop what every later step is past.
        const std::uint64_t done = (first + count) * step_records;
        if (done - m_base > (std::uint64_t{1} << 20)) {
            m_items.erase(m_items.begin(),
                          m_items.begin() + static_cast<std::ptrdiff_t>(done - m_base));
            m_base = done;
        }
    }

    [[nodiscard]] policy_extras extras() const override {
        policy_extras e;
        e.max_delay_batches = m_max_delay;
        e.capped = m_capped;
        e.note = fmt::format("megabatches of {} records", m_megabatch);
        return e;
    }

private:
    // Groups more of the global order until grouped positions [m_base, end) are available.
    void fill_to(std::uint64_t end) {
        while (m_base + m_items.size() < end) {
            // One grouping unit: a whole epoch (for the swap of its longest record to the front),
            // or one megabatch of an endless stream.
            const std::uint64_t unit = m_epoch ? *m_epoch : m_megabatch;
            const std::size_t start = m_items.size();
            for (std::uint64_t g = m_next; g < m_next + unit; ++g)
                m_items.push_back(
                    fetch(m_ctx, static_cast<std::size_t>(g % m_ctx.ranks), g / m_ctx.ranks));
            m_next += unit;
            const auto longer = [](const sample& a, const sample& b) {
                return a.length > b.length;
            };
            std::size_t longest_group = start; // start of the megabatch with the longest record
            for (std::size_t mb = start; mb < m_items.size(); mb += m_megabatch) {
                const std::size_t mb_end = std::min<std::size_t>(mb + m_megabatch, m_items.size());
                std::stable_sort(m_items.begin() + static_cast<std::ptrdiff_t>(mb),
                                 m_items.begin() + static_cast<std::ptrdiff_t>(mb_end), longer);
                if (m_items[mb].length > m_items[longest_group].length) longest_group = mb;
            }
            if (m_epoch) std::swap(m_items[start], m_items[longest_group]);
        }
    }

    sim_context m_ctx;
    std::uint64_t m_megabatch = 0;
    std::optional<std::uint64_t> m_epoch;
    std::vector<sample> m_items; // grouped order, starting at grouped position m_base
    std::uint64_t m_base = 0;
    std::uint64_t m_next = 0; // next global position to group
    std::uint64_t m_max_delay = 0;
    std::uint64_t m_capped = 0;
};

/// `oracle`: K steps coordinated, a reference with cross-rank communication that no trainer runs
/// as such (verl's balance_batch, modelled by verl_kk, coordinates one step at a time). For each
/// window of K steps, all R ranks' K*B-record windows are partitioned together by bcl's
/// lpt_swap_partitioner into R*K packs of B. The packs are sorted by cost, heaviest first, and cut
/// into K groups of R consecutive packs: grouping packs of similar cost into the same step
/// minimizes the sum over steps of the heaviest pack. The groups go to the window's K steps in a
/// seeded random order (so no step is systematically the heaviest), and within a group rank r
/// takes the r-th pack.
class oracle_runner final : public policy_runner {
public:
    explicit oracle_runner(const sim_context& ctx) : m_ctx(ctx) {}

    void run(std::size_t first, std::size_t count, step_block out) override {
        const std::size_t R = m_ctx.ranks;
        const std::size_t B = m_ctx.batch;
        const std::size_t K = m_ctx.lookahead;
        const std::size_t window = K * B;
        const std::size_t n = R * window;
        const std::size_t packs = R * K;
        m_items.resize(n);
        m_costs.resize(n);
        m_pack_of.resize(n);
        for (std::size_t r = 0; r < R; ++r)
            for (std::size_t i = 0; i < window; ++i) {
                m_items[r * window + i] = fetch(m_ctx, r, std::uint64_t{first} * B + i);
                m_costs[r * window + i] = m_items[r * window + i].cost;
            }
        const bcl::partition_summary summary =
            m_partitioner(std::span<const double>(m_costs), bcl::pack_shape{packs, B},
                          std::span<std::uint32_t>(m_pack_of));
        m_gap.add(summary.lower_bound > 0.0
                      ? std::max(0.0, summary.heaviest / summary.lower_bound - 1.0)
                      : 0.0);

        m_pack_cost.assign(packs, 0.0);
        for (std::size_t i = 0; i < n; ++i) m_pack_cost[m_pack_of[i]] += m_costs[i];
        m_order.resize(packs);
        for (std::size_t p = 0; p < packs; ++p) m_order[p] = static_cast<std::uint32_t>(p);
        std::sort(m_order.begin(), m_order.end(), [this](std::uint32_t a, std::uint32_t b) {
            return m_pack_cost[a] > m_pack_cost[b] || (m_pack_cost[a] == m_pack_cost[b] && a < b);
        });
        std::vector<std::uint32_t> group_of_step(K);
        for (std::size_t t = 0; t < K; ++t) group_of_step[t] = static_cast<std::uint32_t>(t);
        splitmix rng(stream_key(m_ctx.seed, domain::oracle, first / K));
        shuffle(std::span<std::uint32_t>(group_of_step), rng);
        // (step offset, rank) of every pack.
        m_slot_of_pack.resize(packs);
        for (std::size_t t = 0; t < K; ++t)
            for (std::size_t r = 0; r < R; ++r)
                m_slot_of_pack[m_order[group_of_step[t] * R + r]] = {t, r};

        for (std::size_t i = 0; i < n; ++i) {
            const auto [t, r] = m_slot_of_pack[m_pack_of[i]];
            if (t >= count) continue; // past the end of the run
            out.charge(t, r, R, m_items[i]);
            m_capped += m_items[i].capped ? 1 : 0;
            const std::size_t s = first + t;
            observe(m_ctx, s, r, m_items[i].id);
            const std::uint64_t arrival =
                arrival_step(m_ctx, std::uint64_t{first} * B + i % window);
            if (s > arrival) m_max_delay = std::max<std::uint64_t>(m_max_delay, s - arrival);
        }
    }

    [[nodiscard]] policy_extras extras() const override {
        policy_extras e;
        e.mean_gap_to_lb = m_gap.mean();
        e.max_delay_batches = m_max_delay;
        e.capped = m_capped;
        return e;
    }

private:
    sim_context m_ctx;
    bcl::lpt_swap_partitioner m_partitioner;
    std::vector<sample> m_items;
    std::vector<double> m_costs;
    std::vector<std::uint32_t> m_pack_of;
    std::vector<double> m_pack_cost;
    std::vector<std::uint32_t> m_order;
    std::vector<std::pair<std::size_t, std::size_t>> m_slot_of_pack;
    bcl::running_stats m_gap;
    std::uint64_t m_max_delay = 0;
    std::uint64_t m_capped = 0;
};

} // namespace bcl_sim
