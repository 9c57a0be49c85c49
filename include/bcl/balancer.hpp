#pragma once
// bcl::balancer: the push/pull core. Buffers a window of K*B records, repartitions it into K
// batches of exactly B records with balanced estimated cost, and hands the batches out.

#include <bcl/detail/config.hpp>

#include <bcl/calibrated_cost.hpp>
#include <bcl/cost_estimator.hpp>
#include <bcl/detail/batch_calibration.hpp>
#include <bcl/detail/batch_order.hpp>
#include <bcl/detail/delay_tally.hpp>
#include <bcl/detail/heavy_slots.hpp>
#include <bcl/detail/outlier_cap.hpp>
#include <bcl/detail/partition_step.hpp>
#include <bcl/detail/ready_batches.hpp>
#include <bcl/detail/record_buffer.hpp>
#include <bcl/detail/record_estimator.hpp>
#include <bcl/detail/saved_state.hpp>
#include <bcl/detail/snapshot_check.hpp>
#include <bcl/error.hpp>
#include <bcl/options.hpp>
#include <bcl/partition/lpt_swap.hpp>
#include <bcl/partition/partitioner.hpp>
#include <bcl/record_model.hpp>
#include <bcl/statistics.hpp>

#include <algorithm>
#include <array>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

namespace bcl {

/// A type satisfies `record` if:
///   1. it is a non-const object type;
///   2. it is nothrow move-constructible;
///   3. it is nothrow move-assignable.
/// Records are moved into the buffer, within it (sliding policy) and out to their batch; a move
/// that could throw halfway through a round would lose records, so it is ruled out at compile
/// time. Records need not be copyable or default-constructible.
template <class T>
concept record = std::is_object_v<T> && !std::is_const_v<T> &&
                 std::is_nothrow_move_constructible_v<T> && std::is_nothrow_move_assignable_v<T>;

/// The push/pull core of bcl.
///
/// push() moves records in; once the buffer is full (K*B records for the tumbling policy,
/// buffer_windows*K*B for sliding), pop() runs a round: it takes K*B records (all of them for
/// tumbling), repartitions them into K batches of exactly B records whose estimated costs are
/// balanced, and hands the batches out one at a time in a seeded random order. finish() marks the
/// end of input; pop() then drains the rest in rounds, the last of which forms ceil(n/B) batches
/// with the single short batch last (or dropped, with options::drop_last).
///
/// The contract (README): every batch has exactly B records but the last; the number of batches
/// is ceil(N/B) (floor with drop_last) whatever the costs; every record comes out exactly once; a
/// record leaves at most max_delay_bound(options) batches after the batch it would have been in
/// (K-1 for tumbling); the same input, options and seed give the same batches; bad input is a
/// bcl::error, and whatever throws leaves the balancer exactly as it was.
///
/// A round reads top to bottom as the data path: the lookahead policy chooses the round's records
/// (detail::tumbling_rounds, detail::sliding_rounds), the partition step splits them into packs
/// within the memory budget (detail::partition_step), the emission order ranks the packs
/// (detail::batch_order), and the records move to their batches while their delays are
/// counted (detail::delay_tally).
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
    using calibration_type =
        std::conditional_t<calibrating, detail::batch_calibration<feature_count>,
                           detail::no_calibration>;

public:
    using record_type = Record;
    /// A batch: a view of records owned by the balancer. Move the records out if you keep them;
    /// the view is valid until the next call of push(), pop() or finish().
    using batch_type = std::span<Record>;

    /// Throws bcl::error if the options are invalid (see bcl::validate) or ask for what the
    /// estimator cannot do (a truncating cap, a memory budget).
    balancer(Estimator estimator, options opt, Partitioner partitioner = Partitioner{})
        : m_options(checked(opt)), m_rounds(detail::make_round_policy(m_options)),
          m_capacity(buffer_capacity(m_options)), m_estimator(std::move(estimator), m_options),
          m_cap(m_options.cap), m_partition(std::move(partitioner), m_options.batching),
          m_order(m_options), m_calibration(make_calibration()),
          m_shapes_heavy(m_options.emission == emission_order::costliest_first &&
                         m_options.batching == batch_cost::packed) {
        const std::size_t window = m_options.batch_size * m_options.lookahead;
        m_buffer.reserve(m_capacity);
        std::visit([&](auto& rounds) { rounds.reserve(m_capacity); }, m_rounds);
        m_partition.reserve(window, m_options.lookahead);
        m_order.reserve(m_options.lookahead);
        m_delays.reserve(std::min(max_delay_bound(m_options) + 1, delays_reserved), m_stats);
        m_ready.reserve(window, m_options.lookahead);
        if constexpr (calibrating) m_calibration.reserve(m_options.lookahead);
    }

    /// Everything needed to continue a balancer exactly where it was; see detail::saved_state.
    using state = detail::saved_state<Record>;

    /// Continues from a saved state. `opt` must equal the options the state was saved with
    /// (bcl::error naming the first that differs); so must the estimator, for the batches to be
    /// the ones the uninterrupted balancer would have emitted.
    balancer(Estimator estimator, options opt, state saved, Partitioner partitioner = Partitioner{})
        : balancer(std::move(estimator), opt, std::move(partitioner)) {
        restore(std::move(saved));
    }

    /// A copy of everything needed to continue (see state). Does not change this balancer:
    /// what it emits afterwards is what it would have emitted without the call.
    [[nodiscard]] state save() const requires std::copy_constructible<Record> {
        return collect_state(*this, [](const Record& r) { return r; });
    }

    /// As save(), moving the records out instead of copying them; for move-only records. The
    /// balancer is left finished and empty.
    [[nodiscard]] state take_state() && {
        state s = collect_state(*this, [](Record& r) { return std::move(r); });
        m_ready.clear();
        m_buffer.clear();
        m_finished = true;
        return s;
    }

    /// Adds one record (moved from). Estimates its cost first: if the estimator throws, or the
    /// cost is NaN, negative or above bcl::max_estimate (bcl::error naming the record position
    /// and value), the record is left with the caller and the balancer is unchanged. When the
    /// buffer is full, runs a round first (as pop() would).
    /// Throws bcl::error after finish(), or when the buffer is full while batches of the previous
    /// round are still waiting to be popped (pop them first; see can_push()). Whatever it throws,
    /// the balancer is exactly as it was before the call and the record is still the caller's.
    /// With a cap whose action is truncate, the record may have been truncated before a later
    /// error (its memory over options::memory_budget).
    void push(Record&& r) {
        check_can_push();
        const detail::record_estimate e = m_estimator(r, m_cap, m_stats.records_in);
        // A round that throws (a memory budget no split fits) leaves everything as it was, so the
        // record is still the caller's and the balancer unchanged.
        if (m_buffer.size() == m_capacity) run_round();
        if constexpr (calibrating) {
            m_buffer.push(std::move(r), e, m_stats.records_in, m_estimator.last_features());
            m_calibration.count_record(m_estimator.last_features());
        } else {
            m_buffer.push(std::move(r), e, m_stats.records_in);
        }
        m_arrival_cost_total += e.cost;
        m_cap.add(e.uncapped, e.cap);
        if (e.capped) ++m_stats.records_capped;
        ++m_stats.records_in;
    }

    /// Adds a copy of `r`; otherwise as push(Record&&). `r` itself is never modified.
    void push(const Record& r) requires std::copy_constructible<Record> { push(Record(r)); }

    /// True if push() would accept a record now.
    [[nodiscard]] bool can_push() const noexcept {
        return !m_finished && (m_buffer.size() < m_capacity || waiting_batches() == 0);
    }

    /// The next batch, once one is ready: when the buffer is full, or after finish().
    /// Returns std::nullopt when more input is needed (or, after finish(), when all is drained).
    /// A round that fails (a partitioner that breaks its contract, a memory budget no split
    /// fits) throws bcl::error and leaves the balancer exactly as it was: every record is still
    /// held, and a later pop() runs the same round again.
    [[nodiscard]] std::optional<batch_type> pop() {
        if (waiting_batches() == 0) {
            if (m_buffer.empty() || (!m_finished && m_buffer.size() < m_capacity))
                return std::nullopt;
            run_round();
        }
        if constexpr (calibrating) m_calibration.emitted(m_stats.batches, m_ready.next());
        const auto batch = m_ready.pop(m_options.batch_size);
        m_last_batch_cost = batch.cost;
        if constexpr (tracks_memory)
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
    /// record handed out) or untouched (nothing pushed since it began or since the last
    /// next_epoch()); otherwise bcl::error, and nothing changes.
    ///
    /// What the balancer learned stays: the quantile cap's sketch (no new warm-up), the heavy
    /// slots, a calibration's fit and the coefficients in force, the running mean of the arrival
    /// costs (mean_cost 0). What belongs to an epoch starts afresh: stats(), the round and batch
    /// counts (observe() counts batches from 0 again; times of the last epoch's batches are no
    /// longer taken), records. So an epoch restarted this way balances as the uninterrupted stream
    /// would, where a new balancer would relearn all of it. O(1) but the calibration ledger,
    /// O(options::calibration.horizon); allocates nothing.
    void next_epoch(double mean_cost) {
        if (!(m_finished && buffered() == 0) && m_stats.records_in != 0)
            throw error("bcl::balancer::next_epoch: the epoch is under way (" +
                        std::to_string(buffered()) + " records still held" +
                        (m_finished ? std::string() : ", finish() not called") +
                        "); drain it first");
        options next = m_options;
        next.mean_cost = mean_cost;
        detail::check_cap_and_budget(next); // mean_cost's range, with the rest unchanged
        m_options.mean_cost = mean_cost;
        m_learned.records += m_stats.records_in;
        m_learned.rounds += m_round;
        m_learned.batches += m_stats.batches;
        detail::start_epoch(m_stats);
        m_round = 0;
        m_finished = false;
        m_last_batch_cost = 0.0;
        if constexpr (calibrating) m_calibration.next_epoch();
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
    /// `batch_index` (counting every batch pop() returned, from 0), in any unit, e.g. the
    /// seconds the rank spent computing it (not waiting for other ranks). Times may arrive late
    /// and in any order, within options::calibration.horizon batches. Refitted coefficients apply
    /// from the next round on (docs/calibration.md). Throws bcl::error, changing nothing, for a
    /// time that is negative or not finite, or a batch not emitted, older than the horizon, or
    /// already observed.
    void observe(std::uint64_t batch_index, double seconds) requires calibrating {
        m_calibration.observe(batch_index, seconds, m_stats.batches);
    }

    /// Calibration: what the fit has learned so far.
    [[nodiscard]] calibration_summary<feature_count> calibration() const requires calibrating {
        const auto& fit = m_calibration.fit();
        return {fit.fitted, m_estimator.coefficients(), fit.observed, fit.downweighted,
                fit.has_fit};
    }

private:
    static constexpr std::size_t delays_reserved = 4096; // delay counts made room for up front

    static options checked(const options& opt) {
        validate(opt);
        return opt;
    }

    [[nodiscard]] std::size_t waiting_batches() const noexcept { return m_ready.waiting(); }

    // The long-run mean cost of a record: the option, or the mean of every record pushed (in
    // earlier epochs too).
    [[nodiscard]] double mean_cost() const noexcept {
        if (m_options.mean_cost > 0.0) return m_options.mean_cost;
        const std::uint64_t records = m_learned.records + m_stats.records_in;
        return records == 0 ? 0.0 : m_arrival_cost_total / static_cast<double>(records);
    }

    // The misuse push() rejects before it looks at the record.
    void check_can_push() const {
        if (can_push()) [[likely]]
            return;
        if (m_finished)
            throw error("bcl::balancer::push: called after finish() (record " +
                        std::to_string(m_stats.records_in) + ")");
        throw error("bcl::balancer::push: the buffer is full (" + std::to_string(m_capacity) +
                    " records) and " + std::to_string(waiting_batches()) +
                    " batches are still waiting; pop() them before pushing record " +
                    std::to_string(m_stats.records_in));
    }

    // One round: choose the records, split them into packs, rank the packs, move the records to
    // their batches. Everything that can throw runs before anything the balancer keeps changes.
    void run_round() {
        const std::size_t b = m_options.batch_size;
        const std::size_t n = m_buffer.size();
        const std::size_t take = std::min(n, b * m_options.lookahead);
        const bool whole_buffer = take == n; // every tumbling round, the end of a sliding drain
        if (!whole_buffer) {
            const detail::round_inputs in{m_buffer.costs(), m_buffer.arrivals(), m_round,
                                          m_finished,       mean_cost(),         take};
            std::visit([&](auto& rounds) { rounds.choose(in, m_buffer.chosen()); }, m_rounds);
            m_buffer.gather(take);
        }
        const std::span<const double> costs =
            whole_buffer ? m_buffer.costs() : m_buffer.round_costs();
        const std::span<const double> memory =
            whole_buffer ? m_buffer.memory() : m_buffer.round_memory();
        const std::size_t packs = (take + b - 1) / b;
        const bool has_short = take % b != 0;
        const bool full = !has_short && packs == m_options.lookahead;
        const std::array<double, detail::heavy_slots::slots> heavy =
            m_shapes_heavy && full
                ? m_heavy.targets(static_cast<double>(b) * mean_cost(), m_cap.current())
                : std::array<double, detail::heavy_slots::slots>{};
        const partition_summary summary = m_partition.run(costs, memory, pack_shape{packs, b},
                                                          m_options.memory_budget, m_round, heavy);
        const std::uint64_t oldest =
            m_buffer.arrivals()[whole_buffer ? 0 : m_buffer.round_slots()[0]];
        auto delays = m_delays.start(m_stats.batches, packs, oldest, b, m_stats);

        // Committed from here on: nothing below throws.
        // The heavy slots learn from full rounds once a quantile cap has settled (the records of
        // its warm-up are not what later rounds hold).
        if (m_shapes_heavy && full &&
            (m_options.cap.kind != cap_kind::quantile || m_cap.current() < HUGE_VAL))
            m_heavy.observe(costs);
        const std::span<const double> pack_cost = m_partition.pack_cost();
        m_order.order(packs, has_short, m_round, pack_cost,
                      tracks_memory ? m_partition.pack_memory() : pack_cost);
        const std::span<const std::uint32_t> rank = m_order.rank();
        m_ready.start(rank, pack_cost,
                      tracks_memory ? m_partition.pack_memory() : std::span<const double>());
        if (whole_buffer)
            place_records<true>(take, delays);
        else
            place_records<false>(take, delays);
        m_delays.finish(m_stats);
        if constexpr (calibrating) m_calibration.finish_round();
        if (whole_buffer)
            m_buffer.clear();
        else
            m_buffer.compact();
        ++m_stats.windows;
        // A gap to the lower bound of the packed cost, where the partition step claims one.
        if (!has_short && packs == m_options.lookahead && m_partition.claims_bound()) {
            m_stats.gap_to_lower_bound.add(
                summary.lower_bound > 0.0
                    ? std::max(0.0, summary.heaviest / summary.lower_bound - 1.0)
                    : 0.0);
        }
        ++m_round;
        if constexpr (calibrating)
            m_calibration.apply_refit(m_estimator, m_buffer, m_heavy, m_cap.current());
    }

    [[nodiscard]] calibration_type make_calibration() const {
        if constexpr (calibrating)
            return calibration_type(m_options, m_estimator.prior());
        else
            return {};
    }

    // Moves each of the round's n records to its batch, counting its delay and, under
    // calibration, adding its features to the batch's.
    template <bool whole_buffer>
    void place_records(std::size_t n, detail::delay_tally::round_counter& delays) noexcept {
        const std::span<const std::uint32_t> pack_of = m_partition.pack_of();
        const std::span<const std::uint32_t> rank = m_order.rank();
        const std::span<const std::uint32_t> slots = m_buffer.round_slots();
        const std::span<const std::uint64_t> arrivals = m_buffer.arrivals();
        if constexpr (calibrating) m_calibration.start_round(rank.size());
        m_ready.place(
            n, m_options.batch_size, m_buffer.records(), arrivals,
            [&](std::size_t i) { return whole_buffer ? static_cast<std::uint32_t>(i) : slots[i]; },
            [&](std::size_t i) { return rank[pack_of[i]]; },
            [&](std::size_t i, std::uint32_t slot, std::uint32_t batch) {
                delays.count(i, arrivals[slot], batch);
                if constexpr (calibrating)
                    m_calibration.add(batch, m_buffer.feature_values()[slot],
                                      m_buffer.costs()[slot]);
            });
    }

    // The snapshot, and the pending records in the documented order, each through `take`.
    template <class Self, class Take>
    [[nodiscard]] static state collect_state(Self& self, Take take) {
        state s;
        s.snapshot = self.snapshot();
        s.pending.reserve(s.snapshot.pending_records());
        for (auto& r : self.m_ready.waiting_span(self.m_options.batch_size))
            s.pending.push_back(take(r));
        for (auto& r : self.m_buffer.records()) s.pending.push_back(take(r));
        return s;
    }

    [[nodiscard]] detail::balancer_snapshot snapshot() const {
        detail::balancer_snapshot s;
        s.opt = m_options;
        s.rng_state = m_order.random_state();
        s.finished = m_finished;
        s.round = m_round;
        s.arrival_cost_total = m_arrival_cost_total;
        s.last_batch_cost = m_last_batch_cost;
        s.stats = m_stats;
        s.learned = m_learned;
        s.waiting_batch_costs.assign(m_ready.waiting_costs().begin(),
                                     m_ready.waiting_costs().end());
        s.waiting_records = m_ready.waiting_records(m_options.batch_size);
        const std::span<const std::uint64_t> waiting =
            m_ready.waiting_arrivals(m_options.batch_size);
        s.waiting_arrivals.assign(waiting.begin(), waiting.end());
        s.buffer_costs.assign(m_buffer.costs().begin(), m_buffer.costs().end());
        s.buffer_arrivals.assign(m_buffer.arrivals().begin(), m_buffer.arrivals().end());
        s.sketch = m_cap.sketch();
        s.quantile_cap = m_cap.last();
        detail::save_heavy_slots(m_heavy, s);
        s.tracks_memory = tracks_memory;
        if constexpr (calibrating)
            s.calibration =
                m_calibration.save(m_stats.batches, m_ready.next(), m_estimator.coefficients());
        if constexpr (tracks_memory) {
            s.waiting_batch_memory.assign(m_ready.waiting_memory().begin(),
                                          m_ready.waiting_memory().end());
            s.buffer_memory.assign(m_buffer.memory().begin(), m_buffer.memory().end());
        }
        return s;
    }

    void restore(state saved) {
        saved.require_pending();
        detail::balancer_snapshot& s = saved.snapshot;
        detail::check_consistent(s);
        detail::require_same_options(s.opt, m_options);
        detail::require_same_estimates(s, tracks_memory, feature_count);
        m_order.restore(s.rng_state);
        m_finished = s.finished;
        m_round = s.round;
        m_arrival_cost_total = s.arrival_cost_total;
        m_last_batch_cost = s.last_batch_cost;
        m_stats = std::move(s.stats);
        m_learned = s.learned;
        m_ready.restore(saved.pending.begin(), s.waiting_records, s.waiting_arrivals,
                        s.waiting_batch_costs, s.waiting_batch_memory);
        m_buffer.assign(saved.pending.begin() + static_cast<std::ptrdiff_t>(s.waiting_records),
                        s.buffer_costs, s.buffer_memory, s.buffer_arrivals);
        m_cap.restore(s.sketch, s.quantile_cap);
        detail::restore_heavy_slots(s, m_heavy);
        if constexpr (calibrating)
            m_calibration.restore(s.calibration, m_stats.batches, m_estimator, m_buffer);
    }

    options m_options;
    detail::round_policy m_rounds;
    std::size_t m_capacity; // records held before a round must run
    estimator_type m_estimator;
    detail::outlier_cap m_cap;
    detail::record_buffer<Record, tracks_memory, feature_count> m_buffer;
    detail::partition_step<Partitioner, tracks_memory> m_partition;
    detail::batch_order m_order;
    detail::delay_tally m_delays;
    detail::heavy_slots m_heavy;
    [[no_unique_address]] calibration_type m_calibration;
    bool m_shapes_heavy; // costliest-first emission of packed batches shapes the heavy slots
    statistics m_stats;

    double m_arrival_cost_total = 0.0; // sum of every accepted cost, for the long-run mean
    detail::earlier_epochs m_learned;  // what the epochs before this one counted
    std::uint64_t m_round = 0;         // rounds run so far
    bool m_finished = false;
    detail::ready_batches<Record> m_ready;
    double m_last_batch_cost = 0.0;
};

} // namespace bcl
