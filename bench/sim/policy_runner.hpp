#pragma once
// What every policy runner shares: its context, the records it fetches, what it reports.

#include "batching.hpp"
#include "calibration.hpp"
#include "cost_and_cap.hpp"
#include "token_settings.hpp"
#include "workload.hpp"

#include <bcl/options.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace bcl_sim {

// ---------------------------------------------------------------------------------------------
// Policies: what every policy runner shares.
// ---------------------------------------------------------------------------------------------

/// Called once for every record a policy puts in a batch: the step, the rank, and the record's
/// global id (index * R + rank of the stream it came from). Optional; tests use it to check that
/// every record is emitted exactly once.
using emit_observer = std::function<void(std::size_t step, std::size_t rank, std::uint64_t id)>;

/// What the bcl policies do at an epoch boundary (--epoch-start, with --epoch-steps).
enum class epoch_boundary {
    /// The rank's balancer, drained, goes on into the next epoch (bcl::balancer::next_epoch):
    /// it keeps what it learned (the quantile cap's sketch, the heavy slots, a calibration's
    /// fit, the running mean), as the samplers carry theirs from epoch to epoch.
    carry,
    /// A new balancer per rank every epoch, with the same options: it learns everything again.
    fresh,
};

[[nodiscard]] inline std::string_view describe(epoch_boundary e) noexcept {
    return e == epoch_boundary::fresh ? "fresh" : "carry";
}

/// Parses an --epoch-start value: `carry` or `fresh`. Throws input_error otherwise.
[[nodiscard]] inline epoch_boundary parse_epoch_start(std::string_view text) {
    if (text == "carry") return epoch_boundary::carry;
    if (text == "fresh") return epoch_boundary::fresh;
    throw input_error(
        fmt::format("--epoch-start {}: unknown epoch start (expected carry or fresh)", text));
}

/// The settings a run and each of its policies share, given once: bcl-sim's flags of the same
/// names. sim_config adds what the command line says beyond them, sim_context what a run
/// resolves for one policy; bcl_options() makes the balancers' options from them.
struct run_settings {
    std::size_t ranks = 8;     ///< --ranks: R
    std::size_t batch = 16;    ///< --batch: B, records per rank per step
    std::size_t lookahead = 8; ///< --lookahead: K, batches per window of the windowed policies
    std::uint64_t seed = 1;    ///< --seed
    /// --cost: the model every policy estimates with (the only one a real loader knows).
    cost_model cost = default_cost();
    /// --memory-budget: per-batch budget on the sum of lengths (tokens), 0 for none. The bcl
    /// policies balance within it; for every policy, batches above it are counted
    /// (over_budget_batches).
    double memory_budget = 0.0;
    /// --batching: what a rank spends on a batch, the sum of its records' costs or B times its
    /// costliest record's, for every policy (mffd's packed bins are never padded).
    batch_cost batching = batch_cost::packed;
    /// --emission: the bcl policies' emission order (bcl::options::emission).
    emission_order emission = emission_order::costliest_first;
    /// --buffer-windows and --max-age: the sliding policy's buffer (windows) and delay bound
    /// (rounds), bcl's defaults unless given.
    std::size_t buffer_windows = bcl::options{}.buffer_windows;
    std::size_t max_age = bcl::options{}.max_age;
    /// --epoch-steps: every this many steps the bcl policies start an epoch on each rank, which
    /// takes exactly epoch_steps * B records of the rank's stream and drains them (what the
    /// samplers do every epoch; see bcl_local_runner). 0: one balancer per rank for the whole
    /// run, never drained. The other policies ignore it.
    std::size_t epoch_steps = 0;
    /// --epoch-start (with epoch_steps > 0): at each epoch boundary the rank's balancer goes on
    /// (bcl::balancer::next_epoch, as the samplers do) or a new one takes its place.
    epoch_boundary epoch_start = epoch_boundary::carry;
    /// --mean-cost epoch (needs epoch_steps > 0): each epoch's balancers get as
    /// bcl::options::mean_cost the mean of their epoch's estimated costs under the run's cap
    /// (bcl::stream_mean_cost), as the samplers pass it.
    bool mean_cost_epoch = false;
    /// --calibrate: the bcl policies tumbling and sliding fit their cost model online, from the
    /// prior `cost`, to their batches' true costs times exp(N(0, time_noise)).
    bool calibrate = false;
    double time_noise = 0.05; ///< --time-noise: sigma of the times' lognormal noise
    token_settings tokens;    ///< micro-batch mode (--max-tokens and its flags)
};

/// Everything a policy needs to run: the run's settings and what the run resolved from them.
struct sim_context : run_settings {
    record_source* source = nullptr;
    double bin_tokens = 0.0; ///< mffd bin capacity in tokens (already resolved, > 0)
    emit_observer observer;  ///< optional
    /// The cap of every policy, in cost units (bcl_cap()). The bcl policies hand it to their
    /// balancers. The baselines apply it only when it truncates, through `truncation`.
    bcl::cap_options cap{};
    /// The baselines' capped stream under a truncating cap (set by make_baseline); null otherwise.
    std::shared_ptr<stream_cap> truncation;
    /// --cap-prior in cost units: the cap during a quantile cap's warm-up, none for +infinity.
    /// The baselines' stream_cap applies it; the bcl balancers get it as bcl::cap_options::prior.
    std::optional<double> cap_prior;
    /// --mean-cost in cost units (bcl::options::mean_cost), none for each rank's running mean.
    std::optional<double> mean_cost;
    /// What the ranks truly spend, per step (--true-cost, --drift); every policy estimates with
    /// `cost`, but every metric is computed on this (run_policy hands it to the step_block).
    cost_schedule truth;
};

/// One record as a policy sees it.
struct sample {
    double length = 0.0;
    double cost = 0.0;
    std::uint64_t id = 0; ///< global id: index * R + rank
    bool capped = false;  ///< truncated by the cap (baselines under a truncating cap)
};

/// Reads rank `rank`'s index-th record (truncated, if ctx.truncation is set) and prices it.
/// Throws input_error if the cost model gives a non-finite cost (a length too large for it).
[[nodiscard]] inline sample fetch(const sim_context& ctx, std::size_t rank, std::uint64_t index) {
    double length = 0.0;
    bool capped = false;
    if (ctx.truncation) {
        const stream_cap::record rec = ctx.truncation->read(rank, index);
        length = rec.length;
        capped = rec.capped;
    } else {
        length = ctx.source->length(rank, index);
    }
    const double cost = record_cost(ctx.cost, length, rank, index);
    return {length, cost, index * ctx.ranks + rank, capped};
}

inline void observe(const sim_context& ctx, std::size_t step, std::size_t rank, std::uint64_t id) {
    if (ctx.observer) ctx.observer(step, rank, id);
}

/// What a policy reports besides its costs.
struct policy_extras {
    /// Mean over windows of (heaviest pack - lower bound) / lower bound, for policies that
    /// partition with bcl's partitioner; empty for the others.
    std::optional<double> mean_gap_to_lb;
    /// Largest number of steps a record was held beyond the step it arrives in on its rank
    /// (its index / B), i.e. beyond the batch fixed-count batching would have put it in.
    std::uint64_t max_delay_batches = 0;
    /// Records capped. bcl policies: the sum over ranks of bcl::statistics::records_capped
    /// (records pushed whose estimate was above the cap, clipped or truncated). Baselines: records
    /// emitted that the truncating cap shortened (0 under clip, which leaves them untouched).
    std::uint64_t capped = 0;
    /// bcl policies: the largest bcl::statistics::peak_batch_memory over ranks (the library's own
    /// count of the tokens of its largest batch; the simulator's peak_batch_tokens must agree).
    /// 0 for the others.
    double peak_batch_memory = 0.0;
    /// Anything the reader should know about this run of the policy.
    std::string note;
    /// A calibrated bcl policy (--calibrate): what it fitted and how well it predicted.
    std::optional<calibration_report> calibration;
};

/// What a policy writes for a block of steps: at [(s - first) * R + r], the time rank r spends in
/// step s, the tokens (sum of lengths) of what it processes in that step, and its useful cost (the
/// sum of its records' costs, what it would spend packed). All three arrive zeroed.
struct step_block {
    std::span<double> costs;
    std::span<double> tokens;
    std::span<double> useful;
    /// 0 for packed batching: a rank spends the sum of its records' costs. Under padded batching,
    /// B: a rank spends B times the cost of its costliest record in the step. A policy that packs
    /// (mffd) sets it to 0 on its copy.
    double pad_to = 0.0;
    /// The true cost per step (--true-cost, --drift): a record costs the model in force at its
    /// step, whatever the policy estimated. Null: a record costs x.cost.
    const cost_schedule* truth = nullptr;
    std::size_t first = 0; ///< the step of the block's t = 0 (for `truth`)

    /// Rank r processes `x` in the block's step t.
    void charge(std::size_t t, std::size_t r, std::size_t ranks, const sample& x) const noexcept {
        const std::size_t i = t * ranks + r;
        const double cost = truth != nullptr ? truth->at(first + t)(x.length) : x.cost;
        useful[i] += cost;
        tokens[i] += x.length;
        if (pad_to > 0.0)
            costs[i] = std::max(costs[i], pad_to * cost); // B * the costliest record so far
        else
            costs[i] += cost;
    }
};

/// One policy's simulation, advanced a block of steps at a time.
class policy_runner {
public:
    virtual ~policy_runner() = default;
    /// Simulates steps [first, first + count) into `out`. Called with consecutive blocks from
    /// step 0; `first` is a multiple of K and count <= K.
    virtual void run(std::size_t first, std::size_t count, step_block out) = 0;
    [[nodiscard]] virtual policy_extras extras() const = 0;
};

/// Arrival step of a rank's index-th record: the step fixed-count batching would put it in.
[[nodiscard]] inline std::uint64_t arrival_step(const sim_context& ctx,
                                                std::uint64_t index) noexcept {
    return index / ctx.batch;
}

} // namespace bcl_sim
