#pragma once
// bcl-mpi-bench's timed runs: each policy's batches "computed" for a time proportional to
// their true cost, then an allreduce, as a data-parallel step.

#include "mpi_setup.hpp"

#include <bcl/balance.hpp>
#include <bcl/calibrated_cost.hpp>
#include <bcl/epoch_plan.hpp>
#include <bcl/global_plan.hpp>
#include <bcl/names.hpp>
#include <bcl/options.hpp>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <mpi.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <iterator>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <variant>
#include <vector>

namespace bcl_mpi {

// ---------------------------------------------------------------------------------------------
// The timed runs.
// ---------------------------------------------------------------------------------------------

/// How a rank waits for the others in the step's allreduce.
enum class wait_mode {
    /// MPI_Iallreduce, then MPI_Test every poll_interval with a sleep in between. The waiting
    /// ranks leave the cores to the ranks still "computing", so more ranks than cores (or a
    /// shared machine) adds the same small delay to every policy rather than delaying the
    /// slowest rank's wake-up by however long the others have been spinning.
    poll,
    /// A plain blocking MPI_Allreduce, as most trainers call it. MPI libraries usually spin
    /// inside it; use this with at most one rank per core.
    block,
};

/// Between two MPI_Test calls in wait_mode::poll: short against a step of milliseconds, long
/// enough that a waiting rank uses next to no CPU.
constexpr std::chrono::microseconds poll_interval{50};

/// In-place sum over all ranks of two doubles, waiting as `wait` says.
inline void allreduce_sum(double (&values)[2], wait_mode wait) {
    if (wait == wait_mode::block) {
        MPI_Allreduce(MPI_IN_PLACE, values, 2, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        return;
    }
    MPI_Request request = MPI_REQUEST_NULL;
    MPI_Iallreduce(MPI_IN_PLACE, values, 2, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, &request);
    for (;;) {
        int done = 0;
        MPI_Test(&request, &done, MPI_STATUS_IGNORE);
        if (done != 0) return;
        std::this_thread::sleep_for(poll_interval);
    }
}

/// What every step needs to know, the same on every rank but `rank`.
struct timing {
    double ms_per_cost = 0.0; ///< milliseconds a rank sleeps per unit of batch cost
    wait_mode wait = wait_mode::poll;
    std::size_t batch_size = 0;
    int rank = 0;
    int ranks = 1;
    std::uint64_t seed = 1;
    double time_noise = 0.0; ///< sigma of every sleep's lognormal noise; 0 without --calibrate
};

/// No measured times wanted.
struct ignore_times {
    void operator()(std::uint64_t, double) const noexcept {}
};

/// Runs steps until every rank has run out of batches. `next_batch()` yields the next batch's
/// batch_info, or nothing at the end. Each step: take the batch, sleep until
/// (now + cost * ms_per_cost), then an allreduce that stands in for the gradient all-reduce. Its
/// payload says how many ranks had a batch, so a rank that runs out early (or late) stops every
/// rank in the same step instead of leaving the others waiting forever.
///
/// The deadline is set once the batch is in hand, so any time the policy itself spends choosing
/// the batch is added to the step, never hidden in it.
///
/// Each batch's sleep is its true cost times time_noise_factor (1 without noise), and the time
/// the rank measured for it (the sleep alone, not the allreduce) goes to `observe(index, s)`.
template <class NextBatch, class Observe = ignore_times>
rank_run timed_run(NextBatch&& next_batch, const timing& t, Observe&& observe = {}) {
    rank_run out;
    MPI_Barrier(MPI_COMM_WORLD);
    const clock_type::time_point start = clock_type::now();
    for (;;) {
        const std::optional<batch_info> batch = next_batch();
        if (batch) {
            const std::uint64_t index = out.batch_costs.size();
            const double noise = bcl_sim::time_noise_factor(
                t.seed, static_cast<std::size_t>(t.rank), index, t.time_noise);
            const std::chrono::duration<double, std::milli> busy(batch->cost * t.ms_per_cost *
                                                                 noise);
            const clock_type::time_point began = clock_type::now();
            std::this_thread::sleep_until(began +
                                          std::chrono::duration_cast<clock_type::duration>(busy));
            observe(index, std::chrono::duration<double>(clock_type::now() - began).count());
            out.batch_costs.push_back(batch->cost);
            out.records += batch->records;
            out.id_sum += batch->id_sum;
            out.short_batch = out.short_batch || batch->records != t.batch_size;
        }
        // [ranks that had a batch, sum of their costs]: small on purpose, so the step time is the
        // wait for the slowest rank and not the size of a gradient.
        double payload[2] = {batch ? 1.0 : 0.0, batch ? batch->cost : 0.0};
        allreduce_sum(payload, t.wait);
        const long with_batch = std::lround(payload[0]);
        if (with_batch == 0) break;
        if (with_batch != t.ranks)
            break; // some ranks ran out before others: their counts differ, run_policy reports it
    }
    out.wall_s = std::chrono::duration<double>(clock_type::now() - start).count();
    return out;
}

/// `none`: consecutive batches of B records in stream order (DistributedSampler + DataLoader).
inline rank_run run_none(const rank_setup& setup, const timing& t) {
    const std::vector<bench_record>& recs = setup.records;
    const std::size_t b = setup.cfg.batch;
    std::size_t next = 0;
    auto next_batch = [&]() -> std::optional<batch_info> {
        if (next >= recs.size()) return std::nullopt;
        const std::size_t end = std::min(recs.size(), next + b);
        batch_info info;
        tally(info, std::span<const bench_record>(recs).subspan(next, end - next));
        next = end;
        return info;
    };
    return timed_run(next_batch, t);
}

/// A bcl policy: the rank's stream through bcl::balance, exactly as a training loop uses it, with
/// the options bcl-sim gives this rank (its seed, bcl's defaults otherwise).
/// The timed run of a bcl policy whose balancer estimates with `estimator`. A calibrating one
/// observes every batch's measured sleep and reports its fit.
template <class Estimator>
rank_run run_bcl_with(const rank_setup& setup, Estimator estimator, const bcl::options& opt,
                      const timing& t) {
    std::vector<bench_record> stream = setup.records; // every policy reads a fresh copy
    auto batches = bcl::balance(std::move(stream), std::move(estimator), opt);
    // begin() already pulls the first batch, so it is called inside the first timed step.
    std::optional<decltype(batches.begin())> it;
    auto next_batch = [&]() -> std::optional<batch_info> {
        if (!it)
            it = batches.begin();
        else
            ++*it;
        if (*it == batches.end()) return std::nullopt;
        batch_info info;
        tally(info, **it);
        return info;
    };
    constexpr bool calibrating = bcl::calibratable_estimator<Estimator, bench_record>;
    if constexpr (calibrating) {
        rank_run out = timed_run(next_batch, t, [&](std::uint64_t index, double seconds) {
            batches.balancer().observe(index, seconds);
        });
        const bcl::calibration_summary<3> fit = batches.balancer().calibration();
        out.fitted = fit.fitted;
        return out;
    } else {
        return timed_run(next_batch, t);
    }
}

inline rank_run run_bcl(const rank_setup& setup, bcl::lookahead_policy policy,
                        bcl::emission_order emission, const timing& t) {
    const bench_config& cfg = setup.cfg;
    bcl_sim::sim_context ctx = make_context(cfg, t.ranks, nullptr);
    ctx.emission = emission;
    const bcl::options opt = bcl_sim::bcl_options(ctx, static_cast<std::size_t>(t.rank), policy);
    // Without --calibrate the balancers' estimate is --cost (by default also the true cost, as
    // in bcl-sim: the bench then measures what balancing can buy when the cost model is right).
    if (cfg.calibrate)
        return run_bcl_with(setup,
                            bcl::calibrated_affine_quadratic(cfg.cost.a, cfg.cost.b, cfg.cost.c,
                                                             &bench_record::length),
                            opt, t);
    return run_bcl_with(setup, bcl_sim::true_cost{}, opt, t);
}

/// `global`: every rank plans each window of K steps of all ranks' records with
/// bcl::global_planner, from the records every rank drew alike (`all_records`), and runs the
/// batches the plan gives it, in the plan's step order. The window is rank 0's K*B records, then
/// rank 1's, and so on (bcl-sim's global policy); the last window is short when K does not divide
/// --steps. The plan estimates with --cost (a --calibrate run does not refit it: every rank must
/// plan alike). A window is planned when its first step asks for its batch, so planning time
/// counts against the step, as the rank-local policies' does.
inline rank_run run_global(const rank_setup& setup, const timing& t) {
    const std::size_t R = static_cast<std::size_t>(t.ranks);
    const std::size_t B = setup.cfg.batch;
    const std::size_t K = setup.cfg.lookahead;
    const std::size_t steps = setup.cfg.steps;
    const std::size_t per_rank = steps * B; // records of each rank's stream
    const auto mine = static_cast<std::uint32_t>(t.rank);

    bcl::epoch_planner planner;
    std::vector<double> costs;
    std::vector<std::size_t> order; // 0, 1, ...: a window's records in rank order
    std::vector<batch_info> window; // this rank's batches of the current window, by step
    std::uint64_t digest = 0;       // chained over the windows
    std::size_t step = 0;           // the next step of the run
    auto next_batch = [&]() -> std::optional<batch_info> {
        if (step >= steps) return std::nullopt;
        const std::size_t in_window = step % K;
        if (in_window == 0) {
            const std::size_t first = step * B;                      // in each rank's stream
            const std::size_t m = std::min(K * B, per_rank - first); // per rank, a multiple of B
            costs.resize(R * m);
            order.resize(R * m);
            for (std::size_t r = 0; r < R; ++r)
                for (std::size_t i = 0; i < m; ++i) {
                    costs[r * m + i] = setup.all_records[r * per_rank + first + i].cost;
                    order[r * m + i] = r * m + i;
                }
            // The window is an epoch of one window (bcl::epoch_planner), its digest chained on.
            window.assign((m + B - 1) / B, batch_info{});
            (void)planner.plan(
                std::span<const double>(costs), std::span<const std::size_t>(order),
                bcl::epoch_shape{.ranks = R, .lookahead = K, .batch = B}, {},
                [&](std::size_t, std::span<const bcl::plan_slot> plan, const bcl::plan_summary&) {
                    digest = bcl::plan_digest(plan, digest);
                    for (std::size_t j = 0; j < plan.size(); ++j)
                        if (plan[j].rank == mine) {
                            const std::size_t r = j / m;
                            const bench_record& rec =
                                setup.all_records[r * per_rank + first + j % m];
                            tally(window.at(plan[j].step), std::span<const bench_record>(&rec, 1));
                        }
                });
        }
        ++step;
        return window.at(in_window);
    };
    rank_run out = timed_run(next_batch, t);
    out.plan_digest = digest;
    return out;
}

/// The library policy a rank-local row runs: its name without `_shuffled`, looked up in the
/// library's registry (a bcl::error for a name it does not know).
inline bcl::lookahead_policy to_bcl_policy(std::string_view name) {
    if (name.ends_with(shuffled_suffix)) name.remove_suffix(shuffled_suffix.size());
    return bcl::named<bcl::lookahead_policy>(name);
}

inline bcl::emission_order to_emission(std::string_view name, const bench_config& cfg) {
    return name.ends_with(shuffled_suffix) ? bcl::emission_order::shuffled
                                           : bcl_sim::parse_emission(cfg.emission_text);
}

/// Collective: one policy's run on every rank, its checks and, on rank 0, its report (the
/// speedups are filled in later, against none).
inline policy_report run_policy(const rank_setup& setup, std::string_view name, const timing& t) {
    const int rank = t.rank;
    const int ranks = t.ranks;
    rank_run run;
    try {
        if (name == "none")
            run = run_none(setup, t);
        else if (name == "global")
            run = run_global(setup, t);
        else
            run = run_bcl(setup, to_bcl_policy(name), to_emission(name, setup.cfg), t);
    } catch (const std::exception& e) {
        // The other ranks are inside an allreduce by now and cannot be told politely.
        fmt::print(stderr, "{}: rank {}: error during the {} run: {}; aborting every rank\n",
                   program, rank, name, e.what());
        std::fflush(stderr);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }

    // The contract checks: the same batch count on every rank, every batch full, every record out
    // exactly once (the count and the id checksum of the emitted records match the input's). A
    // rank-local policy keeps its records on its rank, so each rank checks its own; the global
    // plan moves records between ranks, so each rank checks its count and the ranks' checksums
    // together must match all ranks' records. The global plan must also be the same on every
    // rank: its digests, chained over the windows, must agree.
    const bool global = run.plan_digest.has_value();
    const auto batches = static_cast<long long>(run.batch_costs.size());
    const bool flawed = run.short_batch || run.records != setup.records.size() ||
                        (!global && run.id_sum != setup.id_sum);
    const std::uint64_t digest = run.plan_digest.value_or(0);
    long long checks[3] = {batches, -batches, flawed ? 1 : 0};
    MPI_Allreduce(MPI_IN_PLACE, checks, 3, MPI_LONG_LONG, MPI_MAX, MPI_COMM_WORLD);
    // [emitted checksum, summed over ranks], [max digest, max of ~digest]: one each, every row.
    std::uint64_t emitted = run.id_sum;
    MPI_Allreduce(MPI_IN_PLACE, &emitted, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
    std::uint64_t digests[2] = {digest, ~digest};
    MPI_Allreduce(MPI_IN_PLACE, digests, 2, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD);

    policy_report rep;
    rep.name = std::string(name);
    rep.batches_max = checks[0];
    rep.batches_min = -checks[1];
    rep.same_plan = digests[0] == ~digests[1];
    rep.contract_ok = checks[2] == 0 && rep.same_plan && (!global || emitted == setup.all_id_sum);

    // Calibrated rows: the mean over ranks of the fitted coefficients. Every rank has a fit or
    // none (the same flags and policy everywhere), so every rank takes the same branch.
    if (run.fitted) {
        std::array<double, 3> sum = *run.fitted;
        MPI_Reduce(rank == 0 ? MPI_IN_PLACE : sum.data(), sum.data(), 3, MPI_DOUBLE, MPI_SUM, 0,
                   MPI_COMM_WORLD);
        if (rank == 0) {
            std::array<double, 3> seconds{};
            std::array<double, 3> cost{};
            for (std::size_t j = 0; j < 3; ++j) {
                seconds[j] = sum[j] / static_cast<double>(ranks);
                cost[j] = seconds[j] / (t.ms_per_cost / 1000.0);
            }
            rep.fitted_seconds = seconds;
            rep.fitted_cost = cost;
        }
    }

    double wall = run.wall_s; // the slowest rank's clock; they differ by one allreduce at most
    MPI_Reduce(rank == 0 ? MPI_IN_PLACE : &wall, &wall, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    rep.wall_s = wall;
    // Decided on all-reduced values only, so every rank takes the same branch.
    if (rep.batches_min != rep.batches_max)
        return rep; // nothing to gather: the caller stops every rank

    // The prediction from the very same batches: gather every rank's per-step costs.
    const std::size_t steps = run.batch_costs.size();
    std::vector<double> by_rank(rank == 0 ? steps * static_cast<std::size_t>(ranks) : 0);
    MPI_Gather(run.batch_costs.data(), static_cast<int>(steps), MPI_DOUBLE, by_rank.data(),
               static_cast<int>(steps), MPI_DOUBLE, 0, MPI_COMM_WORLD);
    if (rank == 0 && steps > 0) {
        const auto R = static_cast<std::size_t>(ranks);
        std::vector<double> step_major(steps * R); // costs[s * R + r], as bcl-sim's metrics take
        for (std::size_t r = 0; r < R; ++r)
            for (std::size_t s = 0; s < steps; ++s) step_major[s * R + r] = by_rank[r * steps + s];
        const bcl_sim::step_metrics m = bcl_sim::compute_metrics(step_major, R);
        rep.predicted_step_ms = m.mean_step_time * t.ms_per_cost;
        rep.predicted_efficiency = m.efficiency;
    }
    return rep;
}

} // namespace bcl_mpi
