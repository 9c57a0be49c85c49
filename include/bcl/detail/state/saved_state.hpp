#pragma once
// What a balancer saves: the records it still holds, and everything else as a snapshot that
// travels as bytes.

#include <bcl/detail/config.hpp>

#include <bcl/detail/state/snapshot_check.hpp>
#include <bcl/error.hpp>

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace bcl::detail {

/// Everything needed to continue a balancer exactly where it was (bcl::balancer::state): the
/// records it holds and has not yet handed out (`pending`), and the rest (counters, running
/// means, random state, costs of the pending records, a calibration's fit). `pending` holds first
/// the records of the batches already formed and not yet popped, in the order they will be
/// popped, then the buffered records in arrival order.
template <class Record>
struct saved_state {
    std::vector<Record> pending;
    balancer_snapshot snapshot;

    /// Everything but the records, as a portable byte string (little-endian, checksummed).
    [[nodiscard]] std::string to_bytes() const { return detail::to_bytes(snapshot); }

    /// Rebuilds a state from to_bytes() and the pending records, in the documented order.
    /// Throws bcl::error if the bytes are truncated, corrupted or describe a balancer that could
    /// not exist, or if the number of records is not the number saved.
    [[nodiscard]] static saved_state from_bytes(std::string_view bytes,
                                                std::vector<Record> pending) {
        saved_state s{std::move(pending), snapshot_from_bytes(bytes)};
        s.require_pending();
        return s;
    }

    /// Throws bcl::error unless `pending` holds as many records as the snapshot was saved with.
    void require_pending() const {
        if (pending.size() != snapshot.pending_records())
            throw error("bcl::balancer::state: " + std::to_string(pending.size()) +
                        " pending records given, but the state was saved with " +
                        std::to_string(snapshot.pending_records()));
    }
};

} // namespace bcl::detail
