#pragma once
// Internal: one window's costs sorted once, high to low, shared by every step of a partitioner.

#include <bcl/detail/config.hpp>

#include <bcl/cost_estimator.hpp>
#include <bcl/detail/number_text.hpp>
#include <bcl/error.hpp>
#include <bcl/partition/partitioner.hpp>

#include <algorithm>
#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace bcl::detail {

/// Throws bcl::error, naming the partitioner `who`, unless `pack_of` has one slot per cost and n
/// items fill `shape`: every pack but the last full, the last holding at least one item.
inline void check_partition_shape(std::string_view who, std::size_t n, pack_shape shape,
                                  std::size_t out_size) {
    if (out_size != n)
        throw error(std::string(who) + ": pack_of has " + std::to_string(out_size) + " slots for " +
                    std::to_string(n) + " costs");
    if (n == 0) return;
    if (shape.packs == 0 || shape.pack_size == 0 ||
        shape.pack_size > std::numeric_limits<std::size_t>::max() / shape.packs ||
        n > shape.packs * shape.pack_size || n <= (shape.packs - 1) * shape.pack_size)
        throw error(std::string(who) + ": " + std::to_string(n) + " items do not fill " +
                    std::to_string(shape.packs) + " packs of " + std::to_string(shape.pack_size) +
                    " (only the last pack may be short)");
    if (n > std::numeric_limits<std::uint32_t>::max())
        throw error(std::string(who) + ": a window of " + std::to_string(n) +
                    " items is too large (pack ids and positions are 32-bit)");
}

/// The costs of one window in rank order: rank 0 is the dearest item, ties go to the lower
/// position, so the order (and everything computed from it) is a pure function of the costs.
///
/// Sorting is a radix sort on the bit patterns of the costs: for doubles >= 0 the IEEE-754 bits
/// order like the values, and complementing them turns "high to low" into an ascending sort. Each
/// item becomes one 64-bit word, the top 24 bits of its complemented cost (sign, exponent and 12
/// mantissa bits) above its position; sorting the words sorts by cost, to about 2.4e-4, then by
/// position. An LSD pass per byte of those 24 bits (two, usually: the byte holding the sign and
/// top exponent bits is the same in every word and skipped) does that, then one insertion pass on
/// the exact costs orders the items that the truncated key could not tell apart. Such near-ties
/// are few and already close to their place, so that pass mostly just compares; if it would have
/// to move many items (costs crowded within 2.4e-4 of each other), a comparison sort finishes
/// instead.
/// Windows of at most 64 items use insertion sort on the words. Validating the costs rides along:
/// one comparison per item.
///
/// O(n) per window in practice, O(n log n) at worst; the scratch space is kept, so once it has
/// seen its largest window it allocates nothing.
class ranked_costs {
public:
    /// Sorts `costs`. Throws bcl::error naming `who`, the position and the value of the first cost
    /// that is negative, NaN or above bcl::max_estimate (a partitioner is a public entry point
    /// too, and sums of larger costs could overflow).
    void assign(std::span<const double> costs, std::string_view who) {
        const std::size_t n = costs.size();
        m_word.resize(n);
        m_word_tmp.resize(n);
        m_position.resize(n);
        m_cost.resize(n);
        m_prefix.resize(n + 1);
        m_prefix[0] = 0.0;
        m_smallest_step = std::numeric_limits<double>::infinity();
        if (n == 0) return;
        // +0.0 turns -0.0 (which passes `cost >= 0`) into +0.0. Every valid cost then has a bit
        // pattern at most that of bcl::max_estimate; negative values, larger ones, infinities
        // and NaNs do not.
        constexpr std::uint64_t largest_bits = std::bit_cast<std::uint64_t>(max_estimate);
        constexpr std::uint64_t key_bits = 0xffffff0000000000ULL;
        // The byte counts for the radix passes ride along with building the words.
        byte_counts count{};
        for (std::size_t i = 0; i < n; ++i) {
            const auto bits = std::bit_cast<std::uint64_t>(costs[i] + 0.0);
            if (bits > largest_bits) throw_bad_cost(who, i, costs[i]);
            const std::uint64_t word = (~bits & key_bits) | i;
            m_word[i] = word;
            ++count[0][(word >> 40) & 0xff];
            ++count[1][(word >> 48) & 0xff];
            ++count[2][word >> 56];
        }
        if (n <= insertion_sort_limit)
            std::sort(m_word.begin(), m_word.end()); // distinct words: any sort gives one order
        else
            radix_sort_key(n, count);
        bool sorted = true;
        for (std::size_t r = 0; r < n; ++r) {
            const auto pos = static_cast<std::uint32_t>(m_word[r]);
            m_position[r] = pos;
            m_cost[r] = costs[pos] + 0.0;
            // Words that tie on the key are in position order; only their costs may be out of
            // order (a rank with a cheaper item just before it).
            sorted = sorted && (r == 0 || m_cost[r - 1] >= m_cost[r]);
        }
        if (!sorted && !repair_ties(n, 4 * n)) sort_exactly(costs);
        // The smallest step rides along with the prefix sums, whose add chain leaves room for it.
        // Steps are >= 0 (the costs are sorted); minimised as bit patterns minus one, which order
        // like the values but put a zero step (a tie) last, so the minimum is a conditional move
        // rather than a branch that ties make unpredictable.
        std::uint64_t step =
            std::bit_cast<std::uint64_t>(std::numeric_limits<double>::infinity()) - 1;
        m_prefix[1] = m_cost[0];
        for (std::size_t r = 1; r < n; ++r) {
            m_prefix[r + 1] = m_prefix[r] + m_cost[r];
            const double d = m_cost[r - 1] - m_cost[r];
            step = std::min(step, std::bit_cast<std::uint64_t>(d) - 1);
        }
        m_smallest_step = std::bit_cast<double>(step + 1);
    }

    /// Sizes the scratch for windows of up to n items, so that later calls allocate nothing.
    void reserve(std::size_t n) {
        m_word.reserve(n);
        m_word_tmp.reserve(n);
        m_position.reserve(n);
        m_cost.reserve(n);
        m_prefix.reserve(n + 1);
    }

    [[nodiscard]] std::size_t size() const noexcept { return m_cost.size(); }
    /// Costs by rank: sorted high to low, exactly the input values.
    [[nodiscard]] std::span<const double> desc() const noexcept { return m_cost; }
    /// prefix()[r] is the sum of the r dearest costs; n + 1 values.
    [[nodiscard]] std::span<const double> prefix() const noexcept { return m_prefix; }
    [[nodiscard]] double cost(std::size_t rank) const noexcept { return m_cost[rank]; }
    /// The smallest positive difference between two of the costs (+infinity if they are all
    /// equal). A 1-for-1 swap that changes anything moves at least this much cost, so it cannot
    /// even out two packs closer than this.
    [[nodiscard]] double smallest_step() const noexcept { return m_smallest_step; }
    /// The input position of the item of rank `rank`.
    [[nodiscard]] std::uint32_t position(std::size_t rank) const noexcept {
        return m_position[rank];
    }

private:
    static constexpr std::size_t insertion_sort_limit = 64;

    [[noreturn]] static void throw_bad_cost(std::string_view who, std::size_t i, double value) {
        throw error(std::string(who) + ": cost " + std::to_string(i) + " is " + number_text(value) +
                    "; a cost must be >= 0 and at most bcl::max_estimate (1e120)");
    }

    // Stable counting-sort passes over bytes 5..7 of the words (the key), low byte first, from
    // the byte counts taken while building them. The input is in position order, so words whose
    // keys tie stay in position order.
    using byte_counts = std::array<std::array<std::uint32_t, 256>, 3>;

    void radix_sort_key(std::size_t n, byte_counts& count) noexcept {
        std::uint64_t* in = m_word.data();
        std::uint64_t* out = m_word_tmp.data();
        for (std::size_t d = 0; d < 3; ++d) {
            const std::size_t shift = 40 + 8 * d;
            std::array<std::uint32_t, 256>& offset = count[d];
            if (offset[(in[0] >> shift) & 0xff] == n) continue; // one value: already in order
            std::uint32_t sum = 0;
            for (std::uint32_t& c : offset) {
                const std::uint32_t here = c;
                c = sum;
                sum += here;
            }
            for (std::size_t i = 0; i < n; ++i) out[offset[(in[i] >> shift) & 0xff]++] = in[i];
            std::swap(in, out);
        }
        if (in != m_word.data()) m_word.swap(m_word_tmp); // an odd number of passes ran
    }

    [[nodiscard]] bool ordered(std::size_t a, std::size_t b) const noexcept {
        return m_cost[a] > m_cost[b] || (m_cost[a] == m_cost[b] && m_position[a] < m_position[b]);
    }

    // Insertion sort by (cost high to low, position), giving up after `budget` moves; the arrays
    // stay a permutation either way. Returns true if sorted.
    bool repair_ties(std::size_t n, std::size_t budget) noexcept {
        for (std::size_t i = 1; i < n; ++i) {
            if (ordered(i - 1, i)) continue;
            const double cost = m_cost[i];
            const std::uint32_t pos = m_position[i];
            std::size_t j = i;
            while (j > 0 &&
                   (m_cost[j - 1] < cost || (m_cost[j - 1] == cost && m_position[j - 1] > pos))) {
                if (budget == 0) break;
                --budget;
                m_cost[j] = m_cost[j - 1];
                m_position[j] = m_position[j - 1];
                --j;
            }
            m_cost[j] = cost;
            m_position[j] = pos;
            if (budget == 0) return false;
        }
        return true;
    }

    // The exact order by comparisons, for windows the truncated key could not sort.
    void sort_exactly(std::span<const double> costs) {
        std::sort(m_position.begin(), m_position.end(), [costs](std::uint32_t a, std::uint32_t b) {
            const double ca = costs[a] + 0.0;
            const double cb = costs[b] + 0.0;
            return ca > cb || (ca == cb && a < b);
        });
        for (std::size_t r = 0; r < m_position.size(); ++r) m_cost[r] = costs[m_position[r]] + 0.0;
    }

    std::vector<std::uint64_t> m_word; // top 24 bits of ~bits(cost), then the position
    std::vector<std::uint64_t> m_word_tmp;
    std::vector<std::uint32_t> m_position;
    std::vector<double> m_cost;
    std::vector<double> m_prefix;
    double m_smallest_step = std::numeric_limits<double>::infinity();
};

} // namespace bcl::detail
