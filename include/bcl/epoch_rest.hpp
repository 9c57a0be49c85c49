#pragma once
// What is left of an epoch's order once some of it was trained: the order's positions from a
// start on, those of a short span after the start marked taken. A job that stops mid-epoch and
// restarts on another number of ranks plans the rest of the epoch, and only it, at the new size:
// the records taken stay taken, the others come out once. The rest is small whatever the epoch:
// a bitmap of the span, which a step boundary keeps within the window being trained (and each
// further restart within one more window).

#include <bcl/detail/config.hpp>

#include <bcl/error.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace bcl {

/// The rest of an epoch of N order positions: positions [start, N), but those of
/// [start, start + span) whose bit is set in `taken` (bit i of byte i/8 for position start + i).
/// Its records, in order: the span's untaken positions, then [start + span, N). The whole epoch
/// is epoch_rest(N).
class epoch_rest {
public:
    epoch_rest() = default;
    /// The whole epoch of `n` positions.
    explicit epoch_rest(std::uint64_t n) : m_n(n) {}

    /// A rest from its parts, as a checkpoint holds them. Throws bcl::error (prefixed with
    /// `who`) for a start or span past N, a bitmap of other than ceil(span / 8) bytes or with
    /// bits set past the span, or a start position taken (a rest starts at a record left).
    static epoch_rest from_parts(std::uint64_t n, std::uint64_t start, std::uint64_t span,
                                 std::span<const std::uint8_t> taken, std::string_view who) {
        const std::string prefix = std::string(who) + ": the epoch's rest ";
        if (start > n || span > n - start)
            throw error(prefix + "spans positions [" + std::to_string(start) + ", " +
                        std::to_string(start) + " + " + std::to_string(span) +
                        "), past the epoch's " + std::to_string(n));
        if (taken.size() != (span + 7) / 8)
            throw error(prefix + "has a bitmap of " + std::to_string(taken.size()) +
                        " bytes for a span of " + std::to_string(span) + " positions");
        if (span % 8 != 0 && (taken.back() >> (span % 8)) != 0)
            throw error(prefix + "has bits set past its span");
        if (span > 0 && (taken[0] & 1U) != 0)
            throw error(prefix + "starts at a position it marks taken");
        epoch_rest r(n);
        r.m_start = start;
        r.m_span = span;
        r.m_taken.assign(taken.begin(), taken.end());
        r.index_pending();
        return r;
    }

    [[nodiscard]] std::uint64_t epoch_size() const noexcept { return m_n; }
    [[nodiscard]] std::uint64_t start() const noexcept { return m_start; }
    [[nodiscard]] std::uint64_t span() const noexcept { return m_span; }
    /// The span's bitmap: bit i of byte i/8 set when position start + i is taken.
    [[nodiscard]] std::span<const std::uint8_t> taken() const noexcept { return m_taken; }
    /// Whether this is the whole epoch.
    [[nodiscard]] bool whole() const noexcept { return m_start == 0 && m_span == 0; }

    /// The records left.
    [[nodiscard]] std::uint64_t size() const noexcept {
        return m_pending.size() + (m_n - m_start - m_span);
    }
    /// The order position of the rest's record q (q < size()). O(1).
    [[nodiscard]] std::uint64_t position(std::uint64_t q) const noexcept {
        return q < m_pending.size() ? m_pending[q] : m_start + m_span + (q - m_pending.size());
    }

    /// The rest once the rest's records [0, prefix) and those listed in `also` (the rest's
    /// record numbers, each at least prefix and below size(), in any order; repeats allowed)
    /// are taken too. Its span ends where this one's does or past the last taken record,
    /// whichever is later. O(span of the result + also log also).
    [[nodiscard]] epoch_rest after(std::uint64_t prefix, std::vector<std::uint64_t> also) const {
        std::sort(also.begin(), also.end());
        also.erase(std::unique(also.begin(), also.end()), also.end());
        const std::uint64_t left = size();
        prefix = std::min(prefix, left);
        // The first record not taken.
        std::uint64_t first = prefix;
        auto next_taken = std::lower_bound(also.begin(), also.end(), first);
        while (next_taken != also.end() && *next_taken == first) {
            ++first;
            ++next_taken;
        }
        epoch_rest r(m_n);
        if (first >= left) { // nothing left: the rest is empty
            r.m_start = m_n;
            return r;
        }
        r.m_start = position(first);
        std::uint64_t end = m_start + m_span;
        if (!also.empty() && also.back() < left) end = std::max(end, position(also.back()) + 1);
        end = std::max(end, r.m_start);
        r.m_span = end - r.m_start;
        r.m_taken.assign((r.m_span + 7) / 8, 0xFF);
        if (r.m_span % 8 != 0)
            r.m_taken.back() = static_cast<std::uint8_t>((1U << (r.m_span % 8)) - 1);
        // Clear the bits of the records left: positions rise with record numbers.
        for (std::uint64_t q = first; q < left; ++q) {
            const std::uint64_t p = position(q);
            if (p >= end) break;
            if (next_taken != also.end() && *next_taken == q) {
                ++next_taken;
                continue;
            }
            const std::uint64_t i = p - r.m_start;
            r.m_taken[i / 8] = static_cast<std::uint8_t>(r.m_taken[i / 8] & ~(1U << (i % 8)));
        }
        r.index_pending();
        return r;
    }

private:
    void index_pending() {
        m_pending.clear();
        for (std::uint64_t i = 0; i < m_span; ++i)
            if ((m_taken[i / 8] >> (i % 8) & 1U) == 0) m_pending.push_back(m_start + i);
    }

    std::uint64_t m_n = 0;
    std::uint64_t m_start = 0;
    std::uint64_t m_span = 0;
    std::vector<std::uint8_t> m_taken;
    std::vector<std::uint64_t> m_pending; // the span's positions left, ascending
};

} // namespace bcl
