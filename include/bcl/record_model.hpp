#pragma once
// Optional knowledge about records beyond their cost: a memory estimate (for the per-batch memory
// budget) and a way to truncate a record (for the truncating cap). Both attach to a cost estimator,
// so the balancer keeps a single estimator type.

#include <bcl/detail/config.hpp>

#include <concepts>
#include <functional>
#include <type_traits>
#include <utility>

namespace bcl {

/// A type E satisfies `memory_estimator<E, Record>` if:
///   1. an lvalue of E has a member `memory(const Record&)`;
///   2. whose result is convertible to `double` (bytes, tokens: any unit, the same as
///      options::memory_budget).
/// The balancer checks the values: NaN, infinite or negative is a bcl::error naming the record.
template <class E, class Record>
concept memory_estimator = requires(E& e, const Record& r) {
    { e.memory(r) } -> std::convertible_to<double>;
};

/// A type E satisfies `truncating_estimator<E, Record>` if an lvalue of E has a member
/// `truncate(Record&, double cap)`. It should shrink the record so that its estimated cost is at
/// most `cap` (e.g. cut tokens); the balancer then estimates it again, and clips an estimate that
/// is still above the cap.
template <class E, class Record>
concept truncating_estimator = requires(E& e, Record& r, double cap) {
    e.truncate(r, cap);
};

/// A cost estimator together with a memory estimator; see bcl::with_memory.
template <class Cost, class Memory>
struct memory_aware_cost {
    Cost cost;
    Memory memory_of;

    template <class Record>
    requires std::invocable<Cost&, const Record&>
    decltype(auto) operator()(const Record& r) { return std::invoke(cost, r); }
    template <class Record>
    requires std::invocable<Memory&, const Record&>
    double memory(const Record& r) { return static_cast<double>(std::invoke(memory_of, r)); }
    // Keeps a truncation the wrapped estimator may have.
    template <class Record>
    requires truncating_estimator<Cost, Record>
    void truncate(Record& r, double cap) { cost.truncate(r, cap); }
};

/// A cost estimator together with a truncation; see bcl::with_truncation.
template <class Estimator, class Truncate>
struct truncating_cost {
    Estimator estimator;
    Truncate truncate_to;

    template <class Record>
    requires std::invocable<Estimator&, const Record&>
    decltype(auto) operator()(const Record& r) { return std::invoke(estimator, r); }
    template <class Record>
    requires std::invocable<Truncate&, Record&, double>
    void truncate(Record& r, double cap) { std::invoke(truncate_to, r, cap); }
    // Keeps a memory estimate the wrapped estimator may have.
    template <class Record>
    requires memory_estimator<Estimator, Record>
    double memory(const Record& r) { return static_cast<double>(estimator.memory(r)); }
};

/// Attaches a memory estimate to a cost estimator, e.g.
/// `bcl::with_memory(cost, &sample::tokens)`: the memory of a record is
/// `std::invoke(memory, record)`. The result is itself a cost estimator.
template <class Cost, class Memory>
[[nodiscard]] memory_aware_cost<Cost, Memory> with_memory(Cost cost, Memory memory) {
    return {std::move(cost), std::move(memory)};
}

/// Attaches a truncation to a cost estimator (or to the result of with_memory):
/// `truncate(record, cap)` must shrink the record toward an estimated cost of at most `cap`.
template <class Estimator, class Truncate>
[[nodiscard]] truncating_cost<Estimator, Truncate> with_truncation(Estimator estimator,
                                                                   Truncate truncate) {
    return {std::move(estimator), std::move(truncate)};
}

} // namespace bcl
