// The concepts bcl::record, bcl::cost_estimator and bcl::partitioner: for each, one model that
// satisfies it, one model per numbered requirement of its doc comment that breaks exactly that
// requirement (and meets the others) and is rejected, and models of what it does not require.

#include <bcl/balance.hpp>
#include <bcl/balancer.hpp>
#include <bcl/cost_estimator.hpp>
#include <bcl/partition/lpt_swap.hpp>
#include <bcl/partition/partitioner.hpp>

#include <catch2/catch.hpp>

#include <concepts>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

namespace {

// --- bcl::record --------------------------------------------------------------------------------
// A type satisfies record if: 1. it is a non-const object type; 2. it is nothrow
// move-constructible; 3. it is nothrow move-assignable.

struct plain_record {
    int length = 0;
};

// Violates 1 only: a reference (not an object type), yet nothrow move-constructible and
// move-assignable.
using reference_record = plain_record&;
static_assert(std::is_nothrow_move_constructible_v<reference_record>);
static_assert(std::is_nothrow_move_assignable_v<reference_record>);
// Violates 1 only for the constructor part: const, yet nothrow move-constructible (from const&&,
// via the copy). (Being const it is not assignable either: 1 implies that much of 3.)
using const_record = const plain_record;
static_assert(std::is_nothrow_move_constructible_v<const_record>);

// Violates 2 only: its move constructor may throw; moving and assigning otherwise work.
struct throwing_move_record {
    throwing_move_record() = default;
    throwing_move_record(throwing_move_record&&) noexcept(false) {}
    throwing_move_record& operator=(throwing_move_record&&) noexcept { return *this; }
};
static_assert(std::is_object_v<throwing_move_record>);
static_assert(std::is_nothrow_move_assignable_v<throwing_move_record>);

// Violates 3 only: nothrow move-constructible, but its move assignment may throw.
struct throwing_assign_record {
    throwing_assign_record() = default;
    throwing_assign_record(throwing_assign_record&&) noexcept {}
    throwing_assign_record& operator=(throwing_assign_record&&) noexcept(false) { return *this; }
};
static_assert(std::is_nothrow_move_constructible_v<throwing_assign_record>);

// Violates 3 only: nothrow move-constructible, but not assignable at all (a const member).
struct const_member_record {
    const int id = 0;
};
static_assert(std::is_nothrow_move_constructible_v<const_member_record>);
static_assert(!std::is_move_assignable_v<const_member_record>);

// Not required: copyability, default construction.
struct move_only_no_default_record {
    explicit move_only_no_default_record(int v) : value(std::make_unique<int>(v)) {}
    std::unique_ptr<int> value;
};

// --- bcl::cost_estimator<E, Record> -------------------------------------------------------------
// E satisfies it if: 1. it is move-constructible; 2. an lvalue of E is invocable with a
// const Record&; 3. the result is convertible to double.

struct good_estimator {
    double operator()(const plain_record& r) const { return r.length; }
};

// Violates 1 only: not move-constructible, but invocable and returning a double.
struct immovable_estimator {
    immovable_estimator() = default;
    immovable_estimator(immovable_estimator&&) = delete;
    double operator()(const plain_record& r) const { return r.length; }
};
static_assert(std::invocable<immovable_estimator&, const plain_record&>);

// Violates 2 only: takes the record by non-const reference, so a const Record& does not bind.
struct mutating_estimator {
    double operator()(plain_record& r) const { return r.length; }
};
static_assert(std::move_constructible<mutating_estimator>);

// Violates 2 only: invocable only as an rvalue (&&-qualified), not as an lvalue.
struct rvalue_only_estimator {
    double operator()(const plain_record& r) && { return r.length; }
};
static_assert(std::invocable<rvalue_only_estimator&&, const plain_record&>);

// Violates 3 only: invocable, but returns something that is not convertible to double.
struct text_estimator {
    std::string operator()(const plain_record&) const { return "cheap"; }
};
static_assert(std::move_constructible<text_estimator>);
static_assert(std::invocable<text_estimator&, const plain_record&>);

struct void_estimator {
    void operator()(const plain_record&) const {}
};

// Not required: const-callable (a mutable lambda-like counter), noexcept, default-constructible,
// returning exactly double (an int or float result converts).
struct stateful_estimator {
    explicit stateful_estimator(int s) : scale(s) {}
    int scale;
    int calls = 0;
    double operator()(const plain_record& r) {
        ++calls;
        return scale * r.length;
    }
};
struct int_estimator {
    int operator()(const plain_record& r) const { return r.length; }
};

// --- bcl::partitioner<P> ------------------------------------------------------------------------
// P satisfies it if: 1. it is move-constructible; 2. an lvalue of P is invocable as
// p(std::span<const double>, bcl::pack_shape, std::span<std::uint32_t>); 3. the result is
// convertible to bcl::partition_summary.

struct good_partitioner {
    bcl::partition_summary operator()(std::span<const double>, bcl::pack_shape,
                                      std::span<std::uint32_t>) {
        return {};
    }
};

// Violates 1 only.
struct immovable_partitioner {
    immovable_partitioner() = default;
    immovable_partitioner(immovable_partitioner&&) = delete;
    bcl::partition_summary operator()(std::span<const double>, bcl::pack_shape,
                                      std::span<std::uint32_t>) {
        return {};
    }
};
static_assert(std::invocable<immovable_partitioner&, std::span<const double>, bcl::pack_shape,
                             std::span<std::uint32_t>>);

// Violates 2 only: wants the pack ids as 64-bit integers, which std::span<std::uint32_t> does not
// convert to.
struct wrong_ids_partitioner {
    bcl::partition_summary operator()(std::span<const double>, bcl::pack_shape,
                                      std::span<std::uint64_t>) {
        return {};
    }
};
static_assert(std::move_constructible<wrong_ids_partitioner>);

// Violates 2 only: has no way to learn the shape.
struct shapeless_partitioner {
    bcl::partition_summary operator()(std::span<const double>, std::span<std::uint32_t>) {
        return {};
    }
};

// Violates 3 only: invocable, but returns a plain double.
struct heaviest_only_partitioner {
    double operator()(std::span<const double>, bcl::pack_shape, std::span<std::uint32_t>) {
        return 0.0;
    }
};
static_assert(std::move_constructible<heaviest_only_partitioner>);
static_assert(std::invocable<heaviest_only_partitioner&, std::span<const double>, bcl::pack_shape,
                             std::span<std::uint32_t>>);

// Not required: const-callable, default-constructible, returning exactly partition_summary.
struct summary_like {
    operator bcl::partition_summary() const { return {}; }
};
struct configured_partitioner {
    explicit configured_partitioner(int) {}
    summary_like operator()(std::span<const double>, bcl::pack_shape, std::span<std::uint32_t>) {
        return {};
    }
};

} // namespace

// bcl::balance(range, estimator, options) is offered only for ranges of records, so a range of
// anything else fails at the call, naming the unmet constraint.
struct unit_cost {
    template <class Record>
    double operator()(const Record&) const {
        return 1.0;
    }
};
template <class Range>
concept balanceable = requires(Range range) {
    bcl::balance(std::move(range), unit_cost{}, bcl::options{});
};

TEST_CASE("bcl::balance takes ranges of records only", "[concepts]") {
    STATIC_REQUIRE(balanceable<std::vector<plain_record>>);
    STATIC_REQUIRE(balanceable<std::vector<move_only_no_default_record>>);
    STATIC_REQUIRE_FALSE(balanceable<std::vector<const_member_record>>);
    STATIC_REQUIRE_FALSE(balanceable<std::vector<throwing_move_record>>);
}

TEST_CASE("bcl::record accepts non-const object types that are nothrow move-constructible and "
          "move-assignable, and rejects the rest",
          "[concepts]") {
    STATIC_REQUIRE(bcl::record<plain_record>);
    STATIC_REQUIRE(bcl::record<int>);
    STATIC_REQUIRE(bcl::record<std::vector<int>>);
    SECTION("1. a non-const object type") {
        STATIC_REQUIRE_FALSE(bcl::record<reference_record>);
        STATIC_REQUIRE_FALSE(bcl::record<plain_record&&>);
        STATIC_REQUIRE_FALSE(bcl::record<const_record>);
    }
    SECTION("2. nothrow move-constructible") {
        STATIC_REQUIRE_FALSE(bcl::record<throwing_move_record>);
    }
    SECTION("3. nothrow move-assignable") {
        STATIC_REQUIRE_FALSE(bcl::record<throwing_assign_record>);
        STATIC_REQUIRE_FALSE(bcl::record<const_member_record>);
    }
    SECTION("not required: copyable, default-constructible") {
        STATIC_REQUIRE(bcl::record<move_only_no_default_record>);
        STATIC_REQUIRE(bcl::record<std::unique_ptr<int>>);
    }
}

TEST_CASE("bcl::cost_estimator accepts a movable callable from const Record& to something "
          "convertible to double and rejects the rest",
          "[concepts]") {
    STATIC_REQUIRE(bcl::cost_estimator<good_estimator, plain_record>);
    SECTION("1. move-constructible") {
        STATIC_REQUIRE_FALSE(bcl::cost_estimator<immovable_estimator, plain_record>);
    }
    SECTION("2. an lvalue is invocable with a const Record&") {
        STATIC_REQUIRE_FALSE(bcl::cost_estimator<mutating_estimator, plain_record>);
        STATIC_REQUIRE_FALSE(bcl::cost_estimator<rvalue_only_estimator, plain_record>);
        STATIC_REQUIRE_FALSE(bcl::cost_estimator<good_estimator, std::string>);
    }
    SECTION("3. the result converts to double") {
        STATIC_REQUIRE_FALSE(bcl::cost_estimator<text_estimator, plain_record>);
        STATIC_REQUIRE_FALSE(bcl::cost_estimator<void_estimator, plain_record>);
    }
    SECTION("not required: const-callable, noexcept, default-constructible, exactly double") {
        STATIC_REQUIRE(bcl::cost_estimator<stateful_estimator, plain_record>);
        STATIC_REQUIRE(bcl::cost_estimator<int_estimator, plain_record>);
        STATIC_REQUIRE(bcl::cost_estimator<double (*)(const plain_record&), plain_record>);
    }
    SECTION("a stateful estimator really works in a balancer") {
        bcl::balancer<plain_record, stateful_estimator> b{stateful_estimator{2},
                                                          {.batch_size = 1, .lookahead = 1}};
        b.push(plain_record{3});
        b.finish();
        auto batch = b.pop();
        REQUIRE(batch);
        CHECK(b.last_batch_cost() == 6.0);
    }
}

TEST_CASE("bcl::partitioner accepts a movable callable from (costs, shape, pack ids) to a "
          "partition_summary and rejects the rest",
          "[concepts]") {
    STATIC_REQUIRE(bcl::partitioner<good_partitioner>);
    STATIC_REQUIRE(bcl::partitioner<bcl::lpt_swap_partitioner>);
    SECTION("1. move-constructible") {
        STATIC_REQUIRE_FALSE(bcl::partitioner<immovable_partitioner>);
    }
    SECTION("2. invocable as p(costs, shape, pack_of)") {
        STATIC_REQUIRE_FALSE(bcl::partitioner<wrong_ids_partitioner>);
        STATIC_REQUIRE_FALSE(bcl::partitioner<shapeless_partitioner>);
    }
    SECTION("3. the result converts to partition_summary") {
        STATIC_REQUIRE_FALSE(bcl::partitioner<heaviest_only_partitioner>);
    }
    SECTION("not required: const-callable, default-constructible, exactly partition_summary") {
        STATIC_REQUIRE(bcl::partitioner<configured_partitioner>);
    }
}
