#pragma once
// bcl-mpi-bench's settings, records and set-up: every rank parses and validates its flags
// and draws its records on its own, then the ranks agree before anything collective.

#include "cli.hpp"
#include "json_output.hpp"
#include "simulator.hpp"

#include <bcl/balance.hpp>
#include <bcl/calibrated_cost.hpp>
#include <bcl/global_plan.hpp>
#include <bcl/names.hpp>
#include <bcl/options.hpp>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>
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

using clock_type = std::chrono::steady_clock;

constexpr std::string_view program = "bcl-mpi-bench";

/// The suffix of a rank-local row that runs with emission shuffled, so one run can measure what
/// costliest-first emission buys against the same records.
constexpr std::string_view shuffled_suffix = "_shuffled";

/// The policies this bench runs: the reference, each of bcl's rank-local policies (by the names
/// the library's registry gives them, bcl/names.hpp) with and without `_shuffled`, and the global
/// plan. The rank-local rows run with --emission; `global` emits in the plan's order (heaviest
/// step first).
inline const std::vector<std::string>& known_policies() {
    static const std::vector<std::string> names = [] {
        std::vector<std::string> out{"none"};
        for (const std::string_view p : bcl::names_of<bcl::lookahead_policy>()) {
            out.emplace_back(p);
            out.push_back(std::string(p) + std::string(shuffled_suffix));
        }
        out.emplace_back("global");
        return out;
    }();
    return names;
}

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

inline std::vector<std::string> parse_policy_list(std::string_view text) {
    std::vector<std::string> out{"none"}; // the reference always runs, first
    for (std::string& name : bcl_cli::split_names(text, "--policy")) {
        const std::vector<std::string>& known = known_policies();
        if (std::find(known.begin(), known.end(), name) == known.end())
            throw bcl_sim::input_error(
                fmt::format("--policy: unknown policy '{}' (expected some of {})", name,
                            fmt::join(known, ", ")));
        if (std::find(out.begin(), out.end(), name) == out.end()) out.push_back(std::move(name));
    }
    return out;
}

inline void validate_numbers(const bench_config& cfg) {
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
inline bcl_sim::sim_context make_context(const bench_config& cfg, int ranks,
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
inline void validate_global(const bench_config& cfg, int ranks) {
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
inline void draw_records(rank_setup& setup, int rank, int ranks) {
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
inline setup_status local_setup(int argc, char** argv, int rank, int ranks, rank_setup& setup,
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
                        bcl_cli::choices_of<bcl::emission_order>());
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
inline double median(std::vector<double> values) {
    std::sort(values.begin(), values.end());
    const std::size_t n = values.size();
    return n % 2 == 1 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

/// "0-3,5,7-8" for a sorted list of ranks.
inline std::string rank_ranges(const std::vector<int>& ranks) {
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
inline setup_status agree(setup_status mine, const std::string& message, int rank, int ranks) {
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
inline bool same_settings_everywhere(const rank_setup& setup, int rank) {
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

} // namespace bcl_mpi
