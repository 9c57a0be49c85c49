#pragma once
// The cost_estimator concept: how a balancer learns what a record will cost the trainer.

#include <bcl/detail/config.hpp>

#include <concepts>
#include <type_traits>

namespace bcl {

/// The largest cost (or memory) estimate a balancer or partitioner accepts; a larger one is a
/// bcl::error naming the record. No cost model comes near it (1e120 FLOPs is not a record), and
/// below it no sum, mean or square the library keeps can overflow to infinity: 2^64 records of
/// 2^26-record windows of such costs stay finite, and so do the squares of their batch costs.
/// An infinite sum would make an open pack look full to the partitioner and a saved state
/// unrestorable.
inline constexpr double max_estimate = 1e120;

/// A type E satisfies `cost_estimator<E, Record>` if:
///   1. it is move-constructible (the balancer keeps its own copy);
///   2. an lvalue of E is invocable with a `const Record&`;
///   3. the result is convertible to `double`.
/// It does not have to be noexcept, const-callable or default-constructible. The balancer checks
/// every value it returns: NaN, a negative cost or one above bcl::max_estimate is a bcl::error
/// naming the record. An
/// exception the estimator throws propagates unchanged and the record stays with the caller.
/// For determinism (contract point 5) the result should depend on the record alone.
template <class E, class Record>
concept cost_estimator = std::move_constructible<E> && std::invocable<E&, const Record&> &&
                         std::convertible_to < std::invoke_result_t<E&, const Record&>,
double > ;

} // namespace bcl
