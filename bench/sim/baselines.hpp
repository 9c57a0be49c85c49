#pragma once
// The baseline policies none and length_grouped (mffd is in mffd.hpp, verl_kk in verl_kk.hpp,
// the coordinated global plan in global_runner.hpp).

#include "policy_runner.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

namespace bcl_sim {

// ---------------------------------------------------------------------------------------------
// The baselines: the batching policies in use today.
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

} // namespace bcl_sim
