// bcl-bench: what repartitioning costs per record, and how close to optimal it gets.
//
//   partition/<algorithm>/K:<K>/B:<B>   one partitioner on windows of K*B lognormal token costs
//   partition/default/K:<K>/B:<B>       the partitioner bcl::balancer uses by default
//   adapter/tumbling/K:<K>/B:<B>        the whole bcl::balancer push/pop path on small records
//   adapter/sliding/K:<K>/B:<B>         the same under the sliding policy
//   adapter/sliding_calibrated/K:<K>/B:<B>  the same with a calibrated cost told every batch's
//                                       time (observe, and the refit at each round boundary)
//   baseline/passthrough/K:<K>/B:<B>    the same loop with a partitioner that keeps arrival order
//   baseline/sort/K:<K>/B:<B>           std::sort of the same windows' costs
//   global_plan/R:<R>/K:8/B:16          one bcl::global_planner plan of a window of R*K*B
//                                       lognormal token costs (R = 8, 64, 1024, 8192), read
//                                       against baseline/sort/R:<R>/K:8/B:16, std::sort of the
//                                       same costs; gap_to_lb and plan_efficiency from the plan's
//                                       summary
//   token_plan/held/R:<R>               one bcl::token_planner held batch of 131,072 lognormal
//                                       records, T = 16384 (R = 8, 64), read against
//                                       baseline/sort/N:131072, std::sort of their costs
//   token_plan/epoch/R:<R>              one rank's share of an epoch of the same records
//   token_plan/held/N:1048576/src:<src>/R:64
//                                       one held batch of 2^20 Mooncake or heavy-tailed records
//                                       (T = 131072), beside baseline/sort/N:1048576/src:<src>
//                                       (bcl::token_epoch_planner, K = 8 steps of M = 2)
//   stage_plan/held/R:<R>/D:<D>         one bcl::held_stage_planner plan of a held batch of R*16
//                                       vision-language records (R = 8, 64): D = 2 (the
//                                       encoder's and the language model's costs) or D = 1 (their
//                                       sum: bcl::held_batch_planner's plan), beside
//                                       baseline/sort/stages/R:<R>/D:2, std::sort of the summed
//                                       costs of the same records
//   stage_adapter/<policy>/D:<D>        the whole push/pop path of a rank-local balancer, K = 8,
//                                       B = 16, on the stage rows' records: D = 2 through
//                                       bcl::stage_balancer, D = 1 their sums through
//                                       bcl::balancer; policy tumbling or sliding
//   stage_plan/window/R:<R>/K:8/D:<D>   one bcl::stage_window_planner plan of a window of R*8*16
//                                       records of the same mix (R = 8, 64), D = 2 or 1 (their
//                                       sum: bcl::global_planner's plan)
//   stage_plan/window_candidates/R:<R>/K:8/D:2
//                                       the D + 1 one-number plans alone that such a plan of D = 2
//                                       chooses its steps from (the summed costs, each stage's)
//   distribution/<source>/<algorithm>/K:<K>/B:<B>   partitioners on other length distributions
//                                       and real workloads (bench/workloads), for the table in
//                                       docs/partitioners.md
//   memory_repair/K:<K>/B:64            one bcl::detail::memory_repair call on a cost-balanced
//                                       window, memory = length, budget 1.05x the mean batch memory
//   memory_repair_tight/K:<K>/B:64      the same at 1.01x, where some batches start over budget
//   memory_repair_independent/K:<K>/B:64  budget 1.05x, memory independent of the cost (the
//                                       lengths of another window), so a third of the batches
//                                       start over budget
//
// Costs: lengths L = round(exp(N(6, 1))) tokens (at least 1), cost L + L^2/24576 (a FLOPs proxy
// for a 7B transformer: MLP plus attention). Every benchmark of one window size cycles through the
// same pool of pre-generated windows, so ratios within one run compare like with like.
//
// Counters: items_per_second counts records; time_per_record is its inverse; gap_to_lb is the mean
// of (heaviest pack - lower bound) / lower bound over the windows run; allocs_per_window counts
// heap allocations inside the timed loop (after two or three warm-up windows), which must be 0.
// The memory_repair rows report gap_to_lb for the repaired partition's costliest batch, and
// over_budget, the fraction of windows the repair could not fit.

#include "length_file.hpp"

#include <bcl/bcl.hpp>
#include <bcl/calibrated_cost.hpp>
#include <bcl/detail/split/memory/memory_repair.hpp>
#include <bcl/epoch_plan.hpp>
#include <bcl/global_plan.hpp>
#include <bcl/partition/exact.hpp>
#include <bcl/partition/karmarkar_karp.hpp>
#include <bcl/partition/lower_bound.hpp>
#include <bcl/partition/lpt.hpp>
#include <bcl/partition/snake.hpp>
#include <bcl/partition/swap_refinement.hpp>
#include <bcl/stage_balancer.hpp>
#include <bcl/stage_plan.hpp>
#include <bcl/token_epoch_plan.hpp>
#include <bcl/token_plan.hpp>

#include <benchmark/benchmark.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <new>
#include <numbers>
#include <numeric>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <utility>
#include <vector>

// ---------------------------------------------------------------------------------------------
// Allocation counting: every global operator new of this program goes through here.
// ---------------------------------------------------------------------------------------------

namespace {
std::atomic<std::size_t> g_allocations{0};

/// Allocations so far.
std::size_t allocations_now() {
    return g_allocations.load(std::memory_order_relaxed);
}
std::size_t allocations_since(std::size_t before) {
    return allocations_now() - before;
}

void* counted_allocate(std::size_t size) {
    g_allocations.fetch_add(1, std::memory_order_relaxed);
    if (void* p = std::malloc(size == 0 ? 1 : size)) return p;
    throw std::bad_alloc{};
}
} // namespace

void* operator new(std::size_t size) {
    return counted_allocate(size);
}
void* operator new[](std::size_t size) {
    return counted_allocate(size);
}
void operator delete(void* p) noexcept {
    std::free(p);
}
void operator delete[](void* p) noexcept {
    std::free(p);
}
void operator delete(void* p, std::size_t) noexcept {
    std::free(p);
}
void operator delete[](void* p, std::size_t) noexcept {
    std::free(p);
}

namespace {

// ---------------------------------------------------------------------------------------------
// Workload
// ---------------------------------------------------------------------------------------------

constexpr double quadratic = 1.0 / 24576.0;

double token_cost(std::uint32_t length) {
    const auto l = static_cast<double>(length);
    return l + quadratic * l * l;
}

/// A small record, as a data loader would hold an index entry: 8 bytes.
struct small_record {
    std::uint32_t id;
    std::uint32_t length;
};

/// The windows of one size: lengths, their costs, and the same as records.
struct window_pool {
    std::size_t window = 0;
    std::size_t windows = 0;
    std::vector<double> costs;         // windows * window costs, window after window
    std::vector<small_record> records; // the same, as records

    [[nodiscard]] std::span<const double> costs_of(std::size_t w) const {
        return {costs.data() + w * window, window};
    }
};

/// Where token lengths come from: a named distribution or a workload file of real lengths.
enum class source { lognormal, pareto, uniform, file };

struct length_source {
    const char* name;
    source kind;
    const char* file = nullptr; // under BCL_WORKLOADS_DIR, for source::file
};

constexpr length_source lognormal_tokens{"lognormal", source::lognormal};

/// The distributions of docs/partitioners.md's table.
constexpr length_source table_sources[] = {
    {"lognormal", source::lognormal},
    {"pareto", source::pareto},
    {"uniform", source::uniform},
    {"sharegpt", source::file, "sharegpt_8k_filtered_llama2_total_tokens.txt"},
    {"alpaca", source::file, "alpaca_en_demo999_llama3_tokens.txt"},
    {"gsm8k", source::file, "gsm8k_train_llama3_tokens.txt"},
    {"azure_conv", source::file, "azure_llm_2023_conv_total_tokens.txt"},
    {"mooncake", source::file, "mooncake_fast25_conversation_total_tokens.txt"},
    {"proteins", source::file, "tudataset_proteins_nodes_per_graph.txt"},
};

#ifndef BCL_WORKLOADS_DIR
#define BCL_WORKLOADS_DIR "bench/workloads"
#endif

/// The lengths in a workload file (bench/common/length_file.hpp), each at most 4e9; empty if the
/// file cannot be read or is not a length file (the benchmark then says so and is skipped).
std::vector<std::uint32_t> read_lengths(const char* file) {
    std::vector<std::uint64_t> read;
    try {
        read = bcl_tools::read_length_file(std::string(BCL_WORKLOADS_DIR) + "/" + file);
    } catch (const bcl_tools::length_file_error&) {
        return {};
    }
    std::vector<std::uint32_t> lengths(read.size());
    std::transform(read.begin(), read.end(), lengths.begin(), [](std::uint64_t v) {
        return static_cast<std::uint32_t>(std::min<std::uint64_t>(v, 4000000000U));
    });
    return lengths;
}

/// Token lengths drawn from `src` with mt19937_64 and hand-written transforms (fully specified
/// by the standard, unlike std::lognormal_distribution), so every platform benchmarks the same
/// windows:
///   lognormal: round(exp(N(6, 1))), at least 1 (median 403, mean 665);
///   pareto:    round(100 / U^(1/1.5)), at most 131072 (a 128k context): infinite variance;
///   uniform:   1..4096;
///   file:      drawn with replacement from the file's lengths (at least 1).
/// The benchmarks are registered shape by shape and source by source, so one pool is kept at a
/// time. A pool holds 2^19 records (at least `min_windows` windows, at most 4096). Returns
/// nullptr if a workload file cannot be read.
const window_pool* pool_for(const length_source& src, std::size_t window,
                            std::size_t min_windows = 16) {
    static std::unique_ptr<window_pool> current;
    static const char* current_name = nullptr;
    const std::size_t windows =
        std::clamp<std::size_t>((std::size_t{1} << 19) / window, min_windows, 4096);
    if (current && current->window == window && current_name == src.name &&
        current->windows >= windows)
        return current.get();
    current.reset();
    std::vector<std::uint32_t> file_lengths;
    if (src.kind == source::file) {
        file_lengths = read_lengths(src.file);
        if (file_lengths.empty()) return nullptr;
    }
    current = std::make_unique<window_pool>();
    current_name = src.name;
    window_pool& pool = *current;
    pool.window = window;
    // 2^19 records (at least 16 windows, at most 4096, unless asked otherwise): the mean gap is
    // dominated by rare bad windows, so it needs hundreds of windows to be stable from run to
    // run. The global plan's windows of up to 2^20 records take four each: they are timed, and
    // their quality is measured by bcl-sim.
    pool.windows = windows;
    const std::size_t total = pool.windows * window;
    pool.costs.resize(total);
    pool.records.resize(total);
    std::mt19937_64 gen(0x5eed0000 + window);
    const auto unit = [&gen] { return static_cast<double>(gen() >> 11) * 0x1.0p-53; };
    for (std::size_t i = 0; i < total; ++i) {
        double length = 1.0;
        switch (src.kind) {
        case source::lognormal: {
            const double u = 1.0 - unit(); // (0, 1]
            const double v = unit();
            const double normal =
                std::sqrt(-2.0 * std::log(u)) * std::cos(2.0 * std::numbers::pi * v);
            length = std::round(std::exp(6.0 + normal));
            break;
        }
        case source::pareto:
            length = std::min(131072.0, std::round(100.0 / std::pow(1.0 - unit(), 1.0 / 1.5)));
            break;
        case source::uniform:
            length = static_cast<double>(1 + gen() % 4096);
            break;
        case source::file:
            length = file_lengths[gen() % file_lengths.size()];
            break;
        }
        const auto l = static_cast<std::uint32_t>(std::clamp(length, 1.0, 4.0e9));
        pool.records[i] = {static_cast<std::uint32_t>(i), l};
        pool.costs[i] = token_cost(l);
    }
    return &pool;
}

// ---------------------------------------------------------------------------------------------
// Partitioners and counters
// ---------------------------------------------------------------------------------------------

/// The partitioner bcl::balancer uses when none is named, read off the class template itself.
template <class Balancer>
struct partitioner_of;
template <class Record, class Estimator, class Partitioner>
struct partitioner_of<bcl::balancer<Record, Estimator, Partitioner>> {
    using type = Partitioner;
};

struct cost_of_record {
    double operator()(const small_record& r) const { return token_cost(r.length); }
};

using default_partitioner = partitioner_of<bcl::balancer<small_record, cost_of_record>>::type;

/// Batches of B in arrival order: the do-nothing partitioner.
struct passthrough_partitioner {
    bcl::partition_summary operator()(std::span<const double> costs, bcl::pack_shape shape,
                                      std::span<std::uint32_t> pack_of) const noexcept {
        for (std::size_t i = 0; i < costs.size(); ++i)
            pack_of[i] = static_cast<std::uint32_t>(i / shape.pack_size);
        return {};
    }
};

double gap_of(const bcl::partition_summary& s) {
    return s.lower_bound > 0.0 ? std::max(0.0, s.heaviest / s.lower_bound - 1.0) : 0.0;
}

void set_counters(benchmark::State& state, std::size_t window, double gap_sum,
                  std::size_t windows_run, std::size_t allocations) {
    const auto records = static_cast<double>(window);
    state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()) *
                            static_cast<std::int64_t>(window));
    state.counters["time_per_record"] = benchmark::Counter(
        records, benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
    const double runs = windows_run > 0 ? static_cast<double>(windows_run) : 1.0;
    state.counters["gap_to_lb"] = gap_sum / runs;
    state.counters["allocs_per_window"] = static_cast<double>(allocations) / runs;
}

template <class Partitioner>
void partition_benchmark(benchmark::State& state, const length_source& src) {
    const auto k = static_cast<std::size_t>(state.range(0));
    const auto b = static_cast<std::size_t>(state.range(1));
    const window_pool* found = pool_for(src, k * b);
    if (found == nullptr) {
        state.SkipWithError("workload file not found or not a length file (set BCL_WORKLOADS_DIR)");
        for (auto _ : state) {
        }
        return;
    }
    const window_pool& pool = *found;
    const bcl::pack_shape shape{k, b};
    Partitioner partitioner;
    std::vector<std::uint32_t> pack_of(k * b);
    for (std::size_t w = 0; w < 2; ++w) // warm-up: scratch space reaches its size
        benchmark::DoNotOptimize(partitioner(pool.costs_of(w), shape, pack_of));

    double gap_sum = 0.0;
    std::size_t w = 0;
    std::size_t runs = 0;
    const std::size_t allocations_before = allocations_now();
    for (auto _ : state) {
        const bcl::partition_summary summary = partitioner(pool.costs_of(w), shape, pack_of);
        benchmark::DoNotOptimize(pack_of.data());
        gap_sum += gap_of(summary);
        ++runs;
        if (++w == pool.windows) w = 0;
    }
    const std::size_t allocations = allocations_since(allocations_before);
    set_counters(state, k * b, gap_sum, runs, allocations);
}

/// The cost of a small record, as a calibrated cost: the same model as cost_of_record, whose
/// coefficients the balancer refits from the times it is told.
auto calibrated_cost_of_record() {
    return bcl::calibrated_affine_quadratic(0.0, 1.0, 1.0 / 24576, &small_record::length);
}

/// push/pop through a bcl::balancer, one window of records per iteration (the adapter rows).
/// `calibrated` runs a calibrated cost and tells the balancer each batch's
/// time (its total length: as cheap to compute as the checksum every row takes of its batches).
template <class Partitioner, bool calibrated = false>
void balancer_benchmark(benchmark::State& state, bcl::emission_order emission,
                        bcl::lookahead_policy policy = bcl::lookahead_policy::tumbling) {
    const auto k = static_cast<std::size_t>(state.range(0));
    const auto b = static_cast<std::size_t>(state.range(1));
    const std::size_t window = k * b;
    const window_pool& pool = *pool_for(lognormal_tokens, window);
    bcl::options opt{.batch_size = b, .lookahead = k};
    opt.policy = policy; // named, whatever the default policy is
    opt.emission = emission;
    auto estimator = [] {
        if constexpr (calibrated)
            return calibrated_cost_of_record();
        else
            return cost_of_record{};
    }();
    bcl::balancer<small_record, decltype(estimator), Partitioner> balancer{estimator, opt};
    std::uint64_t sink = 0;
    std::uint64_t emitted = 0;
    std::size_t next = 0;
    const auto one_window = [&] {
        const small_record* records = pool.records.data() + next * window;
        for (std::size_t i = 0; i < window; ++i) {
            balancer.push(records[i]);
            while (auto batch = balancer.pop()) {
                std::uint64_t time = 0;
                for (const small_record& r : *batch) {
                    sink += r.id;
                    if constexpr (calibrated) time += r.length;
                }
                if constexpr (calibrated) balancer.observe(emitted++, static_cast<double>(time));
            }
        }
        if (++next == pool.windows) next = 0;
    };
    one_window(); // warm-up: sliding runs its first round only once two windows are buffered
    one_window();
    one_window();
    const auto gap_sum = [&balancer] {
        const bcl::running_stats& gaps = balancer.stats().gap_to_lower_bound;
        return gaps.mean() * static_cast<double>(gaps.count());
    };
    const std::uint64_t windows_before = balancer.stats().windows;
    const double gap_before = gap_sum();
    const std::size_t allocations_before = allocations_now();
    for (auto _ : state) one_window();
    const std::size_t allocations = allocations_since(allocations_before);
    benchmark::DoNotOptimize(sink);
    const auto runs = static_cast<std::size_t>(balancer.stats().windows - windows_before);
    set_counters(state, window, gap_sum() - gap_before, runs, allocations);
}

/// std::sort of windows of the pool's costs: `window` of them, from a pool of at least
/// `min_windows` windows (what the rows it is read against use).
void sort_windows(benchmark::State& state, std::size_t window, std::size_t min_windows) {
    const window_pool& pool = *pool_for(lognormal_tokens, window, min_windows);
    std::vector<double> buffer(window);
    std::size_t w = 0;
    std::size_t runs = 0;
    const std::size_t allocations_before = allocations_now();
    for (auto _ : state) {
        const std::span<const double> costs = pool.costs_of(w);
        std::copy(costs.begin(), costs.end(), buffer.begin());
        std::sort(buffer.begin(), buffer.end());
        benchmark::DoNotOptimize(buffer.data());
        ++runs;
        if (++w == pool.windows) w = 0;
    }
    const std::size_t allocations = allocations_since(allocations_before);
    set_counters(state, window, 0.0, runs, allocations);
}

void sort_benchmark(benchmark::State& state) {
    sort_windows(state, static_cast<std::size_t>(state.range(0) * state.range(1)), 16);
}

// ---------------------------------------------------------------------------------------------
// The global plan
// ---------------------------------------------------------------------------------------------

/// Windows per pool of the global_plan rows (and of the sort rows read against them).
constexpr std::size_t plan_pool_windows = 4;

/// global_plan/R:<R>/K:<K>/B:<B>: one bcl::global_planner::plan() per iteration on a window of
/// R*K*B lognormal token costs, packed, levelling on (the defaults). Counters as above, plus
/// gap_to_lb = the plan's summary gap (objective / its lower bound - 1) and plan_efficiency =
/// the summary's total / (R * objective), both means over the windows run.
void global_plan_benchmark(benchmark::State& state) {
    const bcl::plan_shape shape{.ranks = static_cast<std::size_t>(state.range(0)),
                                .steps = static_cast<std::size_t>(state.range(1)),
                                .batch = static_cast<std::size_t>(state.range(2))};
    const std::size_t n = shape.ranks * shape.steps * shape.batch;
    const window_pool& pool = *pool_for(lognormal_tokens, n, plan_pool_windows);
    bcl::global_planner planner;
    std::vector<bcl::plan_slot> out(n);
    benchmark::DoNotOptimize(planner.plan(pool.costs_of(0), shape, out)); // warm-up
    double gap_sum = 0.0;
    double efficiency_sum = 0.0;
    std::size_t w = 0;
    std::size_t runs = 0;
    const std::size_t allocations_before = allocations_now();
    for (auto _ : state) {
        const bcl::plan_summary summary = planner.plan(pool.costs_of(w), shape, out);
        benchmark::DoNotOptimize(out.data());
        gap_sum += summary.gap();
        efficiency_sum += summary.efficiency();
        ++runs;
        if (++w == pool.windows) w = 0;
    }
    const std::size_t allocations = allocations_since(allocations_before);
    set_counters(state, n, gap_sum, runs, allocations);
    state.counters["plan_efficiency"] = efficiency_sum / static_cast<double>(runs > 0 ? runs : 1);
}

/// baseline/sort/R:<R>/K:<K>/B:<B>: std::sort of the same R*K*B costs as global_plan's row.
void plan_sort_benchmark(benchmark::State& state) {
    sort_windows(state, static_cast<std::size_t>(state.range(0) * state.range(1) * state.range(2)),
                 plan_pool_windows);
}

// ---------------------------------------------------------------------------------------------
// Token-budget micro-batches
// ---------------------------------------------------------------------------------------------

/// Records of the token rows: one held batch, or one epoch, of this many lognormal records.
constexpr std::size_t token_records = 131072;
/// The token budget of the token rows: 16384 tokens a micro-batch (lognormal(6, 1) lengths, mean
/// about 660 tokens, fill about 25 records each).
constexpr std::uint64_t token_budget_tokens = 16384;

/// The pool's lengths, window w, as token counts.
std::vector<std::uint64_t> tokens_of(const window_pool& pool, std::size_t w) {
    std::vector<std::uint64_t> t(pool.window);
    for (std::size_t i = 0; i < pool.window; ++i) t[i] = pool.records[w * pool.window + i].length;
    return t;
}

/// token_plan/held/R:<R>: one bcl::token_planner::plan_held() per iteration on a held batch of
/// 131,072 lognormal records (the default cost L + L^2/24576, computed in integers), T = 16384,
/// K = 1, the few records above T each alone in a micro-batch. token_plan/epoch/R:<R>: one rank's
/// share of an epoch of the same records, planned by bcl::token_epoch_planner in windows of K = 8
/// steps of M = 2 micro-batches. Counters as above (an iteration is the whole batch or epoch, so
/// allocs_per_window is per epoch on the epoch rows: the share it returns, grown window by
/// window; the planners' scratch is kept), plus plan_efficiency (the plan's own, per micro-step)
/// and micro_steps_over_bound (micro-steps over the token bound).
void token_plan_benchmark(benchmark::State& state, bool epoch) {
    const auto ranks = static_cast<std::size_t>(state.range(0));
    const window_pool& pool = *pool_for(lognormal_tokens, token_records, plan_pool_windows);
    std::vector<std::vector<std::uint64_t>> tokens;
    for (std::size_t w = 0; w < pool.windows; ++w) tokens.push_back(tokens_of(pool, w));
    std::vector<std::size_t> order(token_records);
    std::iota(order.begin(), order.end(), std::size_t{0});
    const bcl::token_budget budget{.ranks = ranks, .max_tokens = token_budget_tokens};
    bcl::token_plan_options opt;
    opt.oversized_alone = true; // the tail's few records above T each have a micro-batch
    bcl::token_planner planner;
    bcl::token_epoch_planner epochs;
    bcl::token_epoch_share<std::size_t> share;
    std::vector<bcl::micro_slot> out(token_records);
    double efficiency_sum = 0.0;
    double over_sum = 0.0;
    const auto run = [&](std::size_t w) {
        if (epoch) {
            epochs.share(std::span<const std::uint64_t>(tokens[w]), {},
                         std::span<const std::size_t>(order), budget, 2, 8, 0, opt, share);
            efficiency_sum += share.efficiency(ranks);
            over_sum += static_cast<double>(share.micro_steps) /
                        static_cast<double>(share.micro_steps_bound);
        } else {
            const bcl::token_plan_summary s =
                planner.plan_held(tokens[w], {}, {}, budget, 1, opt, out);
            efficiency_sum += s.efficiency();
            over_sum +=
                static_cast<double>(s.micro_steps) / static_cast<double>(s.micro_steps_bound);
        }
    };
    // Warm-up over every window: the planners' scratch grows to the largest input once, and
    // allocates nothing after it (allocs_per_window counts what the timed loop allocates).
    for (std::size_t v = 0; v < pool.windows; ++v) run(v);
    efficiency_sum = over_sum = 0.0;
    std::size_t w = 0;
    std::size_t runs = 0;
    const std::size_t allocations_before = allocations_now();
    for (auto _ : state) {
        run(w);
        benchmark::DoNotOptimize(out.data());
        ++runs;
        if (++w == pool.windows) w = 0;
    }
    const std::size_t allocations = allocations_since(allocations_before);
    set_counters(state, token_records, 0.0, runs, allocations);
    const double each = static_cast<double>(runs > 0 ? runs : 1);
    state.counters["plan_efficiency"] = efficiency_sum / each;
    state.counters["micro_steps_over_bound"] = over_sum / each;
}

/// The records of the large held rows: 2^20 lengths drawn with replacement from Mooncake's
/// (`mooncake`), or a heavy tail (`heavy_tail`: round(2000 / U^(1/1.2)), at most 4T = 524288:
/// about 1 in 150 above T = 131072, each planned alone in a micro-batch). Empty if the file is
/// missing.
std::vector<std::uint64_t> large_held_tokens(bool heavy_tail) {
    constexpr std::size_t n = std::size_t{1} << 20;
    std::vector<std::uint64_t> tokens(n);
    std::mt19937_64 gen(0x5eed1000 + (heavy_tail ? 1 : 0));
    if (heavy_tail) {
        for (std::uint64_t& t : tokens) {
            const double u = 1.0 - static_cast<double>(gen() >> 11) * 0x1.0p-53; // (0, 1]
            t = static_cast<std::uint64_t>(
                std::min(std::round(2000.0 / std::pow(u, 1.0 / 1.2)), 524288.0));
        }
        return tokens;
    }
    const std::vector<std::uint32_t> file =
        read_lengths("mooncake_fast25_conversation_total_tokens.txt");
    if (file.empty()) return {};
    for (std::uint64_t& t : tokens) t = std::max<std::uint32_t>(1, file[gen() % file.size()]);
    return tokens;
}

/// token_plan/held/N:1048576/src:<src>/R:64: one bcl::token_planner::plan_held() per iteration
/// of the same held batch of 2^20 records (large_held_tokens), T = 131072, K = 1, records above T
/// alone; baseline/sort/N:1048576/src:<src>: std::sort of those records' default costs (L +
/// L^2/24576, as doubles), the yardstick. Counters as token_plan_benchmark's.
void large_held_benchmark(benchmark::State& state, bool heavy_tail, bool sort_only) {
    const std::vector<std::uint64_t> tokens = large_held_tokens(heavy_tail);
    if (tokens.empty()) {
        state.SkipWithError("bench/workloads/mooncake_fast25_conversation_total_tokens.txt is "
                            "missing (run from the source tree)");
        return;
    }
    const std::size_t n = tokens.size();
    if (sort_only) {
        std::vector<double> costs(n);
        std::vector<double> sorted(n);
        for (std::size_t i = 0; i < n; ++i) {
            const auto l = static_cast<double>(tokens[i]);
            costs[i] = l + l * l / 24576.0;
        }
        for (auto _ : state) {
            state.PauseTiming();
            sorted = costs;
            state.ResumeTiming();
            std::sort(sorted.begin(), sorted.end());
            benchmark::DoNotOptimize(sorted.data());
        }
        set_counters(state, n, 0.0, static_cast<std::size_t>(state.iterations()), 0);
        return;
    }
    const bcl::token_budget budget{.ranks = static_cast<std::size_t>(state.range(0)),
                                   .max_tokens = 131072};
    bcl::token_plan_options opt;
    opt.oversized_alone = true;
    bcl::token_planner planner;
    std::vector<bcl::micro_slot> out(n);
    bcl::token_plan_summary s = planner.plan_held(tokens, {}, {}, budget, 1, opt, out); // warm-up
    const std::size_t allocations_before = allocations_now();
    std::size_t runs = 0;
    for (auto _ : state) {
        s = planner.plan_held(tokens, {}, {}, budget, 1, opt, out);
        benchmark::DoNotOptimize(out.data());
        ++runs;
    }
    set_counters(state, n, 0.0, runs, allocations_since(allocations_before));
    state.counters["plan_efficiency"] = s.efficiency();
    state.counters["micro_steps_over_bound"] =
        static_cast<double>(s.micro_steps) / static_cast<double>(s.micro_steps_bound);
}

/// baseline/sort/N:131072: std::sort of the same 131,072 costs as the token rows.
void token_sort_benchmark(benchmark::State& state) {
    sort_windows(state, token_records, plan_pool_windows);
}

// ---------------------------------------------------------------------------------------------
// Memory repair
// ---------------------------------------------------------------------------------------------

/// What the memory_repair rows give each record as its memory estimate.
enum class repair_memory {
    length,      // its own length, which its cost grows with
    independent, // the length in the same slot of the next window: unrelated to its cost
};

/// memory_repair*: one bcl::detail::memory_repair call per iteration, on a window whose
/// cost-balanced partition (bcl::lpt_swap_partitioner) was computed before timing, at a budget of
/// `budget_factor` x the window's mean batch memory. The timed loop copies that partition (O(n),
/// well under 1 ns per record) and repairs it. The repair is a pure function of its input, so
/// each window's result (its gap to the cost lower bound, whether it fits) is computed once,
/// untimed, and added up per run.
void memory_repair_benchmark(benchmark::State& state, repair_memory kind, double budget_factor) {
    const auto k = static_cast<std::size_t>(state.range(0));
    const auto b = static_cast<std::size_t>(state.range(1));
    const std::size_t window = k * b;
    const window_pool& pool = *pool_for(lognormal_tokens, window);
    const bcl::pack_shape shape{k, b};
    struct prepared {
        std::vector<double> memory;
        std::vector<std::uint32_t> balanced;
        double budget = 0.0;
        double gap = 0.0;
        bool over = false;
    };
    // A few windows: each needs a partition up front, and the slowest repairs take long.
    const std::size_t windows = std::min<std::size_t>(pool.windows, 8);
    std::vector<prepared> input(windows);
    bcl::lpt_swap_partitioner partitioner;
    bcl::detail::memory_repair repair;
    std::vector<std::uint32_t> pack_of(window);
    std::vector<double> batch_cost(k);
    for (std::size_t w = 0; w < windows; ++w) {
        prepared& in = input[w];
        const std::size_t source = kind == repair_memory::length ? w : (w + 1) % pool.windows;
        in.memory.resize(window);
        double memory_total = 0.0;
        for (std::size_t i = 0; i < window; ++i) {
            in.memory[i] = pool.records[source * window + i].length;
            memory_total += in.memory[i];
        }
        in.budget = budget_factor * memory_total / static_cast<double>(k);
        in.balanced.resize(window);
        const bcl::partition_summary summary = partitioner(pool.costs_of(w), shape, in.balanced);
        pack_of = in.balanced;
        in.over = repair(pool.costs_of(w), in.memory, shape, pack_of, in.budget) > in.budget;
        std::fill(batch_cost.begin(), batch_cost.end(), 0.0);
        for (std::size_t i = 0; i < window; ++i) batch_cost[pack_of[i]] += pool.costs_of(w)[i];
        const double heaviest = *std::max_element(batch_cost.begin(), batch_cost.end());
        in.gap = gap_of({heaviest, summary.lower_bound});
    }

    double gap_sum = 0.0;
    std::size_t over = 0;
    std::size_t w = 0;
    std::size_t runs = 0;
    const std::size_t allocations_before = allocations_now();
    for (auto _ : state) {
        const prepared& in = input[w];
        std::copy(in.balanced.begin(), in.balanced.end(), pack_of.begin());
        benchmark::DoNotOptimize(repair(pool.costs_of(w), in.memory, shape, pack_of, in.budget));
        benchmark::DoNotOptimize(pack_of.data());
        gap_sum += in.gap;
        over += in.over ? 1 : 0;
        ++runs;
        if (++w == windows) w = 0;
    }
    const std::size_t allocations = allocations_since(allocations_before);
    set_counters(state, window, gap_sum, runs, allocations);
    state.counters["over_budget"] =
        static_cast<double>(over) / static_cast<double>(runs > 0 ? runs : 1);
}

// ---------------------------------------------------------------------------------------------
// Registration
// ---------------------------------------------------------------------------------------------

constexpr std::int64_t lookaheads[] = {2, 8, 32, 64};
// 16 is not in the design's grid, but K:64/B:16 is a target shape (small B, many packs).
constexpr std::int64_t batch_sizes[] = {1, 8, 16, 64, 512};
constexpr std::int64_t max_window = 65536;

/// 1-for-1 swaps only: the default with refinement effort off, to show what phase 2 buys.
struct lpt_swap_single : bcl::lpt_swap_partitioner {
    lpt_swap_single() : bcl::lpt_swap_partitioner(bcl::refinement_effort{.searches_per_pack = 0}) {}
};

void add(const std::string& name, std::int64_t k, std::int64_t b, auto function) {
    benchmark::RegisterBenchmark(name.c_str(), function)->ArgNames({"K", "B"})->Args({k, b});
}

template <class Partitioner>
void add_partitioner(const std::string& name, const length_source& src, std::int64_t k,
                     std::int64_t b) {
    add(name, k, b,
        [&src](benchmark::State& state) { partition_benchmark<Partitioner>(state, src); });
}

void register_shape(std::int64_t k, std::int64_t b) {
    const length_source& src = lognormal_tokens;
    add("baseline/sort", k, b, sort_benchmark);
    add("baseline/passthrough", k, b, [](benchmark::State& state) {
        balancer_benchmark<passthrough_partitioner>(state, bcl::emission_order::costliest_first);
    });
    add("adapter/tumbling", k, b, [](benchmark::State& state) {
        balancer_benchmark<default_partitioner>(state, bcl::emission_order::costliest_first);
    });
    add("adapter/sliding", k, b, [](benchmark::State& state) {
        balancer_benchmark<default_partitioner>(state, bcl::emission_order::costliest_first,
                                                bcl::lookahead_policy::sliding);
    });
    add("adapter/sliding_calibrated", k, b, [](benchmark::State& state) {
        balancer_benchmark<default_partitioner, true>(state, bcl::emission_order::costliest_first,
                                                      bcl::lookahead_policy::sliding);
    });
    add_partitioner<default_partitioner>("partition/default", src, k, b);
    add_partitioner<bcl::lpt_swap_partitioner>("partition/lpt_swap", src, k, b);
    add_partitioner<bcl::detail::lpt_partitioner>("partition/lpt", src, k, b);
    add_partitioner<bcl::detail::karmarkar_karp_partitioner>("partition/karmarkar_karp", src, k, b);
    add_partitioner<bcl::detail::refined<bcl::detail::karmarkar_karp_partitioner>>(
        "partition/karmarkar_karp_swap", src, k, b);
    add_partitioner<bcl::detail::snake_partitioner>("partition/snake", src, k, b);
    add_partitioner<bcl::detail::refined<bcl::detail::snake_partitioner>>("partition/snake_swap",
                                                                          src, k, b);
}

/// distribution/<source>/<algorithm>/K:<K>/B:<B>: the table of docs/partitioners.md.
void register_distribution(const length_source& src, std::int64_t k, std::int64_t b) {
    const std::string prefix = std::string("distribution/") + src.name + "/";
    add_partitioner<bcl::lpt_swap_partitioner>(prefix + "lpt_swap", src, k, b);
    add_partitioner<lpt_swap_single>(prefix + "lpt_swap_single", src, k, b);
    add_partitioner<bcl::detail::lpt_partitioner>(prefix + "lpt", src, k, b);
    add_partitioner<bcl::detail::karmarkar_karp_partitioner>(prefix + "karmarkar_karp", src, k, b);
    add_partitioner<bcl::detail::refined<bcl::detail::karmarkar_karp_partitioner>>(
        prefix + "karmarkar_karp_swap", src, k, b);
    add_partitioner<bcl::detail::snake_partitioner>(prefix + "snake", src, k, b);
}

/// memory_repair*/K:<K>/B:64: the three memory repair rows of one window size.
void register_memory_repair(std::int64_t k) {
    add("memory_repair", k, 64, [](benchmark::State& state) {
        memory_repair_benchmark(state, repair_memory::length, 1.05);
    });
    add("memory_repair_tight", k, 64, [](benchmark::State& state) {
        memory_repair_benchmark(state, repair_memory::length, 1.01);
    });
    add("memory_repair_independent", k, 64, [](benchmark::State& state) {
        memory_repair_benchmark(state, repair_memory::independent, 1.05);
    });
}

/// The global plan's rows at R = 8 .. 8192, K = 8, B = 16, each after the sort of its costs.
void register_global_plan() {
    for (const std::int64_t r : {8, 64, 1024, 8192}) {
        const std::vector<std::int64_t> args{r, 8, 16};
        benchmark::RegisterBenchmark("baseline/sort", plan_sort_benchmark)
            ->ArgNames({"R", "K", "B"})
            ->Args(args);
        benchmark::RegisterBenchmark("global_plan", global_plan_benchmark)
            ->ArgNames({"R", "K", "B"})
            ->Args(args);
    }
}

void register_all() {
    // Shape by shape (and source by source), so one window pool serves a run of benchmarks.
    for (const std::int64_t k : lookaheads)
        for (const std::int64_t b : batch_sizes)
            if (k * b <= max_window) register_shape(k, b);
    constexpr std::int64_t table_shapes[][2] = {{8, 16}, {8, 64}, {64, 16}};
    for (const auto& shape : table_shapes)
        for (const length_source& src : table_sources)
            register_distribution(src, shape[0], shape[1]);
    for (const std::int64_t k : {64, 256, 1024}) register_memory_repair(k);
    register_global_plan();
    benchmark::RegisterBenchmark("baseline/sort", token_sort_benchmark)
        ->ArgNames({"N"})
        ->Arg(static_cast<std::int64_t>(token_records));
    for (const bool heavy_tail : {false, true}) {
        const std::string src = heavy_tail ? "heavy_tail" : "mooncake";
        benchmark::RegisterBenchmark(("baseline/sort/N:1048576/src:" + src).c_str(),
                                     large_held_benchmark, heavy_tail, true)
            ->Unit(benchmark::kMillisecond);
        benchmark::RegisterBenchmark(("token_plan/held/N:1048576/src:" + src).c_str(),
                                     large_held_benchmark, heavy_tail, false)
            ->ArgNames({"R"})
            ->Arg(64)
            ->Unit(benchmark::kMillisecond);
    }
    for (const std::int64_t r : {8, 64}) {
        benchmark::RegisterBenchmark("token_plan/held", token_plan_benchmark, false)
            ->ArgNames({"R"})
            ->Arg(r);
        benchmark::RegisterBenchmark("token_plan/epoch", token_plan_benchmark, true)
            ->ArgNames({"R"})
            ->Arg(r);
    }
}

/// The records of the stage rows: held batches of R*16 records of a vision-language mix (30%
/// text only, 55% one image of lognormal patch count, median 1000, 15% several, median 4000), the
/// encoder costing 0.09 * (P + P^2/8192) for P patches and the language model T + T^2/24576 for
/// T = text + P/4 tokens, the text lognormal(6, 0.9); as bench/python/bench_stages.py draws them.
std::vector<std::vector<double>> stage_windows(std::size_t records, std::size_t windows) {
    std::mt19937_64 rng(17);
    std::lognormal_distribution<double> text(6.0, 0.9);
    std::lognormal_distribution<double> one(std::log(1000.0), 0.8);
    std::lognormal_distribution<double> many(std::log(4000.0), 0.9);
    std::uniform_real_distribution<double> kind(0.0, 1.0);
    std::vector<std::vector<double>> out(windows, std::vector<double>(2 * records));
    for (std::vector<double>& w : out)
        for (std::size_t i = 0; i < records; ++i) {
            const double u = kind(rng);
            const double p = u < 0.3    ? 0.0
                             : u < 0.85 ? std::clamp(one(rng), 64.0, 16384.0)
                                        : std::clamp(many(rng), 256.0, 32768.0);
            const double t = text(rng) + p / 4.0;
            w[2 * i] = 0.09 * (p + p * p / 8192.0);
            w[2 * i + 1] = t + t * t / 24576.0;
        }
    return out;
}

/// stage_plan/held/R:<R>/D:<D>: one bcl::held_stage_planner::plan per iteration on a held batch
/// of R*16 vision-language records, B = 16 (one micro-step), with their two stage costs (D = 2)
/// or their sums (D = 1, bcl::held_batch_planner's plan); baseline/sort/stages/R:<R>/D:2 with
/// sort_only, std::sort of the summed costs. Counters as above, plus plan_efficiency (the plan's
/// own, per stage: total / (R * objective)).
void stage_plan_benchmark(benchmark::State& state, bool sort_only) {
    const auto ranks = static_cast<std::size_t>(state.range(0));
    const auto stages = static_cast<std::size_t>(state.range(1));
    const std::size_t records = ranks * 16;
    std::vector<std::vector<double>> windows = stage_windows(records, 64);
    if (stages == 1)
        for (std::vector<double>& w : windows) {
            for (std::size_t i = 0; i < records; ++i) w[i] = w[2 * i] + w[2 * i + 1];
            w.resize(records);
        }
    bcl::held_stage_planner planner;
    std::vector<bcl::plan_slot> out(records);
    std::vector<double> sorted(records);
    double efficiency_sum = 0.0;
    const auto run = [&](std::size_t w) {
        if (sort_only) {
            for (std::size_t i = 0; i < records; ++i)
                sorted[i] = windows[w][stages * i] + (stages > 1 ? windows[w][stages * i + 1] : 0);
            std::sort(sorted.begin(), sorted.end());
            return;
        }
        efficiency_sum += planner.plan(windows[w], stages, ranks, 16, {}, out).efficiency();
    };
    for (std::size_t v = 0; v < windows.size(); ++v) run(v);
    efficiency_sum = 0.0;
    std::size_t w = 0;
    std::size_t runs = 0;
    const std::size_t allocations_before = allocations_now();
    for (auto _ : state) {
        run(w);
        benchmark::DoNotOptimize(out.data());
        benchmark::DoNotOptimize(sorted.data());
        ++runs;
        if (++w == windows.size()) w = 0;
    }
    const std::size_t allocations = allocations_since(allocations_before);
    set_counters(state, records, 0.0, runs, allocations);
    if (!sort_only)
        state.counters["plan_efficiency"] =
            efficiency_sum / static_cast<double>(runs > 0 ? runs : 1);
}

struct staged_record {
    std::uint32_t id;
    std::array<double, 2> cost;
};
struct staged_cost {
    std::array<double, 2> operator()(const staged_record& r) const { return r.cost; }
};
struct summed_staged_cost {
    double operator()(const staged_record& r) const { return r.cost[0] + r.cost[1]; }
};

/// stage_adapter/<policy>/D:<D>: one window of K*B = 128 vision-language records pushed and
/// popped per iteration, D = 2 through bcl::stage_balancer, D = 1 (the summed cost) through
/// bcl::balancer, under `policy`.
template <class Balancer>
void stage_adapter_benchmark(benchmark::State& state, bcl::lookahead_policy policy) {
    constexpr std::size_t k = 8;
    constexpr std::size_t b = 16;
    const std::vector<std::vector<double>> windows = stage_windows(k * b, 64);
    const bcl::options opt{.batch_size = b, .lookahead = k, .policy = policy};
    Balancer balancer{typename Balancer::estimator_type{}, opt};
    std::uint32_t id = 0;
    std::size_t taken = 0;
    const auto run = [&](std::size_t w) {
        for (std::size_t i = 0; i < k * b; ++i) {
            balancer.push(staged_record{id++, {windows[w][2 * i], windows[w][2 * i + 1]}});
            while (auto batch = balancer.pop()) taken += batch->size();
        }
    };
    for (std::size_t v = 0; v < 4; ++v) run(v);
    std::size_t w = 0;
    std::size_t runs = 0;
    const std::size_t allocations_before = allocations_now();
    for (auto _ : state) {
        run(w);
        benchmark::DoNotOptimize(taken);
        ++runs;
        if (++w == windows.size()) w = 0;
    }
    const std::size_t allocations = allocations_since(allocations_before);
    set_counters(state, k * b, 0.0, runs, allocations);
}

/// The balancer of a stage_adapter row, with its estimator's type named.
template <class Estimator>
struct stage_adapter_balancer;
template <>
struct stage_adapter_balancer<staged_cost> : bcl::stage_balancer<staged_record, staged_cost> {
    using estimator_type = staged_cost;
    using stage_balancer::stage_balancer;
};
template <>
struct stage_adapter_balancer<summed_staged_cost>
    : bcl::balancer<staged_record, summed_staged_cost> {
    using estimator_type = summed_staged_cost;
    using balancer::balancer;
};

/// The summed costs of rows of two stage costs.
std::vector<double> summed_stages(const std::vector<double>& two_stages) {
    std::vector<double> sums(two_stages.size() / 2);
    for (std::size_t i = 0; i < sums.size(); ++i)
        sums[i] = two_stages[2 * i] + two_stages[2 * i + 1];
    return sums;
}

/// Per stage, the efficiency of the summed plan's steps (`slots` of a plan of R*K*B records)
/// each shared among the ranks by stage with no choice of steps: each step's records planned as
/// a held batch of one micro-step (bcl::held_stage_planner), total / (R * the steps' summed
/// objectives).
double summed_steps_efficiency(const std::vector<double>& two_stages,
                               std::span<const bcl::plan_slot> slots,
                               const bcl::plan_shape& shape) {
    bcl::held_stage_planner planner;
    std::vector<double> step_costs;
    std::vector<bcl::plan_slot> step_out;
    double total = 0.0;
    double objective = 0.0;
    for (std::size_t step = 0; step < shape.steps; ++step) {
        step_costs.clear();
        for (std::size_t i = 0; i < slots.size(); ++i)
            if (slots[i].step == step) {
                step_costs.push_back(two_stages[2 * i]);
                step_costs.push_back(two_stages[2 * i + 1]);
            }
        step_out.resize(step_costs.size() / 2);
        const bcl::stage_plan_summary s =
            planner.plan(step_costs, 2, shape.ranks, shape.batch, {}, step_out);
        total += s.total;
        objective += s.objective;
    }
    return objective > 0.0 ? total / (static_cast<double>(shape.ranks) * objective) : 1.0;
}

/// stage_plan/window/R:<R>/K:8/D:<D>: one bcl::stage_window_planner::plan per iteration on a
/// window of R*K*B records of the stage rows' mix (K = 8 steps of B = 16), with their two stage
/// costs (D = 2) or their sums (D = 1, bcl::global_planner's plan); plan_efficiency the plan's
/// own, per stage. stage_plan/window_candidates/R:<R>/K:8/D:2 with candidates_only: the D + 1
/// one-number plans alone that a plan of D = 2 makes before restaging, to choose its steps
/// (bcl::global_planner on the summed costs and on each stage's alone), the least a plan that
/// chooses can take; its summed_steps_efficiency (per stage, computed before the timed loop) is
/// what the plan reaches without that choice, the summed plan's steps restaged.
void stage_window_benchmark(benchmark::State& state, bool candidates_only) {
    const bcl::plan_shape shape{.ranks = static_cast<std::size_t>(state.range(0)),
                                .steps = static_cast<std::size_t>(state.range(1)),
                                .batch = 16};
    const auto stages = static_cast<std::size_t>(state.range(2));
    const std::size_t records = shape.ranks * shape.steps * shape.batch;
    std::vector<std::vector<double>> windows = stage_windows(records, 16);
    // The candidates' one number a record, window after window: the summed costs, then each
    // stage's.
    std::vector<std::vector<double>> scalars;
    if (candidates_only)
        for (const std::vector<double>& w : windows) {
            scalars.push_back(summed_stages(w));
            for (std::size_t s = 0; s < 2; ++s) {
                std::vector<double> column(records);
                for (std::size_t i = 0; i < records; ++i) column[i] = w[2 * i + s];
                scalars.push_back(std::move(column));
            }
        }
    std::vector<bcl::plan_slot> out(records);
    double summed_steps_sum = 0.0;
    if (candidates_only) {
        bcl::global_planner summed_plan;
        for (std::size_t v = 0; v < windows.size(); ++v) {
            summed_plan.plan(scalars[3 * v], shape, out);
            summed_steps_sum += summed_steps_efficiency(windows[v], out, shape);
        }
    }
    if (stages == 1)
        for (std::vector<double>& w : windows) w = summed_stages(w);
    bcl::stage_window_planner planner;
    bcl::global_planner candidate;
    double efficiency_sum = 0.0;
    const auto run = [&](std::size_t w) {
        if (candidates_only) {
            for (std::size_t c = 0; c < 3; ++c) candidate.plan(scalars[3 * w + c], shape, out);
            return;
        }
        efficiency_sum += planner.plan(windows[w], stages, shape, {}, out).efficiency();
    };
    for (std::size_t v = 0; v < windows.size(); ++v) run(v);
    efficiency_sum = 0.0;
    std::size_t w = 0;
    std::size_t runs = 0;
    const std::size_t allocations_before = allocations_now();
    for (auto _ : state) {
        run(w);
        benchmark::DoNotOptimize(out.data());
        ++runs;
        if (++w == windows.size()) w = 0;
    }
    const std::size_t allocations = allocations_since(allocations_before);
    set_counters(state, records, 0.0, runs, allocations);
    if (candidates_only)
        state.counters["summed_steps_efficiency"] =
            summed_steps_sum / static_cast<double>(windows.size());
    else
        state.counters["plan_efficiency"] =
            efficiency_sum / static_cast<double>(runs > 0 ? runs : 1);
}

void register_stage_plans() {
    for (const auto policy : {bcl::lookahead_policy::tumbling, bcl::lookahead_policy::sliding}) {
        const std::string name = policy == bcl::lookahead_policy::tumbling
                                     ? "stage_adapter/tumbling/D:"
                                     : "stage_adapter/sliding/D:";
        benchmark::RegisterBenchmark(
            (name + "1").c_str(),
            stage_adapter_benchmark<stage_adapter_balancer<summed_staged_cost>>, policy);
        benchmark::RegisterBenchmark((name + "2").c_str(),
                                     stage_adapter_benchmark<stage_adapter_balancer<staged_cost>>,
                                     policy);
    }
    for (const std::int64_t r : {8, 64}) {
        benchmark::RegisterBenchmark("baseline/sort/stages", stage_plan_benchmark, true)
            ->ArgNames({"R", "D"})
            ->Args({r, 2});
        for (const std::int64_t d : {1, 2})
            benchmark::RegisterBenchmark("stage_plan/held", stage_plan_benchmark, false)
                ->ArgNames({"R", "D"})
                ->Args({r, d});
        for (const std::int64_t d : {1, 2})
            benchmark::RegisterBenchmark("stage_plan/window", stage_window_benchmark, false)
                ->ArgNames({"R", "K", "D"})
                ->Args({r, 8, d});
        benchmark::RegisterBenchmark("stage_plan/window_candidates", stage_window_benchmark, true)
            ->ArgNames({"R", "K", "D"})
            ->Args({r, 8, 2});
    }
}

} // namespace

int main(int argc, char** argv) {
    register_all();
    register_stage_plans();
    benchmark::Initialize(&argc, argv);
    if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
    return 0;
}
