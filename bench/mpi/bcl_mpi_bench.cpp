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

#include "cli.hpp"
#include "json_output.hpp"
#include "simulator.hpp"

#include <bcl/balance.hpp>
#include <bcl/calibrated_cost.hpp>
#include <bcl/global_plan.hpp>
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

namespace {

using clock_type = std::chrono::steady_clock;

constexpr std::string_view program = "bcl-mpi-bench";

/// The policies this bench runs: the reference, bcl's two rank-local policies and the global
/// plan. The rank-local rows run with --emission; a `_shuffled` row runs with emission shuffled,
/// so one run can measure what costliest-first emission buys against the same records. `global`
/// emits in the plan's order (heaviest step first).
constexpr std::string_view known_policies[] = {
    "none", "tumbling", "sliding", "tumbling_shuffled", "sliding_shuffled", "global"};

/// Most --rounds: the median of a thousand rounds is as steady as it gets.
constexpr std::uint64_t max_rounds = 1000;

/// Outcome of the set-up phase on one rank: run, help or bad_input. Ordered so that the maximum
/// over ranks is what every rank must do: any error beats a help request, which beats going on.
using setup_status = bcl_cli::request;

struct bench_config {
    std::string dist_text = "lognormal:mu=6,sigma=1";
    std::string cost_text = "affine"; // a=0, b=1, c=1/24576 unless given
    std::string policy_text = "none,tumbling,sliding";
    std::string format = "table";
    std::string wait_text = "poll";
    std::string emission_text = "costliest_first";
    std::string progress = "auto"; ///< --progress; shown by rank 0 only
    std::string true_cost_text;    ///< --true-cost; empty: the --cost model
    bool calibrate = false;        ///< --calibrate
    double time_noise = 0.05;      ///< --time-noise, with --calibrate
    std::size_t batch = 16;
    std::size_t lookahead = 8;
    std::size_t steps = 100;
    std::size_t rounds = 3;
    std::uint64_t seed = 1;
    double step_ms = 20.0;

    // Resolved from the text above.
    bcl_sim::dist_spec dist = bcl_sim::lognormal_spec{};
    bcl_sim::cost_model cost = bcl_sim::default_cost();
    bcl_sim::cost_model true_cost = bcl_sim::default_cost(); ///< --true-cost, or --cost
    std::vector<std::string> policies;                       ///< none first, no duplicates
    std::optional<std::size_t> dataset_records;
};

/// A record as a rank's balancer sees it: which record, its length, what the balancers estimate
/// it costs and what the rank truly spends on it.
struct bench_record {
    std::uint64_t id = 0; ///< global id, index * R + rank (as in bcl-sim)
    double length = 0.0;  ///< tokens: the feature a calibrated estimate fits on
    double cost = 0.0;    ///< the estimate under --cost (what bcl_sim::true_cost reads)
    double truth = 0.0;   ///< the true cost under --true-cost: what the rank sleeps for
};

/// A record's term in an order-independent checksum of a multiset of records (sum mod 2^64). The
/// batches a policy emits must sum to the input's: a record lost or emitted twice shows, with
/// overwhelming probability, since mix64 scatters ids over all 64 bits.
[[nodiscard]] std::uint64_t id_term(const bench_record& r) noexcept {
    return bcl_sim::mix64(r.id);
}

/// One batch as the timed loop sees it.
struct batch_info {
    double cost = 0.0;        ///< sum of its records' true costs (bench_record::truth)
    std::size_t records = 0;  ///< how many records
    std::uint64_t id_sum = 0; ///< sum of id_term over its records
};

/// Adds a batch's records to `info`.
template <class Records>
void tally(batch_info& info, const Records& records) noexcept {
    for (const bench_record& r : records) {
        info.cost += r.truth;
        info.id_sum += id_term(r);
        ++info.records;
    }
}

/// Everything one rank needs for the timed runs.
struct rank_setup {
    bench_config cfg;
    std::vector<bench_record> records;  ///< this rank's stream: steps * B records
    double cost_sum = 0.0;              ///< of `records`' true costs
    std::uint64_t id_sum = 0;           ///< of `records`, see id_term()
    std::uint64_t lengths_checksum = 0; ///< of the workload file, for `file:`
    /// With `global` among the policies: every rank's stream, rank r's records at
    /// [r * steps * B, (r + 1) * steps * B), the same on every rank (`records` is this rank's
    /// slice). Empty otherwise.
    std::vector<bench_record> all_records;
    std::uint64_t all_id_sum = 0; ///< of `all_records`: what all ranks' batches must sum to
};

/// One policy's run as seen by one rank.
struct rank_run {
    double wall_s = 0.0;
    std::vector<double> batch_costs; ///< true cost of each batch this rank processed
    std::uint64_t records = 0;       ///< records in those batches
    std::uint64_t id_sum = 0;        ///< of those records, see id_term()
    bool short_batch = false;        ///< a batch with fewer than B records
    /// --calibrate, bcl policies: the fitted a, b, c (in seconds) at the end of the run.
    std::optional<std::array<double, 3>> fitted;
    /// global: the chained bcl::plan_digest of the run's windows, to compare across ranks.
    std::optional<std::uint64_t> plan_digest;
};

/// One policy's result on rank 0.
struct policy_report {
    std::string name;
    double wall_s = 0.0;             ///< the median round's
    std::vector<double> round_walls; ///< wall time of each round, in order
    double mean_step_ms = 0.0;
    double predicted_step_ms = 0.0;
    double predicted_efficiency = 0.0;
    double measured_speedup = 0.0;
    double predicted_speedup = 0.0;
    std::int64_t batches_min = 0;
    std::int64_t batches_max = 0;
    bool contract_ok = true; ///< every batch had B records, every record came out once
    /// global: every rank computed the same plans (equal digests); true for the other rows.
    bool same_plan = true;
    /// Calibrated (--calibrate, bcl policies): fitted a, b, c, mean over ranks, in seconds per
    /// feature (measured sleeps), and the same in true cost units (divided by seconds per unit).
    std::optional<std::array<double, 3>> fitted_seconds;
    std::optional<std::array<double, 3>> fitted_cost;
};

/// FNV-1a over bytes, to compare settings across ranks without sending them.
class fingerprint {
public:
    void add(std::string_view text) noexcept {
        for (const char c : text) add_byte(static_cast<unsigned char>(c));
        add_byte(0); // so that "ab","c" differs from "a","bc"
    }
    void add(double x) noexcept { add(fmt::format("{}", x)); }
    void add(std::uint64_t x) noexcept { add(fmt::format("{}", x)); }
    [[nodiscard]] std::uint64_t value() const noexcept { return m_hash; }

private:
    void add_byte(unsigned char b) noexcept { m_hash = (m_hash ^ b) * 0x100000001b3ULL; }
    std::uint64_t m_hash = 0xcbf29ce484222325ULL;
};

// ---------------------------------------------------------------------------------------------
// Set-up: parse and validate on every rank, then agree before anything else is collective.
// ---------------------------------------------------------------------------------------------

std::vector<std::string> parse_policy_list(std::string_view text) {
    std::vector<std::string> out{"none"}; // the reference always runs, first
    for (std::string& name : bcl_cli::split_names(text, "--policy")) {
        if (std::find(std::begin(known_policies), std::end(known_policies), name) ==
            std::end(known_policies))
            throw bcl_sim::input_error(fmt::format(
                "--policy: unknown policy '{}' (expected some of none, tumbling, sliding, "
                "tumbling_shuffled, sliding_shuffled, global)",
                name));
        if (std::find(out.begin(), out.end(), name) == out.end()) out.push_back(std::move(name));
    }
    return out;
}

void validate_numbers(const bench_config& cfg) {
    bcl_sim::require_at_least_one(cfg.batch, "--batch");
    bcl_sim::require_at_least_one(cfg.lookahead, "--lookahead");
    bcl_sim::require_at_least_one(cfg.steps, "--steps");
    bcl_sim::require_at_least_one(cfg.rounds, "--rounds");
    // Every rank holds its whole stream (steps * B records of 16 bytes) in memory up front.
    if (cfg.steps > (std::size_t{1} << 26) / cfg.batch)
        throw bcl_sim::input_error(
            fmt::format("--steps * --batch = {} * {} is more than 2^26 records per rank", cfg.steps,
                        cfg.batch));
    if (!(cfg.step_ms > 0.0 && cfg.step_ms <= 60'000.0))
        throw bcl_sim::input_error(
            fmt::format("--step-ms must be > 0 and at most 60000 (got {})", cfg.step_ms));
    bcl_sim::validate_options(bcl::options{.batch_size = cfg.batch, .lookahead = cfg.lookahead});
}

/// The context bcl-sim's helpers take: this run's shape and this rank's stream.
bcl_sim::sim_context make_context(const bench_config& cfg, int ranks,
                                  bcl_sim::record_source* source) {
    // Member by member: the simulator's context may grow fields the bench has no use for.
    bcl_sim::sim_context ctx;
    ctx.ranks = static_cast<std::size_t>(ranks);
    ctx.batch = cfg.batch;
    ctx.lookahead = cfg.lookahead;
    ctx.seed = cfg.seed;
    ctx.cost = cfg.cost;
    ctx.source = source;
    return ctx;
}

/// Whether the run includes the global plan, whose ranks draw every rank's stream.
[[nodiscard]] bool runs_global(const bench_config& cfg) {
    return std::find(cfg.policies.begin(), cfg.policies.end(), "global") != cfg.policies.end();
}

/// The global plan's limits, checked before anything is drawn: every rank holds all ranks'
/// streams (R * steps * B records), and a window of R*K*B records must be one a plan takes.
void validate_global(const bench_config& cfg, int ranks) {
    const auto R = static_cast<std::uint64_t>(ranks);
    if (R * cfg.steps > (std::uint64_t{1} << 26) / cfg.batch)
        throw bcl_sim::input_error(fmt::format(
            "--policy global: every rank holds all ranks' records, and ranks * --steps * --batch "
            "= {} * {} * {} is more than 2^26",
            R, cfg.steps, cfg.batch));
    if (R * cfg.lookahead > bcl::max_plan_records / cfg.batch)
        throw bcl_sim::input_error(fmt::format(
            "--policy global: a window of ranks * --lookahead * --batch = {} * {} * {} records "
            "is more than a plan takes (2^30)",
            R, cfg.lookahead, cfg.batch));
}

/// Draws this rank's steps * B records, exactly as bcl-sim's rank `rank` of `ranks` reads them:
/// its own seeded stream for a synthetic distribution; for `file:`, each epoch a seeded shuffle
/// of the whole file dealt strided over the ranks (PyTorch's DistributedSampler). With `global`
/// among the policies, every rank's stream the same way, into `all_records`, as every rank of a
/// trainer with a shared permutation can.
void draw_records(rank_setup& setup, int rank, int ranks) {
    const bench_config& cfg = setup.cfg;
    std::unique_ptr<bcl_sim::record_source> source;
    if (const auto* file = std::get_if<bcl_sim::file_spec>(&cfg.dist)) {
        auto lengths =
            std::make_shared<const std::vector<double>>(bcl_sim::load_lengths(file->path));
        setup.cfg.dataset_records = lengths->size();
        fingerprint f;
        for (const double x : *lengths) f.add(x);
        setup.lengths_checksum = f.value();
        source = std::make_unique<bcl_sim::file_source>(std::move(lengths),
                                                        static_cast<std::size_t>(ranks), cfg.seed);
    } else {
        source = std::make_unique<bcl_sim::synthetic_source>(
            cfg.dist, static_cast<std::size_t>(ranks), cfg.seed);
    }
    const bcl_sim::sim_context ctx = make_context(cfg, ranks, source.get());
    const std::size_t n = cfg.steps * cfg.batch;
    // fetch() rejects a non-finite or negative cost, naming the record.
    const auto draw = [&](std::size_t r, std::size_t i) {
        const bcl_sim::sample x = bcl_sim::fetch(ctx, r, i);
        return bench_record{x.id, x.length, x.cost,
                            bcl_sim::record_cost(cfg.true_cost, x.length, r, i)};
    };
    // With `global`, every rank's stream, this rank's own records among them (sliced below, not
    // drawn twice).
    setup.all_records.clear();
    setup.all_id_sum = 0;
    const std::size_t streams = runs_global(cfg) ? static_cast<std::size_t>(ranks) : 0;
    setup.all_records.reserve(streams * n);
    for (std::size_t r = 0; r < streams; ++r)
        for (std::size_t i = 0; i < n; ++i) {
            setup.all_records.push_back(draw(r, i));
            setup.all_id_sum += id_term(setup.all_records.back());
        }
    setup.records.clear();
    setup.records.reserve(n);
    setup.cost_sum = 0.0;
    setup.id_sum = 0;
    const auto own = static_cast<std::size_t>(rank);
    for (std::size_t i = 0; i < n; ++i) {
        setup.records.push_back(streams != 0 ? setup.all_records[own * n + i] : draw(own, i));
        setup.cost_sum += setup.records.back().truth;
        setup.id_sum += id_term(setup.records.back());
    }
}

/// Parses the flags and draws the stream. Never throws and never communicates: whatever goes
/// wrong on this rank becomes a status and a message, to be shared with the others.
setup_status local_setup(int argc, char** argv, int rank, int ranks, rank_setup& setup,
                         std::string& message) {
    bench_config& cfg = setup.cfg;
    CLI::App app{"bcl-mpi-bench: real MPI ranks that sleep for their batch's cost and meet in an "
                 "allreduce every step; wall-clock speedup of bcl's policies against none, next "
                 "to the speedup bcl-sim predicts for the same batches. Run it under mpirun."};
    bcl_cli::add_workload_flags(app, cfg.dist_text, cfg.cost_text);
    bcl_cli::add_batch_flags(app, cfg.batch, cfg.lookahead);
    bcl_cli::add_count(app, "--steps", cfg.steps,
                       "steps per policy; each rank draws steps * B records, so every policy "
                       "processes exactly the same records",
                       bcl_cli::max_steps);
    bcl_cli::add_count(app, "--rounds", cfg.rounds,
                       "run every policy this many times, alternating; wall times are the median "
                       "round's (3 or more shrug off a busy moment on a shared machine)",
                       max_rounds);
    bcl_cli::add_seed_flag(app, cfg.seed);
    app.add_option("--policy", cfg.policy_text,
                   "comma list of none, tumbling, sliding, tumbling_shuffled, sliding_shuffled, "
                   "global (the _shuffled rows emit shuffled whatever --emission says; global is "
                   "bcl::global_planner over all ranks' records of each K-step window, every rank "
                   "planning alike and running its share); none always runs first (the reference)")
        ->capture_default_str();
    app.add_option("--step-ms", cfg.step_ms,
                   "milliseconds a batch of mean cost takes; a batch of cost c sleeps "
                   "c / (mean batch cost) * step-ms")
        ->capture_default_str();
    bcl_cli::add_choice(app, "--wait", cfg.wait_text,
                        "how ranks wait in the allreduce: poll (MPI_Iallreduce, then MPI_Test "
                        "every 50 us with sleeps between: no core is burnt waiting, so more ranks "
                        "than cores is fine) or block (MPI_Allreduce, which usually spins; at most "
                        "one rank per core)",
                        {"poll", "block"});
    bcl_cli::add_choice(app, "--emission", cfg.emission_text,
                        "order in which the tumbling and sliding rows emit a round's batches",
                        {"costliest_first", "shuffled"});
    app.add_option("--true-cost", cfg.true_cost_text,
                   "what a record truly costs, affine:a=..,b=..,c=.. as --cost takes it (default: "
                   "the --cost model): ranks sleep for it, while the balancers estimate with "
                   "--cost");
    app.add_flag("--calibrate", cfg.calibrate,
                 "the bcl rows start from --cost as a prior and refit a + b*L + c*L^2 online "
                 "(bcl::calibrated_affine_quadratic) from each batch's measured sleep (the "
                 "rank's own compute, not the allreduce wait); every row's sleeps get "
                 "exp(N(0, --time-noise)) noise. Reports fitted_cost (mean over ranks)");
    app.add_option("--time-noise", cfg.time_noise,
                   "sigma of the lognormal noise on every batch's sleep (with --calibrate)")
        ->capture_default_str();
    bcl_cli::add_format_flag(app, cfg.format, {"table", "json"});
    bcl_cli::add_progress_flag(app, cfg.progress);

    const bcl_cli::parsed command = bcl_cli::parse(app, argc, argv, program);
    if (command.what != bcl_cli::request::run) {
        message = command.message;
        return command.what;
    }

    const auto failed = bcl_cli::catch_failure([&] {
        cfg.dist = bcl_sim::parse_dist(cfg.dist_text);
        cfg.cost = bcl_sim::parse_cost(cfg.cost_text);
        cfg.true_cost = cfg.true_cost_text.empty()
                            ? cfg.cost
                            : bcl_sim::parse_cost(cfg.true_cost_text, "--true-cost");
        if (!(cfg.time_noise >= 0.0 && cfg.time_noise <= 5.0))
            throw bcl_sim::input_error(
                fmt::format("--time-noise must be a number from 0 to 5 (got {})", cfg.time_noise));
        if (cfg.calibrate && cfg.cost.a == 0.0 && cfg.cost.b == 0.0 && cfg.cost.c == 0.0)
            throw bcl_sim::input_error("--calibrate: the prior --cost is 0 for every record");
        cfg.policies = parse_policy_list(cfg.policy_text);
        validate_numbers(cfg);
        if (runs_global(cfg)) validate_global(cfg, ranks);
        draw_records(setup, rank, ranks);
    });
    if (!failed) return setup_status::run;
    message = failed->message;
    return setup_status::bad_input;
}

/// The median; the mean of the two middle values for an even count. `values` is not empty.
double median(std::vector<double> values) {
    std::sort(values.begin(), values.end());
    const std::size_t n = values.size();
    return n % 2 == 1 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

/// "0-3,5,7-8" for a sorted list of ranks.
std::string rank_ranges(const std::vector<int>& ranks) {
    std::string out;
    for (std::size_t i = 0; i < ranks.size();) {
        std::size_t j = i;
        while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
        if (!out.empty()) out += ',';
        out += j == i ? fmt::format("{}", ranks[i]) : fmt::format("{}-{}", ranks[i], ranks[j]);
        i = j + 1;
    }
    return out;
}

/// Collective: every rank passes its status and message. Returns the status all ranks must act
/// on (the worst one). On bad input, rank 0 prints every distinct message once, with the ranks
/// that hit it; on a help request, rank 0 prints the help.
setup_status agree(setup_status mine, const std::string& message, int rank, int ranks) {
    int worst = static_cast<int>(mine);
    MPI_Allreduce(MPI_IN_PLACE, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    const auto status = static_cast<setup_status>(worst);
    if (status == setup_status::run) return status;
    if (status == setup_status::help) {
        if (rank == 0) fmt::print("{}", message);
        return status;
    }

    // Gather the error messages to rank 0 (an empty one from ranks without an error).
    constexpr std::size_t max_message = 4096;
    const std::string mine_text =
        mine == setup_status::bad_input ? message.substr(0, max_message) : std::string{};
    int length = static_cast<int>(mine_text.size());
    std::vector<int> lengths(rank == 0 ? static_cast<std::size_t>(ranks) : 0);
    MPI_Gather(&length, 1, MPI_INT, lengths.data(), 1, MPI_INT, 0, MPI_COMM_WORLD);
    std::vector<int> offsets(lengths.size());
    std::size_t total = 0;
    for (std::size_t r = 0; r < lengths.size(); ++r) {
        offsets[r] = static_cast<int>(total);
        total += static_cast<std::size_t>(lengths[r]);
    }
    std::string all(total, '\0');
    MPI_Gatherv(mine_text.data(), length, MPI_CHAR, all.data(), lengths.data(), offsets.data(),
                MPI_CHAR, 0, MPI_COMM_WORLD);
    if (rank != 0) return status;

    // Same message on several ranks (the usual case: same flags everywhere) is printed once.
    std::vector<std::pair<std::string, std::vector<int>>> distinct;
    for (std::size_t r = 0; r < lengths.size(); ++r) {
        if (lengths[r] == 0) continue;
        std::string text =
            all.substr(static_cast<std::size_t>(offsets[r]), static_cast<std::size_t>(lengths[r]));
        auto it = std::find_if(distinct.begin(), distinct.end(),
                               [&](const auto& d) { return d.first == text; });
        if (it == distinct.end())
            distinct.emplace_back(std::move(text), std::vector<int>{static_cast<int>(r)});
        else
            it->second.push_back(static_cast<int>(r));
    }
    for (const auto& [text, where] : distinct)
        fmt::print(stderr, "{}: error on rank{} {} of {}: {}\n", program,
                   where.size() == 1 ? "" : "s", rank_ranges(where), ranks, text);
    fmt::print(stderr, "{}: every rank stops (exit code 2)\n", program);
    std::fflush(stderr);
    return status;
}

/// Collective: checks that every rank runs the same experiment (same flags, and for `file:` a
/// file with the same lengths, wherever each machine keeps it). Ranks started with different
/// settings would still meet every step, but the comparison would be meaningless, or they would
/// disagree on the batch count. On a mismatch rank 0 says so and every rank returns false.
bool same_settings_everywhere(const rank_setup& setup, int rank) {
    const bench_config& cfg = setup.cfg;
    fingerprint f;
    if (std::holds_alternative<bcl_sim::file_spec>(cfg.dist)) {
        f.add(std::string_view("file"));
        f.add(std::uint64_t{cfg.dataset_records.value_or(0)});
        f.add(setup.lengths_checksum);
    } else {
        f.add(bcl_sim::describe(cfg.dist));
    }
    f.add(bcl_sim::describe(cfg.cost));
    f.add(bcl_sim::describe(cfg.true_cost));
    f.add(std::uint64_t{cfg.calibrate ? 1U : 0U});
    f.add(cfg.time_noise);
    f.add(std::uint64_t{cfg.batch});
    f.add(std::uint64_t{cfg.lookahead});
    f.add(std::uint64_t{cfg.steps});
    f.add(std::uint64_t{cfg.rounds});
    f.add(cfg.seed);
    f.add(cfg.step_ms);
    for (const std::string& p : cfg.policies) f.add(p);
    f.add(cfg.format);
    f.add(cfg.wait_text);
    // max of (h, ~h) gives the largest and the smallest h in one allreduce.
    std::uint64_t range[2] = {f.value(), ~f.value()};
    MPI_Allreduce(MPI_IN_PLACE, range, 2, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD);
    if (range[0] == ~range[1]) return true;
    if (rank == 0)
        fmt::print(stderr,
                   "{}: error: the ranks were not given the same settings (flags, or a workload "
                   "file with the same lengths); every rank stops (exit code 2)\n",
                   program);
    return false;
}

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
void allreduce_sum(double (&values)[2], wait_mode wait) {
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
rank_run run_none(const rank_setup& setup, const timing& t) {
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

rank_run run_bcl(const rank_setup& setup, bcl::lookahead_policy policy,
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
rank_run run_global(const rank_setup& setup, const timing& t) {
    const std::size_t R = static_cast<std::size_t>(t.ranks);
    const std::size_t B = setup.cfg.batch;
    const std::size_t K = setup.cfg.lookahead;
    const std::size_t steps = setup.cfg.steps;
    const std::size_t per_rank = steps * B; // records of each rank's stream
    const auto mine = static_cast<std::uint32_t>(t.rank);

    bcl::global_planner planner;
    planner.reserve({.ranks = R, .steps = K, .batch = B});
    std::vector<double> costs;
    std::vector<bcl::plan_slot> plan;
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
            plan.resize(R * m);
            for (std::size_t r = 0; r < R; ++r)
                for (std::size_t i = 0; i < m; ++i)
                    costs[r * m + i] = setup.all_records[r * per_rank + first + i].cost;
            const bcl::plan_summary summary =
                planner.plan(costs, {.ranks = R, .steps = K, .batch = B}, plan);
            digest = bcl::plan_digest(plan, digest);
            window.assign(summary.steps, batch_info{});
            for (std::size_t j = 0; j < plan.size(); ++j)
                if (plan[j].rank == mine) {
                    const std::size_t r = j / m;
                    const bench_record& rec = setup.all_records[r * per_rank + first + j % m];
                    tally(window.at(plan[j].step), std::span<const bench_record>(&rec, 1));
                }
        }
        ++step;
        return window.at(in_window);
    };
    rank_run out = timed_run(next_batch, t);
    out.plan_digest = digest;
    return out;
}

bcl::lookahead_policy to_bcl_policy(std::string_view name) {
    return name.starts_with("sliding") ? bcl::lookahead_policy::sliding
                                       : bcl::lookahead_policy::tumbling;
}

bcl::emission_order to_emission(std::string_view name, const bench_config& cfg) {
    return name.ends_with("_shuffled") ? bcl::emission_order::shuffled
                                       : bcl_sim::parse_emission(cfg.emission_text);
}

/// Collective: one policy's run on every rank, its checks and, on rank 0, its report (the
/// speedups are filled in later, against none).
policy_report run_policy(const rank_setup& setup, std::string_view name, const timing& t) {
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

// ---------------------------------------------------------------------------------------------
// Output (rank 0).
// ---------------------------------------------------------------------------------------------

struct run_context {
    int ranks = 0;
    double mean_batch_cost = 0.0;
    double ms_per_cost = 0.0;
    std::string mpi_library;
};

nlohmann::ordered_json config_json(const bench_config& cfg, const run_context& run) {
    return {{"dist", bcl_sim::dist_json(cfg.dist_text, cfg.dist, cfg.dataset_records.value_or(0))},
            {"cost", bcl_sim::cost_json(cfg.cost)},
            {"true_cost", bcl_sim::cost_json(cfg.true_cost)},
            {"calibrate", cfg.calibrate},
            {"time_noise", cfg.calibrate ? cfg.time_noise : 0.0},
            {"ranks", run.ranks},
            {"batch", cfg.batch},
            {"lookahead", cfg.lookahead},
            {"steps", cfg.steps},
            {"rounds", cfg.rounds},
            {"seed", cfg.seed},
            {"policies", cfg.policies},
            {"step_ms", cfg.step_ms},
            {"wait", cfg.wait_text},
            {"mean_batch_cost", run.mean_batch_cost},
            {"ms_per_cost_unit", run.ms_per_cost},
            {"format", cfg.format},
            {"mpi_library", run.mpi_library}};
}

/// {"a", "b", "c"} of a calibrated row, null for the others.
nlohmann::ordered_json coefficients_json(const std::optional<std::array<double, 3>>& c) {
    if (!c) return nullptr;
    return {{"a", (*c)[0]}, {"b", (*c)[1]}, {"c", (*c)[2]}};
}

void print_json(const bench_config& cfg, const run_context& run,
                const std::vector<policy_report>& reports) {
    nlohmann::ordered_json out;
    out["config"] = config_json(cfg, run);
    out["policies"] = nlohmann::ordered_json::array();
    for (const policy_report& p : reports)
        out["policies"].push_back({{"policy", p.name},
                                   {"wall_s", p.wall_s},
                                   {"wall_s_rounds", p.round_walls},
                                   {"mean_step_ms", p.mean_step_ms},
                                   {"measured_speedup_vs_none", p.measured_speedup},
                                   {"predicted_speedup_vs_none", p.predicted_speedup},
                                   {"predicted_step_ms", p.predicted_step_ms},
                                   {"overhead_ms_per_step", p.mean_step_ms - p.predicted_step_ms},
                                   {"predicted_efficiency", p.predicted_efficiency},
                                   {"batches", p.batches_max},
                                   {"batches_min", p.batches_min},
                                   {"batches_max", p.batches_max},
                                   {"same_batch_count", p.batches_min == p.batches_max},
                                   {"contract_ok", p.contract_ok},
                                   {"same_plan", p.same_plan},
                                   {"calibrated", p.fitted_cost.has_value()},
                                   {"fitted_cost", coefficients_json(p.fitted_cost)},
                                   {"fitted_seconds", coefficients_json(p.fitted_seconds)}});
    fmt::print("{}\n", out.dump(2));
}

void print_table(const bench_config& cfg, const run_context& run,
                 const std::vector<policy_report>& reports) {
    fmt::print("{}  dist {}", program, bcl_sim::describe(cfg.dist));
    if (cfg.dataset_records)
        fmt::print(" ({} lengths, sharded over the ranks)", *cfg.dataset_records);
    fmt::print("\n{:>15}cost {} (a + b*L + c*L^2)", "", bcl_sim::describe(cfg.cost));
    if (cfg.true_cost_text.empty())
        fmt::print("\n");
    else
        fmt::print(", true cost {}\n", bcl_sim::describe(cfg.true_cost));
    if (cfg.calibrate)
        fmt::print(
            "{:>15}calibrate: bcl rows refit the cost from measured sleeps, noise sigma {}\n", "",
            cfg.time_noise);
    fmt::print("{:>15}R={} MPI ranks, B={}, K={}, {} steps per policy, seed {}", "", run.ranks,
               cfg.batch, cfg.lookahead, cfg.steps, cfg.seed);
    if (cfg.rounds > 1) fmt::print(", {} rounds (median shown)", cfg.rounds);
    fmt::print("\n{:>15}a batch of mean cost ({:.1f}) sleeps {} ms, wait {}; {}\n\n", "",
               run.mean_batch_cost, cfg.step_ms, cfg.wait_text, run.mpi_library);
    fmt::print("{:<18}{:>9}{:>9}{:>10}{:>10}{:>10}{:>10}{:>11}{:>6}\n", "policy", "batches",
               "wall_s", "step_ms", "pred_ms", "overhead", "speedup", "predicted", "same");
    for (const policy_report& p : reports)
        fmt::print("{:<18}{:>9}{:>9.3f}{:>10.2f}{:>10.2f}{:>10.2f}{:>10.3f}{:>11.3f}{:>6}\n",
                   p.name, p.batches_max, p.wall_s, p.mean_step_ms, p.predicted_step_ms,
                   p.mean_step_ms - p.predicted_step_ms, p.measured_speedup, p.predicted_speedup,
                   p.batches_min == p.batches_max ? "yes" : "NO");
    for (const policy_report& p : reports)
        if (p.fitted_cost)
            fmt::print("\n{}: calibrated from the prior {}: fitted a={:.4g}, b={:.4g}, c={:.4g} in "
                       "true cost units (mean over ranks; true cost {})\n",
                       p.name, bcl_sim::describe(cfg.cost), (*p.fitted_cost)[0],
                       (*p.fitted_cost)[1], (*p.fitted_cost)[2], bcl_sim::describe(cfg.true_cost));
    fmt::print(
        "\n\nstep_ms: measured wall time per step (slowest rank); pred_ms: mean over steps of "
        "the costliest rank's\nbatch, from the gathered batch costs; overhead: the "
        "difference (allreduce, wake-up latency);\nspeedup / predicted: none's step time "
        "over the policy's, measured / from the same batch costs.\n");
    // The overhead is about the same per step for every policy, so it pulls the measured
    // speedups toward 1 by roughly overhead / step: say so when that is no longer small.
    const policy_report& none = reports.front();
    if (none.predicted_step_ms > 0.0 &&
        none.mean_step_ms - none.predicted_step_ms > 0.05 * none.predicted_step_ms)
        fmt::print("\nnote: the overhead is {:.0f}% of none's step; it is about the same for every "
                   "policy, so the measured\nspeedups read low by about that much. A larger "
                   "--step-ms makes it smaller.\n",
                   100.0 * (none.mean_step_ms - none.predicted_step_ms) / none.predicted_step_ms);
}

std::string mpi_library_version() {
    std::string text(MPI_MAX_LIBRARY_VERSION_STRING, '\0');
    int length = 0;
    MPI_Get_library_version(text.data(), &length);
    text.resize(static_cast<std::size_t>(std::max(length, 0)));
    const std::size_t cut = text.find_first_of(",\n");
    return std::string(bcl_sim::detail::trim(text.substr(0, cut)));
}

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
