#pragma once
// How an epoch of fixed batches falls to ranks, batches and plan windows under the global plan:
// torch's DistributedSampler and BatchSampler rules for the order's length and each rank's share,
// and where each window of K steps of all R ranks' records lies in that order. Arithmetic only:
// what a window holds is known without planning any other (bcl::epoch_window_planner plans one;
// bcl::epoch_planner all of them).

#include <bcl/detail/config.hpp>

#include <bcl/detail/plan/limits.hpp>
#include <bcl/error.hpp>
#include <bcl/global_plan.hpp>

#include <algorithm>
#include <cstddef>
#include <string>
#include <string_view>

namespace bcl {

/// The shape of an epoch under the global plan. An aggregate:
/// `bcl::epoch_shape{.ranks = 8, .lookahead = 8, .batch = 16}`.
struct epoch_shape {
    std::size_t ranks = 0;     ///< R, data-parallel ranks
    std::size_t lookahead = 0; ///< K, steps planned together (one window)
    std::size_t batch = 0;     ///< B, records per rank per step
    /// As DistributedSampler's and BatchSampler's together: the records that do not fill every
    /// rank are dropped (instead of the order being padded), and so is each rank's short last
    /// batch.
    bool drop_last = false;
};

/// How an epoch of N records falls to ranks and batches, by torch's rules: DistributedSampler
/// pads the order with its first records (repeated as needed) to a multiple of R, or with
/// drop_last cuts it to one; each rank takes m = (that length) / R records; with drop_last m is
/// also cut to a multiple of B (BatchSampler's drop_last). The record at position i of the laid
/// out order is order[i mod N].
struct epoch_layout {
    std::size_t ranks = 1;    ///< R
    std::size_t batch = 1;    ///< B
    std::size_t padded = 0;   ///< the order's length once padded or cut to a multiple of R
    std::size_t per_rank = 0; ///< m: records each rank takes
    std::size_t batches = 0;  ///< batches each rank gets: ceil(m / B)

    /// The records planned: m * R, the first positions of the laid-out order.
    [[nodiscard]] constexpr std::size_t kept() const noexcept { return per_rank * ranks; }

    /// The layout of N records in an epoch of `shape` (whose counts are not 0). O(1).
    [[nodiscard]] static constexpr epoch_layout of(std::size_t n,
                                                   const epoch_shape& shape) noexcept {
        const std::size_t r = shape.ranks;
        epoch_layout l{r, shape.batch};
        l.padded = shape.drop_last && n % r != 0 ? n / r * r : (n + r - 1) / r * r;
        const std::size_t per_rank = l.padded / r;
        l.per_rank = shape.drop_last ? per_rank - per_rank % shape.batch : per_rank;
        l.batches = (l.per_rank + shape.batch - 1) / shape.batch;
        return l;
    }
};

/// Throws bcl::error (prefixed with `who`) for a shape no epoch plan takes: R, K or B of 0, or a
/// window of R*K*B records above bcl::max_plan_records, in those words.
inline void check_epoch_shape(const epoch_shape& shape, std::string_view who) {
    if (shape.ranks == 0 || shape.lookahead == 0 || shape.batch == 0)
        throw error(std::string(who) + ": the ranks (" + std::to_string(shape.ranks) +
                    "), lookahead (" + std::to_string(shape.lookahead) + ") and batch size (" +
                    std::to_string(shape.batch) + ") must all be at least 1");
    const std::size_t per_step = shape.ranks * shape.batch;
    if (shape.ranks > max_plan_records || shape.batch > max_plan_records / shape.ranks ||
        shape.lookahead > max_plan_records / per_step)
        throw error(std::string(who) + ": ranks * lookahead * batch size = " +
                    std::to_string(shape.ranks) + " * " + std::to_string(shape.lookahead) + " * " +
                    std::to_string(shape.batch) + " records in one plan window, above the " +
                    std::to_string(max_plan_records) + " a window may hold");
}

/// Throws bcl::error (prefixed with `who`) for plan options the planner refuses: the batching
/// neither packed nor padded, a negative or NaN cap. O(1).
inline void check_plan_options(const plan_options& opt, std::string_view who) {
    if (opt.batching != batch_cost::packed && opt.batching != batch_cost::padded)
        throw error(std::string(who) + ": plan_options::batching is neither packed nor padded");
    (void)detail::plan::cap_bits(opt.cap, who);
}

/// Where the windows of an epoch lie: the kept records of the laid-out order (epoch_layout), R*K*B
/// at a time, window w from kept position first(w), the last window short when they do not
/// divide. Each rank's batch i is step i mod K of window i / K. O(1) throughout.
struct epoch_windows {
    epoch_layout layout;        ///< the epoch's length, each rank's records and batches
    std::size_t lookahead = 1;  ///< K, steps a window holds (the last may hold fewer)
    std::size_t per_window = 1; ///< R*K*B, the records of every window but the last

    /// The windows of an epoch of N records in `shape`. Throws what check_epoch_shape throws.
    [[nodiscard]] static epoch_windows of(std::size_t n, const epoch_shape& shape,
                                          std::string_view who = "bcl::epoch_windows") {
        check_epoch_shape(shape, who);
        return {epoch_layout::of(n, shape), shape.lookahead,
                shape.ranks * shape.lookahead * shape.batch};
    }
    /// The windows of the epoch: ceil(kept / (R*K*B)).
    [[nodiscard]] constexpr std::size_t count() const noexcept {
        return (layout.kept() + per_window - 1) / per_window;
    }
    /// The laid-out order's position of window w's first record.
    [[nodiscard]] constexpr std::size_t first(std::size_t w) const noexcept {
        return w * per_window;
    }
    /// Window w's records, all ranks' (0 past the last window).
    [[nodiscard]] constexpr std::size_t records(std::size_t w) const noexcept {
        const std::size_t kept = layout.kept();
        return first(w) < kept ? std::min(per_window, kept - first(w)) : 0;
    }
    /// The window that holds each rank's batch i.
    [[nodiscard]] constexpr std::size_t window_of_batch(std::size_t i) const noexcept {
        return i / lookahead;
    }
};

} // namespace bcl
