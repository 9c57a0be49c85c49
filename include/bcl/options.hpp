#pragma once
// The user-facing settings of a balancer: the aggregate and the one list of its fields (which
// saving, restoring and comparing states read). Checking them is bcl/validate.hpp's.

#include <bcl/detail/config.hpp>

#include <bcl/cost_estimator.hpp>

#include <cmath>
#include <cstddef>
#include <cstdint>

namespace bcl {

/// How a balancer chooses which buffered records form the next K batches.
enum class lookahead_policy {
    /// The BCL paper's policy: fill a window of K*B records, repartition all of it, emit K
    /// batches. Each window is balanced to its own mean. Holds K*B records; a record waits at most
    /// K-1 batches.
    tumbling,
    /// Keep a larger buffer (buffer_windows * K*B records). Each round takes the records whose
    /// deadline has come, then picks the rest so the K batches' total is as close as possible to K
    /// times the long-run mean batch cost of the arrivals, and repartitions them. Balances toward
    /// the stream's mean rather than the window's, so every rank converges to the same batch cost
    /// without communicating. A record waits at most (max_age + 1) * K - 1 batches.
    sliding,
};

/// What a cap does to a record whose estimated cost is above it. Either way the record is kept:
/// a cap never drops a record and never changes the batch count.
enum class cap_action {
    /// Balance with the capped estimate; the record itself is untouched (so its real cost is still
    /// high: clip keeps one outlier from distorting the balance of the rest of its window).
    clip,
    /// Call the estimator's truncate(record, cap) (see bcl::with_truncation), which shrinks the
    /// record, e.g. cuts tokens, then estimate it again. An estimate still above the cap is
    /// clipped.
    truncate,
};

/// The order in which a round's batches leave. Ranks with equal options start their rounds at
/// the same batch index whatever the costs, so an order every rank applies alike lines up their
/// heavy batches in the same steps (docs/alignment.md).
enum class emission_order {
    /// A round's full batches leave in descending estimated cost, the costliest first. For fixed
    /// batches this minimizes the sum over steps of the slowest rank's batch (docs/alignment.md).
    costliest_first,
    /// A round's full batches leave in a seeded random order (options::seed).
    shuffled,
};

/// What a batch costs the trainer, given its records' estimates.
enum class batch_cost {
    /// The sum of its records' costs: packed sequences, or any model whose cost adds up.
    packed,
    /// B times its costliest record's cost: a trainer that pads every record to the batch's
    /// longest. Rounds are then cut into batches of records of similar cost (the least padding).
    padded,
};

/// Where the cap on a record's estimated cost comes from.
enum class cap_kind {
    none,     ///< no cap (the default)
    fixed,    ///< cap_options::value
    quantile, ///< the cap_options::quantile of the costs seen so far, by a streaming quantile
              ///< sketch
};

/// The outlier cap, applied to each record's estimate before balancing.
struct cap_options {
    cap_kind kind = cap_kind::none;
    /// kind == fixed: the cap, in cost units. Must be > 0.
    double value = 0.0;
    /// kind == quantile: which quantile of the stream's estimated costs (uncapped), estimated by
    /// a streaming sketch to within 1% and re-read every 64 records. Default 0.99: about one
    /// record in a hundred is capped, few enough to leave the workload intact, while it removes
    /// the tail that no repartitioning can balance.
    double quantile = 0.99;
    /// kind == quantile: records seen before the quantile applies (earlier records get `prior`).
    /// 0 means ceil(10 / (1 - quantile)), 1000 for p99: by then about 10 records lie above the
    /// quantile, enough for the estimate to settle.
    std::size_t warmup = 0;
    cap_action action = cap_action::clip;
    /// kind == quantile: a fixed cap, in cost units, in force until the warm-up ends. Default 0:
    /// none, the first `warmup` records are not capped. A loader that knows every record's cost
    /// up front (a map-style dataset) can pass the quantile it wants, so the cap holds from the
    /// first step.
    double prior = 0.0;
};

/// Online calibration: how a balancer whose estimator is a calibratable_estimator (e.g.
/// bcl::calibrated_cost) fits its coefficients to the batch times reported by balancer::observe.
/// Ignored for other estimators. See docs/calibration.md.
struct calibration_options {
    /// Weight each older time keeps per newer time, in (0, 1]: the fit remembers about
    /// 1 / (1 - forgetting) batches. Default 0.99: a hundred batches average out 5% timing noise
    /// on three coefficients, and a changed cost (a longer-context curriculum) is tracked within a
    /// few hundred steps. 1 never forgets.
    double forgetting = 0.99;
    /// How many batches' worth of evidence the prior's shape counts as, >= 0. Default 0.001: it
    /// decides what the first few times cannot (three coefficients from one time) and hardly
    /// anything after. More biases the fit: batch feature sums are nearly collinear (balanced
    /// batches of bounded lengths look alike), so even a small weight pulls the coefficients
    /// toward the prior's shape along that direction (measured on exact times of ShareGPT
    /// batches: the constant term 30% off at 0.01, 6% at 0.001, 0.4% at 0.0001 with forgetting
    /// 1; a weight of 1 puts it 10-20% off on lognormal lengths).
    double prior_weight = 0.001;
    /// observe() accepts the times of the last `horizon` emitted batches (1 to 2^20); older is a
    /// bcl::error. Default 256: room for deep pipelines and asynchronous loaders.
    std::size_t horizon = 256;
    /// A time whose relative error against the fit exceeds this many typical errors (a GC pause,
    /// a checkpoint step) counts for proportionally less. Must be > 0; default 3.
    double outlier_threshold = 3.0;
};

/// Settings of a balancer. An aggregate, so designated initializers work:
/// `bcl::options{.batch_size = 32, .lookahead = 8}`.
struct options {
    /// B: records per emitted batch, exactly what the trainer expects. No default: it is the
    /// trainer's, not ours. Must be >= 1.
    std::size_t batch_size = 0;
    /// K: batches per lookahead window, so K*B records are buffered and repartitioned together.
    /// Default 8: per-batch cost variability falls roughly as 1/sqrt(K), so 8 already removes most
    /// of it while holding only 8 batches of records and delaying a record by at most 7 batches.
    std::size_t lookahead = 8;
    /// Drop the final short batch (the last N mod B records in arrival order, exactly the records
    /// an unbalanced loader with drop_last would drop). Default false: nothing is dropped.
    bool drop_last = false;
    /// Seed of every random choice (the shuffled emission order). Same seed, same batches.
    std::uint64_t seed = 0;
    /// The order in which a round's batches leave; see emission_order. Default costliest_first:
    /// it lines up every rank's heavy batches in the same steps, which shuffled cannot, and costs
    /// nothing on light tails (docs/alignment.md). The short final batch always leaves last.
    emission_order emission = emission_order::costliest_first;
    /// What a batch costs; see batch_cost. Default packed: the sum of its records' costs.
    batch_cost batching = batch_cost::packed;
    /// Which lookahead policy; see lookahead_policy. Default sliding: it measured better than
    /// tumbling on every bundled workload (docs/policies.md), for one more window of records held
    /// and a longer delay bound. Choose tumbling, the paper's policy, when memory or record order
    /// is tight.
    lookahead_policy policy = lookahead_policy::sliding;
    /// Sliding only: the buffer holds buffer_windows * K * B records. Default 2: twice the window
    /// gives each round a choice of K*B records out of 2*K*B, enough to hit the long-run mean
    /// almost exactly on light tails, while holding only one window more than tumbling. Heavy
    /// tails gain from more room: a third window with max_age 4 lifts Mooncake with a p99
    /// truncating cap from 0.919 to 0.936 (docs/alignment.md, "What is not reached").
    std::size_t buffer_windows = 2;
    /// Sliding only: a record that entered the buffer at round r leaves by round r + max_age.
    /// Must be at least buffer_windows - 1, the rounds a full buffer needs to empty; at exactly
    /// that the deadlines leave no choice and sliding degenerates to first-in first-out. A record
    /// leaves at most (max_age + 1) * K - 1 batches after the batch it would have been in.
    /// Default 2: one round of slack over the minimum. More slack gains on heavy tails (Mooncake
    /// +0.013 at 3) and little elsewhere, for K more batches of delay each (docs/policies.md).
    std::size_t max_age = 2;
    /// Sliding: the long-run mean cost of a record, in cost units, that rounds aim their batches
    /// at (B times it per batch); also the yardstick of the heavy batches under costliest-first
    /// emission. Default 0, not given: a balancer then aims at the running mean of every record
    /// pushed so far, which each rank estimates from its own records (bcl-sim's `--mean-cost
    /// running`, Python's `mean_cost="running"`); a sampler that draws its epoch up front
    /// (bcl::torch::balanced_sampler, Python's default `"epoch"`) computes that epoch's mean and
    /// passes it here. A loader that knows its dataset's mean cost up front (a map-style
    /// dataset) can pass it: every rank then aims at the same level from the first round, which
    /// lines up their batches further, most over short runs (docs/alignment.md). Under a cap,
    /// pass the mean of the capped costs, which is what the running mean averages: a level a few
    /// percent below the costs that arrive keeps heavy records until they are due. A loader that
    /// holds the records before it balances them (an epoch) passes their own mean,
    /// bcl::stream_mean_cost(records, estimator, cap).
    double mean_cost = 0.0;
    /// Outlier cap (default none); see cap_options.
    cap_options cap{};
    /// Largest total memory estimate of one batch, 0 for no limit (the default). Needs an estimator
    /// with a memory(record) member (bcl::with_memory). Every emitted batch then fits the budget;
    /// a record that alone exceeds it, or a round that cannot be split within it, is a bcl::error.
    double memory_budget = 0.0;
    /// Emit first, in the first round, the batch with the largest memory estimate (the largest
    /// estimated cost if there is no memory estimator), so an out-of-memory happens in the first
    /// step rather than hours later. Default false.
    bool largest_first = false;
    /// Online cost calibration (only for a calibratable estimator); see calibration_options.
    calibration_options calibration{};
};

/// Largest window (K*B records) a balancer accepts: slots are indexed with 32-bit integers and a
/// window this large already holds far more records than any lookahead needs.
inline constexpr std::size_t max_window_records = std::size_t{1} << 26;

/// Largest delay bound, (max_age + 1) * lookahead batches, a sliding balancer accepts. The delay
/// statistics keep a count per delay, so the bound sizes them; a million batches of delay is far
/// beyond any use of max_age (more slack than a few rounds measured no better).
inline constexpr std::size_t max_delay_limit = std::size_t{1} << 20;

namespace detail {

// When an option matters to what a balancer does: always, or only under some other setting.
inline bool always(const options& /*o*/) noexcept {
    return true;
}
inline bool sliding_only(const options& o) noexcept {
    return o.policy == lookahead_policy::sliding;
}
inline bool capped_only(const options& o) noexcept {
    return o.cap.kind != cap_kind::none;
}
inline bool fixed_cap_only(const options& o) noexcept {
    return o.cap.kind == cap_kind::fixed;
}
inline bool quantile_cap_only(const options& o) noexcept {
    return o.cap.kind == cap_kind::quantile;
}

/// Every field of bcl::options, once, as the user spells it: `visit(name, field, matters)` is
/// called with each name, a callable that gives that field of an options object, and a predicate
/// saying whether the field matters under the given options. Saving a state writes the fields in
/// this order, restoring reads them back, and a restore compares those that matter one by one: a
/// new option is one more line here (and its component).
template <class Visit>
constexpr void visit_option_fields(Visit&& visit) {
    // One field a line, read as the table it is.
    // clang-format off
    visit("batch_size",     [](auto& o) -> auto& { return o.batch_size; },     always);
    visit("lookahead",      [](auto& o) -> auto& { return o.lookahead; },      always);
    visit("drop_last",      [](auto& o) -> auto& { return o.drop_last; },      always);
    visit("seed",           [](auto& o) -> auto& { return o.seed; },           always);
    visit("emission",       [](auto& o) -> auto& { return o.emission; },       always);
    visit("batching",       [](auto& o) -> auto& { return o.batching; },       always);
    visit("policy",         [](auto& o) -> auto& { return o.policy; },         always);
    visit("buffer_windows", [](auto& o) -> auto& { return o.buffer_windows; }, sliding_only);
    visit("max_age",        [](auto& o) -> auto& { return o.max_age; },        sliding_only);
    visit("mean_cost",      [](auto& o) -> auto& { return o.mean_cost; },      always);
    visit("cap.kind",       [](auto& o) -> auto& { return o.cap.kind; },       always);
    visit("cap.value",      [](auto& o) -> auto& { return o.cap.value; },      fixed_cap_only);
    visit("cap.quantile",   [](auto& o) -> auto& { return o.cap.quantile; },   quantile_cap_only);
    visit("cap.warmup",     [](auto& o) -> auto& { return o.cap.warmup; },     quantile_cap_only);
    visit("cap.action",     [](auto& o) -> auto& { return o.cap.action; },     capped_only);
    visit("cap.prior",      [](auto& o) -> auto& { return o.cap.prior; },      quantile_cap_only);
    visit("memory_budget",  [](auto& o) -> auto& { return o.memory_budget; },  always);
    visit("largest_first",  [](auto& o) -> auto& { return o.largest_first; },  always);
    visit("calibration.forgetting",   [](auto& o) -> auto& { return o.calibration.forgetting; },   always);
    visit("calibration.prior_weight", [](auto& o) -> auto& { return o.calibration.prior_weight; }, always);
    visit("calibration.horizon",      [](auto& o) -> auto& { return o.calibration.horizon; },      always);
    visit("calibration.outlier_threshold",
          [](auto& o) -> auto& { return o.calibration.outlier_threshold; }, always);
    // clang-format on
}

} // namespace detail

/// Calls `visit(name, field)` for every field of bcl::options, once each, in the order a saved
/// state writes them: `name` as the user spells it ("batch_size", "cap.kind",
/// "calibration.horizon") and `field` a callable that gives that field of an options object. What
/// tools and bindings walk to know every option, so a new option reaches them without an edit.
template <class Visit>
constexpr void for_each_option_field(Visit&& visit) {
    detail::visit_option_fields([&](const char* name, auto field, auto) { visit(name, field); });
}

/// Records a quantile cap waits for before it applies (cap_options::warmup, resolved); 0 for
/// the other kinds, which have no warm-up, and for a quantile outside (0, 1), which
/// bcl::validate refuses: 1, 2.0 or NaN would make the default warm-up an infinite, negative or
/// undefined count (the other kinds' `quantile` is never validated, so it is not read either).
[[nodiscard]] inline std::size_t cap_warmup(const cap_options& cap) noexcept {
    if (cap.kind != cap_kind::quantile) return 0;
    if (cap.warmup != 0) return cap.warmup;
    if (!(cap.quantile > 0.0 && cap.quantile < 1.0)) return 0;
    return static_cast<std::size_t>(std::ceil(10.0 / (1.0 - cap.quantile) - 1e-9));
}

} // namespace bcl
