// bcl/partition/partitioner.hpp, as a specification: pack_shape describes K packs of B slots of
// which only the last may be short, and capacity(p, n) is the number of slots of pack p in a
// window of n items; partition_summary defaults to "nothing proved" (all zero, no loads); and the
// partitioner concept admits exactly the move-constructible types whose lvalues take
// (costs, shape, pack_of) and return something convertible to partition_summary. The concept is
// checked with one model that satisfies it and one model per requirement that breaks only that
// requirement.

#include "../support/brute_force.hpp"

#include <bcl/partition/exact.hpp>
#include <bcl/partition/karmarkar_karp.hpp>
#include <bcl/partition/lpt.hpp>
#include <bcl/partition/lpt_swap.hpp>
#include <bcl/partition/padded_cut.hpp>
#include <bcl/partition/partitioner.hpp>
#include <bcl/partition/snake.hpp>
#include <bcl/partition/swap_refinement.hpp>

#include <catch2/catch.hpp>

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace {

using costs_t = std::span<const double>;
using ids_t = std::span<std::uint32_t>;

/// Satisfies every requirement: movable, non-const call operator, returns the summary itself.
struct model_partitioner {
    bcl::partition_summary operator()(costs_t, bcl::pack_shape, ids_t) { return {}; }
};

/// Requirement 3 may be met by anything convertible to partition_summary.
struct convertible_result {
    operator bcl::partition_summary() const { return {1.0, 0.5}; } // NOLINT(google-explicit-*)
};
struct returns_convertible {
    convertible_result operator()(costs_t, bcl::pack_shape, ids_t) { return {}; }
};

/// Breaks requirement 1 only: callable as required, but not move-constructible.
struct immovable {
    immovable() = default;
    immovable(const immovable&) = delete;
    immovable(immovable&&) = delete;
    immovable& operator=(const immovable&) = delete;
    immovable& operator=(immovable&&) = delete;
    ~immovable() = default;
    bcl::partition_summary operator()(costs_t, bcl::pack_shape, ids_t) { return {}; }
};

/// Breaks requirement 2 only: writes 64-bit pack ids, which a span of 32-bit ones is not.
struct wrong_output_type {
    bcl::partition_summary operator()(costs_t, bcl::pack_shape, std::span<std::uint64_t>) {
        return {};
    }
};

/// Breaks requirement 2 only: callable on an rvalue but not on an lvalue.
struct rvalue_only {
    bcl::partition_summary operator()(costs_t, bcl::pack_shape, ids_t) && { return {}; }
};

/// Breaks requirement 2 only: wants (K, B) as two numbers, not a pack_shape.
struct takes_two_sizes {
    bcl::partition_summary operator()(costs_t, std::size_t, std::size_t, ids_t) { return {}; }
};

/// Breaks requirement 3 only: returns the heaviest pack as a bare double.
struct returns_double {
    double operator()(costs_t, bcl::pack_shape, ids_t) { return 0.0; }
};

/// Breaks requirement 3 only: returns nothing.
struct returns_void {
    void operator()(costs_t, bcl::pack_shape, ids_t) {}
};

} // namespace

TEST_CASE("partitioner: a type meets the concept exactly when it meets all three requirements",
          "[partition][partitioner]") {
    STATIC_REQUIRE(bcl::partitioner<model_partitioner>);
    STATIC_REQUIRE(bcl::partitioner<returns_convertible>);
    // What it does not require: a const call operator (model_partitioner's is not) or copyability.
    STATIC_REQUIRE(!std::invocable<const model_partitioner&, costs_t, bcl::pack_shape, ids_t>);

    STATIC_REQUIRE(!bcl::partitioner<immovable>);         // 1. move-constructible
    STATIC_REQUIRE(!bcl::partitioner<wrong_output_type>); // 2. invocable with 32-bit pack_of
    STATIC_REQUIRE(!bcl::partitioner<rvalue_only>);       // 2. ... as an lvalue
    STATIC_REQUIRE(!bcl::partitioner<takes_two_sizes>);   // 2. ... with a pack_shape
    STATIC_REQUIRE(!bcl::partitioner<returns_double>);    // 3. result convertible to summary
    STATIC_REQUIRE(!bcl::partitioner<returns_void>);      // 3.
}

TEST_CASE("partitioner: every partitioner the library ships is a model of the concept",
          "[partition][partitioner]") {
    STATIC_REQUIRE(bcl::partitioner<bcl::lpt_swap_partitioner>);
    STATIC_REQUIRE(bcl::partitioner<bcl::detail::lpt_partitioner>);
    STATIC_REQUIRE(bcl::partitioner<bcl::detail::snake_partitioner>);
    STATIC_REQUIRE(bcl::partitioner<bcl::detail::karmarkar_karp_partitioner>);
    STATIC_REQUIRE(bcl::partitioner<bcl::detail::exact_partitioner>);
    STATIC_REQUIRE(bcl::partitioner<bcl::detail::padded_cut>);
    STATIC_REQUIRE(bcl::partitioner<bcl::detail::swap_refinement>);
    STATIC_REQUIRE(bcl::partitioner<bcl::detail::refined<bcl::detail::karmarkar_karp_partitioner>>);
}

TEST_CASE("partitioner: pack_shape::capacity gives every pack B slots but the last, which holds "
          "the remainder, so the slots add up to n",
          "[partition][partitioner]") {
    // Worked by hand: 10 items in 3 packs of 4 -> 4, 4, 2; 12 items -> 4, 4, 4; 9 -> 4, 4, 1.
    constexpr bcl::pack_shape three_of_four{3, 4};
    STATIC_REQUIRE(three_of_four.capacity(0, 10) == 4);
    STATIC_REQUIRE(three_of_four.capacity(1, 10) == 4);
    STATIC_REQUIRE(three_of_four.capacity(2, 10) == 2);
    STATIC_REQUIRE(three_of_four.capacity(2, 12) == 4);
    STATIC_REQUIRE(three_of_four.capacity(2, 9) == 1);
    STATIC_REQUIRE(bcl::pack_shape{1, 5}.capacity(0, 3) == 3); // one pack: it is the last

    // Every shape that fits n, against the test suite's own spelling of the slot counts.
    for (std::size_t k = 1; k <= 9; ++k)
        for (std::size_t b = 1; b <= 9; ++b)
            for (std::size_t n = (k - 1) * b + 1; n <= k * b; ++n) {
                const auto expected = bcl_test::window_capacities(n, k, b);
                const bcl::pack_shape shape{k, b};
                std::size_t sum = 0;
                for (std::size_t p = 0; p < k; ++p) {
                    INFO("K=" << k << " B=" << b << " n=" << n << " p=" << p);
                    CHECK(shape.capacity(p, n) == expected[p]);
                    sum += shape.capacity(p, n);
                }
                CHECK(sum == n);
            }
}

TEST_CASE("partitioner: a default partition_summary proves nothing: heaviest and bound 0, no "
          "pack loads",
          "[partition][partitioner]") {
    constexpr bcl::partition_summary none{};
    STATIC_REQUIRE(none.heaviest == 0.0);
    STATIC_REQUIRE(none.lower_bound == 0.0);
    CHECK(none.pack_loads.empty());
    constexpr bcl::pack_shape empty_shape{};
    STATIC_REQUIRE(empty_shape.packs == 0);
    STATIC_REQUIRE(empty_shape.pack_size == 0);
    // Aggregates in the documented member order, so designated initializers work.
    constexpr bcl::partition_summary some{.heaviest = 3.0, .lower_bound = 2.0};
    STATIC_REQUIRE(some.heaviest == 3.0);
    constexpr bcl::pack_shape shape{.packs = 2, .pack_size = 5};
    STATIC_REQUIRE(shape.capacity(1, 7) == 2);
}
