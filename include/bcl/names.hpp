#pragma once
// The names of the options' choices, from the registries that define them: a lookahead policy and
// a cap kind are each a component that carries its name, listed once (the variants of
// detail/rounds/round_policy.hpp and detail/caps/cap_kinds.hpp); the emission orders, batch costs
// and cap actions are listed here. Tools, the Python bindings and the benches spell and parse
// every choice through these, so a new policy or cap kind is known everywhere by its name.

#include <bcl/detail/config.hpp>

#include <bcl/detail/caps/cap_kinds.hpp>
#include <bcl/detail/rounds/round_policy.hpp>
#include <bcl/detail/variant_of.hpp>
#include <bcl/error.hpp>
#include <bcl/options.hpp>

#include <array>
#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace bcl {

/// The names of an options enum's values, in the order of those values, and what a value of it
/// is called in messages (and its plural). Defined for lookahead_policy, cap_kind, emission_order,
/// batch_cost and cap_action.
template <class Enum>
struct choice_names;

template <>
struct choice_names<lookahead_policy> {
    static constexpr std::string_view what = "lookahead policy";
    static constexpr std::string_view plural = "lookahead policies";
    static constexpr auto names = detail::alternative_names<detail::round_policy>();
};

template <>
struct choice_names<cap_kind> {
    static constexpr std::string_view what = "cap kind";
    static constexpr std::string_view plural = "cap kinds";
    static constexpr auto names = detail::alternative_names<detail::cap_kinds>();
};

template <>
struct choice_names<emission_order> {
    static constexpr std::string_view what = "emission order";
    static constexpr std::string_view plural = "emission orders";
    static constexpr std::array<std::string_view, 2> names{"costliest_first", "shuffled"};
};

template <>
struct choice_names<batch_cost> {
    static constexpr std::string_view what = "batch cost";
    static constexpr std::string_view plural = "batch costs";
    static constexpr std::array<std::string_view, 2> names{"packed", "padded"};
};

template <>
struct choice_names<cap_action> {
    static constexpr std::string_view what = "cap action";
    static constexpr std::string_view plural = "cap actions";
    static constexpr std::array<std::string_view, 2> names{"clip", "truncate"};
};

/// The names of Enum's values, in the order of the values: `names_of<lookahead_policy>()` is
/// {"tumbling", "sliding"}. O(1), noexcept.
template <class Enum>
[[nodiscard]] constexpr std::span<const std::string_view> names_of() noexcept {
    return choice_names<Enum>::names;
}

/// The name of `value`; "" for a value that names nothing. O(1), noexcept.
template <class Enum>
[[nodiscard]] constexpr std::string_view name_of(Enum value) noexcept {
    const auto i = static_cast<std::size_t>(value);
    return i < choice_names<Enum>::names.size() ? choice_names<Enum>::names[i] : std::string_view{};
}

/// The value named `name`, or nothing. O(values), noexcept.
template <class Enum>
[[nodiscard]] constexpr std::optional<Enum> find_named(std::string_view name) noexcept {
    for (std::size_t i = 0; i < choice_names<Enum>::names.size(); ++i)
        if (choice_names<Enum>::names[i] == name) return static_cast<Enum>(i);
    return std::nullopt;
}

/// What lookahead policy `policy` does, in a line (its component's `summary`); "" for a value
/// that names none. O(1), noexcept.
[[nodiscard]] constexpr std::string_view policy_summary(lookahead_policy policy) noexcept {
    constexpr auto summaries = []<std::size_t... I>(std::index_sequence<I...>) {
        return std::array<std::string_view, sizeof...(I)>{
            std::variant_alternative_t<I, detail::round_policy>::summary...};
    }
    (std::make_index_sequence<std::variant_size_v<detail::round_policy>>{});
    const auto i = static_cast<std::size_t>(policy);
    return i < summaries.size() ? summaries[i] : std::string_view{};
}

/// The names of Enum's values, comma-separated ("tumbling, sliding").
template <class Enum>
[[nodiscard]] std::string names_text() {
    std::string text;
    for (const std::string_view n : choice_names<Enum>::names) {
        if (!text.empty()) text += ", ";
        text += n;
    }
    return text;
}

/// The value named `name`. Throws bcl::error "bcl: no lookahead policy is named 'x' (the
/// lookahead policies are tumbling, sliding)" for a name that is none of them.
template <class Enum>
[[nodiscard]] Enum named(std::string_view name) {
    if (const std::optional<Enum> value = find_named<Enum>(name)) return *value;
    throw error("bcl: no " + std::string(choice_names<Enum>::what) + " is named '" +
                std::string(name) + "' (the " + std::string(choice_names<Enum>::plural) + " are " +
                names_text<Enum>() + ")");
}

} // namespace bcl
