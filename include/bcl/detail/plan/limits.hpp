#pragma once
// The size every plan shares (fixed-size and token plans alike), in a header of its own so that
// a plan's header need not include another plan's for it.

#include <bcl/detail/config.hpp>

#include <cstddef>

namespace bcl {

/// The most records a window may hold (R*K*B), and the most cells (R*K*M) a token plan may
/// hold: record positions are 32-bit, and the fixed-point scale keeps at least 32 bits for the
/// dearest cost.
inline constexpr std::size_t max_plan_records = std::size_t{1} << 30;

} // namespace bcl
