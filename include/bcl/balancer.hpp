#pragma once
// bcl::balancer: the push/pull core. Buffers a window of K*B records, repartitions it into K
// batches of exactly B records with balanced estimated cost, and hands the batches out.

#include <bcl/cost_estimator.hpp>
#include <bcl/detail/random.hpp>
#include <bcl/detail/target_selection.hpp>
#include <bcl/error.hpp>
#include <bcl/lpt_swap_partitioner.hpp>
#include <bcl/options.hpp>
#include <bcl/partitioner.hpp>
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
#include <type_traits>
#include <utility>
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
          m_options(checked(opt)), m_rng(opt.seed) {
        const std::size_t buffer = buffer_capacity(m_options);
        const std::size_t window = round_size();
        m_buffer.reserve(buffer);
        m_costs.reserve(buffer);
        m_arrival.reserve(buffer);
        m_chosen.reserve(buffer);
        m_ready.reserve(window);
        m_round_costs.reserve(window);
        m_round_slots.reserve(window);
        m_pack_of.reserve(window);
        m_slot_order.reserve(window);
        m_batch_cost.reserve(m_options.lookahead);
        m_emit_rank.reserve(m_options.lookahead);
        m_next_slot.reserve(m_options.lookahead);
        m_stats.delay_histogram.assign(max_delay_bound(m_options) + 1, 0);
    }

    /// Adds one record (moved from). Estimates its cost first: if the estimator throws, or the
    /// cost is NaN, infinite or negative (bcl::error naming the record position and value), the
    /// record is left with the caller and the balancer is unchanged.
    /// Throws bcl::error after finish(), or when the buffer is full while batches of the previous
    /// round are still waiting to be popped (pop them first; see can_push()).
    void push(Record&& r) {
        make_room();
        const double cost = checked_cost(r);
        m_buffer.push_back(std::move(r));
        accept(cost);
    }

    /// Adds a copy of `r`; otherwise as push(Record&&).
    void push(const Record& r)
        requires std::copy_constructible<Record>
    {
        make_room();
        const double cost = checked_cost(r);
        m_buffer.push_back(r);
        accept(cost);
    }

    /// True if push() would accept a record now.
    [[nodiscard]] bool can_push() const noexcept {
        return !m_finished && (m_buffer.size() < buffer_capacity(m_options) || waiting_batches() == 0);
    }

    /// The next batch, once one is ready: when the buffer is full, or after finish().
    /// Returns std::nullopt when more input is needed (or, after finish(), when all is drained).
    [[nodiscard]] std::optional<batch_type> pop() {
        if (waiting_batches() == 0) {
            if (m_buffer.empty() || (!m_finished && m_buffer.size() < buffer_capacity(m_options)))
                return std::nullopt;
            run_round();
        }
        const std::size_t b = m_options.batch_size;
        const std::size_t offset = m_next_batch * b;
        const std::size_t size = std::min(b, m_ready.size() - offset);
        m_last_batch_cost = m_batch_cost[m_next_batch];
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

    void make_room() {
        if (m_finished)
            throw error("bcl::balancer::push: called after finish() (record " +
                        std::to_string(m_stats.records_in) + ")");
        if (m_buffer.size() < buffer_capacity(m_options)) return;
        if (waiting_batches() != 0)
            throw error("bcl::balancer::push: the buffer is full (" +
                        std::to_string(buffer_capacity(m_options)) + " records) and " +
                        std::to_string(waiting_batches()) +
                        " batches are still waiting; pop() them before pushing record " +
                        std::to_string(m_stats.records_in));
        run_round();
    }

    template <class R>
    double checked_cost(const R& r) {
        const auto cost = static_cast<double>(std::invoke(m_estimator, r));
        if (std::isfinite(cost) && cost >= 0.0) return cost;
        char value[32];
        const auto written = std::to_chars(value, value + sizeof value, cost);
        throw error("bcl::balancer: record " + std::to_string(m_stats.records_in) + " has cost " +
                    std::string(value, written.ptr) +
                    "; a cost estimate must be finite and >= 0");
    }

    // The record is already in m_buffer; nothing below can throw (capacity is reserved).
    void accept(double cost) noexcept {
        m_costs.push_back(cost);
        m_arrival.push_back(m_stats.records_in);
        m_arrival_cost_total += cost;
        ++m_stats.records_in;
    }

    // Sliding policy, earliest-deadline-first: a record first in the buffer at round r0 must leave
    // by round r0 + max_age. The buffer is in arrival order, so deadlines never decrease along it,
    // and this round must take enough of the oldest records that every later deadline can still
    // be met at K*B records per round: max over positions p of (p + 1) - (deadline_p - now) * K*B.
    // options::validate guarantees this never exceeds K*B.
    [[nodiscard]] std::size_t records_due(std::size_t take) const noexcept {
        const auto capacity = static_cast<std::int64_t>(buffer_capacity(m_options));
        const auto per_round = static_cast<std::int64_t>(round_size());
        const auto max_age = static_cast<std::int64_t>(m_options.max_age);
        const auto now = static_cast<std::int64_t>(m_round);
        std::int64_t due = 0;
        for (std::size_t p = 0; p < m_arrival.size(); ++p) {
            const auto seen = static_cast<std::int64_t>(m_arrival[p]) + 1;
            const std::int64_t first_round =
                seen <= capacity ? 0 : (seen - capacity + per_round - 1) / per_round;
            const std::int64_t rounds_left = std::max<std::int64_t>(first_round + max_age - now, 0);
            due = std::max(due, static_cast<std::int64_t>(p + 1) - rounds_left * per_round);
        }
        return std::min(static_cast<std::size_t>(due), take);
    }

    // Chooses the round's records, repartitions them into packs, and moves every chosen record to
    // its batch in emission order; the records left over stay in the buffer, in arrival order.
    void run_round() {
        const std::size_t n = m_buffer.size();
        const std::size_t take = std::min(n, round_size());
        m_chosen.resize(n);
        if (take == n) {
            std::fill(m_chosen.begin(), m_chosen.end(), std::uint8_t{1});
        } else {
            const double mean_arrival =
                m_arrival_cost_total / static_cast<double>(m_stats.records_in);
            m_selector(std::span<const double>(m_costs), records_due(take), take,
                       mean_arrival * static_cast<double>(take), std::span<std::uint8_t>(m_chosen));
        }
        m_round_costs.clear();
        m_round_slots.clear();
        for (std::size_t i = 0; i < n; ++i) {
            if (!m_chosen[i]) continue;
            m_round_costs.push_back(m_costs[i]);
            m_round_slots.push_back(static_cast<std::uint32_t>(i));
        }
        partition_round();
        compact_buffer();
        ++m_round;
    }

    void partition_round() {
        const std::size_t n = m_round_costs.size();
        const std::size_t b = m_options.batch_size;
        const std::size_t packs = (n + b - 1) / b;
        const bool has_short = n % b != 0;
        const pack_shape shape{packs, b};

        m_pack_of.resize(n);
        const partition_summary summary = m_partitioner(
            std::span<const double>(m_round_costs), shape, std::span<std::uint32_t>(m_pack_of));

        // Emission order: full packs shuffled, the short pack (always pack packs-1) last.
        m_emit_rank.resize(packs);
        for (std::size_t p = 0; p < packs; ++p) m_emit_rank[p] = static_cast<std::uint32_t>(p);
        if (m_options.shuffle_packs)
            detail::shuffle(m_emit_rank.data(), packs - (has_short ? 1 : 0), m_rng);

        // Counting sort of slots by emission rank. First check that the partitioner filled every
        // pack exactly: a wrong count would silently break the batch-size contract.
        m_next_slot.assign(packs, 0);
        for (std::size_t i = 0; i < n; ++i) {
            if (m_pack_of[i] >= packs)
                throw error("bcl::balancer: the partitioner put item " + std::to_string(i) +
                            " in pack " + std::to_string(m_pack_of[i]) + " of a window of " +
                            std::to_string(packs) + " packs");
            ++m_next_slot[m_pack_of[i]];
        }
        for (std::size_t p = 0; p < packs; ++p)
            if (m_next_slot[p] != shape.capacity(p, n))
                throw error("bcl::balancer: the partitioner put " + std::to_string(m_next_slot[p]) +
                            " items in pack " + std::to_string(p) + ", which must hold exactly " +
                            std::to_string(shape.capacity(p, n)));
        for (std::size_t rank = 0; rank < packs; ++rank)
            m_next_slot[rank] = static_cast<std::uint32_t>(rank * b);

        m_slot_order.resize(n);
        m_batch_cost.assign(packs, 0.0);
        const std::uint64_t first_batch = m_stats.batches; // every earlier batch was handed out
        for (std::size_t i = 0; i < n; ++i) {
            const std::uint32_t rank = m_emit_rank[m_pack_of[i]];
            const std::uint32_t slot = m_round_slots[i];
            m_slot_order[m_next_slot[rank]++] = slot;
            m_batch_cost[rank] += m_round_costs[i];
            const std::uint64_t arrival_batch = m_arrival[slot] / b;
            const std::uint64_t emitted_batch = first_batch + rank;
            const std::uint64_t delay = emitted_batch > arrival_batch ? emitted_batch - arrival_batch : 0;
            m_stats.max_delay_batches = std::max(m_stats.max_delay_batches, delay);
            m_stats.delay_batches.add(static_cast<double>(delay));
            ++m_stats.delay_histogram[std::min<std::uint64_t>(delay, m_stats.delay_histogram.size() - 1)];
        }

        m_ready.clear();
        for (std::size_t k = 0; k < n; ++k) m_ready.push_back(std::move(m_buffer[m_slot_order[k]]));
        m_next_batch = 0;

        ++m_stats.windows;
        if (!has_short && packs == m_options.lookahead)
            m_stats.gap_to_lower_bound.add(summary.lower_bound > 0.0
                                               ? std::max(0.0, summary.heaviest / summary.lower_bound - 1.0)
                                               : 0.0);
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
            }
            ++kept;
        }
        while (m_buffer.size() > kept) m_buffer.pop_back();
        m_costs.resize(kept);
        m_arrival.resize(kept);
    }

    Estimator m_estimator;
    Partitioner m_partitioner;
    options m_options;
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

    std::vector<std::uint8_t> m_chosen;      // per buffer slot: taken this round
    std::vector<double> m_round_costs;       // costs of the chosen slots, in slot order
    std::vector<std::uint32_t> m_round_slots; // the chosen slots
    std::vector<std::uint32_t> m_pack_of;    // partitioner output: pack of each chosen slot
    std::vector<std::uint32_t> m_emit_rank;  // pack -> position in emission order
    std::vector<std::uint32_t> m_next_slot;  // counting-sort cursor per emission rank
    std::vector<std::uint32_t> m_slot_order; // buffer slots in emission order
};

} // namespace bcl
