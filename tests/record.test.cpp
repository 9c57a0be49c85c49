// bcl::record, as a specification: what a balancer may buffer and hand out. A type is a record if
// it is a non-const object type whose move constructor and move assignment cannot throw; nothing
// else is asked of it (not copying, not default construction). A balancer over a type that is not
// a record cannot be named at all, so a move that could throw halfway through a round, losing
// records, is ruled out at compile time. Standard types and small models, one per requirement.

#include <bcl/balancer.hpp>
#include <bcl/record.hpp>

#include <catch2/catch.hpp>

#include <cstddef>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace {

// A move that can throw: what a record must not have.
struct may_throw_on_move {
    may_throw_on_move() = default;
    may_throw_on_move(const may_throw_on_move&) = default;
    may_throw_on_move(may_throw_on_move&&) noexcept(false) {}
    may_throw_on_move& operator=(const may_throw_on_move&) = default;
    may_throw_on_move& operator=(may_throw_on_move&&) noexcept = default;
};

// Only copyable (moves fall back to a copy that may allocate and throw).
struct copy_only {
    copy_only() = default;
    copy_only(const copy_only& other) : text(other.text) {}
    copy_only& operator=(const copy_only& other) {
        text = other.text;
        return *this;
    }
    std::string text;
};

// Move-only, with no default constructor: all a record needs.
struct token_list {
    explicit token_list(std::size_t n) : tokens(std::make_unique<int[]>(n)), size(n) {}
    std::unique_ptr<int[]> tokens;
    std::size_t size;
};

struct size_of {
    double operator()(const token_list& t) const { return static_cast<double>(t.size); }
};
struct any_cost {
    template <class T>
    double operator()(const T&) const {
        return 1.0;
    }
};

// Whether bcl::balancer<T, Estimator> names a type: its constraint is checked where it is named.
template <class T, class Estimator>
concept balancer_of = requires {
    typename bcl::balancer<T, Estimator>;
};

} // namespace

TEST_CASE("record: standard value types and move-only handles are records", "[record]") {
    STATIC_REQUIRE(bcl::record<int>);
    STATIC_REQUIRE(bcl::record<double>);
    STATIC_REQUIRE(bcl::record<std::string>);
    STATIC_REQUIRE(bcl::record<std::vector<std::string>>);
    STATIC_REQUIRE(bcl::record<std::map<int, std::string>>);
    STATIC_REQUIRE(bcl::record<std::pair<std::size_t, std::vector<int>>>);
    STATIC_REQUIRE(bcl::record<std::optional<std::string>>);
    STATIC_REQUIRE(bcl::record<std::unique_ptr<int>>);
    STATIC_REQUIRE(bcl::record<token_list>);
}

TEST_CASE("record: 1. only a non-const object type", "[record]") {
    STATIC_REQUIRE_FALSE(bcl::record<void>);
    STATIC_REQUIRE_FALSE(bcl::record<int&>);
    STATIC_REQUIRE_FALSE(bcl::record<std::string&&>);
    STATIC_REQUIRE_FALSE(bcl::record<int(int)>);
    STATIC_REQUIRE_FALSE(bcl::record<const int>);
    STATIC_REQUIRE_FALSE(bcl::record<const std::string>);
}

TEST_CASE("record: 2. and 3. moves that cannot throw", "[record]") {
    STATIC_REQUIRE_FALSE(bcl::record<may_throw_on_move>); // 2: the move constructor may throw
    STATIC_REQUIRE_FALSE(bcl::record<copy_only>);         // 2 and 3: a move is a throwing copy
    STATIC_REQUIRE_FALSE(bcl::record<std::mutex>);        // 2 and 3: not movable at all
    // 3 alone: constructing by move is fine, assigning is not (a const member).
    struct fixed_id {
        const int id;
    };
    STATIC_REQUIRE(std::is_nothrow_move_constructible_v<fixed_id>);
    STATIC_REQUIRE_FALSE(bcl::record<fixed_id>);
}

TEST_CASE("record: a balancer exists only over records", "[record]") {
    STATIC_REQUIRE(balancer_of<token_list, size_of>);
    STATIC_REQUIRE(balancer_of<std::string, any_cost>);
    STATIC_REQUIRE_FALSE(balancer_of<may_throw_on_move, any_cost>);
    STATIC_REQUIRE_FALSE(balancer_of<copy_only, any_cost>);
    STATIC_REQUIRE_FALSE(balancer_of<const std::string, any_cost>);
}

TEST_CASE("record: a move-only record without a default constructor goes in and comes out whole",
          "[record]") {
    // B = 2, K = 2: sizes 1..5 make one window of four and a short batch of one.
    bcl::balancer<token_list, size_of> b{size_of{}, {.batch_size = 2, .lookahead = 2}};
    std::size_t total = 0;
    std::size_t count = 0;
    for (std::size_t n = 1; n <= 5; ++n) {
        token_list t(n);
        t.tokens[n - 1] = static_cast<int>(n);
        b.push(std::move(t));
        while (auto batch = b.pop())
            for (token_list& out : *batch) {
                const token_list mine = std::move(out); // the caller takes the record
                CHECK(mine.tokens[mine.size - 1] == static_cast<int>(mine.size));
                total += mine.size;
                ++count;
            }
    }
    b.finish();
    while (auto batch = b.pop())
        for (token_list& out : *batch) {
            total += out.size;
            ++count;
        }
    CHECK(count == 5);
    CHECK(total == 1 + 2 + 3 + 4 + 5);
}
