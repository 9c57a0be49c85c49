#pragma once
// Internal: the window rule of a token stream, in one place for the planner, the epoch planner
// and the simulator: which records, from the stream's front, a window of K steps of M
// micro-batches on every rank may take.

#include <bcl/detail/config.hpp>

#include <bcl/detail/tokens/budget.hpp>
#include <bcl/detail/tokens/token_records.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>

namespace bcl::detail::tokens {

/// A window takes records in stream order while their tokens stay within its capacity
/// (R * K * M * T), each counted as its padded length and at most T (a record above T fills its
/// micro-batch alone), and, once it holds one record a micro-batch, within max_fill of the
/// capacity. Integers only: the same records on every rank.
class window_rule {
public:
    /// The rule of a window of `steps` steps of `micro_batches` micro-batches (the budget, the
    /// window and the options checked already); `max_fill` as the options say, or 1 for the
    /// candidates an epoch hands its planner.
    window_rule(const token_budget& budget, std::size_t micro_batches, std::size_t steps,
                std::uint64_t pad_to_multiple_of, double max_fill = 1.0) noexcept
        : m_max_tokens(budget.max_tokens), m_pad(pad_to_multiple_of),
          m_cells(budget.ranks * steps * micro_batches), m_capacity(m_cells * budget.max_tokens),
          m_filled(max_fill >= 1.0 ? m_capacity
                                   : static_cast<std::uint64_t>(
                                         std::floor(max_fill * static_cast<double>(m_capacity)))) {}

    /// The tokens a record of `length` takes of the window.
    [[nodiscard]] std::uint64_t counted(std::uint64_t length) const noexcept {
        return std::min(padded_length(length, m_pad), m_max_tokens);
    }

    /// Whether a window holding `taken` records of `running` tokens takes one more of `counted`
    /// tokens.
    [[nodiscard]] bool takes(std::uint64_t running, std::uint64_t counted,
                             std::size_t taken) const noexcept {
        return running + counted <= m_capacity &&
               (running + counted <= m_filled || taken < m_cells);
    }

    /// How many records from the front of `n` the window takes: `length_of(i)` the length of
    /// the i-th. Reads only those and the first it refuses. O(records taken).
    template <class LengthOf>
    [[nodiscard]] std::size_t records(std::size_t n, LengthOf&& length_of) const {
        std::size_t taken = 0;
        std::uint64_t running = 0;
        for (; taken < n; ++taken) {
            const std::uint64_t t = counted(length_of(taken));
            if (!takes(running, t, taken)) break;
            running += t;
        }
        return taken;
    }

    /// The window's micro-batches over every rank: R * K * M.
    [[nodiscard]] std::size_t cells() const noexcept { return m_cells; }

private:
    std::uint64_t m_max_tokens;
    std::uint64_t m_pad;
    std::size_t m_cells;
    std::uint64_t m_capacity;
    std::uint64_t m_filled;
};

} // namespace bcl::detail::tokens
