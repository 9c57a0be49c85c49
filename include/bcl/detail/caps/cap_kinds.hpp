#pragma once
// The cap kinds a balancer can apply, one component each.

#include <bcl/detail/config.hpp>

#include <bcl/detail/caps/fixed_cap.hpp>
#include <bcl/detail/caps/no_cap.hpp>
#include <bcl/detail/caps/quantile_cap.hpp>
#include <bcl/detail/saved_part.hpp>
#include <bcl/detail/variant_of.hpp>
#include <bcl/error.hpp>
#include <bcl/options.hpp>

#include <cstddef>
#include <optional>
#include <string>
#include <utility>
#include <variant>

namespace bcl::detail {

/// The cap kinds, in the order of bcl::cap_kind's values: a kind is its value there and its
/// component here (see no_cap for what one provides). Adding one is its file, its #include here
/// and its name in this list.
using cap_kinds = std::variant<no_cap, fixed_cap, quantile_cap>;

/// The error for a cap.kind that names no kind.
[[nodiscard]] inline error unknown_cap_kind(const cap_options& cap) {
    return error("bcl::options::cap.kind has no such kind (" +
                 std::to_string(static_cast<int>(cap.kind)) + ")");
}

/// Throws bcl::error for a cap.kind that names no kind, or naming the first of the kind's fields
/// out of range, by the kind's type: nothing is built from the unchecked fields (building a
/// quantile cap computes its warm-up from the quantile).
inline void validate_cap_kind(const cap_options& cap) {
    const bool known =
        visit_alternative_type<cap_kinds>(static_cast<std::size_t>(cap.kind),
                                          [&](auto kind) { decltype(kind)::type::validate(cap); });
    if (!known) throw unknown_cap_kind(cap);
}

/// The component of cap.kind. Throws bcl::error for a value that names no kind.
[[nodiscard]] inline cap_kinds make_cap_kind(const cap_options& cap) {
    std::optional<cap_kinds> made = variant_of<cap_kinds>(static_cast<std::size_t>(cap.kind), cap);
    if (!made) throw unknown_cap_kind(cap);
    return *made;
}

/// A cap kind's part of a saved state: its `saved` if it keeps state, else nothing.
template <class Kind>
struct cap_kind_part {
    template <class Io, class Part>
    static void fields(Io& /*io*/, Part& /*s*/) noexcept {}
};
template <keeps_state Kind>
struct cap_kind_part<Kind> : Kind::saved {};

template <class Kinds>
struct cap_kinds_part;
/// Every kind's part, in the list's order, whichever kind is in force (the others keep their
/// parts as made): a kind that keeps state brings its part to the byte format through this list
/// (and a new format version, snapshot.hpp). The snapshot inherits their members, so a kind names
/// its own apart from every other part's.
template <class... Kinds>
struct cap_kinds_part<std::variant<Kinds...>> : cap_kind_part<Kinds>... {
    template <class Io, class Part>
    static void fields(Io& io, Part& s) {
        (cap_kind_part<Kinds>::fields(io, part_of<cap_kind_part<Kinds>>(s)), ...);
    }
    void check() const { (check_part(static_cast<const cap_kind_part<Kinds>&>(*this)), ...); }
};

/// The cap kinds' part of a saved state (outlier_cap's).
using cap_kinds_saved = cap_kinds_part<cap_kinds>;

} // namespace bcl::detail
