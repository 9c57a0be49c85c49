#pragma once
// The stage_cost_estimator concept: how bcl::stage_balancer learns what a record costs each stage
// of a model whose stages synchronise separately (a vision encoder, then a language model).

#include <bcl/detail/config.hpp>

#include <bcl/detail/stages/step_stages.hpp>

#include <array>
#include <concepts>
#include <cstddef>
#include <type_traits>

namespace bcl {

namespace detail {

/// D of a std::array<double, D>; 0 for any other type.
template <class T>
inline constexpr std::size_t stage_array_size = 0;
template <std::size_t D>
inline constexpr std::size_t stage_array_size<std::array<double, D>> = D;

/// D of what E gives a record; 0 if it gives no array of stage costs.
template <class E, class Record>
inline constexpr std::size_t stage_result_size =
    stage_array_size<std::remove_cvref_t<std::invoke_result_t<E&, const Record&>>>;

} // namespace detail

/// A type E satisfies `stage_cost_estimator<E, Record>` if:
///   1. it is move-constructible (the balancer keeps its own copy);
///   2. an lvalue of E is invocable with a `const Record&`;
///   3. the result is a `std::array<double, D>`, D from 1 to bcl::max_plan_stages (16): the
///      record's cost in each stage, in one unit (bcl::multimodal_cost gives {vision encoder,
///      language model}).
/// D is fixed at compile time, so a record's costs live in the buffer beside it without an
/// allocation. The balancer checks every value: NaN, a negative cost or one above
/// bcl::max_estimate is a bcl::error naming the record and the stage. For determinism the result
/// should depend on the record alone.
template <class E, class Record>
concept stage_cost_estimator = std::move_constructible<E> && std::invocable<E&, const Record&> &&
    detail::stage_result_size<E, Record>
>= 1 && detail::stage_result_size<E, Record> <= detail::stages::max_stages;

/// D, the stages an estimator gives a record.
template <class E, class Record>
requires stage_cost_estimator<E, Record>
inline constexpr std::size_t stage_count = detail::stage_result_size<E, Record>;

} // namespace bcl
