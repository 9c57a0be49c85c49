#pragma once
// Saving and restoring a balancer: its own counters, then each component's part of the snapshot,
// which each component writes and reads itself (save_into, restore_from).

#include <bcl/detail/config.hpp>

#include <bcl/detail/state/saved_state.hpp>
#include <bcl/detail/state/snapshot.hpp>
#include <bcl/detail/state/snapshot_check.hpp>

#include <cstddef>
#include <type_traits>
#include <utility>

namespace bcl::detail {

/// A friend of bcl::balancer: what balancer::save(), take_state() and the restoring constructor
/// do. The restore checks the whole state (check_consistent) and that it fits the balancer
/// (options, estimates) before it changes anything, so a refused state leaves the balancer as it
/// was.
struct balancer_state_io {
    /// The snapshot, and the pending records in the documented order (the waiting batches', then
    /// the buffer's), each through `take` (a copy or a move).
    template <class Balancer, class Take>
    [[nodiscard]] static auto collect(Balancer& b, Take take) {
        typename std::remove_const_t<Balancer>::state s;
        s.snapshot = snapshot(b);
        s.pending.reserve(s.snapshot.pending_records());
        for (auto& r : b.m_ready.waiting_span(b.m_options.batch_size)) s.pending.push_back(take(r));
        for (auto& r : b.m_buffer.records()) s.pending.push_back(take(r));
        return s;
    }

    template <class Balancer>
    [[nodiscard]] static balancer_snapshot snapshot(const Balancer& b) {
        balancer_snapshot s;
        s.opt = b.m_options;
        s.finished = b.m_finished;
        s.last_batch_cost = b.m_last_batch_cost;
        s.stats = b.m_stats;
        s.tracks_memory = Balancer::tracks_memory;
        b.m_history.save_into(s);
        b.m_order.save_into(s);
        b.m_ready.save_into(s, b.m_options.batch_size);
        b.m_buffer.save_into(s);
        b.m_cap.save_into(s);
        b.m_heavy.save_into(s);
        b.m_calibration.save_into(s, b.m_stats.batches, b.m_ready.next(), b.m_estimator);
        return s;
    }

    /// Into a balancer just constructed with the options `saved` should hold.
    template <class Balancer, class State>
    static void restore(Balancer& b, State saved) {
        saved.require_pending();
        const balancer_snapshot& s = saved.snapshot;
        check_consistent(s);
        require_same_options(s.opt, b.m_options);
        require_same_estimates(s, Balancer::tracks_memory, Balancer::feature_count);
        b.m_finished = s.finished;
        b.m_last_batch_cost = s.last_batch_cost;
        b.m_stats = s.stats;
        b.m_history.restore_from(s);
        b.m_order.restore_from(s);
        b.m_ready.restore_from(s, saved.pending.begin());
        b.m_buffer.restore_from(s, saved.pending.begin() +
                                       static_cast<std::ptrdiff_t>(s.waiting_records()));
        b.m_cap.restore_from(s);
        b.m_heavy.restore_from(s);
        b.m_calibration.restore_from(s, b.m_stats.batches, b.m_estimator, b.m_buffer);
    }
};

} // namespace bcl::detail
