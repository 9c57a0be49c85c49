#pragma once
// The lookahead buffer: the records a balancer holds and has not yet formed into batches, in
// arrival order, with what balancing knows of each.

#include <bcl/detail/config.hpp>

#include <bcl/cost_estimator.hpp>
#include <bcl/detail/intake/record_estimator.hpp>
#include <bcl/detail/saved_part.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace bcl::detail {

/// record_buffer's part of a saved state, whatever its records' type: each buffered record's
/// cost, arrival position and memory (with a memory estimate), in arrival order; the records
/// themselves follow the waiting batches' in the state's pending records.
struct record_buffer_saved {
    std::vector<double> buffer_costs;
    std::vector<std::uint64_t> buffer_arrivals;
    std::vector<double> buffer_memory;

    /// At most `capacity` records.
    template <class Io, class Part>
    static void fields(Io& io, Part& s, std::size_t capacity, bool tracks_memory) {
        const std::size_t with_memory = tracks_memory ? 3 : 2;
        io.length("the buffered record count", s.buffer_costs, capacity, 8 * with_memory);
        io.items("the buffered costs", s.buffer_costs);
        io.items("the buffered arrival positions", s.buffer_arrivals, s.buffer_costs.size());
        io.items("the buffered memory", s.buffer_memory, tracks_memory ? s.buffer_costs.size() : 0);
    }
    /// (The arrival positions and the memory estimates, which the options bound, are the
    /// snapshot's to check.)
    void check() const {
        for (std::size_t i = 0; i < buffer_costs.size(); ++i)
            check_saved(buffer_costs[i] >= 0.0 && buffer_costs[i] <= max_estimate,
                        "an invalid cost for buffered record " + std::to_string(i));
    }
};

/// Records in arrival order, with their estimated costs, memory estimates (when tracked) and
/// arrival positions, side by side so a round reads the costs as one array. A round takes either
/// every record (the whole buffer, read in place) or the records a policy chose; `gather` lists
/// those, `compact` closes the gaps they leave. All storage is reserved up front: nothing here
/// allocates afterwards. Under calibration each record also keeps its `features` feature values (0:
/// none kept).
template <class Record, bool tracks_memory, std::size_t features = 0>
class record_buffer {
public:
    using features_type = std::array<double, features>;

    void reserve(std::size_t capacity) {
        m_records.reserve(capacity);
        m_costs.reserve(capacity);
        m_arrivals.reserve(capacity);
        m_chosen.reserve(capacity);
        m_round_costs.reserve(capacity + 1);
        m_round_slots.reserve(capacity + 1);
        if constexpr (tracks_memory) {
            m_memory.reserve(capacity);
            m_round_memory.reserve(capacity + 1);
        }
        if constexpr (features > 0) m_features.reserve(capacity);
    }

    [[nodiscard]] std::size_t size() const noexcept { return m_records.size(); }
    [[nodiscard]] bool empty() const noexcept { return m_records.empty(); }

    /// Appends a record of arrival position `arrival`, with its features under calibration
    /// (capacity is reserved: cannot throw).
    void push(Record&& r, const record_estimate& e, std::uint64_t arrival,
              const features_type& x = {}) noexcept {
        m_records.push_back(std::move(r));
        m_costs.push_back(e.cost);
        if constexpr (tracks_memory) m_memory.push_back(e.memory);
        m_arrivals.push_back(arrival);
        if constexpr (features > 0) m_features.push_back(x);
    }

    /// Drops the `count` most recent records (drop_last at the end of input).
    void drop_newest(std::size_t count) noexcept {
        for (std::size_t i = 0; i < count; ++i) {
            m_records.pop_back();
            m_costs.pop_back();
            m_arrivals.pop_back();
            if constexpr (tracks_memory) m_memory.pop_back();
            if constexpr (features > 0) m_features.pop_back();
        }
    }

    void clear() noexcept {
        m_records.clear();
        m_costs.clear();
        m_arrivals.clear();
        if constexpr (tracks_memory) m_memory.clear();
        if constexpr (features > 0) m_features.clear();
    }

    [[nodiscard]] std::vector<Record>& records() noexcept { return m_records; }
    [[nodiscard]] const std::vector<Record>& records() const noexcept { return m_records; }
    [[nodiscard]] std::span<const double> costs() const noexcept { return m_costs; }
    [[nodiscard]] std::span<const double> memory() const noexcept { return m_memory; }
    [[nodiscard]] std::span<const std::uint64_t> arrivals() const noexcept { return m_arrivals; }
    [[nodiscard]] std::span<const features_type> feature_values() const noexcept {
        return m_features;
    }
    /// Calibration: every cost replaced by `cost(features)` (new coefficients).
    template <class Cost>
    void reestimate(Cost&& cost) noexcept {
        for (std::size_t i = 0; i < m_costs.size(); ++i) m_costs[i] = cost(m_features[i]);
    }

    /// Per slot: 1 if the round takes it. Sized to the buffer for a policy to fill.
    [[nodiscard]] std::span<std::uint8_t> chosen() {
        m_chosen.resize(m_records.size());
        return m_chosen;
    }

    /// Lists the `take` chosen slots, their costs and memory, in slot order. Without branches:
    /// which slots were chosen is a coin flip for the predictor. Each slot is written at the next
    /// free place, which only advances past a chosen one; exactly `take` are chosen, so one spare
    /// place at the end takes the rest.
    void gather(std::size_t take) {
        m_round_costs.resize(take + 1);
        m_round_slots.resize(take + 1);
        if constexpr (tracks_memory) m_round_memory.resize(take + 1);
        std::size_t at = 0;
        for (std::size_t i = 0; i < m_records.size(); ++i) {
            m_round_costs[at] = m_costs[i];
            if constexpr (tracks_memory) m_round_memory[at] = m_memory[i];
            m_round_slots[at] = static_cast<std::uint32_t>(i);
            at += m_chosen[i];
        }
        m_round_costs.resize(take);
        m_round_slots.resize(take);
        if constexpr (tracks_memory) m_round_memory.resize(take);
    }
    [[nodiscard]] std::span<const double> round_costs() const noexcept { return m_round_costs; }
    [[nodiscard]] std::span<const double> round_memory() const noexcept { return m_round_memory; }
    [[nodiscard]] std::span<const std::uint32_t> round_slots() const noexcept {
        return m_round_slots;
    }

    /// The arrival position of the round's oldest record (`whole`: the round took every one).
    [[nodiscard]] std::uint64_t round_oldest(bool whole) const noexcept {
        return m_arrivals[whole ? 0 : m_round_slots[0]];
    }

    /// Step 6 of a round: the round's records (every one if `whole`) have left; the rest close
    /// up (compact).
    void release_round(bool whole) noexcept {
        if (whole)
            clear();
        else
            compact();
    }

    /// Drops the (moved-from) chosen records and closes the gaps, keeping arrival order.
    void compact() noexcept {
        std::size_t kept = 0;
        for (std::size_t i = 0; i < m_records.size(); ++i) {
            if (m_chosen[i]) continue;
            if (kept != i) {
                m_records[kept] = std::move(m_records[i]);
                m_costs[kept] = m_costs[i];
                m_arrivals[kept] = m_arrivals[i];
                if constexpr (tracks_memory) m_memory[kept] = m_memory[i];
                if constexpr (features > 0) m_features[kept] = m_features[i];
            }
            ++kept;
        }
        while (m_records.size() > kept) m_records.pop_back();
        m_costs.resize(kept);
        m_arrivals.resize(kept);
        if constexpr (tracks_memory) m_memory.resize(kept);
        if constexpr (features > 0) m_features.resize(kept);
    }

    /// Replaces the contents (restoring a saved state); `records` are moved from.
    template <class Iterator>
    void assign(Iterator records, std::span<const double> costs, std::span<const double> memory,
                std::span<const std::uint64_t> arrivals) {
        clear();
        for (std::size_t i = 0; i < costs.size(); ++i) m_records.push_back(std::move(*records++));
        m_costs.assign(costs.begin(), costs.end());
        m_arrivals.assign(arrivals.begin(), arrivals.end());
        if constexpr (tracks_memory) m_memory.assign(memory.begin(), memory.end());
    }

    /// Its part of a saved state (record_buffer_saved).
    using saved = record_buffer_saved;
    void save_into(saved& s) const {
        s.buffer_costs.assign(m_costs.begin(), m_costs.end());
        s.buffer_arrivals.assign(m_arrivals.begin(), m_arrivals.end());
        s.buffer_memory.assign(m_memory.begin(), m_memory.end());
    }
    template <class Iterator>
    void restore_from(const saved& s, Iterator records) {
        assign(records, s.buffer_costs, s.buffer_memory, s.buffer_arrivals);
    }

    /// Restoring: the features of the held records, recomputed from them.
    template <class Features>
    void assign_features(Features&& of) {
        m_features.clear();
        for (std::size_t i = 0; i < m_records.size(); ++i)
            m_features.push_back(of(m_records[i], i));
    }

private:
    std::vector<Record> m_records;
    std::vector<double> m_costs;
    std::vector<double> m_memory;
    std::vector<std::uint64_t> m_arrivals;
    std::vector<features_type> m_features;
    std::vector<std::uint8_t> m_chosen;
    std::vector<double> m_round_costs; // the chosen slots' costs, in slot order
    std::vector<double> m_round_memory;
    std::vector<std::uint32_t> m_round_slots;
};

} // namespace bcl::detail
