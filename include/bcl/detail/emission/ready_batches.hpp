#pragma once
// The batches of the last round: its records laid out batch after batch in emission order, with
// each batch's estimated cost and memory, handed out one at a time.

#include <bcl/detail/config.hpp>

#include <bcl/detail/saved_part.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

namespace bcl::detail {

/// ready_batches' part of a saved state, whatever its records' type: the batches formed and not
/// yet popped (their costs, and memory with a memory estimate), and their records' arrival
/// positions, which the state's pending records lead with.
struct ready_batches_saved {
    std::vector<double> waiting_batch_costs;
    std::vector<double> waiting_batch_memory;
    std::vector<std::uint64_t> waiting_arrivals;

    [[nodiscard]] std::size_t waiting_records() const noexcept { return waiting_arrivals.size(); }

    /// At most `lookahead` batches of `batch_size` records.
    template <class Io, class Part>
    static void fields(Io& io, Part& s, std::size_t lookahead, std::size_t batch_size,
                       bool tracks_memory) {
        const std::size_t with_memory = tracks_memory ? 2 : 1;
        io.length("the waiting batch count", s.waiting_batch_costs, lookahead, 8 * with_memory);
        io.items("the waiting batch costs", s.waiting_batch_costs);
        io.items("the waiting batch memory", s.waiting_batch_memory,
                 tracks_memory ? s.waiting_batch_costs.size() : 0);
        io.length("the waiting record count", s.waiting_arrivals, lookahead * batch_size, 8);
        io.items("the waiting records' arrival positions", s.waiting_arrivals);
    }
    /// (How many records and batches wait, and which arrivals, is the snapshot's to check.)
    void check() const {
        for (const double c : waiting_batch_costs)
            check_saved(c >= 0.0 && c < HUGE_VAL, "an invalid batch cost");
        for (const double m : waiting_batch_memory)
            check_saved(m >= 0.0 && m < HUGE_VAL, "an invalid batch memory");
    }
};

/// A round's records move here from the buffer, each to its place in its batch (a counting sort
/// by batch), with its arrival position (a saved state names every record it holds by it);
/// pop() hands out batch after batch. In the steady state the storage holds the previous round's
/// handed-out records, which are assigned over; otherwise the places are listed first and the
/// records gathered after. Everything is reserved up front.
template <class Record>
class ready_batches {
public:
    /// A batch handed out: its records, estimated cost and memory (0 without a memory estimate).
    struct handed_out {
        std::span<Record> records;
        double cost;
        double memory;
    };

    void reserve(std::size_t window, std::size_t lookahead) {
        m_records.reserve(window);
        m_arrivals.reserve(window);
        m_cost.reserve(lookahead);
        m_memory.reserve(lookahead);
        m_next_place.reserve(lookahead);
        m_slot_order.reserve(window);
    }

    /// Batches formed and not yet handed out.
    [[nodiscard]] std::size_t waiting() const noexcept { return m_cost.size() - m_next; }
    /// Position of the next batch to hand out within the round.
    [[nodiscard]] std::size_t next() const noexcept { return m_next; }
    /// Records formed into batches and not yet handed out.
    [[nodiscard]] std::size_t waiting_records(std::size_t batch_size) const noexcept {
        return m_records.size() - std::min(m_records.size(), m_next * batch_size);
    }

    /// A new round of `packs` batches: pack p leaves as batch rank[p], with its cost and memory
    /// (memory empty without a memory estimate).
    void start(std::span<const std::uint32_t> rank, std::span<const double> pack_cost,
               std::span<const double> pack_memory) noexcept {
        m_cost.resize(rank.size());
        for (std::size_t p = 0; p < rank.size(); ++p) m_cost[rank[p]] = pack_cost[p];
        m_memory.resize(pack_memory.empty() ? 0 : rank.size());
        for (std::size_t p = 0; p < pack_memory.size(); ++p) m_memory[rank[p]] = pack_memory[p];
        m_next = 0;
    }

    /// Moves the round's n records from `buffered` (arrived at `arrivals`, by slot) to their
    /// batches: record i (at buffer slot slot_of(i)) goes to batch batch_of(i); `visit(i, slot,
    /// batch)` sees each on its way.
    template <class SlotOf, class BatchOf, class Visit>
    void place(std::size_t n, std::size_t batch_size, std::vector<Record>& buffered,
               std::span<const std::uint64_t> arrivals, SlotOf slot_of, BatchOf batch_of,
               Visit visit) noexcept {
        m_next_place.resize(m_cost.size());
        for (std::size_t r = 0; r < m_cost.size(); ++r)
            m_next_place[r] = static_cast<std::uint32_t>(r * batch_size);
        const bool in_place = m_records.size() == n;
        m_arrivals.resize(n); // reserved for a window: allocates nothing
        if (!in_place) m_slot_order.resize(n);
        for (std::size_t i = 0; i < n; ++i) {
            const std::uint32_t batch = batch_of(i);
            const std::uint32_t slot = slot_of(i);
            const std::uint32_t place = m_next_place[batch]++;
            if (in_place)
                m_records[place] = std::move(buffered[slot]);
            else
                m_slot_order[place] = slot;
            m_arrivals[place] = arrivals[slot];
            visit(i, slot, batch);
        }
        if (in_place) return;
        m_records.clear();
        for (std::size_t k = 0; k < n; ++k)
            m_records.push_back(std::move(buffered[m_slot_order[k]]));
    }

    /// The next batch (waiting() > 0).
    handed_out pop(std::size_t batch_size) noexcept {
        const std::size_t offset = m_next * batch_size;
        const std::size_t size = std::min(batch_size, m_records.size() - offset);
        const handed_out h{std::span<Record>(m_records.data() + offset, size), m_cost[m_next],
                           m_memory.empty() ? 0.0 : m_memory[m_next]};
        ++m_next;
        return h;
    }

    /// The waiting batches' records, costs and memory, in the order they will leave.
    [[nodiscard]] std::span<Record> waiting_span(std::size_t batch_size) noexcept {
        return std::span<Record>(m_records).subspan(m_records.size() - waiting_records(batch_size));
    }
    [[nodiscard]] std::span<const Record> waiting_span(std::size_t batch_size) const noexcept {
        return std::span<const Record>(m_records).subspan(m_records.size() -
                                                          waiting_records(batch_size));
    }
    [[nodiscard]] std::span<const std::uint64_t>
    waiting_arrivals(std::size_t batch_size) const noexcept {
        return std::span<const std::uint64_t>(m_arrivals)
            .subspan(m_arrivals.size() - waiting_records(batch_size));
    }
    [[nodiscard]] std::span<const double> waiting_costs() const noexcept {
        return std::span<const double>(m_cost).subspan(m_next);
    }
    [[nodiscard]] std::span<const double> waiting_memory() const noexcept {
        return m_memory.empty() ? std::span<const double>()
                                : std::span<const double>(m_memory).subspan(m_next);
    }

    /// Its part of a saved state (ready_batches_saved).
    using saved = ready_batches_saved;
    void save_into(saved& s, std::size_t batch_size) const {
        s.waiting_batch_costs.assign(waiting_costs().begin(), waiting_costs().end());
        s.waiting_batch_memory.assign(waiting_memory().begin(), waiting_memory().end());
        const std::span<const std::uint64_t> arrivals = waiting_arrivals(batch_size);
        s.waiting_arrivals.assign(arrivals.begin(), arrivals.end());
    }
    template <class Iterator>
    void restore_from(const saved& s, Iterator records) {
        restore(records, s.waiting_records(), s.waiting_arrivals, s.waiting_batch_costs,
                s.waiting_batch_memory);
    }

    /// Restoring: `count` waiting records moved from `records`, arrived at `arrivals`, in batches
    /// of these costs and memory.
    template <class Iterator>
    void restore(Iterator records, std::size_t count, std::span<const std::uint64_t> arrivals,
                 std::span<const double> cost, std::span<const double> memory) {
        for (std::size_t i = 0; i < count; ++i) m_records.push_back(std::move(*records++));
        m_arrivals.assign(arrivals.begin(), arrivals.end());
        m_cost.assign(cost.begin(), cost.end());
        m_memory.assign(memory.begin(), memory.end());
        m_next = 0;
    }

    void clear() noexcept {
        m_records.clear();
        m_arrivals.clear();
        m_cost.clear();
        m_memory.clear();
        m_next = 0;
    }

private:
    std::vector<Record> m_records;           // the round's records, batch after batch
    std::vector<std::uint64_t> m_arrivals;   // and their arrival positions
    std::vector<double> m_cost;              // estimated cost of each batch
    std::vector<double> m_memory;            // and its memory (with a memory estimator)
    std::size_t m_next = 0;                  // next batch to hand out
    std::vector<std::uint32_t> m_next_place; // counting-sort cursor per batch
    std::vector<std::uint32_t> m_slot_order; // buffer slots in emission order
};

} // namespace bcl::detail
