#pragma once
// A variant's alternative chosen by its index, as an options enum names it (its type, to check its
// settings before any is built, or one built), and a visit of the alternative it holds.

#include <bcl/detail/config.hpp>

#include <array>
#include <cstddef>
#include <optional>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>

namespace bcl::detail {

/// f(std::type_identity<the alternative number `index` of Variant>{}), building nothing: what
/// checks an alternative's settings (a static validate) before one is constructed from them.
/// False for an index past its alternatives.
template <class Variant, class F>
bool visit_alternative_type(std::size_t index, F&& f) {
    return [&]<std::size_t... I>(std::index_sequence<I...>) {
        return ((index == I
                     ? (f(std::type_identity<std::variant_alternative_t<I, Variant>>{}), true)
                     : false) ||
                ...);
    }
    (std::make_index_sequence<std::variant_size_v<Variant>>{});
}

/// The alternative number `index` of `Variant`, constructed from `arg`; nothing for an index past
/// its alternatives. A policy or cap kind is the enum value of its position in the variant that
/// lists the components, so a new one is its component and its place in that list.
template <class Variant, class Arg>
[[nodiscard]] std::optional<Variant> variant_of(std::size_t index, const Arg& arg) {
    return [&]<std::size_t... I>(std::index_sequence<I...>) {
        std::optional<Variant> made;
        (void)((index == I ? (made.emplace(std::in_place_index<I>, arg), true) : false) || ...);
        return made;
    }
    (std::make_index_sequence<std::variant_size_v<Variant>>{});
}

/// The names of a registry's alternatives (each one's static `name`), in the order of the enum
/// whose values index them.
template <class Variant>
[[nodiscard]] constexpr auto alternative_names() noexcept {
    return []<std::size_t... I>(std::index_sequence<I...>) {
        return std::array<std::string_view, sizeof...(I)>{
            std::variant_alternative_t<I, Variant>::name...};
    }
    (std::make_index_sequence<std::variant_size_v<Variant>>{});
}

/// f(the alternative `v` holds), as std::visit, for a variant that is never valueless (its
/// alternatives' constructors and moves do not throw once made): by index, so nothing escapes a
/// noexcept caller. Every f(alternative) must have the same type.
template <std::size_t I = 0, class Variant, class F>
decltype(auto) visit_held(Variant& v, F&& f) {
    if constexpr (I + 1 == std::variant_size_v<std::remove_const_t<Variant>>)
        return f(*std::get_if<I>(&v));
    else
        return v.index() == I ? f(*std::get_if<I>(&v)) : visit_held<I + 1>(v, f);
}

} // namespace bcl::detail
