#pragma once
// bcl::stage_balancer: the rank-local balancer for records with D stage costs (a vision encoder's
// and a language model's), for models whose stages synchronise separately. Each round takes K*B
// buffered records and splits them into K batches of exactly B whose cost in every stage is as
// level as the planner finds, each stage toward its own mean, with no communication.

#include <bcl/detail/config.hpp>

#include <bcl/cost_check.hpp>
#include <bcl/detail/emission/batch_order.hpp>
#include <bcl/detail/misuse.hpp>
#include <bcl/detail/number_text.hpp>
#include <bcl/detail/rounds/sliding_rounds.hpp>
#include <bcl/detail/stages/stage_selector.hpp>
#include <bcl/detail/state/snapshot_check.hpp>
#include <bcl/error.hpp>
#include <bcl/global_plan.hpp>
#include <bcl/options.hpp>
#include <bcl/record.hpp>
#include <bcl/stage_cost_estimator.hpp>
#include <bcl/stage_plan.hpp>
#include <bcl/statistics.hpp>
#include <bcl/validate.hpp>

#include <algorithm>
#include <array>
#include <bit>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace bcl {

/// What a stage_balancer has done this epoch, stage by stage.
template <std::size_t Stages>
struct stage_statistics {
    std::uint64_t records_in = 0;      ///< records pushed
    std::uint64_t records_out = 0;     ///< records handed out in a batch
    std::uint64_t records_dropped = 0; ///< the short batch's records, with options::drop_last
    std::uint64_t batches = 0;         ///< batches handed out
    std::uint64_t windows = 0;         ///< rounds run
    /// Each stage's cost of the full batches handed out: a stage whose batches vary little waits
    /// little for the other ranks' batches in that stage.
    std::array<running_stats, Stages> stage_batch_cost{};
    /// Each full window's efficiency: its every record's every stage over K times the sum over
    /// stages of its dearest batch in that stage (1 when every stage is level across the window).
    running_stats window_efficiency;
};

/// The rank-local balancer for records with D stage costs.
///
/// As bcl::balancer, stage by stage: push() moves records in; once the buffer is full, pop() runs
/// a round and hands its K batches out one at a time; finish() ends the input and pop() drains the
/// rest, the single short batch last (dropped with options::drop_last). A round takes K*B
/// records and splits them into K batches of exactly B whose stage costs are levelled together:
/// bcl::held_stage_planner plans them as one micro-step of K "ranks", lowering the sum over
/// stages of the dearest batch in that stage. A step of a model whose stages synchronise
/// separately lasts the sum over stages of the slowest rank in that stage; with every rank's
/// batches near each stage's mean, each stage waits little, with no communication.
///
/// Which records a round takes is the policy's (options::policy):
///   tumbling  the K*B records of the window, each stage levelled toward the window's own mean;
///   sliding   (the default) a buffer of buffer_windows * K*B records; the records at their
///             deadline first, then the rest chosen so that each stage's total comes near K*B
///             times that stage's long-run mean (detail::stages::stage_selector), so that the
///             ranks' batches meet at the same level in every stage. The means are the ones
///             given (stage_means), or else the running means of every record pushed.
///
/// The contract is bcl::balancer's: exactly B records a batch but the last, ceil(N/B) batches
/// (floor with drop_last) whatever the costs, every record exactly once, a record leaves at most
/// max_delay_bound(options) batches after the batch it would have been in, the same input and
/// options give the same batches, and bad input is a bcl::error that leaves the balancer exactly
/// as it was.
///
/// Options: batch_size, lookahead, drop_last, seed, policy, buffer_windows, max_age, emission (a
/// round's batches leave by their summed cost, costliest first, or shuffled) and largest_first
/// (by summed cost) apply as in bcl::balancer. A cap, a memory budget, padded batches and
/// options::mean_cost bound or aim one cost, not D: each is refused by name (the stages' means
/// are given as stage_means).
///
/// Memory: the buffer's records and their D costs, K*B records being handed out, the planner's
/// scratch; after the first rounds nothing is allocated. A record is moved in once and out once;
/// under the sliding policy also once within the buffer per round it waits.
template <record Record, stage_cost_estimator<Record> Estimator>
class stage_balancer {
public:
    /// D, the costs of a record.
    static constexpr std::size_t stages = stage_count<Estimator, Record>;
    using record_type = Record;
    /// A batch: a view of records owned by the balancer. Move the records out if you keep them;
    /// the view is valid until the next call of push(), pop() or finish().
    using batch_type = std::span<Record>;
    /// One number a stage: costs, or means.
    using stage_costs = std::array<double, stages>;
    using statistics_type = stage_statistics<stages>;

    /// Throws bcl::error for options bcl::validate refuses, or that a stage balancer does not
    /// apply (see the class comment), naming the option. The sliding policy aims each stage at
    /// the running mean of the records pushed.
    stage_balancer(Estimator estimator, options opt)
        : m_options(checked(opt)), m_rounds(settings_of(m_options)),
          m_capacity(m_options.policy == lookahead_policy::sliding ? m_rounds.capacity()
                                                                   : window()),
          m_estimator(std::move(estimator)), m_order(m_options) {
        const std::size_t k = m_options.lookahead;
        m_buffer.reserve(m_capacity);
        m_costs.reserve(m_capacity * stages);
        m_arrivals.reserve(m_capacity);
        m_chosen.reserve(m_capacity);
        m_selector.reserve(m_capacity);
        m_round.reserve(window());
        m_round_costs.reserve(window() * stages);
        m_slots.reserve(window());
        m_source.reserve(window());
        m_ready.reserve(window());
        m_pack_costs.reserve(k * stages);
        m_pack_totals.reserve(k);
        m_place_start.reserve(k + 1);
        m_batch_sizes.reserve(k);
        m_batch_costs.reserve(k * stages);
        m_order.reserve(k);
    }

    /// As above, the sliding policy aiming each stage s at stage_means[s] (a cost >= 0 each: a
    /// bcl::error names the stage otherwise), e.g. the means of an epoch's records known up
    /// front, which every rank can then share from the first round.
    stage_balancer(Estimator estimator, options opt, const stage_costs& stage_means)
        : stage_balancer(std::move(estimator), opt) {
        check_means(stage_means);
        m_means = stage_means;
    }

    /// Everything needed to continue a stage balancer exactly where it was. A state is input:
    /// restoring checks it against itself and against the options and estimator it is restored
    /// with.
    struct state {
        options settings{};
        std::uint64_t records_in = 0;
        std::uint64_t records_out = 0;
        std::uint64_t records_dropped = 0;
        std::uint64_t batches = 0;
        std::uint64_t windows = 0;
        bool finished = false;
        std::uint64_t random_state = 0;      ///< the shuffled emission order's generator
        std::optional<stage_costs> means{};  ///< the means given, if any
        stage_costs stream_sums{};           ///< each stage's sum over every record pushed
        std::uint64_t stream_records = 0;    ///< over every epoch
        std::vector<Record> buffered;        ///< pushed, in no round yet; in push order
        std::vector<std::uint64_t> arrivals; ///< their push positions this epoch
        std::vector<Record> waiting;         ///< the round's batches not handed out, in order
        std::vector<std::size_t> sizes{};    ///< each waiting batch's records
    };

    /// Continues from a saved state. `opt` must equal the options the state was saved with (a
    /// bcl::error names the first that differs); the estimator must price the records as the
    /// saved balancer's did for the batches to be the uninterrupted balancer's. Throws
    /// bcl::error for a state that contradicts itself (its counts, its batches' sizes, a record
    /// past its deadline) or a record the estimator prices badly, naming what is wrong. stats()
    /// start afresh, but for the counts.
    stage_balancer(Estimator estimator, options opt, state saved)
        : stage_balancer(std::move(estimator), opt) {
        detail::require_same_options(saved.settings, m_options, who);
        restore(std::move(saved));
    }

    /// A copy of everything needed to continue (see state). Does not change this balancer.
    [[nodiscard]] state save() const requires std::copy_constructible<Record> {
        state s = counts();
        s.buffered.assign(m_buffer.begin(), m_buffer.end());
        s.waiting.assign(m_ready.begin() + static_cast<std::ptrdiff_t>(m_next_record),
                         m_ready.end());
        return s;
    }

    /// As save(), moving the records out; for move-only records. The balancer is left finished
    /// and empty.
    [[nodiscard]] state take_state() && {
        state s = counts();
        for (Record& r : m_buffer) s.buffered.push_back(std::move(r));
        for (auto r = m_ready.begin() + static_cast<std::ptrdiff_t>(m_next_record);
             r != m_ready.end(); ++r)
            s.waiting.push_back(std::move(*r));
        m_buffer.clear();
        m_costs.clear();
        m_arrivals.clear();
        m_ready.clear();
        m_batch_sizes.clear();
        m_next_record = m_next_batch = 0;
        m_finished = true;
        return s;
    }

    /// Adds one record (moved from), estimating its D costs first; when the buffer is full, runs
    /// a round first. Throws bcl::error for a cost that is NaN, negative or above
    /// bcl::max_estimate (naming the record's position and the stage), after finish(), or when
    /// the buffer is full while batches still wait (see can_push()). Whatever throws leaves the
    /// balancer exactly as it was and the record the caller's.
    void push(Record&& r) {
        if (!can_push()) [[unlikely]]
            detail::throw_cannot_push(m_finished, m_stats.records_in, m_capacity, waiting_batches(),
                                      who);
        const stage_costs cost = m_estimator(std::as_const(r));
        for (std::size_t s = 0; s < stages; ++s)
            check_cost(cost[s], [&] {
                return std::string(who) + ": record " + std::to_string(m_stats.records_in) +
                       " has stage " + std::to_string(s) + " cost estimate ";
            });
        // A round that throws leaves everything as it was: the record is still the caller's.
        if (m_buffer.size() == m_capacity) run_round();
        m_buffer.push_back(std::move(r));
        m_costs.insert(m_costs.end(), cost.begin(), cost.end());
        m_arrivals.push_back(m_stats.records_in);
        for (std::size_t s = 0; s < stages; ++s) m_stream_sums[s] += cost[s];
        ++m_stream_records;
        ++m_stats.records_in;
    }

    /// Adds a copy of `r`; otherwise as push(Record&&).
    void push(const Record& r) requires std::copy_constructible<Record> { push(Record(r)); }

    /// True if push() would accept a record now.
    [[nodiscard]] bool can_push() const noexcept {
        return !m_finished && (m_buffer.size() < m_capacity || waiting_batches() == 0);
    }

    /// The next batch, once one is ready: when the buffer is full, or after finish(). Returns
    /// std::nullopt when more input is needed (or, after finish(), when all is drained). A round
    /// that fails throws bcl::error and leaves the balancer exactly as it was.
    [[nodiscard]] std::optional<batch_type> pop() {
        if (waiting_batches() == 0) {
            if (m_buffer.empty() || (!m_finished && m_buffer.size() < m_capacity))
                return std::nullopt;
            run_round();
        }
        const std::size_t size = m_batch_sizes[m_next_batch];
        const batch_type batch(m_ready.data() + m_next_record, size);
        std::copy_n(m_batch_costs.begin() + static_cast<std::ptrdiff_t>(m_next_batch * stages),
                    stages, m_last_costs.begin());
        if (size == m_options.batch_size)
            for (std::size_t s = 0; s < stages; ++s)
                m_stats.stage_batch_cost[s].add(m_last_costs[s]);
        m_next_record += size;
        ++m_next_batch;
        ++m_stats.batches;
        m_stats.records_out += size;
        return batch;
    }

    /// Marks the end of input: pop() then drains what is buffered. With options::drop_last the
    /// N mod B most recently pushed records still buffered are dropped here; under the tumbling
    /// policy those are exactly the last N mod B records pushed, the ones an unbalanced loader
    /// would drop. Calling it twice is harmless.
    void finish() {
        if (m_finished) return;
        m_finished = true;
        if (!m_options.drop_last) return;
        const auto extra = static_cast<std::size_t>(m_stats.records_in % m_options.batch_size);
        m_buffer.erase(m_buffer.end() - static_cast<std::ptrdiff_t>(extra), m_buffer.end());
        m_costs.resize(m_buffer.size() * stages);
        m_arrivals.resize(m_buffer.size());
        m_stats.records_dropped += extra;
    }

    /// Starts the next epoch of the same stream. The balancer must be drained (finished, every
    /// record handed out) or untouched; otherwise bcl::error, and nothing changes. stats() start
    /// afresh; the running means and the emission order's generator carry on. Allocates nothing.
    void next_epoch() {
        if (!(m_finished && buffered() == 0) && m_stats.records_in != 0)
            detail::throw_epoch_under_way(buffered(), m_finished, who);
        m_stats = statistics_type{};
        m_finished = false;
        m_last_costs = {};
    }

    /// next_epoch(), the sliding policy aiming each stage at stage_means from now on (each a
    /// cost >= 0; a bcl::error names the stage otherwise, and nothing changes).
    void next_epoch(const stage_costs& stage_means) {
        check_means(stage_means);
        next_epoch();
        m_means = stage_means;
    }

    [[nodiscard]] bool finished() const noexcept { return m_finished; }
    /// Records pushed and not yet handed out in a batch (nor dropped).
    [[nodiscard]] std::size_t buffered() const noexcept {
        return m_buffer.size() + (m_ready.size() - m_next_record);
    }
    /// The estimated stage costs of the batch pop() returned last (zeros before the first).
    [[nodiscard]] const stage_costs& last_batch_costs() const noexcept { return m_last_costs; }
    /// The means the sliding policy aims each stage at: the ones given, or else the running
    /// means of every record pushed (zeros before the first).
    [[nodiscard]] stage_costs stage_means() const noexcept {
        if (m_means) return *m_means;
        stage_costs means{};
        if (m_stream_records > 0)
            for (std::size_t s = 0; s < stages; ++s)
                means[s] = m_stream_sums[s] / static_cast<double>(m_stream_records);
        return means;
    }
    [[nodiscard]] const statistics_type& stats() const noexcept { return m_stats; }
    [[nodiscard]] const options& settings() const noexcept { return m_options; }

private:
    static constexpr const char* who = "bcl::stage_balancer";
    // More records than any stream reaches (2^62): a state counting more is not one; below it
    // no count the checks of a state multiply can overflow.
    static constexpr std::uint64_t max_records = std::uint64_t{1} << 62;

    static options checked(const options& opt) {
        validate(opt);
        const auto refuse = [](const char* what) { throw error(std::string(who) + ": " + what); };
        if (opt.cap.kind != cap_kind::none)
            refuse("options::cap must be none: a cap bounds one cost, not D stage costs");
        if (opt.memory_budget != 0.0)
            refuse("options::memory_budget must be 0: a stage balancer keeps no memory budget");
        if (opt.batching != batch_cost::packed)
            refuse("options::batching must be packed: a padded batch's cost is one number");
        if (opt.mean_cost != 0.0)
            refuse("options::mean_cost must be 0: it is one number; give each stage's mean as "
                   "the constructor's stage_means");
        return opt;
    }

    static detail::round_settings settings_of(const options& opt) noexcept {
        return {opt.batch_size, opt.lookahead, opt.buffer_windows, opt.max_age};
    }

    static void check_means(const stage_costs& means) {
        for (std::size_t s = 0; s < stages; ++s)
            check_cost(means[s], [&] {
                return std::string(who) + ": stage " + std::to_string(s) + "'s mean is ";
            });
    }

    [[nodiscard]] std::size_t window() const noexcept {
        return m_options.batch_size * m_options.lookahead;
    }

    [[nodiscard]] std::size_t waiting_batches() const noexcept {
        return m_batch_sizes.size() - m_next_batch;
    }

    [[nodiscard]] state counts() const {
        state s;
        s.settings = m_options;
        s.records_in = m_stats.records_in;
        s.records_out = m_stats.records_out;
        s.records_dropped = m_stats.records_dropped;
        s.batches = m_stats.batches;
        s.windows = m_stats.windows;
        s.finished = m_finished;
        s.random_state = m_order.random_state();
        s.means = m_means;
        s.stream_sums = m_stream_sums;
        s.stream_records = m_stream_records;
        s.arrivals = m_arrivals;
        s.sizes.assign(m_batch_sizes.begin() + static_cast<std::ptrdiff_t>(m_next_batch),
                       m_batch_sizes.end());
        return s;
    }

    // Step 1 of a round: which buffered records it takes, listed in m_round in buffer order.
    // All of them when they fit a window; else (sliding) the ones at their deadline and the rest
    // toward each stage's target.
    void choose_round() {
        const std::size_t n = m_buffer.size();
        const std::size_t take = std::min(window(), n);
        m_round.clear();
        if (take == n) {
            for (std::size_t i = 0; i < n; ++i) m_round.push_back(static_cast<std::uint32_t>(i));
            return;
        }
        detail::round_inputs in;
        in.arrivals = m_arrivals;
        in.round = m_stats.windows;
        in.finished = m_finished;
        in.take = take;
        const std::size_t due = m_rounds.records_due(in);
        // Each stage's target: its share of the long-run mean, plus a little of what the buffer
        // holds above it (detail::sliding_rounds::round_target says why); once the input has
        // ended, each round its share of what is held.
        stage_costs held{};
        for (std::size_t i = 0; i < n; ++i)
            for (std::size_t s = 0; s < stages; ++s) held[s] += m_costs[i * stages + s];
        const stage_costs means = stage_means();
        stage_costs targets{};
        const auto t = static_cast<double>(take);
        const auto h = static_cast<double>(n);
        for (std::size_t s = 0; s < stages; ++s)
            targets[s] = m_finished ? held[s] * t / h
                                    : means[s] * t + detail::sliding_rounds::surplus_feedback *
                                                         (held[s] - means[s] * h);
        m_chosen.resize(n);
        m_selector(m_costs, stages, due, take, targets, m_chosen);
        for (std::size_t i = 0; i < n; ++i)
            if (m_chosen[i] != 0) m_round.push_back(static_cast<std::uint32_t>(i));
    }

    // One round: its records chosen, full batches of B planned by stage, the N mod B left at the
    // end of input forming the short batch; then the batches' emission order, every record
    // moved to its place, and the buffer closed up. Everything that can throw (the plan) runs
    // before anything the balancer keeps changes.
    void run_round() {
        choose_round();
        const std::size_t b = m_options.batch_size;
        const std::size_t n = m_round.size();
        const std::size_t full = n / b;
        const std::size_t planned = full * b;
        m_round_costs.clear();
        for (const std::uint32_t i : m_round)
            m_round_costs.insert(m_round_costs.end(),
                                 m_costs.begin() + static_cast<std::ptrdiff_t>(i * stages),
                                 m_costs.begin() + static_cast<std::ptrdiff_t>((i + 1) * stages));
        m_slots.resize(planned);
        stage_plan_summary summary;
        if (full > 0)
            summary =
                m_planner.plan(std::span<const double>(m_round_costs.data(), planned * stages),
                               stages, full, b, plan_options{}, m_slots, who);

        // Committed from here on: nothing below throws.
        const std::size_t packs = full + (planned < n ? 1 : 0);
        const auto pack_of = [&](std::size_t i) { return i < planned ? m_slots[i].rank : full; };
        m_pack_costs.assign(packs * stages, 0.0);
        m_pack_totals.assign(packs, 0.0);
        for (std::size_t i = 0; i < n; ++i)
            for (std::size_t s = 0; s < stages; ++s) {
                m_pack_costs[pack_of(i) * stages + s] += m_round_costs[i * stages + s];
                m_pack_totals[pack_of(i)] += m_round_costs[i * stages + s];
            }
        m_order.order(packs, planned < n, m_stats.windows, m_pack_totals, m_pack_totals);
        const std::span<const std::uint32_t> place = m_order.rank();

        // Each place's first record, then each record's place in the round, buffer order within.
        m_batch_sizes.assign(packs, 0);
        m_batch_costs.assign(packs * stages, 0.0);
        for (std::size_t p = 0; p < packs; ++p) {
            m_batch_sizes[place[p]] = p < full ? b : n - planned;
            std::copy_n(m_pack_costs.begin() + static_cast<std::ptrdiff_t>(p * stages), stages,
                        m_batch_costs.begin() + static_cast<std::ptrdiff_t>(place[p] * stages));
        }
        m_place_start.assign(packs + 1, 0);
        for (std::size_t q = 0; q < packs; ++q)
            m_place_start[q + 1] = m_place_start[q] + m_batch_sizes[q];
        m_source.resize(n);
        for (std::size_t i = 0; i < n; ++i)
            m_source[m_place_start[place[pack_of(i)]]++] = m_round[i];
        m_ready.clear();
        for (const std::uint32_t i : m_source) m_ready.push_back(std::move(m_buffer[i]));
        close_up();
        m_next_record = m_next_batch = 0;
        if (full == m_options.lookahead) m_stats.window_efficiency.add(summary.efficiency());
        ++m_stats.windows;
    }

    // Removes the round's records (m_round, in buffer order) from the buffer, the rest keeping
    // their order.
    void close_up() {
        std::size_t kept = 0;
        std::size_t next = 0; // the next of m_round
        for (std::size_t i = 0; i < m_buffer.size(); ++i) {
            if (next < m_round.size() && m_round[next] == i) {
                ++next;
                continue;
            }
            if (kept != i) {
                m_buffer[kept] = std::move(m_buffer[i]);
                std::copy_n(m_costs.begin() + static_cast<std::ptrdiff_t>(i * stages), stages,
                            m_costs.begin() + static_cast<std::ptrdiff_t>(kept * stages));
                m_arrivals[kept] = m_arrivals[i];
            }
            ++kept;
        }
        m_buffer.erase(m_buffer.begin() + static_cast<std::ptrdiff_t>(kept), m_buffer.end());
        m_costs.resize(kept * stages);
        m_arrivals.resize(kept);
    }

    // Checks a saved state against itself, the options and the estimator, then takes it.
    // Nothing of this balancer changes before every check has passed.
    void restore(state saved) {
        const std::size_t b = m_options.batch_size;
        const std::size_t k = m_options.lookahead;
        const auto fail = [](const std::string& what) {
            throw error(std::string(who) + ": the state " + what);
        };
        if (saved.records_in > max_records || saved.stream_records > max_records)
            fail("counts " + std::to_string(std::max(saved.records_in, saved.stream_records)) +
                 " records in, more than any stream reaches");
        for (std::size_t s = 0; s < stages; ++s)
            if (!(detail::cost_bits(saved.stream_sums[s]) <= largest_sum_bits))
                fail("has stage " + std::to_string(s) + "'s sum over the stream " +
                     detail::number_text(saved.stream_sums[s]) + ", not a finite sum >= 0");
        if (saved.means) check_means(*saved.means);
        const std::uint64_t held = saved.buffered.size() + saved.waiting.size();
        if (saved.buffered.size() > m_capacity)
            fail("holds " + std::to_string(saved.buffered.size()) + " buffered records, more " +
                 "than the buffer's " + std::to_string(m_capacity));
        if (saved.arrivals.size() != saved.buffered.size())
            fail("has " + std::to_string(saved.arrivals.size()) + " arrivals for " +
                 std::to_string(saved.buffered.size()) + " buffered records");
        if (saved.sizes.size() > k)
            fail("has " + std::to_string(saved.sizes.size()) + " waiting batches, more than a " +
                 "round's " + std::to_string(k));
        std::uint64_t waiting = 0;
        for (std::size_t j = 0; j < saved.sizes.size(); ++j) {
            const std::size_t size = saved.sizes[j];
            const bool last_short = j + 1 == saved.sizes.size() && saved.finished &&
                                    saved.buffered.empty() && !m_options.drop_last;
            if (size == 0 || size > b || (size < b && !last_short))
                fail("has a waiting batch of " + std::to_string(size) + " records (batch " +
                     std::to_string(j) + "); every batch has " + std::to_string(b) +
                     " but a short last one");
            waiting += size;
        }
        if (waiting != saved.waiting.size())
            fail("has " + std::to_string(saved.waiting.size()) + " waiting records, but its " +
                 "waiting batches hold " + std::to_string(waiting));
        const std::uint64_t dropped =
            saved.finished && m_options.drop_last ? saved.records_in % b : 0;
        if (saved.records_dropped != dropped)
            fail("counts " + std::to_string(saved.records_dropped) + " dropped records, not " +
                 std::to_string(dropped));
        if (saved.records_in < held || saved.records_in - held < saved.records_dropped ||
            saved.records_in - held - saved.records_dropped != saved.records_out)
            fail("counts " + std::to_string(saved.records_in) + " records in, but " +
                 std::to_string(saved.records_out) + " out, " +
                 std::to_string(saved.records_dropped) + " dropped and " + std::to_string(held) +
                 " held");
        const bool short_out = saved.records_out % b != 0;
        if (saved.batches != saved.records_out / b + (short_out ? 1 : 0) ||
            (short_out && !(saved.finished && held == 0)))
            fail("counts " + std::to_string(saved.batches) + " batches handed out for " +
                 std::to_string(saved.records_out) + " records");
        // Every round but a final one at the end of input takes K*B records and yields K
        // batches; the final one yields the batches its records fill. (Rounds past
        // ceil(emitted / K) are refused first, so that no product below can overflow.)
        const std::uint64_t emitted = saved.batches + saved.sizes.size();
        const std::uint64_t in_rounds = saved.records_out + waiting;
        bool rounds_agree = saved.windows <= emitted / k + 1;
        if (rounds_agree && in_rounds == saved.windows * k * b) {
            rounds_agree = emitted == saved.windows * k;
        } else if (rounds_agree) {
            const std::uint64_t before_last = saved.windows == 0 ? 0 : (saved.windows - 1) * k * b;
            const std::uint64_t last = in_rounds - before_last; // the final round's records
            rounds_agree = saved.finished && saved.buffered.empty() && saved.windows > 0 &&
                           in_rounds > before_last && last < k * b &&
                           emitted == (saved.windows - 1) * k + last / b + (last % b != 0 ? 1 : 0);
        }
        if (!rounds_agree)
            fail("counts " + std::to_string(saved.windows) + " rounds for " +
                 std::to_string(emitted) + " batches of " + std::to_string(in_rounds) + " records");
        for (std::size_t i = 0; i < saved.arrivals.size(); ++i) {
            const std::uint64_t a = saved.arrivals[i];
            const bool tumbling = m_options.policy == lookahead_policy::tumbling;
            const bool in_order = i == 0 || a > saved.arrivals[i - 1];
            const bool in_time =
                tumbling ? a == saved.records_in - saved.records_dropped - saved.arrivals.size() + i
                         : a < saved.records_in && m_rounds.may_hold(a, i, saved.windows);
            if (!in_order || !in_time)
                fail("has buffered record " + std::to_string(i) + " of arrival " +
                     std::to_string(a) + ", out of order or past its deadline at round " +
                     std::to_string(saved.windows));
        }
        if (saved.stream_records < saved.records_in)
            fail("counts " + std::to_string(saved.stream_records) + " records over the stream, " +
                 "fewer than the " + std::to_string(saved.records_in) + " of this epoch");
        std::vector<double> costs;
        costs.reserve(saved.buffered.size() * stages);
        for (std::size_t i = 0; i < saved.buffered.size(); ++i) {
            const stage_costs c = m_estimator(std::as_const(saved.buffered[i]));
            for (std::size_t s = 0; s < stages; ++s)
                check_cost(c[s], [&] {
                    return std::string(who) + ": the state's buffered record " +
                           std::to_string(saved.arrivals[i]) + " has stage " + std::to_string(s) +
                           " cost estimate ";
                });
            costs.insert(costs.end(), c.begin(), c.end());
        }
        std::vector<double> batch_costs(saved.sizes.size() * stages, 0.0);
        std::size_t at = 0;
        for (std::size_t j = 0; j < saved.sizes.size(); ++j)
            for (std::size_t i = 0; i < saved.sizes[j]; ++i, ++at) {
                const stage_costs c = m_estimator(std::as_const(saved.waiting[at]));
                for (std::size_t s = 0; s < stages; ++s) {
                    check_cost(c[s], [&] {
                        return std::string(who) + ": the state's waiting batch " +
                               std::to_string(j) + " has a record whose stage " +
                               std::to_string(s) + " cost estimate is ";
                    });
                    batch_costs[j * stages + s] += c[s];
                }
            }

        // Every check passed: taken.
        m_stats.records_in = saved.records_in;
        m_stats.records_out = saved.records_out;
        m_stats.records_dropped = saved.records_dropped;
        m_stats.batches = saved.batches;
        m_stats.windows = saved.windows;
        m_finished = saved.finished;
        m_order.restore(saved.random_state);
        m_means = saved.means;
        m_stream_sums = saved.stream_sums;
        m_stream_records = saved.stream_records;
        for (Record& r : saved.buffered) m_buffer.push_back(std::move(r));
        m_costs.assign(costs.begin(), costs.end());
        m_arrivals.assign(saved.arrivals.begin(), saved.arrivals.end());
        for (Record& r : saved.waiting) m_ready.push_back(std::move(r));
        m_batch_sizes.assign(saved.sizes.begin(), saved.sizes.end());
        m_batch_costs.assign(batch_costs.begin(), batch_costs.end());
        m_next_record = m_next_batch = 0;
    }

    // The largest sum a state may hold: any finite value >= 0.
    static constexpr std::uint64_t largest_sum_bits =
        std::bit_cast<std::uint64_t>(std::numeric_limits<double>::max());

    options m_options;
    detail::sliding_rounds m_rounds; // deadlines and capacity under the sliding policy
    std::size_t m_capacity;          // records held before a round must run
    Estimator m_estimator;
    detail::stages::stage_selector m_selector;
    held_stage_planner m_planner;
    detail::batch_order m_order;
    std::optional<stage_costs> m_means;     // the means given, if any
    stage_costs m_stream_sums{};            // each stage's sum over every record pushed
    std::uint64_t m_stream_records = 0;     // over every epoch
    std::vector<Record> m_buffer;           // pushed, in no round yet, in push order
    std::vector<double> m_costs;            // their D costs, record i's at [i*D, i*D+D)
    std::vector<std::uint64_t> m_arrivals;  // their push positions this epoch
    std::vector<std::uint8_t> m_chosen;     // sliding: which the round takes
    std::vector<std::uint32_t> m_round;     // the round's records, buffer positions in order
    std::vector<double> m_round_costs;      // their D costs
    std::vector<plan_slot> m_slots;         // the plan: each planned record's batch (its rank)
    std::vector<double> m_pack_costs;       // each batch's D stage costs, by pack
    std::vector<double> m_pack_totals;      // each batch's summed cost, by pack
    std::vector<std::size_t> m_place_start; // each emission place's first record
    std::vector<std::uint32_t> m_source;    // the buffer slot of each record of the round, in order
    std::vector<Record> m_ready;            // the round's batches, in emission order
    std::vector<std::size_t> m_batch_sizes; // by emission place
    std::vector<double> m_batch_costs;      // by emission place, D each
    std::size_t m_next_record = 0;          // the first record not handed out
    std::size_t m_next_batch = 0;           // the first batch not handed out
    stage_costs m_last_costs{};
    statistics_type m_stats;
    bool m_finished = false;
};

} // namespace bcl
