#pragma once
// Cutting a window into batches of records of similar cost, for trainers that pad every record
// to its batch's costliest (options::batching == padded).

#include <bcl/detail/config.hpp>

#include <bcl/partition/detail/ranked_costs.hpp>
#include <bcl/partition/partitioner.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace bcl::detail {

/// Ranks the window by cost and cuts it into consecutive runs: the costliest B items form one
/// pack, the next B another, and so on. A padded batch costs its size times its costliest item,
/// and among all partitions into packs of these sizes some one of consecutive runs has the least
/// total padded cost (an exchange argument: a pack holding a costlier item than a run would give
/// it raises that pack's cost and lowers no other's below the run's). With equal packs that is
/// the cut above; in a short window the short run goes where it costs least (of places that cost
/// the same, the one furthest down the ranking, among the cheapest items), and it is always the
/// last pack, as the shape has it. The summary's pack_loads are
/// the padded costs (size times the costliest item); `heaviest` is the largest of them, and no
/// lower bound is claimed (0).
///
/// O(n) radix sort and O(K) to place the short run; scratch is kept, so it allocates nothing
/// once it has seen its largest window. Throws bcl::error if the shape does not fit the costs or
/// a cost is negative, NaN or above bcl::max_estimate.
class padded_cut {
public:
    partition_summary operator()(std::span<const double> costs, pack_shape shape,
                                 std::span<std::uint32_t> pack_of) {
        check_partition_shape("bcl::detail::padded_cut", costs.size(), shape, pack_of.size());
        const std::size_t n = costs.size();
        if (n == 0) return {};
        m_ranked.assign(costs, "bcl::detail::padded_cut");
        const std::size_t b = shape.pack_size;
        const std::size_t last = shape.packs - 1;
        const std::size_t short_size = shape.capacity(last, n);
        // The short run's place among the runs: the total padded cost with the short run at
        // place j is the runs before it starting at j*B, the short run at j*B, and the runs after
        // it starting r later (r = the short size). Prefix and suffix sums make each place O(1).
        std::size_t best_place = last;
        if (short_size < b) {
            const auto bd = static_cast<double>(b);
            double after = 0.0; // runs after place j
            for (std::size_t run = 1; run < shape.packs; ++run)
                after += bd * m_ranked.cost((run - 1) * b + short_size);
            double before = 0.0; // runs before place j
            double best = HUGE_VAL;
            for (std::size_t place = 0; place < shape.packs; ++place) {
                if (place > 0) {
                    before += bd * m_ranked.cost((place - 1) * b);
                    after -= bd * m_ranked.cost((place - 1) * b + short_size);
                }
                const double total =
                    before + static_cast<double>(short_size) * m_ranked.cost(place * b) + after;
                if (total <= best) {
                    best = total;
                    best_place = place;
                }
            }
        }
        m_loads.assign(shape.packs, 0.0);
        for (std::size_t run = 0, first = 0; run < shape.packs; ++run) {
            const std::size_t size = run == best_place ? short_size : b;
            // Runs before the short one are packs 0.., the short one is the last pack, runs
            // after it take the ids it skipped.
            const std::size_t pack = run == best_place ? last : run < best_place ? run : run - 1;
            for (std::size_t r = first; r < first + size; ++r)
                pack_of[m_ranked.position(r)] = static_cast<std::uint32_t>(pack);
            m_loads[pack] = static_cast<double>(size) * m_ranked.cost(first);
            first += size;
        }
        return {*std::max_element(m_loads.begin(), m_loads.end()), 0.0, m_loads};
    }

private:
    ranked_costs m_ranked;
    std::vector<double> m_loads; // padded cost of each pack
};

} // namespace bcl::detail
