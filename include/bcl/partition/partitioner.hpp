#pragma once
// The partitioner concept: costs of a window in, a pack id per slot out.

#include <bcl/detail/config.hpp>

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <span>

namespace bcl {

/// The shape of one partitioning problem: `packs` packs of `pack_size` slots, except that the last
/// pack holds only what is left when the window is short (the final window at end of input).
/// For n items: `(packs - 1) * pack_size < n <= packs * pack_size`.
struct pack_shape {
    std::size_t packs = 0;
    std::size_t pack_size = 0;

    /// Slots of pack `p` for a window of `n` items: pack_size, or the remainder for the last pack.
    [[nodiscard]] constexpr std::size_t capacity(std::size_t p, std::size_t n) const noexcept {
        return p + 1 < packs ? pack_size : n - (packs - 1) * pack_size;
    }
};

/// What a partitioner reports for one window: the cost of its heaviest pack, and the best lower
/// bound it could prove on the heaviest pack of any valid partition (0 when it proved none).
/// `(heaviest - lower_bound) / lower_bound` is the window's gap to optimal, an upper bound on how
/// far from the best possible partition it is. A partitioner that has each pack's total cost
/// may hand it over in `pack_loads` (one per pack, valid until its next call), so the balancer
/// does not sum the window again; left empty, the balancer sums it.
struct partition_summary {
    double heaviest = 0.0;
    double lower_bound = 0.0;
    std::span<const double> pack_loads{};
};

/// A type P satisfies `partitioner<P>` if:
///   1. it is move-constructible (the balancer owns one and reuses its scratch space);
///   2. an lvalue of P is invocable as `p(costs, shape, pack_of)` with
///      `std::span<const double> costs`, `bcl::pack_shape shape` and `std::span<std::uint32_t>
///      pack_of` of the same length as `costs`;
///   3. that call returns something convertible to `bcl::partition_summary`.
/// Semantic requirements the compiler cannot check: after the call `pack_of[i]` is the pack of
/// item i, every pack p < shape.packs receives exactly `shape.capacity(p, n)` items, and the result
/// depends only on the costs and the shape (determinism). It does not have to be const-callable,
/// thread-safe or allocation-free on its first call; it should not allocate once warmed up.
template <class P>
concept partitioner = std::move_constructible<P> &&
    std::invocable<P&, std::span<const double>, pack_shape, std::span<std::uint32_t>> &&
    std::convertible_to<
        std::invoke_result_t<P&, std::span<const double>, pack_shape, std::span<std::uint32_t>>,
        partition_summary>;

} // namespace bcl
