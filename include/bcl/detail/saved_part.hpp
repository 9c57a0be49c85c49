#pragma once
// What every component's part of a saved state shares. A component that keeps state declares its
// part beside itself: the members (`saved`), their field list (a static `fields(io, part, ...)`
// over an `Io` that the state layer's field_writer and field_reader both are) and the checks
// that read that part alone (`check()`). The state layer composes the parts into one snapshot
// and walks them in the format's order; components never include it.

#include <bcl/detail/config.hpp>

#include <bcl/error.hpp>

#include <string>
#include <type_traits>

namespace bcl::detail {

/// The error of a saved state that no balancer could have written, unless `ok`.
inline void check_saved(bool ok, const std::string& what) {
    if (!ok) throw error("bcl: saved state is inconsistent: " + what);
}

/// The part `Part` of a composed saved state `whole` (one of its bases), const if `whole` is:
/// the writer walks a const state, the reader a mutable one, through the same field list.
template <class Part, class Whole>
[[nodiscard]] constexpr auto& part_of(Whole& whole) noexcept {
    if constexpr (std::is_const_v<Whole>)
        return static_cast<const Part&>(whole);
    else
        return static_cast<Part&>(whole);
}

/// Checks a part alone (its check()), if it has anything to check.
template <class Part>
void check_part(const Part& part) {
    if constexpr (requires { part.check(); }) part.check();
}

/// A component that keeps state: it declares its part of a saved state as `saved`.
template <class Component>
concept keeps_state = requires {
    typename Component::saved;
};

} // namespace bcl::detail
