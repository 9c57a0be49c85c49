#pragma once
// Internal: a partition held as lists of ranks per pack, the form every partitioner step works on.

#include <bcl/detail/config.hpp>

#include <bcl/error.hpp>
#include <bcl/partition/detail/ranked_costs.hpp>
#include <bcl/partition/partitioner.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace bcl::detail {

/// Pack p holds the ranks members(p)[0 .. count(p)), kept ascending, i.e. by cost high to low, so
/// the swap search can walk two packs with two pointers; costs(p) holds their costs alongside,
/// so that walk reads one array instead of chasing ranks. Slots are laid out pack after pack
/// with a stride of `pack_size`. Loads are maintained by whoever moves items.
class pack_table {
public:
    /// Empties every pack of a window of n items in `shape` (which must fit n).
    void reset(pack_shape shape, std::size_t n) {
        m_packs = shape.packs;
        // No pack holds more than the window's n items: a short window of huge packs needs no
        // room for whole packs.
        m_stride = std::min(shape.pack_size, n);
        m_load.assign(m_packs, 0.0);
        m_count.assign(m_packs, 0);
        m_capacity.resize(m_packs);
        for (std::size_t p = 0; p < m_packs; ++p)
            m_capacity[p] = static_cast<std::uint32_t>(shape.capacity(p, n));
        m_member.resize(m_packs * m_stride);
        m_member_cost.resize(m_packs * m_stride);
    }

    [[nodiscard]] std::size_t packs() const noexcept { return m_packs; }
    [[nodiscard]] std::size_t stride() const noexcept { return m_stride; }
    [[nodiscard]] double load(std::size_t p) const noexcept { return m_load[p]; }
    [[nodiscard]] std::span<const double> loads() const noexcept { return m_load; }
    [[nodiscard]] double& load(std::size_t p) noexcept { return m_load[p]; }
    [[nodiscard]] std::uint32_t count(std::size_t p) const noexcept { return m_count[p]; }
    [[nodiscard]] std::uint32_t capacity(std::size_t p) const noexcept { return m_capacity[p]; }
    [[nodiscard]] std::uint32_t* members(std::size_t p) noexcept {
        return m_member.data() + p * m_stride;
    }
    [[nodiscard]] const std::uint32_t* members(std::size_t p) const noexcept {
        return m_member.data() + p * m_stride;
    }
    [[nodiscard]] const double* costs(std::size_t p) const noexcept {
        return m_member_cost.data() + p * m_stride;
    }

    /// Appends `rank` (of cost `cost`) to pack p. Ranks must arrive in ascending order per pack.
    void append(std::size_t p, std::uint32_t rank, double cost) noexcept {
        m_member[p * m_stride + m_count[p]] = rank;
        m_member_cost[p * m_stride + m_count[p]] = cost;
        ++m_count[p];
        m_load[p] += cost;
    }

    /// Loads `pack_of` (one pack id per input position) into the table, walking the items in rank
    /// order so every member list comes out ascending. Throws bcl::error naming `who` if an id is
    /// out of range or a pack does not get exactly its capacity.
    void assign(const ranked_costs& ranked, std::span<const std::uint32_t> pack_of,
                std::string_view who) {
        const std::size_t n = ranked.size();
        for (std::size_t r = 0; r < n; ++r) {
            const std::uint32_t pos = ranked.position(r);
            const std::uint32_t p = pack_of[pos];
            if (p >= m_packs || m_count[p] == m_capacity[p])
                throw error(std::string(who) + ": item " + std::to_string(pos) + " is in pack " +
                            std::to_string(p) +
                            (p >= m_packs ? " of " + std::to_string(m_packs) + " packs"
                                          : ", which already holds its " +
                                                std::to_string(m_capacity[p]) + " items"));
            append(p, static_cast<std::uint32_t>(r), ranked.cost(r));
        }
        // Every item went somewhere and no pack overflowed, so every pack is exactly full.
    }

    /// Writes the pack of every item to `pack_of` and recomputes the loads from scratch (moves
    /// add and subtract; a fresh sum in rank order is what is reported). Returns the heaviest.
    double write(const ranked_costs& ranked, std::span<std::uint32_t> pack_of) noexcept {
        double heaviest = 0.0;
        for (std::size_t p = 0; p < m_packs; ++p) {
            const std::uint32_t* list = members(p);
            const double* list_cost = costs(p);
            double load = 0.0;
            for (std::uint32_t s = 0; s < m_count[p]; ++s) {
                pack_of[ranked.position(list[s])] = static_cast<std::uint32_t>(p);
                load += list_cost[s];
            }
            m_load[p] = load;
            heaviest = std::max(heaviest, load);
        }
        return heaviest;
    }

    /// Puts `rank` (of cost `cost`) at slot `at` of pack p, in place of what was there, and
    /// restores the ascending order around it. Loads are left to the caller.
    void replace(std::size_t p, std::size_t at, std::uint32_t rank, double cost) noexcept {
        std::uint32_t* list = members(p);
        double* list_cost = m_member_cost.data() + p * m_stride;
        const std::size_t size = m_count[p];
        while (at > 0 && list[at - 1] > rank) {
            list[at] = list[at - 1];
            list_cost[at] = list_cost[at - 1];
            --at;
        }
        while (at + 1 < size && list[at + 1] < rank) {
            list[at] = list[at + 1];
            list_cost[at] = list_cost[at + 1];
            ++at;
        }
        list[at] = rank;
        list_cost[at] = cost;
    }

    /// The slot of `rank` in pack p, which must hold it (binary search: the list is sorted).
    [[nodiscard]] std::size_t slot_of(std::size_t p, std::uint32_t rank) const noexcept {
        const std::uint32_t* list = members(p);
        return static_cast<std::size_t>(std::lower_bound(list, list + m_count[p], rank) - list);
    }

    /// Exchanges the contents of packs p and q (members, counts and loads; not capacities).
    void swap_packs(std::size_t p, std::size_t q) noexcept {
        std::swap_ranges(members(p), members(p) + m_stride, members(q));
        std::swap_ranges(m_member_cost.data() + p * m_stride,
                         m_member_cost.data() + (p + 1) * m_stride,
                         m_member_cost.data() + q * m_stride);
        std::swap(m_count[p], m_count[q]);
        std::swap(m_load[p], m_load[q]);
    }

    /// For partitioners that deal a short window of n items as if it were full (the table reset
    /// for packs * pack_size items): the ranks >= n are zero-cost placeholders. Gathers them into
    /// one pack, makes that pack the last one (the short one) and drops them, so every pack ends
    /// up with exactly its capacity. Each placeholder found outside the chosen pack (the one
    /// holding the most) trades places with the cheapest real item of that pack.
    void gather_placeholders(std::size_t n, const ranked_costs& ranked) noexcept {
        const std::size_t last = m_packs - 1;
        const auto placeholders = [&](std::size_t p) {
            const std::uint32_t* list = members(p);
            std::uint32_t c = 0;
            for (std::uint32_t s = 0; s < m_count[p]; ++s) c += list[s] >= n ? 1U : 0U;
            return c;
        };
        std::size_t host = last;
        std::uint32_t most = placeholders(last);
        for (std::size_t p = 0; p < last; ++p) {
            const std::uint32_t c = placeholders(p);
            if (c > most) {
                most = c;
                host = p;
            }
        }
        for (std::size_t p = 0; p < m_packs; ++p) {
            if (p == host) continue;
            std::uint32_t* list = members(p);
            while (m_count[p] > 0 && list[m_count[p] - 1] >= n) {
                // The host's cheapest real item: its real ranks come first (ascending order).
                std::uint32_t* host_list = members(host);
                std::size_t at = 0;
                while (host_list[at + 1] < n) ++at; // the host still holds a placeholder after it
                const std::uint32_t real = host_list[at];
                const std::uint32_t fake = list[m_count[p] - 1];
                m_load[host] -= ranked.cost(real);
                m_load[p] += ranked.cost(real);
                replace(host, at, fake, 0.0);
                replace(p, m_count[p] - 1, real, ranked.cost(real));
            }
        }
        // All placeholders now sit at the end of the host's list; drop them.
        std::uint32_t* host_list = members(host);
        while (m_count[host] > 0 && host_list[m_count[host] - 1] >= n) --m_count[host];
        if (host != last) swap_packs(host, last);
        m_capacity[last] = m_count[last];
    }

private:
    std::size_t m_packs = 0;
    std::size_t m_stride = 0;
    std::vector<double> m_load;
    std::vector<std::uint32_t> m_count;
    std::vector<std::uint32_t> m_capacity;
    std::vector<std::uint32_t> m_member;
    std::vector<double> m_member_cost;
};

} // namespace bcl::detail
