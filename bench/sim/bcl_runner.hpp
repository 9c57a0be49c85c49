#pragma once
// The bcl policies (tumbling, sliding): one bcl::balancer per rank, through the library itself.

#include "cost_and_cap.hpp"
#include "policy_runner.hpp"
#include "random.hpp"

#include <bcl/balancer.hpp>
#include <bcl/error.hpp>
#include <bcl/options.hpp>
#include <bcl/record_model.hpp>
#include <bcl/statistics.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace bcl_sim {

// ---------------------------------------------------------------------------------------------
// The bcl policies: a bcl::balancer per rank, no communication.
// ---------------------------------------------------------------------------------------------

/// A record as the bcl balancers in the simulator see it.
struct sim_record {
    std::uint64_t id;
    double length; ///< tokens; what the memory budget counts (shrunk by a truncating cap)
    double cost;   ///< the true cost of `length`; what the rank spends on it
};

/// The cost estimate the simulated balancers use: the true cost, a perfect estimate. It reads the
/// `cost` member of any record that has one (sim_record here, bcl-mpi-bench's records too).
struct true_cost {
    template <class Record>
    [[nodiscard]] double operator()(const Record& r) const noexcept {
        return r.cost;
    }
};

/// The truncation bcl calls for a record whose cost is above the cap: the record keeps the
/// largest whole number of tokens whose cost is within the cap (truncated_length), and its true
/// cost becomes the cost of that length.
struct truncate_record {
    cost_model cost;
    void operator()(sim_record& r, double cap) const {
        r.length = truncated_length(cost, r.length, cap);
        r.cost = cost(r.length);
    }
};

/// The estimator of the simulated balancers, built from bcl's public pieces: the true cost, the
/// record's length as its memory estimate (bcl::with_memory; what --memory-budget bounds), and the
/// truncation (bcl::with_truncation; called only under --cap-action truncate).
using sim_estimator = decltype(bcl::with_truncation(
    bcl::with_memory(true_cost{}, &sim_record::length), truncate_record{}));

[[nodiscard]] inline sim_estimator make_sim_estimator(const cost_model& cost) {
    return bcl::with_truncation(bcl::with_memory(true_cost{}, &sim_record::length),
                                truncate_record{cost});
}

/// A rank-local bcl policy: one bcl::balancer per rank, no communication. Each step, each rank
/// pops its next batch, pushing records from its own stream until one is ready, exactly as a
/// training loop would. The rank's time is the sum of its batch's true costs (a clipped estimate
/// changes what the balancer sees, not what the rank spends; a truncated record costs less). The
/// options decide which bcl policy it is: tumbling or sliding, with the run's cap and memory
/// budget. A bcl::error from a balancer (a record alone over the memory budget, a round that
/// cannot be split within it) propagates, prefixed with the policy, rank and step.
class bcl_local_runner final : public policy_runner {
public:
    using balancer_type = bcl::balancer<sim_record, sim_estimator>;

    bcl_local_runner(std::string_view name, const sim_context& ctx,
                     const std::function<bcl::options(std::size_t rank)>& make_options)
        : m_name(name), m_ctx(ctx), m_next(ctx.ranks, 0) {
        m_balancers.reserve(ctx.ranks);
        for (std::size_t r = 0; r < ctx.ranks; ++r)
            m_balancers.emplace_back(make_sim_estimator(ctx.cost), make_options(r));
    }

    void run(std::size_t first, std::size_t count, step_block out) override {
        const std::size_t R = m_ctx.ranks;
        for (std::size_t s = first; s < first + count; ++s)
            for (std::size_t r = 0; r < R; ++r) {
                balancer_type& bal = m_balancers[r];
                std::optional<balancer_type::batch_type> batch;
                try {
                    while (!(batch = bal.pop())) {
                        const sample x = fetch(m_ctx, r, m_next[r]++);
                        bal.push(sim_record{x.id, x.length, x.cost});
                    }
                } catch (const bcl::error& e) {
                    throw bcl::error(
                        fmt::format("policy {}, rank {}, step {}: {}", m_name, r, s, e.what()));
                }
                if (batch->size() != m_ctx.batch)
                    throw std::logic_error("bcl balancer emitted a short batch mid-stream");
                for (const sim_record& rec : *batch) {
                    out.charge(s - first, r, R, sample{rec.length, rec.cost, rec.id, false});
                    observe(m_ctx, s, r, rec.id);
                }
            }
    }

    [[nodiscard]] policy_extras extras() const override {
        policy_extras e;
        double weighted = 0.0;
        std::uint64_t windows = 0;
        for (const balancer_type& bal : m_balancers) {
            const bcl::statistics& st = bal.stats();
            weighted +=
                st.gap_to_lower_bound.mean() * static_cast<double>(st.gap_to_lower_bound.count());
            windows += st.gap_to_lower_bound.count();
            e.max_delay_batches = std::max(e.max_delay_batches, st.max_delay_batches);
            e.capped += st.records_capped;
            e.peak_batch_memory = std::max(e.peak_batch_memory, st.peak_batch_memory);
        }
        e.mean_gap_to_lb = windows > 0 ? weighted / static_cast<double>(windows) : 0.0;
        return e;
    }

private:
    std::string m_name;
    sim_context m_ctx;
    std::vector<balancer_type> m_balancers;
    std::vector<std::uint64_t> m_next; // next stream index per rank
};

/// The options of rank `rank`'s balancer under a bcl policy: B and K from the run, a seed per rank,
/// the run's cap and memory budget, every other setting at bcl's default (sliding: 2 windows of
/// buffer, max_age 2). The one place where the run's settings become the balancers' options.
[[nodiscard]] inline bcl::options bcl_options(const sim_context& ctx, std::size_t rank,
                                              bcl::lookahead_policy policy) {
    bcl::options opt{.batch_size = ctx.batch,
                     .lookahead = ctx.lookahead,
                     .drop_last = false,
                     .seed = stream_key(ctx.seed, domain::bcl, rank)};
    opt.policy = policy;
    opt.cap = ctx.cap;
    opt.memory_budget = ctx.memory_budget;
    opt.batching = ctx.batching;
    opt.emission = ctx.emission;
    if (ctx.cap_prior) opt.cap.prior = *ctx.cap_prior;
    if (ctx.mean_cost) opt.mean_cost = *ctx.mean_cost;
    return opt;
}

template <bcl::lookahead_policy Policy>
[[nodiscard]] std::unique_ptr<policy_runner> make_bcl_runner(const sim_context& ctx) {
    const std::string_view name = Policy == bcl::lookahead_policy::sliding ? "sliding" : "tumbling";
    return std::make_unique<bcl_local_runner>(
        name, ctx, [&ctx](std::size_t rank) { return bcl_options(ctx, rank, Policy); });
}

} // namespace bcl_sim
