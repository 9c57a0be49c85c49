#pragma once
// Internal: a Fenwick tree (binary indexed tree): prefix sums of values that change one at a
// time, and the longest prefix whose sum stays below a bound, each in O(log n).

#include <bcl/detail/config.hpp>

#include <bit>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace bcl::detail::plan {

/// Prefix sums over values v[0], ..., v[n-1], each of which may be lowered later. `Value` is a
/// regular type whose value-initialized object is zero, with += and -=: an unsigned integer, or a
/// struct of several sums kept side by side (step_leveller keeps how many records are free and
/// what they cost in one tree, so one descent finds both). Sums are Value's own arithmetic (for
/// unsigned integers modulo 2^64), in the same order on every platform.
///
/// Node i (1 to n) holds the sum of v[i - low(i), i), low(i) being i's lowest set bit: a prefix
/// is the sum of at most bit_width(n) nodes, and a value lies in at most as many. build() is
/// O(n); prefix(), subtract() and longest_prefix_below() are O(log n). The nodes are kept, so a
/// tree rebuilt at a size it has had, or after reserve(), allocates nothing.
template <class Value>
class fenwick {
public:
    /// Sizes the nodes for n values now.
    void reserve(std::size_t n) { m_node.reserve(n + 1); }

    /// Makes the tree hold value_of(0), ..., value_of(n - 1). O(n).
    template <class ValueOf>
    void build(std::size_t n, ValueOf value_of) {
        m_n = n;
        m_node.assign(n + 1, Value{});
        for (std::size_t i = 1; i <= n; ++i) {
            m_node[i] += value_of(i - 1);
            // A node is complete once every node below it has been added: pass it up once.
            if (const std::size_t parent = i + low(i); parent <= n) m_node[parent] += m_node[i];
        }
        m_top = std::bit_floor(n);
    }

    /// How many values the tree holds.
    [[nodiscard]] std::size_t size() const noexcept { return m_n; }

    /// v[0] + ... + v[i-1], for i <= size().
    [[nodiscard]] Value prefix(std::size_t i) const noexcept {
        Value sum{};
        for (; i > 0; i -= low(i)) sum += m_node[i];
        return sum;
    }

    /// v[i] -= d, for i < size().
    void subtract(std::size_t i, const Value& d) noexcept {
        for (std::size_t k = i + 1; k <= m_n; k += low(k)) m_node[k] -= d;
    }

    /// A prefix v[0, length) and its sum.
    struct found {
        std::size_t length;
        Value sum;
    };

    /// The longest prefix whose sum, read through `key`, is below `bound`; and that sum. `key`
    /// maps a Value to an unsigned integer, adds up (key(a + b) = key(a) + key(b)) and is never
    /// negative, so a longer prefix never has a smaller key: the count of a {count, cost} pair,
    /// or the value itself. With a count of 1 per value still present, bound k (1 <= k <= the
    /// count present) finds the k-th present value at index `length`. One descent from the
    /// highest power of two, O(log n); the bound is lowered as the descent moves right, so each
    /// level reads one node and compares it, nothing more (what makes the leveller's picks cheap).
    template <class Key>
    [[nodiscard]] found longest_prefix_below(std::uint64_t bound, Key key) const noexcept {
        std::size_t length = 0;
        Value sum{};
        for (std::size_t step = m_top; step > 0; step /= 2) {
            const std::size_t next = length + step;
            if (next <= m_n && key(m_node[next]) < bound) {
                length = next;
                bound -= key(m_node[next]);
                sum += m_node[next];
            }
        }
        return {length, sum};
    }

private:
    [[nodiscard]] static constexpr std::size_t low(std::size_t i) noexcept { return i & (~i + 1); }

    std::size_t m_n = 0;
    std::size_t m_top = 0;     // the highest power of two <= n: where a descent starts
    std::vector<Value> m_node; // node i at [i]; [0] unused
};

} // namespace bcl::detail::plan
