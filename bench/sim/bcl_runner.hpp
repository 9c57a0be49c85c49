#pragma once
// The bcl policies (tumbling, sliding): one bcl::balancer per rank, through the library itself.

#include "cost_and_cap.hpp"
#include "policy_runner.hpp"
#include "random.hpp"

#include <bcl/balancer.hpp>
#include <bcl/calibrated_cost.hpp>
#include <bcl/error.hpp>
#include <bcl/names.hpp>
#include <bcl/options.hpp>
#include <bcl/record_model.hpp>
#include <bcl/statistics.hpp>
#include <bcl/stream_mean_cost.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace bcl_sim {

// ---------------------------------------------------------------------------------------------
// The bcl policies: a bcl::balancer per rank, no communication.
// ---------------------------------------------------------------------------------------------

/// A record as the bcl balancers in the simulator see it.
struct sim_record {
    std::uint64_t id;
    double length; ///< tokens; what the memory budget counts (shrunk by a truncating cap)
    double cost;   ///< the true cost of `length`; what the rank spends on it
};

/// The cost estimate the simulated balancers use: the true cost, a perfect estimate. It reads the
/// `cost` member of any record that has one (sim_record here, bcl-mpi-bench's records too).
struct true_cost {
    template <class Record>
    [[nodiscard]] double operator()(const Record& r) const noexcept {
        return r.cost;
    }
};

/// The truncation bcl calls for a record whose cost is above the cap: the record keeps the
/// largest whole number of tokens whose cost is within the cap (truncated_length), and its true
/// cost becomes the cost of that length.
struct truncate_record {
    cost_model cost;
    void operator()(sim_record& r, double cap) const {
        r.length = truncated_length(cost, r.length, cap);
        r.cost = cost(r.length);
    }
};

/// The estimator of the simulated balancers, built from bcl's public pieces: the true cost, the
/// record's length as its memory estimate (bcl::with_memory; what --memory-budget bounds), and the
/// truncation (bcl::with_truncation; called only under --cap-action truncate).
using sim_estimator = decltype(bcl::with_truncation(
    bcl::with_memory(true_cost{}, &sim_record::length), truncate_record{}));

[[nodiscard]] inline sim_estimator make_sim_estimator(const cost_model& cost) {
    return bcl::with_truncation(bcl::with_memory(true_cost{}, &sim_record::length),
                                truncate_record{cost});
}

/// The estimator of the calibrated bcl policies (--calibrate): a + b*L + c*L^2 over the record's
/// length, bcl::calibrated_affine_quadratic starting from the --cost coefficients, which the
/// balancer refits from the times it observes. Like sim_estimator it gives the length as the
/// memory estimate and truncates a record to the cap, here under the coefficients in force.
class calibrated_sim_estimator {
public:
    using cost_type =
        decltype(bcl::calibrated_affine_quadratic(0.0, 1.0, 0.0, &sim_record::length));
    static constexpr std::size_t feature_count = cost_type::feature_count;
    using coefficient_array = cost_type::coefficient_array;

    /// Throws bcl::error for a prior that costs nothing (every coefficient 0).
    explicit calibrated_sim_estimator(const cost_model& prior)
        : m_cost(bcl::calibrated_affine_quadratic(prior.a, prior.b, prior.c, &sim_record::length)) {
    }

    [[nodiscard]] coefficient_array features(const sim_record& r) const {
        return m_cost.features(r);
    }
    [[nodiscard]] const coefficient_array& coefficients() const noexcept {
        return m_cost.coefficients();
    }
    [[nodiscard]] const coefficient_array& prior() const noexcept { return m_cost.prior(); }
    void set_coefficients(const coefficient_array& c) noexcept { m_cost.set_coefficients(c); }
    [[nodiscard]] double operator()(const sim_record& r) const { return m_cost(r); }
    [[nodiscard]] double memory(const sim_record& r) const noexcept { return r.length; }
    void truncate(sim_record& r, double cap) const {
        const coefficient_array& c = m_cost.coefficients();
        const cost_model now{c[0], c[1], c[2], {}};
        r.length = truncated_length(now, r.length, cap);
        r.cost = now(r.length);
    }

private:
    cost_type m_cost;
};

/// How a rank-local bcl policy estimates a record's cost.
enum class bcl_estimate {
    given,      ///< the --cost model (a user's hard-coded estimate)
    true_cost,  ///< the true cost model in force at the step the record is pushed in
    calibrated, ///< the --cost model as a prior, refitted online from observed batch times
};

/// The options of rank `rank`'s balancer under a bcl policy: B and K from the run, a seed per rank,
/// the run's cap, memory budget, batching, emission, mean cost and sliding buffer
/// (--buffer-windows, --max-age), every other setting at bcl's default. The one place where the
/// run's settings become the balancers' options (but for --mean-cost epoch, whose mean
/// bcl_local_runner sets per epoch).
[[nodiscard]] inline bcl::options bcl_options(const sim_context& ctx, std::size_t rank,
                                              bcl::lookahead_policy policy) {
    bcl::options opt{.batch_size = ctx.batch,
                     .lookahead = ctx.lookahead,
                     .drop_last = false,
                     .seed = stream_key(ctx.seed, domain::bcl, rank)};
    opt.policy = policy;
    opt.cap = ctx.cap;
    opt.memory_budget = ctx.memory_budget;
    opt.batching = ctx.batching;
    opt.emission = ctx.emission;
    opt.buffer_windows = ctx.buffer_windows;
    opt.max_age = ctx.max_age;
    if (ctx.cap_prior) opt.cap.prior = *ctx.cap_prior;
    if (ctx.mean_cost) opt.mean_cost = *ctx.mean_cost;
    return opt;
}

/// A rank-local bcl policy: one bcl::balancer per rank, no communication. Each step, each rank
/// pops its next batch, pushing records from its own stream until one is ready, exactly as a
/// training loop would. The rank's time is the sum of its batch's true costs (a clipped estimate
/// changes what the balancer sees, not what the rank spends; a truncated record costs less). The
/// options decide which bcl policy it is: tumbling or sliding, with the run's cap and memory
/// budget. A bcl::error from a balancer (a record alone over the memory budget, a round that
/// cannot be split within it) propagates, prefixed with the policy, rank and step.
///
/// Epochs (ctx.epoch_steps = N > 0): at every step s with s % N == 0 each rank starts epoch
/// e = s / N. Its balancer takes only the epoch's N*B records (stream indices [e*N*B, (e+1)*N*B)),
/// still pushing only until pop() yields, calls finish() once all of them are pushed and nothing
/// is ready, and drains them: N full batches. At the next boundary (ctx.epoch_start) the drained
/// balancer goes on with next_epoch(), keeping what it learned, as the samplers carry theirs
/// (`carry`, the default); or a new balancer with the same options takes its place (`fresh`).
/// Under ctx.mean_cost_epoch each epoch aims at the mean of its own estimated costs under the cap
/// (bcl::stream_mean_cost), evaluated when the epoch starts: the new balancer's
/// options::mean_cost, or next_epoch(mean). Without epochs one balancer per rank serves the whole
/// run and is never drained.
///
/// Calibrated (Estimator = calibrated_sim_estimator), each rank then observes the batch's time:
/// its true cost times its noise factor (time_noise_factor), and the runner tallies how far the
/// fit in force predicted that batch's true cost (calibration_report). A carried balancer keeps
/// its fit across epochs; a fresh one starts again from the prior, as a balancer rebuilt from the
/// same estimator does. The epoch's mean is taken from the prior's costs either way, as the
/// samplers take it from their cost table.
template <class Estimator>
class bcl_local_runner final : public policy_runner {
public:
    using balancer_type = bcl::balancer<sim_record, Estimator>;
    static constexpr bool calibrating = std::is_same_v<Estimator, calibrated_sim_estimator>;

    bcl_local_runner(std::string_view name, const sim_context& ctx, bcl_estimate estimate,
                     bcl::lookahead_policy policy)
        : m_name(name), m_ctx(ctx), m_estimate(estimate), m_policy(policy), m_balancers(ctx.ranks),
          m_next(ctx.ranks, 0), m_epoch_end(ctx.ranks, std::numeric_limits<std::uint64_t>::max()) {
        for (std::size_t r = 0; r < ctx.ranks; ++r)
            m_balancers[r].emplace(make_estimator(), bcl_options(m_ctx, r, m_policy));
    }

    void run(std::size_t first, std::size_t count, step_block out) override {
        const std::size_t R = m_ctx.ranks;
        for (std::size_t s = first; s < first + count; ++s)
            for (std::size_t r = 0; r < R; ++r) {
                std::optional<typename balancer_type::batch_type> batch;
                try {
                    if (m_ctx.epoch_steps > 0 && s % m_ctx.epoch_steps == 0) start_epoch(r, s);
                    balancer_type& bal = *m_balancers[r];
                    while (!(batch = bal.pop())) {
                        if (m_next[r] == m_epoch_end[r]) {
                            if (bal.finished())
                                throw std::logic_error("bcl balancer drained an epoch before its "
                                                       "last step");
                            bal.finish();
                            continue;
                        }
                        const sample x = fetch(m_ctx, r, m_next[r]++);
                        bal.push(sim_record{x.id, x.length, estimated_cost(x, s)});
                    }
                } catch (const bcl::error& e) {
                    throw bcl::error(
                        fmt::format("policy {}, rank {}, step {}: {}", m_name, r, s, e.what()));
                }
                if (batch->size() != m_ctx.batch)
                    throw std::logic_error("bcl balancer emitted a short batch mid-stream");
                for (const sim_record& rec : *batch) {
                    out.charge(s - first, r, R, sample{rec.length, rec.cost, rec.id, false});
                    observe(m_ctx, s, r, rec.id);
                }
                if constexpr (calibrating) calibrate(*m_balancers[r], *batch, out, s, first, r);
            }
    }

    [[nodiscard]] policy_extras extras() const override {
        balancer_tally all = m_retired;
        for (const std::optional<balancer_type>& bal : m_balancers) all.add(bal->stats());
        policy_extras e;
        e.max_delay_batches = all.max_delay_batches;
        e.capped = all.capped;
        e.peak_batch_memory = all.peak_batch_memory;
        e.mean_gap_to_lb = all.windows > 0 ? all.gap_sum / static_cast<double>(all.windows) : 0.0;
        if constexpr (calibrating) {
            calibration_report c = m_report;
            for (const std::optional<balancer_type>& bal : m_balancers) {
                const bcl::calibration_summary<3> fit = bal->calibration();
                for (std::size_t j = 0; j < 3; ++j)
                    c.fitted[j] += fit.fitted[j] / static_cast<double>(m_balancers.size());
            }
            const std::optional<double> error = calibration_error(c);
            e.note = fmt::format(
                "calibrated online from the prior {}: fitted {} (mean over ranks), "
                "calibration_error {} (relative RMS error of the fit's batch costs over the last "
                "half of the steps)",
                describe(m_ctx.cost),
                describe(cost_model{c.fitted[0], c.fitted[1], c.fitted[2], {}}),
                error ? fmt::format("{:.4f}", *error) : std::string("-"));
            e.calibration = std::move(c);
        }
        return e;
    }

    /// Rank `rank`'s balancer: the one of the epoch under way (for tests, which read its
    /// settings() and stats()).
    [[nodiscard]] const balancer_type& balancer(std::size_t rank) const {
        return *m_balancers.at(rank);
    }

private:
    // What the balancers' statistics add up to over ranks and epochs.
    struct balancer_tally {
        double gap_sum = 0.0; // gap_to_lower_bound summed over windows
        std::uint64_t windows = 0;
        std::uint64_t max_delay_batches = 0;
        std::uint64_t capped = 0;
        double peak_batch_memory = 0.0;

        void add(const bcl::statistics& st) {
            gap_sum +=
                st.gap_to_lower_bound.mean() * static_cast<double>(st.gap_to_lower_bound.count());
            windows += st.gap_to_lower_bound.count();
            max_delay_batches = std::max(max_delay_batches, st.max_delay_batches);
            capped += st.records_capped;
            peak_batch_memory = std::max(peak_batch_memory, st.peak_batch_memory);
        }
    };

    [[nodiscard]] Estimator make_estimator() const {
        if constexpr (calibrating)
            return calibrated_sim_estimator(m_ctx.cost);
        else
            return make_sim_estimator(m_estimate == bcl_estimate::true_cost ? m_ctx.truth.initial()
                                                                            : m_ctx.cost);
    }

    // The cost rank's balancer is given for record x pushed in step s: the --cost model's (also
    // the calibrated policies' prior), or for sliding_true the true cost in force at s.
    [[nodiscard]] double estimated_cost(const sample& x, std::size_t s) const {
        return m_estimate == bcl_estimate::true_cost ? m_ctx.truth.at(s)(x.length) : x.cost;
    }

    // Step s starts an epoch on rank r, for stream indices [e*N*B, (e+1)*N*B). The balancer of
    // the previous epoch, which has handed out all of its N*B records, goes on into it
    // (next_epoch) or gives way to a new one (epoch_boundary::fresh, and the first epoch).
    void start_epoch(std::size_t r, std::size_t s) {
        const std::uint64_t records = std::uint64_t{m_ctx.epoch_steps} * m_ctx.batch;
        const std::uint64_t begin = s / m_ctx.epoch_steps * records;
        if (s > 0) {
            if (m_next[r] != begin || m_balancers[r]->buffered() != 0)
                throw std::logic_error(fmt::format("bcl balancer of rank {} ended an epoch at "
                                                   "step {} holding records",
                                                   r, s));
            m_retired.add(m_balancers[r]->stats()); // next_epoch() starts them afresh
        }
        m_epoch_end[r] = begin + records;
        bcl::options opt = bcl_options(m_ctx, r, m_policy);
        if (m_ctx.mean_cost_epoch) {
            // A sampler draws its epoch's indices up front, so it knows their costs: evaluated
            // here, at the epoch's first step, under the estimate the balancer will be given.
            m_epoch_costs.clear();
            for (std::uint64_t i = begin; i < begin + records; ++i)
                m_epoch_costs.push_back(estimated_cost(fetch(m_ctx, r, i), s));
            opt.mean_cost = bcl::stream_mean_cost(m_epoch_costs, opt.cap);
        }
        if (s > 0 && m_ctx.epoch_start == epoch_boundary::carry) {
            balancer_type& bal = *m_balancers[r];
            // An epoch whose last round was full has handed out everything without finish().
            bal.finish();
            if (m_ctx.mean_cost_epoch)
                bal.next_epoch(opt.mean_cost);
            else
                bal.next_epoch(); // the run's own mean_cost: 0 (the running mean) or --mean-cost
            return;
        }
        m_balancers[r].emplace(make_estimator(), opt);
    }

    // The rank has just been charged for `batch` in step s: its true cost is what the block
    // holds. Tallies the fit's prediction of it, then observes the noisy time.
    void calibrate(balancer_type& bal, const typename balancer_type::batch_type& batch,
                   const step_block& out, std::size_t s, std::size_t first, std::size_t r) {
        const double true_cost = out.costs[(s - first) * m_ctx.ranks + r];
        const bcl::calibration_summary<3> fit = bal.calibration();
        double predicted = 0.0;
        for (const sim_record& rec : batch) {
            const double x = fit.fitted[0] + fit.fitted[1] * rec.length +
                             fit.fitted[2] * rec.length * rec.length;
            predicted = out.pad_to > 0.0 ? std::max(predicted, out.pad_to * x) : predicted + x;
        }
        if (m_report.step_squared_error.size() <= s) {
            m_report.step_squared_error.resize(s + 1, 0.0);
            m_report.step_batches.resize(s + 1, 0);
        }
        if (true_cost > 0.0) {
            const double relative = (predicted - true_cost) / true_cost;
            m_report.step_squared_error[s] += relative * relative;
            ++m_report.step_batches[s];
        }
        // The balancer counts its own batches, from 0 every epoch; the noise is keyed by the
        // rank's batch of the run, which is the step (one batch per rank per step).
        const std::uint64_t index = bal.stats().batches - 1; // the batch just popped
        bal.observe(index, true_cost * time_noise_factor(m_ctx.seed, r, s, m_ctx.time_noise));
    }

    std::string m_name;
    sim_context m_ctx;
    bcl_estimate m_estimate;
    bcl::lookahead_policy m_policy;
    // Optional so that an epoch can build its rank's balancer afresh (epoch_boundary::fresh);
    // always engaged.
    std::vector<std::optional<balancer_type>> m_balancers;
    std::vector<std::uint64_t> m_next;      // next stream index per rank
    std::vector<std::uint64_t> m_epoch_end; // per rank: the first index past its epoch
    balancer_tally m_retired;               // the balancers of epochs that have ended
    std::vector<double> m_epoch_costs;      // the epoch's estimated costs (--mean-cost epoch)
    calibration_report m_report;            // calibrated runs only
};

/// A rank-local policy of the library (by its name there): estimating with --cost, or
/// calibrating from it under --calibrate.
[[nodiscard]] inline std::unique_ptr<policy_runner> make_bcl_runner(bcl::lookahead_policy policy,
                                                                    const sim_context& ctx) {
    const std::string_view name = bcl::name_of(policy);
    if (ctx.calibrate)
        return std::make_unique<bcl_local_runner<calibrated_sim_estimator>>(
            name, ctx, bcl_estimate::calibrated, policy);
    return std::make_unique<bcl_local_runner<sim_estimator>>(name, ctx, bcl_estimate::given,
                                                             policy);
}

/// sliding_true: sliding that estimates with the true cost in force (never calibrated), the
/// reference a calibrated sliding is measured against in the same run.
[[nodiscard]] inline std::unique_ptr<policy_runner>
make_sliding_true_runner(const sim_context& ctx) {
    return std::make_unique<bcl_local_runner<sim_estimator>>(
        "sliding_true", ctx, bcl_estimate::true_cost, bcl::lookahead_policy::sliding);
}

} // namespace bcl_sim
