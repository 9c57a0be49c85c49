#pragma once
// The concept of what a balancer buffers and hands out.

#include <bcl/detail/config.hpp>

#include <type_traits>

namespace bcl {

/// A type satisfies `record` if:
///   1. it is a non-const object type;
///   2. it is nothrow move-constructible;
///   3. it is nothrow move-assignable.
/// Records are moved into the buffer, within it (sliding policy) and out to their batch; a move
/// that could throw halfway through a round would lose records, so it is ruled out at compile
/// time. Records need not be copyable or default-constructible.
template <class T>
concept record = std::is_object_v<T> && !std::is_const_v<T> &&
                 std::is_nothrow_move_constructible_v<T> && std::is_nothrow_move_assignable_v<T>;

} // namespace bcl
