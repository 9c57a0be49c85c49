#pragma once
// bcl::balancer: the push/pull core. Buffers a window of K*B records, repartitions it into K
// batches of exactly B records with balanced estimated cost, and hands the batches out.

#include <bcl/detail/config.hpp>

#include <bcl/calibrated_cost.hpp>
#include <bcl/cost_estimator.hpp>
#include <bcl/detail/calibration/batch_calibration.hpp>
#include <bcl/detail/emission/batch_order.hpp>
#include <bcl/detail/emission/delay_tally.hpp>
#include <bcl/detail/emission/placement.hpp>
#include <bcl/detail/emission/ready_batches.hpp>
#include <bcl/detail/intake/outlier_cap.hpp>
#include <bcl/detail/intake/record_buffer.hpp>
#include <bcl/detail/intake/record_estimator.hpp>
#include <bcl/detail/intake/stream_history.hpp>
#include <bcl/detail/misuse.hpp>
#include <bcl/detail/rounds/round_policy.hpp>
#include <bcl/detail/split/heavy_slots.hpp>
#include <bcl/detail/split/partition_step.hpp>
#include <bcl/detail/state/balancer_state_io.hpp>
#include <bcl/options.hpp>
#include <bcl/partition/lpt_swap.hpp>
#include <bcl/partition/partitioner.hpp>
#include <bcl/record.hpp>
#include <bcl/statistics.hpp>
#include <bcl/validate.hpp>

#include <algorithm>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <utility>

namespace bcl {

/// The push/pull core of bcl.
///
/// push() moves records in; once the buffer is full (bcl::buffer_capacity), pop() runs a round
/// and hands its K batches out one at a time. finish() marks the end of input; pop() then drains
/// the rest, the single short batch last (or dropped, with options::drop_last).
///
/// The contract (README): every batch has exactly B records but the last; the number of batches
/// is ceil(N/B) (floor with drop_last) whatever the costs; every record comes out exactly once; a
/// record leaves at most max_delay_bound(options) batches after the batch it would have been in
/// (K-1 for tumbling); the same input, options and seed give the same batches; bad input is a
/// bcl::error, and whatever throws leaves the balancer exactly as it was.
///
/// A record's path, each step one component (docs/design.md lists their files):
///   push: estimated and capped (detail::record_estimator, detail::outlier_cap), then held
///         (detail::record_buffer).
///   pop, once the buffer is full or the input has ended, runs a round (run_round):
///     1 choose   the lookahead policy picks the round's K*B records (detail::round_chooser)
///     2 gather   the buffer lists them with their costs (detail::record_buffer)
///     3 split    into K packs of B, balanced, within the memory budget, the heavy slots shaped
///                (detail::partition_step, detail::heavy_slots)
///     4 order    the packs' emission order (detail::batch_order)
///     5 place    each record moves to its batch, its delay counted, its features added to the
///                batch's when calibrating (detail::place_round)
///     6 compact  the buffer closes the gaps (detail::record_buffer)
///     7 refit    measured times refit a calibrating estimator (detail::batch_calibration;
///                detail::no_calibration does nothing)
///   then hands the round's batches out one at a time (detail::ready_batches).
///
/// Memory: the buffer, K*B records being handed out, and O(buffer) indices, all reserved at
/// construction; after the first round nothing is allocated. A record is moved in once and out
/// once; under the sliding policy it is also moved once within the buffer per round it waits.
template <record Record, cost_estimator<Record> Estimator,
          partitioner Partitioner = lpt_swap_partitioner>
class balancer {
    using estimator_type = detail::record_estimator<Record, Estimator>;
    static constexpr bool tracks_memory = estimator_type::tracks_memory;
    static constexpr std::size_t feature_count = estimator_type::feature_count;
    static constexpr bool calibrating = feature_count > 0;

public:
    using record_type = Record;
    /// A batch: a view of records owned by the balancer. Move the records out if you keep them;
    /// the view is valid until the next call of push(), pop() or finish().
    using batch_type = std::span<Record>;

    /// Throws bcl::error if the options are invalid (see bcl::validate) or ask for what the
    /// estimator cannot do (a truncating cap, a memory budget).
    balancer(Estimator estimator, options opt, Partitioner partitioner = Partitioner{})
        : m_options((validate(opt), opt)), m_rounds(m_options), m_capacity(m_rounds.capacity()),
          m_estimator(std::move(estimator), m_options), m_cap(m_options.cap),
          m_partition(std::move(partitioner), m_options.batching), m_heavy(m_options),
          m_order(m_options),
          m_calibration(detail::make_calibration<feature_count>(m_options, m_estimator)) {
        const std::size_t window = m_options.batch_size * m_options.lookahead;
        m_buffer.reserve(m_capacity);
        m_partition.reserve(window, m_options.lookahead);
        m_order.reserve(m_options.lookahead);
        m_delays.reserve(std::min(m_rounds.max_delay() + 1, delays_reserved), m_stats);
        m_ready.reserve(window, m_options.lookahead);
        m_calibration.reserve(m_options.lookahead);
    }

    /// Everything needed to continue a balancer exactly where it was; see detail::saved_state.
    using state = detail::saved_state<Record>;

    /// Continues from a saved state. `opt` must equal the options the state was saved with
    /// (bcl::error naming the first that differs); so must the estimator, for the batches to be
    /// the ones the uninterrupted balancer would have emitted.
    balancer(Estimator estimator, options opt, state saved, Partitioner partitioner = Partitioner{})
        : balancer(std::move(estimator), opt, std::move(partitioner)) {
        detail::balancer_state_io::restore(*this, std::move(saved));
    }

    /// A copy of everything needed to continue (see state). Does not change this balancer:
    /// what it emits afterwards is what it would have emitted without the call.
    [[nodiscard]] state save() const requires std::copy_constructible<Record> {
        return detail::balancer_state_io::collect(*this, [](const Record& r) { return r; });
    }

    /// As save(), moving the records out instead of copying them; for move-only records. The
    /// balancer is left finished and empty.
    [[nodiscard]] state take_state() && {
        state s = detail::balancer_state_io::collect(*this, [](Record& r) { return std::move(r); });
        m_ready.clear();
        m_buffer.clear();
        m_finished = true;
        return s;
    }

    /// Adds one record (moved from), estimating it first; when the buffer is full, runs a round
    /// first (as pop() would). Throws bcl::error for an estimate that is NaN, negative or above
    /// bcl::max_estimate (naming the record position and value), after finish(), or when the
    /// buffer is full while batches are still waiting to be popped (see can_push()). Whatever
    /// throws leaves the balancer exactly as it was and the record the caller's (under a
    /// truncating cap, perhaps truncated before a later error: memory over the budget).
    void push(Record&& r) {
        if (!can_push()) [[unlikely]]
            detail::throw_cannot_push(m_finished, m_stats.records_in, m_capacity,
                                      m_ready.waiting());
        const detail::record_estimate e = m_estimator(r, m_cap, m_stats.records_in);
        // A round that throws (a memory budget no split fits) leaves everything as it was, so the
        // record is still the caller's and the balancer unchanged.
        if (m_buffer.size() == m_capacity) run_round();
        m_buffer.push(std::move(r), e, m_stats.records_in, m_estimator.last_features());
        m_calibration.count_record(m_estimator.last_features());
        m_history.accept(e.cost);
        m_cap.add(e.uncapped, e.cap);
        if (e.capped) ++m_stats.records_capped;
        ++m_stats.records_in;
    }

    /// Adds a copy of `r`; otherwise as push(Record&&). `r` itself is never modified.
    void push(const Record& r) requires std::copy_constructible<Record> { push(Record(r)); }

    /// True if push() would accept a record now.
    [[nodiscard]] bool can_push() const noexcept {
        return !m_finished && (m_buffer.size() < m_capacity || m_ready.waiting() == 0);
    }

    /// The next batch, once one is ready: when the buffer is full, or after finish().
    /// Returns std::nullopt when more input is needed (or, after finish(), when all is drained).
    /// A round that fails (a partitioner that breaks its contract, a memory budget no split
    /// fits) throws bcl::error and leaves the balancer exactly as it was: every record is still
    /// held, and a later pop() runs the same round again.
    [[nodiscard]] std::optional<batch_type> pop() {
        if (m_ready.waiting() == 0) {
            if (m_buffer.empty() || (!m_finished && m_buffer.size() < m_capacity))
                return std::nullopt;
            run_round();
        }
        m_calibration.emitted(m_stats.batches, m_ready.next());
        const auto batch = m_ready.pop(m_options.batch_size);
        m_last_batch_cost = batch.cost;
        m_stats.peak_batch_memory = std::max(m_stats.peak_batch_memory, batch.memory);
        ++m_stats.batches;
        m_stats.records_out += batch.records.size();
        if (batch.records.size() == m_options.batch_size) m_stats.batch_cost.add(m_last_batch_cost);
        return batch.records;
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
        m_buffer.drop_newest(extra);
        m_stats.records_dropped += extra;
    }

    /// Starts the next epoch of the same stream, aiming at `mean_cost` (options::mean_cost for
    /// the new epoch; the other options stay). The balancer must be drained (finished, every
    /// record handed out) or untouched; otherwise bcl::error, and nothing changes. What it
    /// learned stays (the quantile cap's sketch, the heavy slots, a calibration's fit, the running
    /// mean cost); stats(), the round and batch counts start afresh (observe() counts batches
    /// from 0 again). So the epoch balances as the uninterrupted stream would. Allocates nothing;
    /// O(options::calibration.horizon) under calibration, else O(1).
    void next_epoch(double mean_cost) {
        if (!(m_finished && buffered() == 0) && m_stats.records_in != 0)
            detail::throw_epoch_under_way(buffered(), m_finished);
        options next = m_options;
        next.mean_cost = mean_cost;
        detail::check_cap_and_budget(next); // mean_cost's range, with the rest unchanged
        m_options.mean_cost = mean_cost;
        m_history.next_epoch(m_stats);
        m_finished = false;
        m_last_batch_cost = 0.0;
        m_calibration.next_epoch();
    }

    /// next_epoch() at the options' own mean_cost.
    void next_epoch() { next_epoch(m_options.mean_cost); }

    [[nodiscard]] bool finished() const noexcept { return m_finished; }
    /// Records pushed and not yet handed out in a batch (nor dropped).
    [[nodiscard]] std::size_t buffered() const noexcept {
        return m_buffer.size() + m_ready.waiting_records(m_options.batch_size);
    }
    /// Estimated cost of the batch pop() returned last (0 before the first).
    [[nodiscard]] double last_batch_cost() const noexcept { return m_last_batch_cost; }
    [[nodiscard]] const statistics& stats() const noexcept { return m_stats; }
    [[nodiscard]] const options& settings() const noexcept { return m_options; }

    /// Calibration (a calibratable_estimator only): the measured time of emitted batch
    /// `batch_index` (from 0 each epoch), in any unit, e.g. the seconds the rank computed it.
    /// Times may come late and in any order, within options::calibration.horizon batches; refits
    /// apply from the next round (docs/calibration.md). Throws bcl::error, changing nothing, for
    /// a time negative or not finite, or a batch not emitted, older than the horizon, or already
    /// observed.
    void observe(std::uint64_t batch_index, double seconds) requires calibrating {
        m_calibration.observe(batch_index, seconds, m_stats.batches);
    }

    /// Calibration: what the fit has learned so far.
    [[nodiscard]] calibration_summary<feature_count> calibration() const requires calibrating {
        return m_calibration.summary(m_estimator.coefficients());
    }

private:
    friend struct detail::balancer_state_io;
    static constexpr std::size_t delays_reserved = 4096; // delay counts made room for up front

    [[nodiscard]] double mean_cost() const noexcept {
        return m_history.mean_cost(m_options.mean_cost, m_stats.records_in);
    }

    // One round, steps 1 to 7 of the class comment. Everything that can throw (choosing,
    // splitting, making room for the delays) runs before anything the balancer keeps changes.
    void run_round() {
        const std::size_t b = m_options.batch_size;
        const std::uint64_t round = m_stats.windows;
        const detail::round_records r =
            m_rounds.choose(m_buffer, round, m_finished, mean_cost()); // 1, 2
        const partition_summary split = m_partition.run(               // 3
            r.costs, r.memory, pack_shape{r.packs, b}, m_options.memory_budget, round,
            m_heavy.round_targets(r.full, static_cast<double>(b) * mean_cost(), m_cap.current()));
        auto delays = m_delays.start(m_stats.batches, r.packs,
                                     m_buffer.round_oldest(r.whole_buffer), b, m_stats);

        // Committed from here on: nothing below throws.
        m_heavy.learn(r.costs, r.full, m_cap.settled());
        const std::span<const double> pack_cost = m_partition.pack_cost();
        const std::span<const double> pack_memory = m_partition.pack_memory();
        m_order.order(r.packs, r.has_short, round, pack_cost, // 4
                      tracks_memory ? pack_memory : pack_cost);
        m_ready.start(m_order.rank(), pack_cost, pack_memory);
        detail::place_round(m_ready, m_buffer, r, b, m_partition.pack_of(), m_order.rank(), // 5
                            delays, m_calibration);
        m_delays.finish(m_stats);
        m_buffer.release_round(r.whole_buffer); // 6
        ++m_stats.windows;
        m_partition.add_gap(split, r.full, m_stats.gap_to_lower_bound);
        m_calibration.apply_refit(m_estimator, m_buffer, m_heavy, m_cap.current()); // 7
    }

    options m_options;
    detail::round_chooser m_rounds;
    std::size_t m_capacity; // records held before a round must run
    estimator_type m_estimator;
    detail::outlier_cap m_cap;
    detail::record_buffer<Record, tracks_memory, feature_count> m_buffer;
    detail::partition_step<Partitioner, tracks_memory> m_partition;
    detail::heavy_slots m_heavy;
    detail::batch_order m_order;
    detail::delay_tally m_delays;
    detail::ready_batches<Record> m_ready;
    [[no_unique_address]] detail::calibration_for<feature_count> m_calibration;
    statistics m_stats; // stats().windows counts the rounds run this epoch

    detail::stream_history m_history; // the mean cost over every epoch, the earlier epochs' counts
    bool m_finished = false;
    double m_last_batch_cost = 0.0;
};

} // namespace bcl
