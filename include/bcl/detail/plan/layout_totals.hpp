#pragma once
// Internal: what a layout of the global plan (packed_layout, padded_layout) reports.

#include <bcl/detail/config.hpp>

#include <cstdint>

namespace bcl::detail::plan {

/// What a layout reports, in quantized units.
struct layout_totals {
    std::uint64_t total = 0;       ///< sum of the costs (padded: of the packs' padded costs)
    std::uint64_t objective = 0;   ///< sum over steps of the step's heaviest pack
    std::uint64_t heaviest = 0;    ///< heaviest pack
    std::uint64_t lower_bound = 0; ///< no plan has a smaller objective
};

} // namespace bcl::detail::plan
