#pragma once
// Makes a cost-balanced partition fit a per-pack memory budget, giving up as little cost balance
// as it can.

#include <bcl/detail/config.hpp>

#include <algorithm>
#include <bcl/detail/ranked_costs.hpp>
#include <bcl/lpt_swap_partitioner.hpp>
#include <bcl/partitioner.hpp>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <span>
#include <vector>

namespace bcl::detail {

/// Repairs `pack_of`, a partition of a round into `shape` (every pack at its capacity), so that
/// every pack's total memory is at most `budget`, giving up as little cost balance as it can.
///
/// Promises:
///   - a partition that already fits comes back untouched (an O(n) check, nothing else runs);
///   - pack sizes never change: every move exchanges two items of different packs;
///   - the returned value is the largest pack memory of what is left in `pack_of`, summed item by
///     item in index order, and it is at most `budget` whenever a fit was found. Otherwise it is
///     above `budget` and `pack_of` holds the split with the smallest largest pack memory among
///     those tried, for the caller's error message;
///   - on rounds of at most exact_items items it fails only when no split fits (exhaustive
///     search); on larger ones it is a heuristic (on random rounds of 13 and 14 items at the
///     very edge of feasibility it found a fit for all 300 of the test's);
///   - the result is a pure function of the inputs; after the first call of a given size
///     (which sizes all scratch space and warms up the memory-first partitioner) nothing is
///     allocated.
///
/// How, and why in this order:
///   1. Shed memory from the cost-balanced partition, so that a budget that is rarely hit costs
///      a few swaps and little balance. The memories are ranked once (radix sort), each pack
///      keeps its items in rank order, and the packs over budget wait in a heap, the one with
///      the most memory first. Each of its items x looks for a partner y, from another pack
///      that stays within budget after the swap, among at most 16 items just below
///      memory(x) - excess in the ranking (one binary search) and in the pack with the most
///      room (a winner tree over the packs; two binary searches in it). A swap that brings the
///      pack within budget beats one that does not; among those, the one that raises the larger
///      of the two packs' costs least wins; otherwise the one that frees the most memory.
///      O(B (log n + 16)) per swap, at most 4K + 4 swaps.
///   2. If that gets stuck (a cost-balanced start can scatter the free room over packs that
///      cannot take what the full ones must give), start again from a memory-first split:
///      bcl::lpt_swap_partitioner on the memories (largest memory first into the pack with the
///      least memory and a free slot, then swaps that lower the largest pack memory), a split
///      that fits unless memory is very tight; step 1 then sheds what is left over.
///   3. Once everything fits, win back cost balance by swaps that keep every pack within budget:
///      the costliest pack against the others, cheapest first, taking the swap that comes
///      closest to halving their cost gap (binary searches in the partner's items by cost and
///      by memory). Stops once the costliest pack is no costlier than in the partition given.
///   4. Still over budget: a depth-first search over the items, largest memory first, into
///      every pack with room for the item and for its smallest possible filling, packs in the
///      same state tried once. Run to the end on rounds of at most exact_items items (at most
///      15400 ways to split 12 items into packs of fixed sizes), bounded on larger ones.
/// Work: every search step is counted, and steps 1, 3 and 4 each stop after 64 n + 65536
/// steps, so a round costs O(n log n) whatever the data, plus step 2, which costs what the
/// default partitioner costs (O(n log K) and its refinement). Measured (bcl-bench
/// memory_repair_tight and _independent, K = 64..1024, B = 64): 120-160 ns per record when a
/// few packs start just over budget, 190-430 ns when a third of them do. Throws bcl::error if a
/// memory value is negative, infinite or NaN.
class memory_repair {
public:
    /// Rounds of up to this many items that no swap fits are searched exhaustively: small enough
    /// that the search is always short.
    static constexpr std::size_t exact_items = 12;

    /// Returns the largest pack memory after the repair: at most `budget` unless no assignment
    /// was found that fits (the caller reports that as an error).
    double operator()(std::span<const double> costs, std::span<const double> memory,
                      pack_shape shape, std::span<std::uint32_t> pack_of, double budget) {
        warm_up(memory, shape);
        const double given = heaviest(memory, shape.packs, pack_of);
        if (given <= budget)
            return given;
        start(costs, memory, shape, budget);
        m_best.assign(pack_of.begin(), pack_of.end());
        m_best_heaviest = given;

        // 1. Shed memory from the cost-balanced partition.
        load(pack_of);
        m_target_cost = *std::max_element(m_pack_cost.begin(), m_pack_cost.end());
        if (settle(shed_memory(), pack_of))
            return m_result;
        // 2. Start again from a memory-first partition.
        m_partitioner(memory, shape, std::span<std::uint32_t>(m_items));
        load(m_items);
        if (settle(shed_memory(), pack_of))
            return m_result;
        // 4. Depth-first search (3 runs inside settle, on success).
        if (search_fit() && settle(true, pack_of))
            return m_result;
        std::copy(m_best.begin(), m_best.end(), pack_of.begin());
        return m_best_heaviest;
    }

private:
    // Candidates scanned in the ranking per item of the pack being shed (step 1): enough to see
    // past a few partners in packs without room, few enough to keep a swap O(B).
    static constexpr std::size_t scan_width = 16;
    // Items compared on each side of the ideal partner in step 3.
    static constexpr std::size_t cost_scan_width = 8;
    static constexpr std::size_t none = std::numeric_limits<std::size_t>::max();

    struct swap_choice {
        std::size_t x = none; // rank in the pack being repaired
        std::size_t y = none; // rank in the partner pack
        bool reaches = false;
        double freed = 0.0;
        double damage = 0.0;
    };

    // The largest pack memory of `pack_of`, summed in item order.
    double heaviest(std::span<const double> memory, std::size_t packs,
                    std::span<const std::uint32_t> pack_of) {
        m_exact.assign(packs, 0.0);
        for (std::size_t i = 0; i < memory.size(); ++i)
            m_exact[pack_of[i]] += memory[i];
        return m_exact.empty() ? 0.0 : *std::max_element(m_exact.begin(), m_exact.end());
    }

    // On the first call at a new largest size, sizes every scratch vector and runs the
    // memory-first partitioner once, so that no later call of this size allocates, whether it
    // repairs or not. The balancer's first round is such a call.
    void warm_up(std::span<const double> memory, pack_shape shape) {
        const std::size_t n = memory.size();
        const std::size_t k = shape.packs;
        if (n <= m_warm_items && k <= m_warm_packs)
            return;
        m_warm_items = std::max(m_warm_items, n);
        m_warm_packs = std::max(m_warm_packs, k);
        for (auto* v : {&m_pack, &m_slot, &m_member, &m_items, &m_best, &m_saved, &m_sorted})
            v->reserve(m_warm_items);
        for (auto* v : {&m_cost_of, &m_undo})
            v->reserve(m_warm_items);
        m_smallest.reserve(m_warm_items + 1);
        m_ranked.reserve(m_warm_items);
        std::size_t leaves = 1;
        while (leaves < m_warm_packs)
            leaves *= 2;
        m_tree.reserve(2 * leaves);
        for (auto* v : {&m_first, &m_order, &m_order_pos, &m_over, &m_count})
            v->reserve(m_warm_packs + 1);
        for (auto* v : {&m_pack_memory, &m_pack_cost, &m_exact})
            v->reserve(m_warm_packs);
        m_items.resize(n);
        m_partitioner(memory, shape, std::span<std::uint32_t>(m_items));
    }

    void start(std::span<const double> costs, std::span<const double> memory, pack_shape shape,
               double budget) {
        m_memory = memory;
        m_shape = shape;
        m_n = costs.size();
        m_k = shape.packs;
        m_budget = budget;
        m_ranked.assign(memory, "bcl::detail::memory_repair");
        m_items.resize(m_n);
        m_cost_of.resize(m_n);
        for (std::size_t r = 0; r < m_n; ++r)
            m_cost_of[r] = costs[m_ranked.position(r)];
        m_work_limit = 64 * m_n + 65536;
    }

    [[nodiscard]] double mem(std::size_t rank) const noexcept { return m_ranked.cost(rank); }

    // Takes the partition given by item (`pack_of`) into rank space, with per-pack sums and each
    // pack's members in rank order.
    void load(std::span<const std::uint32_t> pack_of) {
        m_pack.resize(m_n);
        m_pack_memory.assign(m_k, 0.0);
        m_pack_cost.assign(m_k, 0.0);
        m_first.assign(m_k + 1, 0);
        for (std::size_t r = 0; r < m_n; ++r) {
            const std::uint32_t p = pack_of[m_ranked.position(r)];
            m_pack[r] = p;
            m_pack_memory[p] += mem(r);
            m_pack_cost[p] += m_cost_of[r];
            ++m_first[p + 1];
        }
        for (std::size_t p = 0; p < m_k; ++p)
            m_first[p + 1] += m_first[p];
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

    // Writes the rank-space partition back by item.
    void write(std::span<std::uint32_t> pack_of) const {
        for (std::size_t r = 0; r < m_n; ++r)
            pack_of[m_ranked.position(r)] = m_pack[r];
    }

    // After a step: if it fit (checked again on exact sums, which may differ in the last bits
    // from the running ones), win back cost balance and report success; otherwise remember the
    // split if it is the best so far.
    bool settle(bool fits, std::span<std::uint32_t> pack_of) {
        write(std::span<std::uint32_t>(m_items));
        const double h = heaviest(m_memory, m_k, m_items);
        if (!fits || h > m_budget) {
            if (h < m_best_heaviest) {
                m_best.assign(m_items.begin(), m_items.end());
                m_best_heaviest = h;
            }
            return false;
        }
        m_saved.assign(m_pack.begin(), m_pack.end());
        improve_cost();
        write(pack_of);
        m_result = heaviest(m_memory, m_k, pack_of);
        if (m_result > m_budget) { // rounding in the running sums: keep the split checked above
            m_pack.assign(m_saved.begin(), m_saved.end());
            write(pack_of);
            m_result = h;
        }
        return true;
    }

    // Exchanges the items of ranks x and y (in different packs), keeping sums and member order.
    void exchange(std::size_t x, std::size_t y) noexcept {
        const std::uint32_t h = m_pack[x];
        const std::uint32_t p = m_pack[y];
        const double freed = mem(x) - mem(y);
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

    // ---- Step 1: shed memory from the packs over budget -------------------------------------

    bool shed_memory() {
        build_tree();
        m_over.clear();
        for (std::size_t p = 0; p < m_k; ++p)
            if (m_pack_memory[p] > m_budget)
                m_over.push_back(static_cast<std::uint32_t>(p));
        const auto less_memory = [this](std::uint32_t a, std::uint32_t b) {
            return m_pack_memory[a] < m_pack_memory[b] ||
                   (m_pack_memory[a] == m_pack_memory[b] && a > b);
        };
        std::make_heap(m_over.begin(), m_over.end(), less_memory);
        for (std::size_t swaps = 0; !m_over.empty(); ++swaps) {
            if (swaps > 4 * m_k + 4 || m_work > m_work_limit)
                return false;
            std::pop_heap(m_over.begin(), m_over.end(), less_memory);
            const std::uint32_t h = m_over.back();
            m_over.pop_back();
            const swap_choice c = best_shedding_swap(h);
            if (c.x == none)
                return false;
            const std::uint32_t p = m_pack[c.y];
            exchange(c.x, c.y);
            update_tree(h);
            update_tree(p);
            if (m_pack_memory[h] > m_budget) {
                m_over.push_back(h);
                std::push_heap(m_over.begin(), m_over.end(), less_memory);
            }
        }
        return true;
    }

    swap_choice best_shedding_swap(std::uint32_t h) {
        swap_choice best;
        const std::uint32_t roomiest = m_tree.empty() ? h : m_tree[1];
        if (roomiest == h)
            return best;
        const double most_room = m_budget - m_pack_memory[roomiest];
        if (!(most_room > 0.0))
            return best;
        const double need = m_pack_memory[h] - m_budget;
        const std::span<const double> desc = m_ranked.desc();
        const auto consider = [&](std::size_t x, std::size_t y) {
            const std::uint32_t p = m_pack[y];
            const double freed = mem(x) - mem(y);
            if (!(freed > 0.0) || m_pack_memory[p] + freed > m_budget)
                return;
            const double moved = m_cost_of[x] - m_cost_of[y];
            const double damage = std::max(m_pack_cost[h] - moved, m_pack_cost[p] + moved);
            const bool reaches = freed >= need;
            const bool better =
                best.x == none || (reaches && !best.reaches) ||
                (reaches == best.reaches &&
                 (reaches ? damage < best.damage
                          : freed > best.freed || (freed == best.freed && damage < best.damage)));
            if (better)
                best = {x, y, reaches, freed, damage};
        };
        const std::uint32_t* room_begin = m_member.data() + m_first[roomiest];
        const std::uint32_t* room_end = m_member.data() + m_first[roomiest + 1];
        for (std::uint32_t s = m_first[h]; s < m_first[h + 1]; ++s) {
            const std::size_t x = m_member[s];
            const double target = mem(x) - need; // a partner at most this large brings h within
            const double lowest = mem(x) - most_room; // a partner below this fits no pack
            // (a) The items just below the target, in whatever pack they are.
            if (target >= lowest) {
                auto r = static_cast<std::size_t>(
                    std::partition_point(desc.begin(), desc.end(),
                                         [target](double v) { return v > target; }) -
                    desc.begin());
                for (const std::size_t last = std::min(m_n, r + scan_width); r < last; ++r) {
                    if (desc[r] < lowest)
                        break;
                    if (m_pack[r] != h)
                        consider(x, r);
                }
            }
            // (b) The pack with the most room: its largest item at most the target, else its
            // smallest that still fits (the most memory it can take).
            const std::uint32_t* at = std::partition_point(
                room_begin, room_end, [&](std::uint32_t y) { return mem(y) > target; });
            if (at != room_end)
                consider(x, *at);
            const std::uint32_t* fits = std::partition_point(
                room_begin, room_end, [&](std::uint32_t y) { return mem(y) >= lowest; });
            if (fits != room_begin)
                consider(x, *(fits - 1));
            m_work += 2 * scan_width;
        }
        return best;
    }

    // A winner tree over the packs: m_tree[1] is the pack with the least memory (ties to the
    // lowest id); leaf p is node leaves + p.
    void build_tree() {
        m_leaves = 1;
        while (m_leaves < m_k)
            m_leaves *= 2;
        m_tree.resize(2 * m_leaves);
        for (std::size_t p = 0; p < m_leaves; ++p)
            m_tree[m_leaves + p] = static_cast<std::uint32_t>(std::min(p, m_k - 1));
        for (std::size_t node = m_leaves; node-- > 1;)
            replay(node);
    }

    void update_tree(std::uint32_t p) noexcept {
        for (std::size_t node = (m_leaves + p) / 2; node >= 1; node /= 2)
            replay(node);
    }

    void replay(std::size_t node) noexcept {
        const std::uint32_t left = m_tree[2 * node];
        const std::uint32_t right = m_tree[2 * node + 1];
        m_tree[node] = m_pack_memory[right] < m_pack_memory[left] ? right : left;
    }

    // ---- Step 3: win back cost balance within the budget -------------------------------------

    void improve_cost() {
        m_order.resize(m_k);
        for (std::size_t p = 0; p < m_k; ++p)
            m_order[p] = static_cast<std::uint32_t>(p);
        std::sort(m_order.begin(), m_order.end(),
                  [this](std::uint32_t a, std::uint32_t b) { return cheaper(a, b); });
        m_order_pos.resize(m_k);
        for (std::size_t i = 0; i < m_k; ++i)
            m_order_pos[m_order[i]] = static_cast<std::uint32_t>(i);
        m_work = 0;
        for (std::size_t round = 0; round < 2 * m_n + 2 * m_k && m_work <= m_work_limit; ++round) {
            const std::uint32_t h = m_order[m_k - 1];
            if (m_pack_cost[h] <= m_target_cost)
                return; // as balanced as the partition given
            bool moved = false;
            for (std::size_t i = 0; i + 1 < m_k && m_work <= m_work_limit; ++i) {
                const std::uint32_t p = m_order[i];
                if (!(m_pack_cost[h] > m_pack_cost[p]))
                    break;
                const swap_choice c = best_balancing_swap(h, p);
                if (c.x == none)
                    continue;
                exchange(c.x, c.y);
                reorder(h);
                reorder(p);
                moved = true;
                break;
            }
            if (!moved)
                return;
        }
    }

    [[nodiscard]] bool cheaper(std::uint32_t a, std::uint32_t b) const noexcept {
        return m_pack_cost[a] < m_pack_cost[b] || (m_pack_cost[a] == m_pack_cost[b] && a < b);
    }

    // Moves pack q to its place in m_order after its cost changed.
    void reorder(std::uint32_t q) noexcept {
        std::size_t i = m_order_pos[q];
        for (; i > 0 && cheaper(q, m_order[i - 1]); --i) {
            m_order[i] = m_order[i - 1];
            m_order_pos[m_order[i]] = static_cast<std::uint32_t>(i);
        }
        for (; i + 1 < m_k && cheaper(m_order[i + 1], q); ++i) {
            m_order[i] = m_order[i + 1];
            m_order_pos[m_order[i]] = static_cast<std::uint32_t>(i);
        }
        m_order[i] = q;
        m_order_pos[q] = static_cast<std::uint32_t>(i);
        ++m_work;
    }

    // The swap of an item of h for one of p that keeps both within budget and brings their costs
    // closest together, if it lowers the costlier of the two.
    swap_choice best_balancing_swap(std::uint32_t h, std::uint32_t p) {
        m_sorted.assign(m_member.begin() + m_first[p], m_member.begin() + m_first[p + 1]);
        std::sort(m_sorted.begin(), m_sorted.end(), [this](std::uint32_t a, std::uint32_t b) {
            return m_cost_of[a] < m_cost_of[b] || (m_cost_of[a] == m_cost_of[b] && a < b);
        });
        m_work += m_sorted.size() * 4;
        const double top = m_pack_cost[h];
        const double gap = top - m_pack_cost[p];
        const double half = gap / 2;
        swap_choice best;
        double best_distance = std::numeric_limits<double>::infinity();
        const auto consider = [&](std::size_t x, std::size_t y, double moved) {
            const double freed = mem(x) - mem(y);
            if (m_pack_memory[h] - freed > m_budget || m_pack_memory[p] + freed > m_budget)
                return false;
            const double distance = std::abs(moved - half);
            if (moved > 0.0 && moved < gap && distance < best_distance &&
                std::max(top - moved, m_pack_cost[p] + moved) < top) {
                best_distance = distance;
                best = {x, y, true, freed, 0.0};
            }
            return true;
        };
        const auto sorted_begin = m_sorted.begin();
        const auto sorted_end = m_sorted.end();
        const std::uint32_t* partner_begin = m_member.data() + m_first[p];
        const std::uint32_t* partner_end = m_member.data() + m_first[p + 1];
        for (std::uint32_t s = m_first[h]; s < m_first[h + 1]; ++s) {
            const std::size_t x = m_member[s];
            const double cx = m_cost_of[x];
            const double ideal = cx - half; // the partner cost that would even the two out
            const auto at = std::partition_point(
                sorted_begin, sorted_end, [&](std::uint32_t y) { return m_cost_of[y] < ideal; });
            // Upward: partners dearer than ideal move less than half the gap.
            auto up = at;
            for (std::size_t step = 0; up != sorted_end && step < cost_scan_width; ++up, ++step) {
                const double moved = cx - m_cost_of[*up];
                if (!(moved > 0.0) || std::abs(moved - half) >= best_distance)
                    break;
                if (consider(x, *up, moved))
                    break;
            }
            // Downward: cheaper partners move more than half the gap.
            auto down = at;
            for (std::size_t step = 0; down != sorted_begin && step < cost_scan_width; ++step) {
                --down;
                const double moved = cx - m_cost_of[*down];
                if (!(moved < gap) || std::abs(moved - half) >= best_distance)
                    break;
                if (consider(x, *down, moved))
                    break;
            }
            // The partners whose memory keeps both packs within budget, from either end of that
            // window: under a tight budget the cost-ideal ones above rarely fit.
            const double most = mem(x) + (m_budget - m_pack_memory[h]);
            const double least = mem(x) - (m_budget - m_pack_memory[p]);
            const std::uint32_t* lo = std::partition_point(
                partner_begin, partner_end, [&](std::uint32_t y) { return mem(y) > most; });
            const std::uint32_t* hi = std::partition_point(
                lo, partner_end, [&](std::uint32_t y) { return mem(y) >= least; });
            for (std::size_t step = 0; hi != lo && step < cost_scan_width; ++step) {
                --hi;
                consider(x, *hi, cx - m_cost_of[*hi]);
            }
            for (std::size_t step = 0; lo != hi && step < cost_scan_width; ++step, ++lo)
                consider(x, *lo, cx - m_cost_of[*lo]);
            m_work += 4 * cost_scan_width;
        }
        return best;
    }

    // ---- Step 4: depth-first search ----------------------------------------------------------

    // Depth first over the items by rank (largest memory first), each into every pack with a free
    // slot and room for it and for the smallest items that could fill its other free slots; of
    // packs in the same state (same memory, same free slots) only the first is tried. Rounds of
    // at most exact_items items are searched to the end (a few hundred thousand steps at most);
    // larger ones give up after m_work_limit steps. Iterative, so the depth costs no stack.
    // Leaves a fit in m_pack with sums and members rebuilt; on failure m_pack is not a valid
    // partition.
    bool search_fit() {
        m_pack_memory.assign(m_k, 0.0);
        m_count.assign(m_k, 0);
        m_smallest.assign(m_n + 1, 0.0); // m_smallest[f]: the f smallest memories together
        for (std::size_t f = 1; f <= m_n; ++f)
            m_smallest[f] = m_smallest[f - 1] + mem(m_n - f);
        m_undo.resize(m_n);
        m_work = 0;
        // The bound on the smallest filling sums in another order than the pack does: loosened
        // by a hair, so rounding never cuts a branch that fits.
        const double loose_budget = m_budget + 1e-12 * std::abs(m_budget);
        std::size_t r = 0;
        std::size_t next = 0; // the first pack item r may still try
        while (r < m_n) {
            if (m_n > exact_items && m_work > m_work_limit)
                return false;
            const double m = mem(r);
            std::size_t p = next;
            for (; p < m_k; ++p) {
                const std::size_t free = m_shape.capacity(p, m_n) - m_count[p];
                m_work += 1;
                if (free == 0 || m_pack_memory[p] + m > m_budget ||
                    m_pack_memory[p] + m + m_smallest[free - 1] > loose_budget)
                    continue;
                bool twin = false;
                for (std::size_t q = 0; q < p && !twin; ++q)
                    twin = m_pack_memory[q] == m_pack_memory[p] &&
                           m_shape.capacity(q, m_n) - m_count[q] == free;
                m_work += p;
                if (!twin)
                    break;
            }
            if (p < m_k) { // place item r into pack p and go deeper
                m_undo[r] = m_pack_memory[p];
                m_pack_memory[p] += m;
                ++m_count[p];
                m_pack[r] = static_cast<std::uint32_t>(p);
                ++r;
                next = 0;
                continue;
            }
            if (r == 0)
                return false; // every branch tried
            --r;              // take the previous item back out and try its next pack
            const std::uint32_t q = m_pack[r];
            m_pack_memory[q] = m_undo[r]; // restored exactly, not by subtracting
            --m_count[q];
            next = q + 1;
        }
        for (std::size_t i = 0; i < m_n; ++i)
            m_items[m_ranked.position(i)] = m_pack[i];
        load(m_items);
        return true;
    }

    // The round.
    std::span<const double> m_memory;
    pack_shape m_shape{};
    std::size_t m_n = 0;
    std::size_t m_k = 0;
    double m_budget = 0.0;
    ranked_costs m_ranked;         // the memories, ranked high to low
    std::vector<double> m_cost_of; // cost by rank

    // The partition being repaired, in rank space.
    std::vector<std::uint32_t> m_pack;  // pack by rank
    std::vector<std::uint32_t> m_first; // pack p's members are m_member[m_first[p] .. m_first[p+1])
    std::vector<std::uint32_t> m_member; // ranks, ascending within each pack
    std::vector<std::uint32_t> m_slot;   // position of each rank in m_member
    std::vector<std::uint32_t> m_count;
    std::vector<double> m_pack_memory;
    std::vector<double> m_pack_cost;

    // Step scratch.
    std::vector<std::uint32_t> m_over; // step 1: packs over budget, a heap by memory
    std::vector<std::uint32_t> m_tree; // step 1: winner tree, least memory
    std::size_t m_leaves = 1;
    std::vector<std::uint32_t> m_order; // step 3: packs by cost, ascending
    std::vector<std::uint32_t> m_order_pos;
    std::vector<std::uint32_t> m_sorted; // step 3: the partner's members by cost
    std::size_t m_work = 0;
    std::size_t m_work_limit = 0;

    // Splits by item.
    std::vector<std::uint32_t> m_items; // scratch: a split by item
    std::vector<std::uint32_t> m_best;  // the split with the least largest memory so far
    double m_best_heaviest = 0.0;
    std::vector<std::uint32_t> m_saved; // rank space: the fit before step 3
    std::vector<double> m_exact;        // exact per-pack memory sums
    std::vector<double> m_smallest;     // step 4: sums of the smallest memories
    std::vector<double> m_undo;         // step 4: each placed item's pack memory before it
    double m_result = 0.0;
    double m_target_cost = 0.0; // the costliest pack of the partition given

    lpt_swap_partitioner m_partitioner;
    std::size_t m_warm_items = 0;
    std::size_t m_warm_packs = 0;
};

} // namespace bcl::detail
