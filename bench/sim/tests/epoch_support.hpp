#pragma once
// Streams and helpers the epoch tests share (epochs.test.cpp, epoch_mean.test.cpp).

#include "bcl_runner.hpp"
#include "cost_and_cap.hpp"
#include "policy_runner.hpp"
#include "sim_test_support.hpp"
#include "simulate.hpp"
#include "workload.hpp"

#include <bcl/options.hpp>
#include <bcl/stream_mean_cost.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace bcl_sim_test::epochs {

using bcl_sim::sim_config;
using bcl_sim_test::hand_source;

/// A synthetic stream that remembers the largest index each rank has read.
class counting_source final : public bcl_sim::record_source {
public:
    counting_source(const bcl_sim::dist_spec& dist, std::size_t ranks, std::uint64_t seed)
        : m_inner(dist, ranks, seed), m_read(ranks, 0) {}
    [[nodiscard]] double length(std::size_t rank, std::uint64_t index) override {
        m_read.at(rank) = std::max(m_read.at(rank), index + 1);
        return m_inner.length(rank, index);
    }
    /// Records rank `rank` has read: one past the largest index read.
    [[nodiscard]] std::uint64_t read(std::size_t rank) const { return m_read.at(rank); }

private:
    bcl_sim::synthetic_source m_inner;
    std::vector<std::uint64_t> m_read;
};

/// A bcl policy as the tests name it: the policy, and whether it calibrates (--calibrate).
struct bcl_variant {
    std::string_view policy;
    bool calibrate;
};

const std::vector<bcl_variant> bcl_variants{{"tumbling", false},
                                            {"sliding", false},
                                            {"sliding_true", false},
                                            {"tumbling", true},
                                            {"sliding", true}};

constexpr bcl_sim::epoch_boundary boundaries[] = {bcl_sim::epoch_boundary::carry,
                                                  bcl_sim::epoch_boundary::fresh};

[[nodiscard]] inline const bcl_sim::policy_result& only(const bcl_sim::sim_result& res) {
    REQUIRE(res.policies.size() == 1);
    return res.policies.front();
}

/// The settings of rank `rank`'s balancer for the epoch under way in `runner`, a bcl policy's.
[[nodiscard]] inline const bcl::options& balancer_settings(const bcl_sim::policy_runner& runner,
                                                           std::size_t rank) {
    using given = bcl_sim::bcl_local_runner<bcl_sim::sim_estimator>;
    using calibrated = bcl_sim::bcl_local_runner<bcl_sim::calibrated_sim_estimator>;
    if (const auto* r = dynamic_cast<const given*>(&runner)) return r->balancer(rank).settings();
    const auto* r = dynamic_cast<const calibrated*>(&runner);
    REQUIRE(r != nullptr);
    return r->balancer(rank).settings();
}

/// Rank `rank`'s balancer for the epoch under way in `runner`, a calibrated bcl policy's.
[[nodiscard]] inline const bcl_sim::bcl_local_runner<
    bcl_sim::calibrated_sim_estimator>::balancer_type&
calibrated_balancer(const bcl_sim::policy_runner& runner, std::size_t rank) {
    using calibrated = bcl_sim::bcl_local_runner<bcl_sim::calibrated_sim_estimator>;
    const auto* r = dynamic_cast<const calibrated*>(&runner);
    REQUIRE(r != nullptr);
    return r->balancer(rank);
}

/// A policy's runner on a hand-made stream, advanced one block at a time.
class hand_runner {
public:
    hand_runner(std::string_view policy, const std::vector<std::vector<double>>& streams,
                bcl_sim::sim_context ctx)
        : m_source(streams, std::nullopt, std::nullopt), m_ctx(std::move(ctx)) {
        m_ctx.ranks = streams.size();
        m_ctx.source = &m_source;
        const bcl_sim::policy_entry* entry = bcl_sim::find_policy(policy);
        REQUIRE(entry != nullptr);
        m_runner = entry->make(m_ctx);
    }

    /// Runs steps [first, first + count), count <= K.
    void run(std::size_t first, std::size_t count) {
        const std::size_t n = count * m_ctx.ranks;
        std::vector<double> costs(n, 0.0);
        std::vector<double> tokens(n, 0.0);
        std::vector<double> useful(n, 0.0);
        m_runner->run(first, count,
                      bcl_sim::step_block{costs, tokens, useful, 0.0, &m_ctx.truth, first});
    }

    [[nodiscard]] const bcl::options& settings(std::size_t rank) const {
        return balancer_settings(*m_runner, rank);
    }
    [[nodiscard]] const bcl_sim::policy_runner& runner() const { return *m_runner; }

private:
    hand_source m_source;
    bcl_sim::sim_context m_ctx;
    std::unique_ptr<bcl_sim::policy_runner> m_runner;
};

} // namespace bcl_sim_test::epochs
