#pragma once
// The tumbling lookahead policy (the BCL paper's): fill a window of K*B records, take all of it.

#include <bcl/detail/config.hpp>

#include <bcl/detail/rounds/round_settings.hpp>

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

namespace bcl::detail {

/// Tumbling rounds: the buffer holds exactly one window, and each round takes all of it, so each
/// window is balanced to its own mean and a record waits at most K-1 batches.
struct tumbling_rounds {
    /// Its name in options::policy's spelling (bcl::policy_names), and what it does, in a line.
    static constexpr std::string_view name = "tumbling";
    static constexpr std::string_view summary =
        "fill a window of K*B records, balance all of it, emit K batches (the paper's policy)";

    round_settings settings;

    [[nodiscard]] std::size_t capacity() const noexcept { return settings.window(); }
    [[nodiscard]] std::size_t max_delay() const noexcept { return settings.lookahead - 1; }
    /// Nothing to check beyond the settings every policy shares.
    static void validate(const round_settings& /*s*/, std::size_t /*max_buffer*/,
                         std::size_t /*max_delay*/) noexcept {}
    void reserve(std::size_t /*buffer*/) noexcept {}

    /// Whether a saved buffer could hold the record at `slot` (arrival `arrival`) after `round`
    /// rounds: exactly the records pushed since the last round, in order.
    [[nodiscard]] bool may_hold(std::uint64_t arrival, std::size_t slot,
                                std::uint64_t round) const noexcept {
        return arrival == round * settings.window() + slot;
    }

    /// A tumbling round always takes the whole buffer, so it never has to choose; for
    /// completeness it would take the oldest records.
    static void choose(const round_inputs& in, std::span<std::uint8_t> chosen) noexcept {
        for (std::size_t i = 0; i < chosen.size(); ++i) chosen[i] = i < in.take ? 1 : 0;
    }
};

} // namespace bcl::detail
