#pragma once
// One rank's pass over an epoch of fixed batches in the keyed order, window by window: the
// epoch's order is bcl::keyed_order, read position by position; each window of K steps is
// planned (bcl::epoch_window_planner) when the rank first asks for one of its batches. What it
// holds is one window, never the epoch. A pass covers the whole epoch, or what a checkpoint left
// of it (bcl::epoch_rest) laid out as an epoch of its own, which is how an epoch resumes at
// another world size. The samplers of the keyed global plan (libtorch and Python) run this; the
// cost table stays theirs, read through a function at each window.

#include <bcl/detail/config.hpp>

#include <bcl/detail/random.hpp>
#include <bcl/epoch_layout.hpp>
#include <bcl/epoch_plan.hpp>
#include <bcl/epoch_rest.hpp>
#include <bcl/epoch_window.hpp>
#include <bcl/error.hpp>
#include <bcl/global_plan.hpp>
#include <bcl/keyed_order.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace bcl {

/// The digest of a keyed pass: `inputs` (what its plans depend on besides these: the cost
/// table's digest and the settings, as the sampler digests them), the epoch, the ranks R and the
/// rest the pass plans (nothing of it for the whole epoch). Equal on every rank of a pass;
/// another for another epoch, R or rest. O(the rest's bitmap), noexcept.
[[nodiscard]] inline std::uint64_t keyed_epoch_digest(std::uint64_t inputs, std::uint64_t epoch,
                                                      std::size_t ranks,
                                                      const epoch_rest& rest) noexcept {
    using detail::mix64;
    std::uint64_t h = mix64(inputs ^ mix64(epoch));
    h = mix64(h ^ ranks);
    if (rest.whole()) return h;
    h = mix64(mix64(h ^ rest.start()) ^ rest.span());
    for (const std::uint8_t b : rest.taken()) h = mix64(h ^ b);
    return h;
}

/// A pass of one rank over a keyed epoch (or its rest), planned window by window. start() sets
/// the pass up in O(1) (plus the rest's bitmap); batch(i) plans the window of batch i if it is
/// not the last one planned, O(R*K*B log(R*K*B)), and is O(B) otherwise. The plans are, window
/// for window, bcl::epoch_planner's of the same epoch: for the whole epoch, the batches of
/// bcl::epoch_planner::share over bcl::keyed_order(N, seed, epoch) at positions 0..N-1 (0..N-1
/// itself without shuffle). Each method that plans takes `cost_of(index)`, the cost of a dataset
/// index (below N; checked by the planner, bcl::valid_cost).
///
/// Memory: one window's planner scratch and this rank's records of it, kept between passes (a
/// pass no larger allocates nothing), and the rest's bitmap. Not thread-safe.
template <class Index = std::uint64_t>
class keyed_epoch_pass {
    static_assert(std::is_integral_v<Index> && std::is_unsigned_v<Index>,
                  "dataset indices are unsigned integers");

public:
    /// Starts the pass of `epoch` over `rest` (of an epoch of rest.epoch_size() records) for
    /// rank `rank` of the ranks of `shape`, its order keyed_order(N, seed, epoch) (or 0..N-1
    /// without `shuffle`), planned with `opt`; its digest is keyed_epoch_digest(inputs, epoch,
    /// R, rest). Nothing is planned yet. Throws bcl::error (prefixed with `who`) for a shape
    /// check_epoch_shape refuses, options check_plan_options refuses or a rank not below R,
    /// leaving the pass as it was. O(the rest's bitmap).
    void start(std::uint64_t seed, std::uint64_t epoch, bool shuffle, const epoch_shape& shape,
               std::size_t rank, const plan_options& opt, std::uint64_t inputs, epoch_rest rest,
               std::string_view who = "bcl::keyed_epoch_pass") {
        const epoch_windows windows = epoch_windows::of(rest.size(), shape, who);
        check_plan_options(opt, who);
        if (rank >= shape.ranks)
            throw error(std::string(who) + ": rank " + std::to_string(rank) + " of " +
                        std::to_string(shape.ranks) + " ranks: the rank must be below them");
        m_windows = windows;
        m_order = keyed_order(rest.epoch_size(), seed, epoch);
        m_shuffle = shuffle;
        m_epoch = epoch;
        m_rank = rank;
        m_opt = opt;
        m_digest = keyed_epoch_digest(inputs, epoch, shape.ranks, rest);
        m_rest = std::move(rest);
        m_window = none;
        m_counted = 0;
        m_planned = {};
        m_planned.ranks = shape.ranks;
        m_planned.batches = windows.layout.batches;
    }

    /// Where the pass's windows lie: its layout (per rank m, batches) is the rest's, laid out as
    /// an epoch of its own at the pass's R. O(1).
    [[nodiscard]] const epoch_windows& windows() const noexcept { return m_windows; }
    /// This rank's batches in the pass: ceil(m / B) (floor with drop_last). O(1).
    [[nodiscard]] std::size_t batches() const noexcept { return m_windows.layout.batches; }
    /// The pass's digest (keyed_epoch_digest), known without planning. O(1).
    [[nodiscard]] std::uint64_t digest() const noexcept { return m_digest; }
    /// The epoch's records this pass plans: the whole epoch, or what a checkpoint left. O(1).
    [[nodiscard]] const epoch_rest& rest() const noexcept { return m_rest; }
    /// The pass's epoch. O(1).
    [[nodiscard]] std::uint64_t epoch() const noexcept { return m_epoch; }
    /// What the windows planned so far promise, as the pass moves forward: each window from the
    /// first one planned on, counted once (its digest the chain of their plan digests). O(1).
    [[nodiscard]] const epoch_plan_summary& planned() const noexcept { return m_planned; }

    /// Batch i (i < batches()): B dataset indices, the pass's last batch the rest; its window
    /// planned first if it is not the last one planned. The span stays valid until the next
    /// call. Throws bcl::error for i past the batches, and what epoch_window_planner::plan
    /// throws (prefixed with `who`); a later call plans that window again.
    template <class CostOf>
    [[nodiscard]] std::span<const Index> batch(std::size_t i, CostOf&& cost_of,
                                               std::string_view who = "bcl::keyed_epoch_pass") {
        if (i >= batches())
            throw error(std::string(who) + ": batch " + std::to_string(i) + " of a pass of " +
                        std::to_string(batches()));
        const std::size_t w = m_windows.window_of_batch(i);
        if (w != m_window) plan_window(w, cost_of, who);
        const std::size_t b = m_windows.layout.batch;
        const std::size_t first = (i % m_windows.lookahead) * b;
        return std::span<const Index>(m_mine).subspan(first, std::min(b, m_mine.size() - first));
    }

    /// What the plans of the whole pass promise, as bcl::epoch_planner sums them (its digest the
    /// chain of the windows' plan digests in order): every window planned once, one after the
    /// other. O(N log(R*K*B)) time, one window's memory. Throws what batch() throws.
    template <class CostOf>
    [[nodiscard]] epoch_plan_summary summary(CostOf&& cost_of,
                                             std::string_view who = "bcl::keyed_epoch_pass") {
        epoch_plan_summary s;
        s.ranks = m_windows.layout.ranks;
        s.batches = batches();
        for (std::size_t w = 0; w < m_windows.count(); ++w) {
            const plan_summary p = plan_only(w, cost_of, who);
            s.digest = plan_digest(m_planner.slots(), s.digest);
            ++s.windows;
            s.total += p.cost_of(p.total);
            s.objective += p.cost_of(p.objective);
            s.lower_bound += p.cost_of(p.lower_bound);
        }
        return s;
    }

    /// The rest of the epoch once every rank of this pass has taken `position` batches (at a step
    /// boundary every rank has taken as many): the pass's records of the windows before the
    /// current one and of the current one's first position mod K steps, as the plan placed them
    /// (that window planned again if it is not the last one planned), taken besides what the
    /// pass's own rest had taken. Throws bcl::error for a position past batches(), and what
    /// batch() throws. O(the window + the rest's span).
    template <class CostOf>
    [[nodiscard]] epoch_rest rest_after(std::size_t position, CostOf&& cost_of,
                                        std::string_view who = "bcl::keyed_epoch_pass") {
        if (position > batches())
            throw error(std::string(who) + ": position " + std::to_string(position) +
                        " is past the pass's " + std::to_string(batches()) + " batches");
        const std::uint64_t left = m_rest.size();
        if (position == batches()) return m_rest.after(left, {});
        const std::size_t w = m_windows.window_of_batch(position);
        const std::size_t steps = position % m_windows.lookahead;
        const std::uint64_t first = m_windows.first(w);
        std::vector<std::uint64_t> also;
        if (steps > 0) {
            if (w != m_window) plan_window(w, cost_of, who);
            const std::span<const plan_slot> slots = m_planner.slots();
            // Positions at or past `left` are the padding's repeats of the rest's first records.
            for (std::size_t i = 0; i < slots.size(); ++i)
                if (slots[i].step < steps && first + i < left) also.push_back(first + i);
        }
        return m_rest.after(first, std::move(also));
    }

private:
    static constexpr std::size_t none = std::numeric_limits<std::size_t>::max();

    template <class CostOf>
    plan_summary plan_only(std::size_t w, CostOf& cost_of, std::string_view who) {
        const std::uint64_t n = m_rest.size();
        m_window = none; // until the plan and this rank's records are both in
        if (m_shuffle)
            return m_planner.plan(
                m_windows, w, n, [this](std::uint64_t q) { return m_order.at(m_rest.position(q)); },
                cost_of, m_opt, who);
        return m_planner.plan(
            m_windows, w, n, [this](std::uint64_t q) { return m_rest.position(q); }, cost_of, m_opt,
            who);
    }

    template <class CostOf>
    void plan_window(std::size_t w, CostOf& cost_of, std::string_view who) {
        const plan_summary s = plan_only(w, cost_of, who);
        m_mine.resize(m_windows.records(w) / m_windows.layout.ranks);
        m_planner.rank_records(m_rank, std::span<Index>(m_mine), who);
        m_window = w;
        if (w >= m_counted) { // each window's promise counted once, when first planned
            m_counted = w + 1;
            m_planned.digest = plan_digest(m_planner.slots(), m_planned.digest);
            ++m_planned.windows;
            m_planned.total += s.cost_of(s.total);
            m_planned.objective += s.cost_of(s.objective);
            m_planned.lower_bound += s.cost_of(s.lower_bound);
        }
    }

    keyed_order m_order{0, 0, 0};
    bool m_shuffle = true;
    std::uint64_t m_epoch = 0;
    std::size_t m_rank = 0;
    plan_options m_opt{};
    std::uint64_t m_digest = 0;
    epoch_rest m_rest;         // the records this pass plans: all, or what a checkpoint left
    epoch_windows m_windows{}; // the rest's windows at the pass's R
    epoch_window_planner m_planner;
    std::vector<Index> m_mine; // this rank's records of window m_window, step by step
    std::size_t m_window = none;
    std::size_t m_counted = 0;      // windows below it are in m_planned
    epoch_plan_summary m_planned{}; // what the windows planned so far promise
};

} // namespace bcl
