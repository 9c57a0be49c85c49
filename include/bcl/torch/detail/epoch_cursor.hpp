#pragma once
// The epoch protocol of bcl's libtorch samplers, in one place: which epoch is under way, which one
// set_epoch() chose for the next reset(), and whether the epoch under way has started, with the
// rule by which reset() moves on. Both samplers keep their epoch in one of these, and both
// archives hold it as one field (detail/archive_header.hpp).

#include <bcl/detail/config.hpp>

#include <bcl/error.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>

namespace bcl::torch::detail {

/// The one range of an epoch and of a distributed sampler's seed, wherever either enters
/// (set_epoch(), reset(), a constructor): [0, 2^63), what an archive's int64 field holds, and the
/// range the Python samplers keep.
inline constexpr std::uint64_t counter_end = std::uint64_t{1} << 63;

/// Throws bcl::error "<who>: <what> must be below 2^63 (got <value>)" unless value < 2^63.
inline void check_counter(std::uint64_t value, const char* who, const char* what) {
    if (value >= counter_end)
        throw bcl::error(std::string(who) + ": " + what + " must be below 2^63 (got " +
                         std::to_string(value) + ")");
}

/// Where a sampler stands in its epochs: the epoch under way, the epoch set_epoch() chose for
/// the next reset() (if it was called since the last one), and whether the epoch under way has
/// started (the sampler says when: mark_started()). reset() moves to the chosen epoch, else to
/// the next one if this one started, else starts this one again, so a data loader's first
/// begin() (a reset() before any batch) does not skip epoch 0.
///
/// Invariant: every epoch it holds is below 2^63 (counter_end), what an archive can hold; each
/// way in checks it and throws bcl::error otherwise, changing nothing. Every operation is O(1).
class epoch_cursor {
public:
    /// Epoch 0, not started, none chosen.
    epoch_cursor() = default;

    /// `epoch`, not started, none chosen. Throws bcl::error "<who>: <what> must be below 2^63"
    /// for an epoch of 2^63 or more.
    epoch_cursor(std::size_t epoch, const char* who, const char* what) : m_current(epoch) {
        check_counter(epoch, who, what);
    }

    /// Chooses the epoch the next reset() starts; the epoch under way is not changed. Throws
    /// bcl::error (prefixed with `who`) for an epoch of 2^63 or more, changing nothing.
    void set_epoch(std::size_t epoch, const char* who) {
        check_counter(epoch, who, "the epoch");
        m_chosen = epoch;
    }

    /// Starts the next epoch (next_epoch()), not started, none chosen, and returns it. Throws
    /// bcl::error (prefixed with `who`) if that is 2^63 (the epoch after the largest one),
    /// changing nothing.
    std::size_t reset(const char* who) {
        const std::size_t next = next_epoch();
        check_counter(next, who, "the next epoch");
        m_current = next;
        m_chosen.reset();
        m_started = false;
        return next;
    }

    /// The epoch under way has started: the next reset() moves past it.
    void mark_started() noexcept { m_started = true; }

    /// The epoch the next reset() starts: the one set_epoch() chose, else the epoch under way
    /// plus one if it started, else the epoch under way.
    [[nodiscard]] std::size_t next_epoch() const noexcept {
        return m_chosen ? *m_chosen : m_current + (m_started ? 1 : 0);
    }
    /// What a sampler's epoch() says: the epoch set_epoch() chose, else the epoch under way.
    [[nodiscard]] std::size_t epoch() const noexcept { return m_chosen.value_or(m_current); }
    /// The epoch under way.
    [[nodiscard]] std::size_t current() const noexcept { return m_current; }
    /// Whether the epoch under way has started (mark_started() since the last reset()).
    [[nodiscard]] bool started() const noexcept { return m_started; }
    /// The epoch set_epoch() chose since the last reset(), if it was called.
    [[nodiscard]] std::optional<std::size_t> chosen() const noexcept { return m_chosen; }

    /// The cursor as four values: the epoch under way, started (0 or 1), chosen (0 or 1), and
    /// the chosen epoch (0 if none). What an archive's bcl_epoch holds.
    [[nodiscard]] std::array<std::int64_t, 4> to_values() const noexcept {
        return {static_cast<std::int64_t>(m_current), m_started ? 1 : 0, m_chosen ? 1 : 0,
                static_cast<std::int64_t>(m_chosen.value_or(0))};
    }

    /// The cursor whose to_values() is `values`, or std::nullopt unless `values` is four such
    /// values: epochs of 0 or more (so below 2^63), flags of 0 or 1, the chosen epoch 0 without
    /// its flag.
    [[nodiscard]] static std::optional<epoch_cursor>
    from_values(std::span<const std::int64_t> values) noexcept {
        const auto flag = [](std::int64_t v) { return v == 0 || v == 1; };
        if (values.size() != 4 || values[0] < 0 || !flag(values[1]) || !flag(values[2]) ||
            values[3] < 0 || (values[2] == 0 && values[3] != 0))
            return std::nullopt;
        epoch_cursor c;
        c.m_current = static_cast<std::size_t>(values[0]);
        c.m_started = values[1] != 0;
        if (values[2] != 0) c.m_chosen = static_cast<std::size_t>(values[3]);
        return c;
    }

    friend bool operator==(const epoch_cursor&, const epoch_cursor&) = default;

private:
    std::size_t m_current = 0;           // the epoch under way
    std::optional<std::size_t> m_chosen; // set_epoch() since the last reset()
    bool m_started = false;              // the epoch under way has started
};

} // namespace bcl::torch::detail
