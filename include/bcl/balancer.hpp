#pragma once
// bcl::balancer: the push/pull core. Buffers a window of K*B records, repartitions it into K
// batches of exactly B records with balanced estimated cost, and hands the batches out.

#include <bcl/detail/config.hpp>

#include <bcl/cost_estimator.hpp>
#include <bcl/detail/memory_repair.hpp>
#include <bcl/detail/random.hpp>
#include <bcl/detail/snapshot.hpp>
#include <bcl/detail/target_selection.hpp>
#include <bcl/error.hpp>
#include <bcl/lpt_swap_partitioner.hpp>
#include <bcl/options.hpp>
#include <bcl/partitioner.hpp>
#include <bcl/quantile_sketch.hpp>
#include <bcl/record_model.hpp>
#include <bcl/statistics.hpp>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#ifndef BCL_SURPLUS_FEEDBACK
#define BCL_SURPLUS_FEEDBACK 0.03
#endif
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
/// The contract (see DESIGN.md): every batch has exactly B records but the last; the number of
/// batches is ceil(N/B) (floor with drop_last) whatever the costs; every record comes out exactly
/// once; a record leaves at most max_delay_bound(options) batches after the batch it would have
/// been in (K-1 for tumbling); the same input, options and seed give the same batches; a bad
/// cost is a bcl::error and the balancer is unchanged by the failed push.
///
/// Memory: the buffer, K*B records being handed out, and O(buffer) indices, all reserved at
/// construction; after the first round nothing is allocated. A record is moved in once and out
/// once; under the sliding policy it is also moved once within the buffer per round it waits.
template <record Record, cost_estimator<Record> Estimator,
          partitioner Partitioner = lpt_swap_partitioner>
class balancer {
public:
    using record_type = Record;
    /// A batch: a view of records owned by the balancer. Move the records out if you keep them;
    /// the view is valid until the next call of push(), pop() or finish().
    using batch_type = std::span<Record>;

    /// Throws bcl::error if the options are invalid (see bcl::validate).
    balancer(Estimator estimator, options opt, Partitioner partitioner = Partitioner{})
        : m_estimator(std::move(estimator)), m_partitioner(std::move(partitioner)),
          m_options(checked(opt)), m_capacity(buffer_capacity(m_options)),
          m_costs_only(!tracks_memory && m_options.cap.kind == cap_kind::none &&
                       m_options.memory_budget <= 0.0),
          m_rng(opt.seed) {
        const std::size_t buffer = m_capacity;
        const std::size_t window = round_size();
        if (m_options.cap.kind != cap_kind::none && m_options.cap.action == cap_action::truncate &&
            !truncating)
            throw error("bcl::options::cap.action is truncate, but the estimator has no "
                        "truncate(record, cap); attach one with bcl::with_truncation");
        if (m_options.memory_budget > 0.0 && !tracks_memory)
            throw error("bcl::options::memory_budget is set, but the estimator has no "
                        "memory(record); attach one with bcl::with_memory");
        m_buffer.reserve(buffer);
        m_costs.reserve(buffer);
        if constexpr (tracks_memory) {
            m_memory.reserve(buffer);
            m_round_memory.reserve(window + 1);
            m_batch_memory.reserve(m_options.lookahead);
        }
        m_arrival.reserve(buffer);
        m_chosen.reserve(buffer);
        if (m_options.policy == lookahead_policy::sliding) m_selector.reserve(buffer);
        m_ready.reserve(window);
        m_round_costs.reserve(window + 1);
        m_round_slots.reserve(window + 1);
        m_pack_of.reserve(window);
        m_slot_order.reserve(window);
        m_batch_cost.reserve(m_options.lookahead);
        m_pack_cost.reserve(m_options.lookahead);
        if constexpr (tracks_memory) m_pack_memory.reserve(m_options.lookahead);
        m_emit_rank.reserve(m_options.lookahead);
        m_next_slot.reserve(m_options.lookahead);
        // The delay statistics grow with the largest delay seen; room for every delay up to the
        // bound is made now unless the bound is unusually large, so the steady state allocates
        // nothing.
        const std::size_t delays = std::min(max_delay_bound(m_options) + 1, delays_reserved);
        m_stats.delay_histogram.reserve(delays);
        m_delay_counts.reserve(delay_tables * delays);
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
        /// Throws bcl::error if the bytes are truncated, corrupted or inconsistent, or if the
        /// number of records is not the number saved.
        [[nodiscard]] static state from_bytes(std::string_view bytes, std::vector<Record> pending) {
            state s{std::move(pending), detail::snapshot_from_bytes(bytes)};
            s.check_pending();
            return s;
        }

        void check_pending() const {
            if (pending.size() != snapshot.pending_records())
                throw error("bcl::balancer::state: " + std::to_string(pending.size()) +
                            " pending records given, but the state was saved with " +
                            std::to_string(snapshot.pending_records()));
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
    [[nodiscard]] state save() const
        requires std::copy_constructible<Record>
    {
        state s;
        s.snapshot = snapshot();
        s.pending.reserve(s.snapshot.pending_records());
        for (std::size_t i = m_next_batch * m_options.batch_size; i < m_ready.size(); ++i)
            s.pending.push_back(m_ready[i]);
        for (const Record& r : m_buffer) s.pending.push_back(r);
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
        for (Record& r : m_buffer) s.pending.push_back(std::move(r));
        m_ready.clear();
        m_batch_cost.clear();
        m_next_batch = 0;
        m_buffer.clear();
        m_costs.clear();
        m_arrival.clear();
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
        const estimate e = estimate_and_cap(r);
        // A round that throws (a memory budget no split fits) leaves everything as it was, so the
        // record is still the caller's and the balancer unchanged.
        if (m_buffer.size() == m_capacity) run_round();
        m_buffer.push_back(std::move(r));
        accept(e);
    }

    /// Adds a copy of `r`; otherwise as push(Record&&). `r` itself is never modified.
    void push(const Record& r)
        requires std::copy_constructible<Record>
    {
        push(Record(r));
    }

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
            m_stats.peak_batch_memory = std::max(m_stats.peak_batch_memory, m_batch_memory[m_next_batch]);
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
        for (std::size_t i = 0; i < extra; ++i) {
            m_buffer.pop_back();
            m_costs.pop_back();
            m_arrival.pop_back();
            if constexpr (tracks_memory) m_memory.pop_back();
        }
        m_stats.records_dropped += extra;
    }

    [[nodiscard]] bool finished() const noexcept { return m_finished; }
    /// Records pushed and not yet handed out in a batch (nor dropped).
    [[nodiscard]] std::size_t buffered() const noexcept {
        const std::size_t handed_out = std::min(m_ready.size(), m_next_batch * m_options.batch_size);
        return m_buffer.size() + (m_ready.size() - handed_out);
    }
    /// Estimated cost of the batch pop() returned last (0 before the first).
    [[nodiscard]] double last_batch_cost() const noexcept { return m_last_batch_cost; }
    [[nodiscard]] const statistics& stats() const noexcept { return m_stats; }
    [[nodiscard]] const options& settings() const noexcept { return m_options; }

private:
    [[nodiscard]] detail::balancer_snapshot snapshot() const {
        detail::balancer_snapshot s;
        s.opt = m_options;
        s.rng_state = m_rng.state();
        s.finished = m_finished;
        s.round = m_round;
        s.arrival_cost_total = m_arrival_cost_total;
        s.last_batch_cost = m_last_batch_cost;
        s.stats = m_stats;
        s.waiting_batch_costs.assign(m_batch_cost.begin() + static_cast<std::ptrdiff_t>(m_next_batch),
                                     m_batch_cost.end());
        s.waiting_records = m_ready.size() - std::min(m_ready.size(), m_next_batch * m_options.batch_size);
        s.buffer_costs = m_costs;
        s.buffer_arrivals = m_arrival;
        s.sketch = m_sketch;
        s.quantile_cap = m_quantile_cap;
        s.tracks_memory = tracks_memory;
        if constexpr (tracks_memory) {
            s.waiting_batch_memory.assign(
                m_batch_memory.begin() + static_cast<std::ptrdiff_t>(m_next_batch), m_batch_memory.end());
            s.buffer_memory = m_memory;
        }
        return s;
    }

    void restore(state saved) {
        saved.check_pending();
        detail::balancer_snapshot& s = saved.snapshot;
        detail::check_consistent(s);
        const options& o = s.opt;
        const auto differs = [](const char* name, auto saved_value, auto given_value) {
            if (saved_value != given_value)
                throw error(std::string("bcl::balancer: the state was saved with options::") + name +
                            " = " + std::to_string(static_cast<std::uint64_t>(saved_value)) +
                            ", not " + std::to_string(static_cast<std::uint64_t>(given_value)));
        };
        differs("batch_size", o.batch_size, m_options.batch_size);
        differs("lookahead", o.lookahead, m_options.lookahead);
        differs("drop_last", o.drop_last, m_options.drop_last);
        differs("seed", o.seed, m_options.seed);
        differs("shuffle_packs", o.shuffle_packs, m_options.shuffle_packs);
        differs("largest_first", o.largest_first, m_options.largest_first);
        differs("cap.kind (0 none, 1 fixed, 2 quantile)", static_cast<int>(o.cap.kind),
                static_cast<int>(m_options.cap.kind));
        if (o.cap.kind != cap_kind::none)
            differs("cap.action (0 clip, 1 truncate)", static_cast<int>(o.cap.action),
                    static_cast<int>(m_options.cap.action));
        if (o.cap.kind == cap_kind::quantile) differs("cap.warmup", o.cap.warmup, m_options.cap.warmup);
        const auto differs_value = [](const char* name, double saved_value, double given_value) {
            if (saved_value != given_value)
                throw error(std::string("bcl::balancer: the state was saved with options::") +
                            name + " = " + number(saved_value) + ", not " + number(given_value));
        };
        if (o.cap.kind == cap_kind::fixed) differs_value("cap.value", o.cap.value, m_options.cap.value);
        if (o.cap.kind == cap_kind::quantile)
            differs_value("cap.quantile", o.cap.quantile, m_options.cap.quantile);
        differs_value("memory_budget", o.memory_budget, m_options.memory_budget);
        if (s.tracks_memory != tracks_memory)
            throw error("bcl::balancer: the state was saved by a balancer whose estimator " +
                        std::string(s.tracks_memory ? "had" : "had no") +
                        " memory estimate, unlike this one");
        differs("policy (0 tumbling, 1 sliding)", static_cast<int>(o.policy), static_cast<int>(m_options.policy));
        if (m_options.policy == lookahead_policy::sliding) {
            differs("buffer_windows", o.buffer_windows, m_options.buffer_windows);
            differs("max_age", o.max_age, m_options.max_age);
        }

        m_rng = detail::splitmix64(s.rng_state);
        m_finished = s.finished;
        m_round = s.round;
        m_arrival_cost_total = s.arrival_cost_total;
        m_last_batch_cost = s.last_batch_cost;
        m_stats = std::move(s.stats);
        m_batch_cost = std::move(s.waiting_batch_costs);
        m_batch_cost.reserve(m_options.lookahead);
        m_next_batch = 0;
        auto record = saved.pending.begin();
        for (std::size_t i = 0; i < s.waiting_records; ++i) m_ready.push_back(std::move(*record++));
        for (; record != saved.pending.end(); ++record) m_buffer.push_back(std::move(*record));
        m_costs.assign(s.buffer_costs.begin(), s.buffer_costs.end());
        m_arrival.assign(s.buffer_arrivals.begin(), s.buffer_arrivals.end());
        m_sketch = s.sketch;
        m_quantile_cap = s.quantile_cap;
        if constexpr (tracks_memory) {
            m_batch_memory = std::move(s.waiting_batch_memory);
            m_batch_memory.reserve(m_options.lookahead);
            m_memory.assign(s.buffer_memory.begin(), s.buffer_memory.end());
        }
    }

    static options checked(const options& opt) {
        validate(opt);
        return opt;
    }

    [[nodiscard]] std::size_t round_size() const noexcept {
        return m_options.batch_size * m_options.lookahead;
    }
    [[nodiscard]] std::size_t waiting_batches() const noexcept {
        return m_batch_cost.size() - m_next_batch;
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

    static constexpr bool tracks_memory = memory_estimator<Estimator, Record>;
    static constexpr bool truncating = truncating_estimator<Estimator, Record>;

    static std::string number(double x) {
        char text[32];
        const auto written = std::to_chars(text, text + sizeof text, x);
        return std::string(text, written.ptr);
    }

    // The throws live in their own functions so the per-record path stays small.
    [[noreturn]] static void throw_bad_pack(std::size_t item, std::uint32_t pack, std::size_t packs) {
        throw error("bcl::balancer: the partitioner put item " + std::to_string(item) + " in pack " +
                    std::to_string(pack) + " of a window of " + std::to_string(packs) + " packs");
    }

    [[noreturn]] void throw_bad_estimate(const char* what, double value) const {
        throw error("bcl::balancer: record " + std::to_string(m_stats.records_in) + " has " + what +
                    " " + number(value) + "; it must be >= 0 and at most bcl::max_estimate (" +
                    number(max_estimate) + ")");
    }

    double checked_cost(const Record& r) {
        const auto cost = static_cast<double>(std::invoke(m_estimator, r));
        // One comparison each way also rejects NaN and both infinities.
        if (cost >= 0.0 && cost <= max_estimate) [[likely]]
            return cost;
        throw_bad_estimate("cost estimate", cost);
    }

    double checked_memory(const Record& r) {
        if constexpr (tracks_memory) {
            const auto memory = static_cast<double>(m_estimator.memory(r));
            if (memory >= 0.0 && memory <= max_estimate) [[likely]]
                return memory;
            throw_bad_estimate("memory estimate", memory);
        } else {
            (void)r;
            return 0.0;
        }
    }

    struct estimate {
        double cost;     // what balancing uses: capped when the record was capped
        double memory;   // 0 without a memory estimator
        double observed; // the first, uncapped estimate, which feeds the quantile cap
        double cap;      // the cap in force for this record (+infinity for none)
        bool capped;
    };

    // The cap in force for the next record: +infinity when there is none yet. A quantile cap is
    // read from the sketch when the warm-up ends and then every quantile_cap_refresh records,
    // since a read walks the sketch's buckets and a p99 moves slowly anyway. accept() keeps what
    // was read, so a push that fails changes nothing.
    [[nodiscard]] double current_cap() const noexcept {
        const cap_options& cap = m_options.cap;
        if (cap.kind == cap_kind::fixed) return cap.value;
        if (cap.kind != cap_kind::quantile) return HUGE_VAL;
        const std::uint64_t seen = m_sketch.count();
        const std::size_t warmup = cap_warmup(cap);
        if (seen < warmup) return HUGE_VAL;
        if (seen == warmup || (seen - warmup) % quantile_cap_refresh == 0)
            return m_sketch.quantile(cap.quantile);
        return m_quantile_cap;
    }

    // Estimates cost and memory, applies the cap (truncating the record if so configured) and
    // checks the memory budget. Changes nothing in the balancer, so a throw leaves it as it was.
    estimate estimate_and_cap(Record& r) {
        estimate e{checked_cost(r), 0.0, 0.0, HUGE_VAL, false};
        e.observed = e.cost;
        if (m_costs_only) [[likely]]
            return e; // no cap, no memory: the estimate is the cost, and nothing else is looked at
        const double cap = current_cap();
        e.cap = cap;
        if (e.cost > cap) {
            e.capped = true;
            if constexpr (truncating) {
                if (m_options.cap.action == cap_action::truncate) {
                    m_estimator.truncate(r, cap);
                    e.cost = checked_cost(r);
                }
            }
            e.cost = std::min(e.cost, cap);
        }
        e.memory = checked_memory(r);
        if (m_options.memory_budget > 0.0 && e.memory > m_options.memory_budget) [[unlikely]]
            throw_over_budget(e.memory);
        return e;
    }

    // A round the memory repair could not fit. When the round's total memory alone exceeds
    // packs * budget no split can fit, and the message says so.
    [[noreturn]] void throw_round_over_budget(std::span<const double> round_memory, std::size_t packs,
                                              double heaviest) const {
        double total = 0.0;
        for (const double m : round_memory) total += m;
        const double budget = m_options.memory_budget;
        const double per_batch = total / static_cast<double>(packs);
        throw error("bcl::balancer: the " + std::to_string(round_memory.size()) + " records of round " +
                    std::to_string(m_round) + " could not be split into " + std::to_string(packs) +
                    " batches within memory_budget " + number(budget) +
                    " (the best split found has a batch of " + number(heaviest) + "; " +
                    (per_batch > budget ? "no split can fit: together they need " + number(per_batch) +
                                              " per batch on average"
                                        : "they need " + number(per_batch) + " per batch on average") +
                    "); the records are still buffered");
    }

    [[noreturn]] void throw_over_budget(double memory) const {
        throw error("bcl::balancer: record " + std::to_string(m_stats.records_in) +
                    " alone needs memory " + number(memory) + ", over the batch budget of " +
                    number(m_options.memory_budget));
    }

    // The record is already in m_buffer; nothing below can throw (capacity is reserved).
    void accept(const estimate& e) noexcept {
        m_costs.push_back(e.cost);
        if constexpr (tracks_memory) m_memory.push_back(e.memory);
        m_arrival.push_back(m_stats.records_in);
        m_arrival_cost_total += e.cost;
        if (m_options.cap.kind == cap_kind::quantile) {
            m_quantile_cap = e.cap;
            m_sketch.add(e.observed);
        }
        if (e.capped) ++m_stats.records_capped;
        ++m_stats.records_in;
    }

    // Sliding policy, earliest-deadline-first: a record first in the buffer at round r0 must leave
    // by round r0 + max_age. The buffer is in arrival order, so deadlines never decrease along it,
    // and this round must take enough of the oldest records that every later deadline can still
    // be met at K*B records per round: max over positions p of (p + 1) - (deadline_p - now) * K*B.
    // options::validate guarantees this never exceeds K*B.
    [[nodiscard]] std::size_t records_due(std::size_t take) const noexcept {
        const std::uint64_t capacity = m_capacity;
        const std::uint64_t per_round = round_size();
        const std::uint64_t max_age = m_options.max_age;
        const std::uint64_t now = m_round;
        // A record's first round: 0 for the first `capacity` arrivals, then one more per K*B.
        // Arrivals only grow along the buffer, so the records of one first round are contiguous,
        // and within them (p + 1) - (deadline - now) * K*B is largest at the last: one binary
        // search per first round present (a handful) instead of a step per record.
        // Unsigned throughout: a term below zero asks for nothing and is skipped, never computed.
        std::uint64_t due = 0;
        const auto arrivals_end = m_arrival.end();
        for (auto group = m_arrival.begin(); group != arrivals_end;) {
            const std::uint64_t arrival = *group;
            const std::uint64_t first_round = arrival < capacity ? 0 : (arrival - capacity) / per_round + 1;
            const std::uint64_t next_round_from = capacity + first_round * per_round;
            group = std::lower_bound(group, arrivals_end, next_round_from);
            const auto last = static_cast<std::uint64_t>(group - m_arrival.begin()); // p + 1 of its last
            const std::uint64_t deadline = first_round + max_age;
            const std::uint64_t rounds_left = deadline > now ? deadline - now : 0;
            if (rounds_left <= last / per_round) due = std::max(due, last - rounds_left * per_round);
        }
        return static_cast<std::size_t>(std::min<std::uint64_t>(due, take));
    }

    // The total cost the round's `take` records should have: `take` times the long-run mean cost
    // of arrivals, plus a fraction of what the buffer holds above (or below) that mean. Without
    // that feedback the buffer's surplus is a random walk (each round removes exactly the mean,
    // arrivals add the mean plus noise) until it can no longer meet the target, and the final
    // drain pays for all of it at once.
    // Once the input has ended the buffer is all that is left, so its surplus is spread evenly
    // over the remaining rounds (each takes its share of what is held) rather than left to the last.
    [[nodiscard]] double round_target(std::size_t take) const noexcept {
        // Four running sums, so the adds do not each wait for the previous one: the buffer holds
        // two windows or more, and a single chain of adds was a visible part of a sliding round.
        double lane[4] = {0.0, 0.0, 0.0, 0.0};
        std::size_t i = 0;
        for (; i + 4 <= m_costs.size(); i += 4)
            for (std::size_t l = 0; l < 4; ++l) lane[l] += m_costs[i + l];
        for (; i < m_costs.size(); ++i) lane[0] += m_costs[i];
        const double held = (lane[0] + lane[1]) + (lane[2] + lane[3]);
        const auto held_records = static_cast<double>(m_costs.size());
        if (m_finished) return held * static_cast<double>(take) / held_records;
        const double mean = m_arrival_cost_total / static_cast<double>(m_stats.records_in);
        const double surplus = held - mean * held_records;
        return mean * static_cast<double>(take) + surplus_feedback * surplus;
    }

    // Chooses the round's records, repartitions them into packs, and moves every chosen record to
    // its batch in emission order; the records left over stay in the buffer, in arrival order.
    void run_round() {
        const std::size_t n = m_buffer.size();
        const std::size_t take = std::min(n, round_size());
        if (take == n) {
            // Every tumbling round, and the last rounds of a sliding drain: the whole buffer goes,
            // so there is nothing to choose, gather or compact.
            partition_round<true>(m_costs, m_memory);
            m_buffer.clear();
            m_costs.clear();
            m_arrival.clear();
            m_memory.clear();
        } else {
            m_chosen.resize(n);
            m_selector(std::span<const double>(m_costs), records_due(take), take,
                       round_target(take), std::span<std::uint8_t>(m_chosen));
            // Gathered without branches: which slots were chosen is a coin flip for the predictor.
            // Each slot is written at the next free place, which only advances past a chosen one;
            // exactly `take` are chosen, so one spare place at the end takes the rest.
            m_round_costs.resize(take + 1);
            m_round_slots.resize(take + 1);
            if constexpr (tracks_memory) m_round_memory.resize(take + 1);
            std::size_t at = 0;
            for (std::size_t i = 0; i < n; ++i) {
                m_round_costs[at] = m_costs[i];
                if constexpr (tracks_memory) m_round_memory[at] = m_memory[i];
                m_round_slots[at] = static_cast<std::uint32_t>(i);
                at += m_chosen[i];
            }
            m_round_costs.resize(take);
            m_round_slots.resize(take);
            if constexpr (tracks_memory) m_round_memory.resize(take);
            partition_round<false>(m_round_costs, m_round_memory);
            compact_buffer();
        }
        ++m_round;
    }

    // A wrong count would silently break the batch-size contract, so the partitioner's (and the
    // memory repair's) output is checked: O(n). With `sum`, the same pass also sums each pack's
    // costs and memory into m_pack_cost and m_pack_memory (scratch: the round is not committed).
    template <bool sum = false>
    void check_pack_sizes(pack_shape shape, std::span<const double> round_costs,
                          std::span<const double> round_memory) {
        const std::size_t n = round_costs.size();
        m_next_slot.assign(shape.packs, 0);
        if constexpr (sum) {
            m_pack_cost.assign(shape.packs, 0.0);
            if constexpr (tracks_memory) m_pack_memory.assign(shape.packs, 0.0);
        }
        for (std::size_t i = 0; i < n; ++i) {
            const std::uint32_t p = m_pack_of[i];
            if (p >= shape.packs) [[unlikely]]
                throw_bad_pack(i, p, shape.packs);
            ++m_next_slot[p];
            if constexpr (sum) {
                m_pack_cost[p] += round_costs[i];
                if constexpr (tracks_memory) m_pack_memory[p] += round_memory[i];
            }
        }
        for (std::size_t p = 0; p < shape.packs; ++p)
            if (m_next_slot[p] != shape.capacity(p, n))
                throw error("bcl::balancer: the partitioner put " + std::to_string(m_next_slot[p]) +
                            " items in pack " + std::to_string(p) + ", which must hold exactly " +
                            std::to_string(shape.capacity(p, n)));
    }

    // Partitions the round's records, given by their costs and memory estimates in buffer order:
    // the whole buffer, or the slots listed in m_round_slots. Everything that can throw (the
    // partitioner, the memory repair, the checks of their output, making room for the delay
    // counts) runs before anything the balancer keeps is touched, so a round that throws leaves
    // the balancer as it was; the rest cannot throw.
    template <bool whole_buffer>
    void partition_round(std::span<const double> round_costs, std::span<const double> round_memory) {
        const std::size_t n = round_costs.size();
        const std::size_t b = m_options.batch_size;
        const std::size_t packs = (n + b - 1) / b;
        const bool has_short = n % b != 0;
        const pack_shape shape{packs, b};

        m_pack_of.resize(n);
        partition_summary summary =
            m_partitioner(round_costs, shape, std::span<std::uint32_t>(m_pack_of));
        if constexpr (tracks_memory) {
            if (m_options.memory_budget > 0.0) {
                check_pack_sizes(shape, round_costs, round_memory);
                const double heaviest = m_memory_repair(round_costs, round_memory, shape,
                                                        m_pack_of, m_options.memory_budget);
                if (heaviest > m_options.memory_budget) throw_round_over_budget(round_memory, packs, heaviest);
            }
        }
        check_pack_sizes<true>(shape, round_costs, round_memory);

        // Delays (see place_records) run from 0 to at most `widest` - 1. A round is never empty.
        const std::uint64_t first_batch = m_stats.batches; // every earlier batch was handed out
        const std::uint64_t arrival_batch = m_arrival[slot_of<whole_buffer>(0)] / b;
        // The oldest record arrived first and the last batch goes out last: no delay is larger.
        const std::uint64_t last_batch = first_batch + packs - 1;
        const std::size_t widest =
            static_cast<std::size_t>(last_batch > arrival_batch ? last_batch - arrival_batch : 0) + 1;
        m_delay_counts.assign(delay_tables * widest, 0);
        m_stats.delay_histogram.reserve(widest);

        // Committed from here on: nothing below throws.
        // Emission order: full packs shuffled, the short pack (always pack packs-1) last.
        const std::size_t full_packs = packs - (has_short ? 1 : 0);
        m_emit_rank.resize(packs);
        for (std::size_t p = 0; p < packs; ++p) m_emit_rank[p] = static_cast<std::uint32_t>(p);
        if (m_options.shuffle_packs) detail::shuffle(m_emit_rank.data(), full_packs, m_rng);

        if (has_short || packs != m_options.lookahead || m_options.memory_budget > 0.0)
            summary.heaviest = *std::max_element(m_pack_cost.begin(), m_pack_cost.end());
        if (m_options.largest_first && m_round == 0 && full_packs > 0) {
            // The pack that needs the most memory (cost, without a memory estimator) goes first.
            const std::vector<double>& size = tracks_memory ? m_pack_memory : m_pack_cost;
            const auto largest = static_cast<std::size_t>(
                std::max_element(size.begin(), size.begin() + static_cast<std::ptrdiff_t>(full_packs)) -
                size.begin());
            const auto first = static_cast<std::size_t>(
                std::find(m_emit_rank.begin(), m_emit_rank.end(), 0U) - m_emit_rank.begin());
            std::swap(m_emit_rank[largest], m_emit_rank[first]);
        }
        // Per-pack sums, indexed by emission rank (capacity for K packs is reserved).
        m_batch_cost.resize(packs);
        for (std::size_t p = 0; p < packs; ++p) m_batch_cost[m_emit_rank[p]] = m_pack_cost[p];
        if constexpr (tracks_memory) {
            m_batch_memory.resize(packs);
            for (std::size_t p = 0; p < packs; ++p) m_batch_memory[m_emit_rank[p]] = m_pack_memory[p];
        }

        // Counting sort of slots by emission rank.
        m_next_slot.resize(packs);
        for (std::size_t rank = 0; rank < packs; ++rank)
            m_next_slot[rank] = static_cast<std::uint32_t>(rank * b);

        // Records are moved to their batch's place in m_ready in the same pass. In the steady
        // state m_ready already holds a round's worth of (handed-out) records, which are simply
        // assigned over; otherwise the places are listed first and the records gathered after.
        if (m_ready.size() == n) {
            place_records<whole_buffer, true>(n, first_batch, arrival_batch, widest);
        } else {
            m_slot_order.resize(n);
            place_records<whole_buffer, false>(n, first_batch, arrival_batch, widest);
            m_ready.clear();
            for (std::size_t k = 0; k < n; ++k) m_ready.push_back(std::move(m_buffer[m_slot_order[k]]));
        }
        merge_delays(widest);
        m_next_batch = 0;

        ++m_stats.windows;
        if (!has_short && packs == m_options.lookahead)
            m_stats.gap_to_lower_bound.add(summary.lower_bound > 0.0
                                               ? std::max(0.0, summary.heaviest / summary.lower_bound - 1.0)
                                               : 0.0);
    }

    // The buffer slot of the round's i-th record: the whole buffer, or the slots listed in
    // m_round_slots.
    template <bool whole_buffer>
    [[nodiscard]] std::uint32_t slot_of(std::size_t i) const noexcept {
        if constexpr (whole_buffer) return static_cast<std::uint32_t>(i);
        else return m_round_slots[i];
    }

    // Puts each of the round's n records at its place in emission order (m_next_slot holds each
    // batch's next place): moved into m_ready when `into_ready`, else listed in m_slot_order. And
    // counts each record's delay: its batch's position in the output stream minus the batch it
    // arrived in (arrival / B). Slots are in buffer order, so arrivals only grow and the arrival
    // batch is stepped forward instead of divided for (divided for only past a gap of several
    // batches, which a sliding buffer has where an old record waits). Per record only a count is
    // kept, in one of delay_tables interleaved tables of `widest` counts (a record rarely waits
    // for the previous one's increment of the same counter that way); merge_delays reads the
    // round's statistics off them.
    template <bool whole_buffer, bool into_ready>
    void place_records(std::size_t n, std::uint64_t first_batch, std::uint64_t arrival_batch,
                       std::size_t widest) noexcept {
        const std::size_t b = m_options.batch_size;
        std::uint64_t next_batch_start = (arrival_batch + 1) * b;
        std::uint32_t* const counts = m_delay_counts.data();
        for (std::size_t i = 0; i < n; ++i) {
            const std::uint32_t rank = m_emit_rank[m_pack_of[i]];
            const std::uint32_t slot = slot_of<whole_buffer>(i);
            const std::uint32_t place = m_next_slot[rank]++;
            if constexpr (into_ready) m_ready[place] = std::move(m_buffer[slot]);
            else m_slot_order[place] = slot;
            const std::uint64_t arrival = m_arrival[slot];
            if (arrival >= next_batch_start + max_batch_steps * b) [[unlikely]] {
                arrival_batch = arrival / b;
                next_batch_start = (arrival_batch + 1) * b;
            }
            while (arrival >= next_batch_start) {
                ++arrival_batch;
                next_batch_start += b;
            }
            const std::uint64_t emitted_batch = first_batch + rank;
            // A record of a later arrival batch can go out in an earlier batch: delay 0. Masked,
            // not selected: which records do is a coin flip, and GCC makes a selection a branch.
            const std::uint64_t late = std::uint64_t{0} - std::uint64_t{emitted_batch > arrival_batch};
            const std::uint64_t delay = (emitted_batch - arrival_batch) & late;
            ++counts[(i % delay_tables) * widest + delay];
        }
    }

    // Adds the round's delay counts (delay_tables interleaved tables of `widest` counts) to the
    // statistics: their moments, extremes and histogram. The histogram grows to the largest delay
    // seen (room for `widest` was made before the round was committed, so this cannot throw).
    void merge_delays(std::size_t widest) noexcept {
        std::uint64_t count = 0;
        std::uint64_t sum = 0;
        std::uint64_t square_sum = 0;
        std::uint64_t lowest = widest;
        std::uint64_t highest = 0;
        std::vector<std::uint64_t>& histogram = m_stats.delay_histogram;
        for (std::uint64_t d = 0; d < widest; ++d) {
            std::uint64_t c = 0;
            for (std::size_t t = 0; t < delay_tables; ++t) c += m_delay_counts[t * widest + d];
            if (c == 0) continue;
            count += c;
            sum += c * d;
            square_sum += c * d * d;
            lowest = std::min(lowest, d);
            highest = d;
            if (histogram.size() <= d) histogram.resize(static_cast<std::size_t>(d) + 1, 0);
            histogram[static_cast<std::size_t>(d)] += c;
        }
        if (count == 0) return;
        const auto records = static_cast<double>(count);
        const double mean = static_cast<double>(sum) / records;
        const double m2 = static_cast<double>(square_sum) - static_cast<double>(sum) * mean;
        m_stats.delay_batches.merge(running_stats::from_raw(
            {count, mean, std::max(0.0, m2), static_cast<double>(lowest), static_cast<double>(highest)}));
        m_stats.max_delay_batches = std::max(m_stats.max_delay_batches, highest);
    }

    // Drops the moved-from chosen records and closes the gaps, keeping arrival order.
    void compact_buffer() noexcept {
        std::size_t kept = 0;
        for (std::size_t i = 0; i < m_buffer.size(); ++i) {
            if (m_chosen[i]) continue;
            if (kept != i) {
                m_buffer[kept] = std::move(m_buffer[i]);
                m_costs[kept] = m_costs[i];
                m_arrival[kept] = m_arrival[i];
                if constexpr (tracks_memory) m_memory[kept] = m_memory[i];
            }
            ++kept;
        }
        while (m_buffer.size() > kept) m_buffer.pop_back();
        m_costs.resize(kept);
        m_arrival.resize(kept);
        if constexpr (tracks_memory) m_memory.resize(kept);
    }

    static constexpr double surplus_feedback = BCL_SURPLUS_FEEDBACK;
    static constexpr std::size_t delay_tables = 4; // interleaved delay counts, see place_records
    static constexpr std::uint64_t max_batch_steps = 8; // see place_records
    static constexpr std::size_t delays_reserved = 4096; // delay counts made room for up front
    static constexpr std::uint64_t quantile_cap_refresh = 64;

    Estimator m_estimator;
    Partitioner m_partitioner;
    options m_options;
    std::size_t m_capacity; // buffer_capacity(m_options)
    bool m_costs_only;      // no cap and no memory estimate: push() estimates the cost alone
    detail::splitmix64 m_rng;
    detail::target_selector m_selector;
    statistics m_stats;

    std::vector<Record> m_buffer;          // records pushed and not yet chosen, in arrival order
    std::vector<double> m_costs;           // their estimated costs
    std::vector<std::uint64_t> m_arrival;  // their arrival positions
    double m_arrival_cost_total = 0.0;     // sum of every accepted cost, for the long-run mean
    std::uint64_t m_round = 0;             // rounds run so far
    std::vector<Record> m_ready;           // the last round's records, batch after batch
    std::vector<double> m_batch_cost;      // estimated cost of each batch in m_ready
    std::size_t m_next_batch = 0;          // next batch of m_ready to hand out
    bool m_finished = false;
    double m_last_batch_cost = 0.0;

    std::vector<double> m_memory;          // memory estimates of the buffered records
    std::vector<double> m_batch_memory;    // memory of each batch in m_ready
    std::vector<double> m_round_memory;    // memory of the chosen slots
    std::vector<double> m_pack_cost;       // per pack of the round being formed: its cost ...
    std::vector<double> m_pack_memory;     // ... and memory, before packs become batches
    quantile_sketch m_sketch;              // the stream's costs, for a quantile cap
    double m_quantile_cap = HUGE_VAL;      // the quantile cap last read from m_sketch
    detail::memory_repair m_memory_repair;
    std::vector<std::uint8_t> m_chosen;      // per buffer slot: taken this round
    std::vector<double> m_round_costs;       // costs of the chosen slots, in slot order
    std::vector<std::uint32_t> m_round_slots; // the chosen slots
    std::vector<std::uint32_t> m_pack_of;    // partitioner output: pack of each chosen slot
    std::vector<std::uint32_t> m_emit_rank;  // pack -> position in emission order
    std::vector<std::uint32_t> m_next_slot;  // counting-sort cursor per emission rank
    std::vector<std::uint32_t> m_slot_order; // buffer slots in emission order
    std::vector<std::uint32_t> m_delay_counts; // per round: records by delay, delay_tables times
};

} // namespace bcl
