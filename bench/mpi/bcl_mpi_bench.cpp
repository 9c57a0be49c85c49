// bcl-mpi-bench: the simulator's claim checked on real processes. Every MPI rank draws its own
// record stream (the same distributions, cost models and `file:` sharding as bcl-sim), batches it
// under each policy in turn and, for every batch, "computes" for a time proportional to the
// batch's true cost (a sleep until a steady-clock deadline) before it joins an allreduce, the way
// a data-parallel trainer joins its gradient all-reduce. A step therefore lasts as long as its
// slowest rank, in wall-clock time. Rank 0 reports the measured time per step, the measured
// speedup against `none`, and the speedup bcl-sim's metrics predict from the very same per-rank
// batch costs (gathered to rank 0).
//
// The `global` row is the global plan instead: every rank draws every rank's stream (the same
// records the other rows see, the shared seed), plans each window of K steps of all ranks'
// records with bcl::global_planner, alike on every rank, and runs its own share. No
// communication but the step's allreduce, as in the other rows.
//
//   mpirun -np 4 --oversubscribe build/bin/bcl-mpi-bench
//       --dist file:bench/workloads/sharegpt_8k_filtered_llama2_total_tokens.txt --steps 60
//
// Ranks sleep rather than spin while they "compute", so more ranks than cores is fine.
// Exit codes, the same on every rank: 0 success, 2 bad input on any rank (flags, distribution,
// cost model, workload file), 1 anything else (a rank that breaks mid-run aborts the whole job).
// See docs/mpi.md.

#include "mpi_report.hpp"
#include "mpi_runs.hpp"
#include "mpi_setup.hpp"

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

namespace {

using namespace bcl_mpi;

int run(int argc, char** argv) {
    int rank = 0;
    int ranks = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &ranks);

    // 1. Every rank validates everything it was given and draws its stream, on its own; then they
    //    agree. Nothing collective happens before this point, so bad input on one rank cannot
    //    leave the others waiting.
    rank_setup setup;
    std::string message;
    const setup_status mine = local_setup(argc, argv, rank, ranks, setup, message);
    switch (agree(mine, message, rank, ranks)) {
    case setup_status::run:
        break;
    case setup_status::help:
        return 0;
    case setup_status::bad_input:
        return 2;
    }
    const bench_config& cfg = setup.cfg;
    if (!same_settings_everywhere(setup, rank)) return 2;

    // 2. The time scale, the same on every rank: a batch of the mean cost over all ranks' records
    //    sleeps step-ms. Every policy processes exactly these records, so the total work, and
    //    the ideal step time, is the same for all of them.
    double totals[2] = {setup.cost_sum, static_cast<double>(setup.records.size())};
    MPI_Allreduce(MPI_IN_PLACE, totals, 2, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    run_context ctx;
    ctx.ranks = ranks;
    ctx.mean_batch_cost = totals[0] / totals[1] * static_cast<double>(cfg.batch);
    if (!(ctx.mean_batch_cost > 0.0 && std::isfinite(ctx.mean_batch_cost))) {
        if (rank == 0)
            fmt::print(stderr,
                       "{}: error: the mean batch cost over all ranks is {}; every record costs "
                       "nothing under --cost {}, so there is nothing to time (exit code 2)\n",
                       program, ctx.mean_batch_cost, bcl_sim::describe(cfg.cost));
        return 2;
    }
    ctx.ms_per_cost = cfg.step_ms / ctx.mean_batch_cost;
    ctx.mpi_library = mpi_library_version();
    const timing clock{.ms_per_cost = ctx.ms_per_cost,
                       .wait = cfg.wait_text == "block" ? wait_mode::block : wait_mode::poll,
                       .batch_size = cfg.batch,
                       .rank = rank,
                       .ranks = ranks,
                       .seed = cfg.seed,
                       .time_noise = cfg.calibrate ? cfg.time_noise : 0.0};

    // 3. The policies back to back, none first; all of them again in every further round. A
    //    round replays the same batches (same records, options and seeds), so rounds differ only
    //    in what the machine was doing meanwhile, and the median round discards a disturbed one.
    std::vector<policy_report> reports;
    bcl_cli::progress bar(rank == 0 ? cfg.progress : "off");
    for (std::size_t round = 0; round < cfg.rounds; ++round)
        for (std::size_t i = 0; i < cfg.policies.size(); ++i) {
            const std::string& name = cfg.policies[i];
            bar.begin(fmt::format("{}: round {}/{}, policy {} ({}/{}), {} steps", program,
                                  round + 1, cfg.rounds, name, i + 1, cfg.policies.size(),
                                  cfg.steps));
            policy_report rep = run_policy(setup, name, clock);
            if (rep.batches_min != rep.batches_max) {
                bar.clear();
                if (rank == 0)
                    fmt::print(stderr,
                               "{}: error: policy {} gave between {} and {} batches across the "
                               "ranks; a real trainer would hang here (exit code 1)\n",
                               program, name, rep.batches_min, rep.batches_max);
                return 1;
            }
            if (round == 0) {
                rep.round_walls.push_back(rep.wall_s);
                reports.push_back(std::move(rep));
            } else {
                reports[i].round_walls.push_back(rep.wall_s);
                reports[i].contract_ok = reports[i].contract_ok && rep.contract_ok;
                reports[i].same_plan = reports[i].same_plan && rep.same_plan;
            }
        }
    bar.clear();
    if (rank == 0) {
        for (policy_report& p : reports) {
            p.wall_s = median(p.round_walls);
            p.mean_step_ms = 1000.0 * p.wall_s / static_cast<double>(p.batches_max);
        }
        const policy_report& none = reports.front();
        for (policy_report& p : reports) {
            p.measured_speedup = p.wall_s > 0.0 ? none.wall_s / p.wall_s : 0.0;
            p.predicted_speedup =
                bcl_sim::speedup(p.predicted_efficiency, none.predicted_efficiency);
        }
        if (cfg.format == "json")
            print_json(cfg, ctx, reports);
        else
            print_table(cfg, ctx, reports);
        std::fflush(stdout);
    }
    // Every rank holds the same (all-reduced) verdict, so every rank exits the same way.
    int code = 0;
    for (const policy_report& p : reports)
        if (!p.same_plan) {
            if (rank == 0)
                fmt::print(stderr,
                           "{}: error: policy {}: the ranks' plans differ (their digests "
                           "disagree), so records were trained twice or never (exit code 1)\n",
                           program, p.name);
            code = 1;
        } else if (!p.contract_ok) {
            if (rank == 0)
                fmt::print(stderr,
                           "{}: error: policy {} emitted a short batch, or lost or duplicated a "
                           "record, on some rank (exit code 1)\n",
                           program, p.name);
            code = 1;
        }
    return code;
}

} // namespace

int main(int argc, char** argv) {
    MPI_Init(&argc, &argv);
    const int code = run(argc, argv);
    MPI_Finalize();
    return code;
}
