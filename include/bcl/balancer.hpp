#pragma once
// bcl::balancer: the push/pull core. Buffers a window of K*B records, repartitions it into K
// batches of exactly B records with balanced estimated cost, and hands the batches out.

#include <bcl/detail/config.hpp>

#include <bcl/cost_estimator.hpp>
#include <bcl/detail/batch_order.hpp>
#include <bcl/detail/delay_tally.hpp>
#include <bcl/detail/heavy_slots.hpp>
#include <bcl/detail/outlier_cap.hpp>
#include <bcl/detail/partition_step.hpp>
#include <bcl/detail/record_buffer.hpp>
#include <bcl/detail/record_estimator.hpp>
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
          m_order(m_options),
          m_shapes_heavy(m_options.emission == emission_order::costliest_first &&
                         m_options.batching == batch_cost::packed) {
        const std::size_t window = m_options.batch_size * m_options.lookahead;
        m_buffer.reserve(m_capacity);
        std::visit([&](auto& rounds) { rounds.reserve(m_capacity); }, m_rounds);
        m_partition.reserve(window, m_options.lookahead);
        m_order.reserve(m_options.lookahead);
        m_delays.reserve(std::min(max_delay_bound(m_options) + 1, delays_reserved), m_stats);
        m_ready.reserve(window);
        m_batch_cost.reserve(m_options.lookahead);
        m_batch_memory.reserve(m_options.lookahead);
        m_next_place.reserve(m_options.lookahead);
        m_slot_order.reserve(window);
    }

    /// Everything needed to continue a balancer exactly where it was: the records it holds and
    /// not yet handed out (`pending`), and the rest (counters, running means, random state,
    /// costs of the pending records). `pending` holds first the records of the batches already
    /// formed and not yet popped, in the order they will be popped, then the buffered records in
    /// arrival order.
    struct state {
        std::vector<Record> pending;
        detail::balancer_snapshot snapshot;

        /// Everything but the records, as a portable byte string (little-endian, checksummed).
        [[nodiscard]] std::string to_bytes() const { return detail::to_bytes(snapshot); }

        /// Rebuilds a state from to_bytes() and the pending records, in the documented order.
        /// Throws bcl::error if the bytes are truncated, corrupted or describe a balancer that
        /// could not exist, or if the number of records is not the number saved.
        [[nodiscard]] static state from_bytes(std::string_view bytes, std::vector<Record> pending) {
            state s{std::move(pending), detail::snapshot_from_bytes(bytes)};
            require_pending(s);
            return s;
        }
    };

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
        state s;
        s.snapshot = snapshot();
        s.pending.reserve(s.snapshot.pending_records());
        for (std::size_t i = m_next_batch * m_options.batch_size; i < m_ready.size(); ++i)
            s.pending.push_back(m_ready[i]);
        for (const Record& r : m_buffer.records()) s.pending.push_back(r);
        return s;
    }

    /// As save(), moving the records out instead of copying them; for move-only records. The
    /// balancer is left finished and empty.
    [[nodiscard]] state take_state() && {
        state s;
        s.snapshot = snapshot();
        s.pending.reserve(s.snapshot.pending_records());
        for (std::size_t i = m_next_batch * m_options.batch_size; i < m_ready.size(); ++i)
            s.pending.push_back(std::move(m_ready[i]));
        for (Record& r : m_buffer.records()) s.pending.push_back(std::move(r));
        m_ready.clear();
        m_batch_cost.clear();
        m_next_batch = 0;
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
        m_buffer.push(std::move(r), e, m_stats.records_in);
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
        const std::size_t b = m_options.batch_size;
        const std::size_t offset = m_next_batch * b;
        const std::size_t size = std::min(b, m_ready.size() - offset);
        m_last_batch_cost = m_batch_cost[m_next_batch];
        if constexpr (tracks_memory)
            m_stats.peak_batch_memory =
                std::max(m_stats.peak_batch_memory, m_batch_memory[m_next_batch]);
        ++m_next_batch;
        ++m_stats.batches;
        m_stats.records_out += size;
        if (size == b) m_stats.batch_cost.add(m_last_batch_cost);
        return batch_type(m_ready.data() + offset, size);
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

    [[nodiscard]] bool finished() const noexcept { return m_finished; }
    /// Records pushed and not yet handed out in a batch (nor dropped).
    [[nodiscard]] std::size_t buffered() const noexcept {
        const std::size_t handed_out =
            std::min(m_ready.size(), m_next_batch * m_options.batch_size);
        return m_buffer.size() + (m_ready.size() - handed_out);
    }
    /// Estimated cost of the batch pop() returned last (0 before the first).
    [[nodiscard]] double last_batch_cost() const noexcept { return m_last_batch_cost; }
    [[nodiscard]] const statistics& stats() const noexcept { return m_stats; }
    [[nodiscard]] const options& settings() const noexcept { return m_options; }

private:
    static constexpr std::size_t delays_reserved = 4096; // delay counts made room for up front

    static options checked(const options& opt) {
        validate(opt);
        return opt;
    }

    static void require_pending(const state& s) {
        if (s.pending.size() != s.snapshot.pending_records())
            throw error("bcl::balancer::state: " + std::to_string(s.pending.size()) +
                        " pending records given, but the state was saved with " +
                        std::to_string(s.snapshot.pending_records()));
    }

    [[nodiscard]] std::size_t waiting_batches() const noexcept {
        return m_batch_cost.size() - m_next_batch;
    }

    // The long-run mean cost of a record: the option, or the mean of every record pushed.
    [[nodiscard]] double mean_cost() const noexcept {
        if (m_options.mean_cost > 0.0) return m_options.mean_cost;
        return m_stats.records_in == 0
                   ? 0.0
                   : m_arrival_cost_total / static_cast<double>(m_stats.records_in);
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
        partition_summary summary = m_partition.run(costs, memory, pack_shape{packs, b},
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
        m_batch_cost.resize(packs);
        for (std::size_t p = 0; p < packs; ++p) m_batch_cost[rank[p]] = pack_cost[p];
        if constexpr (tracks_memory) {
            m_batch_memory.resize(packs);
            for (std::size_t p = 0; p < packs; ++p)
                m_batch_memory[rank[p]] = m_partition.pack_memory()[p];
        }
        if (whole_buffer)
            place_records<true>(take, delays);
        else
            place_records<false>(take, delays);
        m_delays.finish(m_stats);
        if (whole_buffer)
            m_buffer.clear();
        else
            m_buffer.compact();
        m_next_batch = 0;
        ++m_stats.windows;
        // A gap to the lower bound of the packed cost: padded batches claim no bound.
        if (!has_short && packs == m_options.lookahead &&
            m_options.batching == batch_cost::packed) {
            if (m_options.memory_budget > 0.0)
                summary.heaviest = *std::max_element(pack_cost.begin(), pack_cost.end());
            m_stats.gap_to_lower_bound.add(
                summary.lower_bound > 0.0
                    ? std::max(0.0, summary.heaviest / summary.lower_bound - 1.0)
                    : 0.0);
        }
        ++m_round;
    }

    // Moves each of the round's n records to its place in emission order (a counting sort by
    // batch) and counts its delay. In the steady state m_ready holds a round's worth of
    // handed-out records, which are assigned over; otherwise the places are listed first and the
    // records gathered after.
    template <bool whole_buffer>
    void place_records(std::size_t n, detail::delay_tally::round_counter& delays) noexcept {
        const std::size_t b = m_options.batch_size;
        const std::span<const std::uint32_t> pack_of = m_partition.pack_of();
        const std::span<const std::uint32_t> rank = m_order.rank();
        const std::span<const std::uint32_t> slots = m_buffer.round_slots();
        const std::span<const std::uint64_t> arrivals = m_buffer.arrivals();
        std::vector<Record>& buffered = m_buffer.records();
        m_next_place.resize(rank.size());
        for (std::size_t r = 0; r < rank.size(); ++r)
            m_next_place[r] = static_cast<std::uint32_t>(r * b);
        const bool in_place = m_ready.size() == n;
        if (!in_place) m_slot_order.resize(n);
        for (std::size_t i = 0; i < n; ++i) {
            const std::uint32_t batch = rank[pack_of[i]];
            const std::uint32_t slot = whole_buffer ? static_cast<std::uint32_t>(i) : slots[i];
            const std::uint32_t place = m_next_place[batch]++;
            if (in_place)
                m_ready[place] = std::move(buffered[slot]);
            else
                m_slot_order[place] = slot;
            delays.count(i, arrivals[slot], batch);
        }
        if (in_place) return;
        m_ready.clear();
        for (std::size_t k = 0; k < n; ++k) m_ready.push_back(std::move(buffered[m_slot_order[k]]));
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
        const auto first_waiting = static_cast<std::ptrdiff_t>(m_next_batch);
        s.waiting_batch_costs.assign(m_batch_cost.begin() + first_waiting, m_batch_cost.end());
        s.waiting_records =
            m_ready.size() - std::min(m_ready.size(), m_next_batch * m_options.batch_size);
        s.buffer_costs.assign(m_buffer.costs().begin(), m_buffer.costs().end());
        s.buffer_arrivals.assign(m_buffer.arrivals().begin(), m_buffer.arrivals().end());
        s.sketch = m_cap.sketch();
        s.quantile_cap = m_cap.last();
        s.heavy_seen = m_heavy.seen();
        const auto remembered = static_cast<std::ptrdiff_t>(
            std::min<std::uint64_t>(m_heavy.seen(), detail::heavy_slots::window));
        for (std::size_t slot = 0; slot < detail::heavy_slots::slots; ++slot)
            s.heavy_recent[slot].assign(m_heavy.recent(slot).begin(),
                                        m_heavy.recent(slot).begin() + remembered);
        s.tracks_memory = tracks_memory;
        if constexpr (tracks_memory) {
            s.waiting_batch_memory.assign(m_batch_memory.begin() + first_waiting,
                                          m_batch_memory.end());
            s.buffer_memory.assign(m_buffer.memory().begin(), m_buffer.memory().end());
        }
        return s;
    }

    void restore(state saved) {
        require_pending(saved);
        detail::balancer_snapshot& s = saved.snapshot;
        detail::check_consistent(s);
        detail::require_same_options(s.opt, m_options);
        if (s.tracks_memory != tracks_memory)
            throw error("bcl::balancer: the state was saved by a balancer whose estimator " +
                        std::string(s.tracks_memory ? "had" : "had no") +
                        " memory estimate, unlike this one");
        m_order.restore(s.rng_state);
        m_finished = s.finished;
        m_round = s.round;
        m_arrival_cost_total = s.arrival_cost_total;
        m_last_batch_cost = s.last_batch_cost;
        m_stats = std::move(s.stats);
        m_batch_cost.assign(s.waiting_batch_costs.begin(), s.waiting_batch_costs.end());
        m_batch_memory.assign(s.waiting_batch_memory.begin(), s.waiting_batch_memory.end());
        m_next_batch = 0;
        auto record = saved.pending.begin();
        for (std::size_t i = 0; i < s.waiting_records; ++i) m_ready.push_back(std::move(*record++));
        m_buffer.assign(record, s.buffer_costs, s.buffer_memory, s.buffer_arrivals);
        m_cap.restore(s.sketch, s.quantile_cap);
        for (std::size_t slot = 0; slot < detail::heavy_slots::slots; ++slot)
            m_heavy.restore(s.heavy_seen, slot, s.heavy_recent[slot]);
    }

    options m_options;
    detail::round_policy m_rounds;
    std::size_t m_capacity; // records held before a round must run
    estimator_type m_estimator;
    detail::outlier_cap m_cap;
    detail::record_buffer<Record, tracks_memory> m_buffer;
    detail::partition_step<Partitioner, tracks_memory> m_partition;
    detail::batch_order m_order;
    detail::delay_tally m_delays;
    detail::heavy_slots m_heavy;
    bool m_shapes_heavy; // costliest-first emission of packed batches shapes the heavy slots
    statistics m_stats;

    double m_arrival_cost_total = 0.0; // sum of every accepted cost, for the long-run mean
    std::uint64_t m_round = 0;         // rounds run so far
    bool m_finished = false;
    std::vector<Record> m_ready;        // the last round's records, batch after batch
    std::vector<double> m_batch_cost;   // estimated cost of each batch in m_ready
    std::vector<double> m_batch_memory; // and its memory (with a memory estimator)
    std::size_t m_next_batch = 0;       // next batch of m_ready to hand out
    double m_last_batch_cost = 0.0;
    std::vector<std::uint32_t> m_next_place; // counting-sort cursor per batch
    std::vector<std::uint32_t> m_slot_order; // buffer slots in emission order
};

} // namespace bcl
