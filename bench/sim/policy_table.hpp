#pragma once
// The policies of fixed-size batches (B records a rank a step): each by its name, what it stands
// for and how its runner is made. A new policy is one more entry in policy_table().

#include "baselines.hpp"
#include "bcl_runner.hpp"
#include "cost_and_cap.hpp"
#include "global_runner.hpp"
#include "mffd.hpp"
#include "policy_runner.hpp"
#include "sim_config.hpp"
#include "verl_kk.hpp"

#include <bcl/global_plan.hpp>
#include <bcl/names.hpp>
#include <bcl/options.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace bcl_sim {

struct policy_entry {
    std::string name;
    std::string models; ///< one line: what it stands for
    /// Builds the runner. `ctx.source` is a fresh source for this policy.
    std::function<std::unique_ptr<policy_runner>(const sim_context& ctx)> make;
    /// Why the policy cannot run with this configuration, or nothing if it can.
    std::optional<std::string> (*skip)(const sim_config& cfg);
    /// Part of a run that names no policies; false: runs only when named.
    bool by_default;
};

[[nodiscard]] inline std::optional<std::string> never_skip(const sim_config&) {
    return {};
}

/// The context of a policy that reads records as fetch() gives them: under a truncating cap, the
/// capped stream (stream_cap), so it runs on the same truncated records as the bcl policies; a
/// clipping cap leaves its records alone.
[[nodiscard]] inline sim_context with_truncation(const sim_context& ctx) {
    sim_context c = ctx;
    if (ctx.cap.kind != bcl::cap_kind::none && ctx.cap.action == bcl::cap_action::truncate)
        c.truncation =
            std::make_shared<stream_cap>(ctx.source, ctx.cost, ctx.cap, ctx.ranks, ctx.cap_prior);
    return c;
}

/// A baseline's runner, on with_truncation's records.
template <class Runner>
[[nodiscard]] std::unique_ptr<policy_runner> make_baseline(const sim_context& ctx) {
    return std::make_unique<Runner>(with_truncation(ctx));
}

/// The global plan's runner, on with_truncation's records (a fixed clipping cap goes to the
/// plan itself: global_plan_cap).
template <bool LevelSteps>
[[nodiscard]] std::unique_ptr<policy_runner> make_global_runner(const sim_context& ctx) {
    return std::make_unique<global_runner>(with_truncation(ctx), LevelSteps);
}

/// A plan takes at most bcl::max_plan_records records per window.
[[nodiscard]] inline std::optional<std::string> skip_global(const sim_config& cfg) {
    const std::uint64_t window = std::uint64_t{cfg.ranks} * cfg.lookahead * cfg.batch;
    if (window <= bcl::max_plan_records) return {};
    return fmt::format("global skipped: R*K*B = {} records per window is more than a plan takes "
                       "(bcl::max_plan_records = {})",
                       window, bcl::max_plan_records);
}

[[nodiscard]] inline const std::vector<policy_entry>& policy_table() {
    static const std::vector<policy_entry> table = [] {
        std::vector<policy_entry> t{
            {"none",
             "fixed-count batches in sampler order (PyTorch DistributedSampler + DataLoader)",
             make_baseline<none_runner>, never_skip, true},
            {"length_grouped", "Hugging Face group_by_length: megabatches sorted by length",
             make_baseline<length_grouped_runner>, never_skip, true},
            {"mffd", "NeMo-RL sequence packing: pooled MFFD token bins dealt round-robin",
             make_baseline<mffd_runner>, never_skip, true},
            {"verl_kk",
             "verl balance_batch: each step's R*B records split by Karmarkar-Karp into R groups "
             "of B (needs cross-rank communication)",
             make_baseline<verl_kk_runner>, never_skip, true},
            {"global",
             "bcl global plan: every rank computes the same plan of all ranks' K-step windows "
             "from the shared cost table (bcl::global_planner; coordinated, no communication)",
             make_global_runner<true>, skip_global, true},
            {"global_flat",
             "the global plan with bcl::plan_options::level_steps off: every pack dealt toward "
             "the same mean (runs only when named)",
             make_global_runner<false>, skip_global, false},
        };
        // The library's lookahead policies, each by the name and summary its component carries
        // (bcl/names.hpp): a new policy runs here without an edit.
        for (const std::string_view name : bcl::names_of<bcl::lookahead_policy>()) {
            const bcl::lookahead_policy policy = bcl::named<bcl::lookahead_policy>(name);
            t.push_back({std::string(name),
                         "bcl " + std::string(name) + ", rank-local (bcl::balancer per rank): " +
                             std::string(bcl::policy_summary(policy)),
                         [policy](const sim_context& ctx) { return make_bcl_runner(policy, ctx); },
                         never_skip, true});
        }
        t.push_back({"sliding_true",
                     "bcl sliding estimating with the true cost in force (--true-cost, --drift) "
                     "instead of --cost, never calibrated: what a calibrated sliding should "
                     "approach (runs only when named)",
                     make_sliding_true_runner, never_skip, false});
        return t;
    }();
    return table;
}

[[nodiscard]] inline const policy_entry* find_policy(std::string_view name) {
    for (const policy_entry& e : policy_table())
        if (e.name == name) return &e;
    return nullptr;
}

/// The policies a run asks for, in the order asked and each once; when cfg.policies is empty,
/// every policy of the table that runs by default. The names must be known (validate() checks
/// that).
[[nodiscard]] inline std::vector<const policy_entry*> requested_policies(const sim_config& cfg) {
    std::vector<const policy_entry*> wanted;
    if (cfg.policies.empty()) {
        for (const policy_entry& e : policy_table())
            if (e.by_default) wanted.push_back(&e);
        return wanted;
    }
    for (const std::string& name : cfg.policies) {
        const policy_entry* e = find_policy(name);
        if (std::find(wanted.begin(), wanted.end(), e) == wanted.end()) wanted.push_back(e);
    }
    return wanted;
}

/// The names of every policy in the table, comma-separated.
[[nodiscard]] inline std::string policy_names() {
    std::string names;
    for (const policy_entry& e : policy_table()) {
        if (!names.empty()) names += ',';
        names += e.name;
    }
    return names;
}

/// The names of the policies a run asks for, in the order asked and each once.
[[nodiscard]] inline std::vector<std::string> requested_policy_names(const sim_config& cfg) {
    std::vector<std::string> names;
    for (const policy_entry* e : requested_policies(cfg)) names.emplace_back(e->name);
    return names;
}

} // namespace bcl_sim
