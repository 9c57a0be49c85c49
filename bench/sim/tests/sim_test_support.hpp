#pragma once
// What the bcl-sim engine's tests share: a policy run on hand-made per-rank streams (run_by_hand).

#include "cost_and_cap.hpp"
#include "policy_runner.hpp"
#include "simulate.hpp"
#include "workload.hpp"

#include <bcl/options.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

namespace bcl_sim_test {

/// Per-rank streams with an optional data-set size and epoch, so length_grouped can be worked out.
class hand_source final : public bcl_sim::record_source {
public:
    hand_source(std::vector<std::vector<double>> per_rank, std::optional<std::uint64_t> dataset,
                std::optional<std::uint64_t> epoch)
        : m_table(std::move(per_rank)), m_dataset(dataset), m_epoch(epoch) {}
    [[nodiscard]] double length(std::size_t rank, std::uint64_t index) override {
        return m_table.length(rank, index);
    }
    [[nodiscard]] std::optional<std::uint64_t> global_epoch() const override { return m_epoch; }
    [[nodiscard]] std::optional<std::uint64_t> dataset_size() const override { return m_dataset; }

private:
    bcl_sim::table_source m_table;
    std::optional<std::uint64_t> m_dataset;
    std::optional<std::uint64_t> m_epoch;
};

/// Costs (what each rank spends), tokens and useful costs (the sum of the records' costs) of one
/// policy on a hand-made stream, step-major: costs[s * R + r].
struct hand_run {
    std::vector<double> costs;
    std::vector<double> tokens;
    std::vector<double> useful;
    bcl_sim::policy_extras extras;
};

/// Settings of a hand run beyond the stream and B, K, steps.
struct hand_settings {
    double bin_tokens = 0.0;
    std::optional<std::uint64_t> dataset;
    std::optional<std::uint64_t> epoch;
    bcl_sim::cost_model cost{0.0, 1.0, 0.0, {}}; // cost = length
    bcl::cap_options cap{};
    double memory_budget = 0.0;
    bcl_sim::batch_cost batching = bcl_sim::batch_cost::packed;
    std::optional<double> cap_prior; // cost units
};

inline hand_run run_by_hand(std::string_view policy,
                            const std::vector<std::vector<double>>& streams, std::size_t batch,
                            std::size_t lookahead, std::size_t steps,
                            const hand_settings& settings) {
    hand_source source(streams, settings.dataset, settings.epoch);
    bcl_sim::sim_context ctx;
    ctx.ranks = streams.size();
    ctx.batch = batch;
    ctx.lookahead = lookahead;
    ctx.seed = 7;
    ctx.cost = settings.cost;
    ctx.source = &source;
    ctx.bin_tokens = settings.bin_tokens;
    ctx.cap = settings.cap;
    ctx.memory_budget = settings.memory_budget;
    ctx.batching = settings.batching;
    ctx.cap_prior = settings.cap_prior;
    const bcl_sim::policy_entry* entry = bcl_sim::find_policy(policy);
    REQUIRE(entry != nullptr);
    auto runner = entry->make(ctx);
    hand_run out;
    out.costs.assign(steps * ctx.ranks, 0.0);
    out.tokens.assign(steps * ctx.ranks, 0.0);
    out.useful.assign(steps * ctx.ranks, 0.0);
    const double pad_to =
        settings.batching == bcl_sim::batch_cost::padded ? static_cast<double>(batch) : 0.0;
    for (std::size_t first = 0; first < steps; first += lookahead) {
        const std::size_t count = std::min(lookahead, steps - first);
        const std::size_t at = first * ctx.ranks;
        const std::size_t n = count * ctx.ranks;
        runner->run(first, count,
                    bcl_sim::step_block{std::span<double>(out.costs).subspan(at, n),
                                        std::span<double>(out.tokens).subspan(at, n),
                                        std::span<double>(out.useful).subspan(at, n), pad_to});
    }
    out.extras = runner->extras();
    return out;
}

inline hand_run run_by_hand(std::string_view policy,
                            const std::vector<std::vector<double>>& streams, std::size_t batch,
                            std::size_t lookahead, std::size_t steps, double bin_tokens = 0.0,
                            std::optional<std::uint64_t> dataset = {},
                            std::optional<std::uint64_t> epoch = {}) {
    hand_settings settings;
    settings.bin_tokens = bin_tokens;
    settings.dataset = dataset;
    settings.epoch = epoch;
    return run_by_hand(policy, streams, batch, lookahead, steps, settings);
}

// Two ranks, B = 2, K = 2, cost = length. rank 0 reads 10, 10, 1, 1; rank 1 reads 5, 5, 6, 6.
// Global order (index * R + rank): 10, 5, 10, 5, 1, 6, 1, 6.
inline const std::vector<std::vector<double>> two_ranks{{10, 10, 1, 1}, {5, 5, 6, 6}};

} // namespace bcl_sim_test
