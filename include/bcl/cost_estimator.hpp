#pragma once
// The cost_estimator concept: how a balancer learns what a record will cost the trainer.

#include <concepts>
#include <type_traits>

namespace bcl {

/// A type E satisfies `cost_estimator<E, Record>` if:
///   1. it is move-constructible (the balancer keeps its own copy);
///   2. an lvalue of E is invocable with a `const Record&`;
///   3. the result is convertible to `double`.
/// It does not have to be noexcept, const-callable or default-constructible. The balancer checks
/// every value it returns: NaN, infinity or a negative cost is a bcl::error naming the record. An
/// exception the estimator throws propagates unchanged and the record stays with the caller.
/// For determinism (contract point 5) the result should depend on the record alone.
template <class E, class Record>
concept cost_estimator =
    std::move_constructible<E> && std::invocable<E&, const Record&> &&
    std::convertible_to<std::invoke_result_t<E&, const Record&>, double>;

} // namespace bcl
