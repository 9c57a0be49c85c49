#pragma once
// Internal: a dataset index checked against the table it indexes (a cost or token table).

#include <bcl/detail/config.hpp>

#include <bcl/error.hpp>

#include <cstddef>
#include <string>
#include <string_view>
#include <type_traits>

namespace bcl::detail {

/// `index` as a position in a table of `table` entries by dataset index. Throws bcl::error
/// (prefixed with `who`) naming the index when it is negative or past the table: it has no
/// `what` in `table_name`.
template <class Index>
[[nodiscard]] std::size_t table_index(Index index, std::size_t table, std::string_view what,
                                      std::string_view table_name, std::string_view who) {
    bool negative = false;
    if constexpr (std::is_signed_v<Index>) negative = index < 0;
    if (!negative && static_cast<std::size_t>(index) < table) [[likely]]
        return static_cast<std::size_t>(index);
    throw error(std::string(who) + ": dataset index " + std::to_string(index) + " has no " +
                std::string(what) + " (" + std::string(table_name) + " has " +
                std::to_string(table) + " entries)");
}

} // namespace bcl::detail
