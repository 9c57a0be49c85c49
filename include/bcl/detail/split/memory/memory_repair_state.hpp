#pragma once
// Internal: the partition a memory repair works on, in rank space, shared by its steps.

#include <bcl/detail/config.hpp>

#include <bcl/partition/detail/ranked_costs.hpp>
#include <bcl/partition/partitioner.hpp>

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <span>
#include <vector>

namespace bcl::detail {

/// An exchange of the items of ranks x and y, as a repair step weighs it.
struct repair_swap {
    /// No rank: a swap with x == none was not found.
    static constexpr std::size_t none = std::numeric_limits<std::size_t>::max();

    std::size_t x = none; // rank in the pack being repaired
    std::size_t y = none; // rank in the partner pack
    bool reaches = false; // brings the pack being repaired within budget
    double freed = 0.0;   // memory it moves out of x's pack
    double damage = 0.0;  // the larger of the two packs' costs after it
};

/// One round of a memory repair: the items ranked by memory, high to low (rank 0 holds the most;
/// ties go to the lower position, so everything is a pure function of the inputs), each rank's
/// cost, and a partition in rank space with each pack's members kept in rank order and its memory
/// and cost kept as running sums. Keeping members in rank order lets a step find a partner of a
/// given memory in a pack by binary search.
///
/// It also counts work: every step adds what it scans, so that a step can stop after
/// work_limit() = 64 n + 65536 steps and a round stays O(n log n) whatever the data.
class memory_repair_state {
public:
    /// Sizes the scratch space for rounds of up to `items` items in up to `packs` packs.
    void reserve(std::size_t items, std::size_t packs) {
        for (auto* v : {&m_pack, &m_slot, &m_member, &m_saved}) v->reserve(items);
        m_cost_of.reserve(items);
        m_ranked.reserve(items);
        for (auto* v : {&m_first, &m_count}) v->reserve(packs + 1);
        for (auto* v : {&m_pack_memory, &m_pack_cost}) v->reserve(packs);
    }

    /// Begins a round: ranks `memory` (throws bcl::error if a value is negative, infinite or NaN)
    /// and takes each rank's cost. The partition is empty until load().
    void start(std::span<const double> costs, std::span<const double> memory, pack_shape shape,
               double budget) {
        m_shape = shape;
        m_n = costs.size();
        m_k = shape.packs;
        m_budget = budget;
        m_ranked.assign(memory, "bcl::detail::memory_repair");
        m_cost_of.resize(m_n);
        for (std::size_t r = 0; r < m_n; ++r) m_cost_of[r] = costs[m_ranked.position(r)];
        m_work_limit = 64 * m_n + 65536;
    }

    /// Takes the partition given by item (`pack_of`) into rank space, with per-pack sums and each
    /// pack's members in rank order, and sets the work count to zero. O(n + K).
    void load(std::span<const std::uint32_t> pack_of) {
        m_pack.resize(m_n);
        m_pack_memory.assign(m_k, 0.0);
        m_pack_cost.assign(m_k, 0.0);
        m_first.assign(m_k + 1, 0);
        for (std::size_t r = 0; r < m_n; ++r) {
            const std::uint32_t p = pack_of[m_ranked.position(r)];
            m_pack[r] = p;
            m_pack_memory[p] += memory(r);
            m_pack_cost[p] += m_cost_of[r];
            ++m_first[p + 1];
        }
        for (std::size_t p = 0; p < m_k; ++p) m_first[p + 1] += m_first[p];
        m_count.assign(m_first.begin(), m_first.end() - 1); // next free slot of each pack
        m_member.resize(m_n);
        m_slot.resize(m_n);
        for (std::size_t r = 0; r < m_n; ++r) {
            const std::uint32_t s = m_count[m_pack[r]]++;
            m_member[s] = static_cast<std::uint32_t>(r);
            m_slot[r] = s;
        }
        m_work = 0;
    }

    /// Writes the partition back by item.
    void write(std::span<std::uint32_t> pack_of) const noexcept {
        for (std::size_t r = 0; r < m_n; ++r) pack_of[m_ranked.position(r)] = m_pack[r];
    }

    /// Keeps a copy of the partition, for restore().
    void save() { m_saved.assign(m_pack.begin(), m_pack.end()); }

    /// Sets the partition back to the one save() kept. Only the packs: the sums and member lists
    /// are left as they are, so write() is all that may follow.
    void restore() { m_pack.assign(m_saved.begin(), m_saved.end()); }

    /// Exchanges the items of ranks x and y (in different packs), keeping the sums and the rank
    /// order of both packs' members. O(B).
    void exchange(std::size_t x, std::size_t y) noexcept {
        const std::uint32_t h = m_pack[x];
        const std::uint32_t p = m_pack[y];
        const double freed = memory(x) - memory(y);
        const double moved = m_cost_of[x] - m_cost_of[y];
        m_pack_memory[h] -= freed;
        m_pack_memory[p] += freed;
        m_pack_cost[h] -= moved;
        m_pack_cost[p] += moved;
        m_pack[x] = p;
        m_pack[y] = h;
        const std::uint32_t sx = m_slot[x];
        const std::uint32_t sy = m_slot[y];
        place(h, sx, static_cast<std::uint32_t>(y));
        place(p, sy, static_cast<std::uint32_t>(x));
    }

    [[nodiscard]] std::size_t items() const noexcept { return m_n; }
    [[nodiscard]] std::size_t packs() const noexcept { return m_k; }
    [[nodiscard]] pack_shape shape() const noexcept { return m_shape; }
    [[nodiscard]] double budget() const noexcept { return m_budget; }
    /// The memories by rank, high to low.
    [[nodiscard]] std::span<const double> memories() const noexcept { return m_ranked.desc(); }
    [[nodiscard]] double memory(std::size_t rank) const noexcept { return m_ranked.cost(rank); }
    [[nodiscard]] double cost(std::size_t rank) const noexcept { return m_cost_of[rank]; }
    /// The item (input position) of a rank.
    [[nodiscard]] std::uint32_t position(std::size_t rank) const noexcept {
        return m_ranked.position(rank);
    }
    [[nodiscard]] std::uint32_t pack(std::size_t rank) const noexcept { return m_pack[rank]; }
    /// Pack p's members, ranks ascending (memory high to low).
    [[nodiscard]] std::span<const std::uint32_t> members(std::size_t p) const noexcept {
        return {m_member.data() + m_first[p], m_member.data() + m_first[p + 1]};
    }
    [[nodiscard]] double pack_memory(std::size_t p) const noexcept { return m_pack_memory[p]; }
    [[nodiscard]] double pack_cost(std::size_t p) const noexcept { return m_pack_cost[p]; }
    [[nodiscard]] std::span<const double> pack_costs() const noexcept { return m_pack_cost; }

    void reset_work() noexcept { m_work = 0; }
    void add_work(std::size_t steps) noexcept { m_work += steps; }
    [[nodiscard]] std::size_t work_limit() const noexcept { return m_work_limit; }
    /// Whether the work done since the last reset is past work_limit().
    [[nodiscard]] bool out_of_work() const noexcept { return m_work > m_work_limit; }

private:
    // Puts `rank` into slot s of pack q and moves it to its place in the pack's rank order.
    void place(std::uint32_t q, std::uint32_t s, std::uint32_t rank) noexcept {
        const std::uint32_t begin = m_first[q];
        const std::uint32_t end = m_first[q + 1];
        for (; s > begin && m_member[s - 1] > rank; --s) {
            m_member[s] = m_member[s - 1];
            m_slot[m_member[s]] = s;
        }
        for (; s + 1 < end && m_member[s + 1] < rank; ++s) {
            m_member[s] = m_member[s + 1];
            m_slot[m_member[s]] = s;
        }
        m_member[s] = rank;
        m_slot[rank] = s;
        m_work += end - begin;
    }

    pack_shape m_shape{};
    std::size_t m_n = 0;
    std::size_t m_k = 0;
    double m_budget = 0.0;
    ranked_costs m_ranked;         // the memories, ranked high to low
    std::vector<double> m_cost_of; // cost by rank

    std::vector<std::uint32_t> m_pack;  // pack by rank
    std::vector<std::uint32_t> m_first; // pack p's members are m_member[m_first[p] .. m_first[p+1])
    std::vector<std::uint32_t> m_member; // ranks, ascending within each pack
    std::vector<std::uint32_t> m_slot;   // position of each rank in m_member
    std::vector<std::uint32_t> m_count;  // load(): next free slot of each pack
    std::vector<std::uint32_t> m_saved;  // save(): a copy of m_pack
    std::vector<double> m_pack_memory;
    std::vector<double> m_pack_cost;

    std::size_t m_work = 0;
    std::size_t m_work_limit = 0;
};

} // namespace bcl::detail
