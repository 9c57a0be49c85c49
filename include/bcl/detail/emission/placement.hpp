#pragma once
// Step 5 of a round: every record of the round moves from the buffer to its batch.

#include <bcl/detail/config.hpp>

#include <bcl/detail/emission/delay_tally.hpp>
#include <bcl/detail/rounds/round_policy.hpp>

#include <cstddef>
#include <cstdint>
#include <span>

namespace bcl::detail {

/// Moves the round's records (`r`, gathered in `buffer`) to the batches of `ready`: record i
/// went to pack pack_of[i], which leaves as batch rank[pack]. On its way each record's delay is
/// counted (`delays`) and its features join its batch's (`calibration`: batch_calibration, or
/// no_calibration doing nothing). Cannot throw: every vector involved was reserved.
template <class Ready, class Buffer, class Calibration>
void place_round(Ready& ready, Buffer& buffer, const round_records& r, std::size_t batch_size,
                 std::span<const std::uint32_t> pack_of, std::span<const std::uint32_t> rank,
                 delay_tally::round_counter& delays, Calibration& calibration) noexcept {
    const std::span<const std::uint32_t> slots = buffer.round_slots();
    const std::span<const std::uint64_t> arrivals = buffer.arrivals();
    calibration.start_round(rank.size());
    auto place = [&](auto slot_of) {
        ready.place(
            r.take, batch_size, buffer.records(), arrivals, slot_of,
            [&](std::size_t i) { return rank[pack_of[i]]; },
            [&](std::size_t i, std::uint32_t slot, std::uint32_t batch) {
                delays.count(i, arrivals[slot], batch);
                calibration.add(batch, buffer, slot);
            });
    };
    // Two loops rather than a branch per record: a round of the whole buffer reads it in place.
    if (r.whole_buffer)
        place([](std::size_t i) { return static_cast<std::uint32_t>(i); });
    else
        place([&](std::size_t i) { return slots[i]; });
    calibration.finish_round();
}

} // namespace bcl::detail
