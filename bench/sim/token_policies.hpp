#pragma once
// The policies of micro-batch mode (--max-tokens): each by its name, what it stands for and how
// its runner is made. A new policy is one more entry in token_policy_table().

#include "policy_runner.hpp"
#include "sim_config.hpp"
#include "token_fixed_runner.hpp"
#include "token_global_runner.hpp"
#include "token_peer_runner.hpp"
#include "token_peers.hpp"
#include "token_runner.hpp"

#include <algorithm>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace bcl_sim {

/// A policy of micro-batch mode. A new one is one more entry in token_policy_table().
struct token_policy_entry {
    std::string name;
    std::string models; ///< one line: what it stands for
    std::function<std::unique_ptr<token_runner>(const sim_context& ctx)> make;
};

/// A peer's runner: `plan` on each step's records (token_peer_runner), with `note`.
template <class Plan>
[[nodiscard]] std::function<std::unique_ptr<token_runner>(const sim_context&)>
make_peer(Plan plan, std::string note) {
    return [plan, note](const sim_context& ctx) -> std::unique_ptr<token_runner> {
        return std::make_unique<token_peer_runner>(ctx, plan, note);
    };
}

[[nodiscard]] inline const std::vector<token_policy_entry>& token_policy_table() {
    static const std::vector<token_policy_entry> table = [] {
        const auto t = [](const sim_context& ctx) {
            return static_cast<double>(*ctx.tokens.max_tokens);
        };
        return std::vector<token_policy_entry>{
            {"none",
             "each rank's records packed in arrival order (sequential: a micro-batch closes when "
             "the next record would take it above T); the count per step is the most any rank "
             "needs, the others running empty micro-batches: a trainer that does not balance",
             make_peer(
                 [t](std::span<const double> lengths, std::span<const double>,
                     const sim_context& ctx) {
                     return none_plan(lengths, ctx.ranks, t(ctx), ctx.tokens.multiple_of);
                 },
                 "sequential packing per rank, padded to the most any rank needs")},
            {"global",
             "bcl's token plan (bcl::token_planner): every rank plans the same micro-batches of "
             "all ranks' records, K held batches or a window of K steps at a time, and keeps its "
             "share; no communication",
             [](const sim_context& ctx) -> std::unique_ptr<token_runner> {
                 return std::make_unique<token_global_runner>(ctx);
             }},
            {"verl_dynamic",
             "verl's dynamic batch size: balance_batch (Karmarkar-Karp, equal sizes) across "
             "ranks, then rearrange_micro_batches per rank (all-reduced count, Karmarkar-Karp "
             "into micro-batches, one more until all fit T)",
             make_peer(
                 [t](std::span<const double> lengths, std::span<const double>,
                     const sim_context& ctx) {
                     return verl_dynamic_plan(lengths, ctx.ranks, t(ctx), ctx.tokens.multiple_of);
                 },
                 "balance_batch, then rearrange_micro_batches with the strict budget, on "
                 "verl's workload 24576 L + L^2; the repartition loop taken as collective")},
            {"skyrl",
             "SkyRL's balanced bin packing (max_tokens_per_microbatch): each worker's contiguous "
             "chunk packed longest first into the least-loaded bin that fits, counts padded to "
             "the most over the workers",
             make_peer(
                 [t](std::span<const double> lengths, std::span<const double>,
                     const sim_context& ctx) { return skyrl_plan(lengths, ctx.ranks, t(ctx)); },
                 "padding micro-batches cost nothing; SkyRL has no multiple, so --multiple-of "
                 "does not apply")},
            {"nemo_rl",
             "NeMo-RL's sequence packing: the step's records packed by MFFD into bins of T "
             "tokens, the bin count a multiple of R, bins dealt round-robin",
             make_peer(
                 [t](std::span<const double> lengths, std::span<const double>,
                     const sim_context& ctx) { return nemo_rl_plan(lengths, ctx.ranks, t(ctx)); },
                 "modified_first_fit_decreasing, microbatch_order packer; --multiple-of does not "
                 "apply (the count is a multiple of R)")},
            {"fixed_length",
             "WLB-LLM's baseline: each rank's records concatenated and cut into micro-batches of "
             "exactly T tokens, records split; the count per step is the most any rank needs, "
             "the others idle",
             make_peer(
                 [t](std::span<const double> lengths, std::span<const double>,
                     const sim_context& ctx) {
                     return fixed_length_plan(lengths, ctx.ranks, t(ctx), ctx.tokens.multiple_of);
                 },
                 "records split at every T tokens (a piece costs by its own length); idle ranks "
                 "run empty micro-batches")},
            {"global_fixed",
             "bcl's fixed-B global plan on the same records, micro-batches of B records "
             "whatever their tokens: the paper's shape beside the token shape",
             [](const sim_context& ctx) -> std::unique_ptr<token_runner> {
                 return std::make_unique<token_fixed_runner>(ctx);
             }},
        };
    }();
    return table;
}

[[nodiscard]] inline const token_policy_entry* find_token_policy(std::string_view name) {
    for (const token_policy_entry& e : token_policy_table())
        if (e.name == name) return &e;
    return nullptr;
}

/// The names of micro-batch mode's policies, comma-separated.
[[nodiscard]] inline std::string token_policy_names() {
    std::string names;
    for (const token_policy_entry& e : token_policy_table()) {
        if (!names.empty()) names += ',';
        names += e.name;
    }
    return names;
}

/// The names of the policies a micro-batch-mode run asks for, in the order asked and each once;
/// without --policy, every policy of the table.
[[nodiscard]] inline std::vector<std::string> requested_token_policies(const sim_config& cfg) {
    std::vector<std::string> names;
    if (cfg.policies.empty()) {
        for (const token_policy_entry& e : token_policy_table()) names.push_back(e.name);
        return names;
    }
    for (const std::string& name : cfg.policies)
        if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
    return names;
}

} // namespace bcl_sim
