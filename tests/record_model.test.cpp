// bcl/record_model.hpp, as a specification: what a cost estimator may know beyond the cost. A
// memory_estimator has memory(record) convertible to double; a truncating_estimator has
// truncate(record&, cap). with_memory(cost, memory) and with_truncation(estimator, truncate)
// attach them to any cost estimator and are cost estimators themselves: the cost is the wrapped
// estimator's, memory(r) is std::invoke(memory, r) as a double, truncate(r, cap) calls the given
// truncation, and each wrapper keeps what the other attached, in either order of wrapping.

#include <bcl/cost_estimator.hpp>
#include <bcl/record_model.hpp>

#include <catch2/catch.hpp>

#include <cstddef>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace {

struct sequence {
    std::vector<int> tokens;
    std::size_t image_patches = 0;
    [[nodiscard]] std::size_t length() const { return tokens.size(); }
};

// Cost of a sequence: its length squared (hand-checkable).
struct squared_length {
    double operator()(const sequence& s) const {
        const auto l = static_cast<double>(s.length());
        return l * l;
    }
};

// Cuts a sequence to the longest length whose squared length is at most the cap, and counts calls.
struct cut_to_cap {
    int* calls;
    void operator()(sequence& s, double cap) const {
        ++*calls;
        std::size_t keep = 0;
        while (static_cast<double>((keep + 1) * (keep + 1)) <= cap) ++keep;
        if (s.tokens.size() > keep) s.tokens.resize(keep);
    }
};

sequence of_length(std::size_t n, std::size_t patches = 0) {
    return sequence{std::vector<int>(n, 1), patches};
}

// Models of the two concepts, and near misses.
struct has_memory {
    float memory(const sequence& s) { return static_cast<float>(s.length()); }
};
struct memory_as_text {
    std::string memory(const sequence&) { return "a lot"; }
};
struct has_truncate {
    void truncate(sequence& s, double) { s.tokens.clear(); }
};
struct truncate_needs_int {
    void truncate(sequence&, int*) {}
};

} // namespace

TEST_CASE("record_model: memory_estimator and truncating_estimator ask for one member each",
          "[record_model]") {
    STATIC_REQUIRE(bcl::memory_estimator<has_memory, sequence>);
    STATIC_REQUIRE_FALSE(bcl::memory_estimator<memory_as_text, sequence>); // not a double
    STATIC_REQUIRE_FALSE(bcl::memory_estimator<squared_length, sequence>); // no member
    STATIC_REQUIRE(bcl::truncating_estimator<has_truncate, sequence>);
    STATIC_REQUIRE_FALSE(bcl::truncating_estimator<truncate_needs_int, sequence>);
    STATIC_REQUIRE_FALSE(bcl::truncating_estimator<has_memory, sequence>);
    STATIC_REQUIRE_FALSE(bcl::memory_estimator<has_truncate, sequence>);
}

TEST_CASE("record_model: with_memory keeps the cost and adds memory(r) = invoke(memory, r)",
          "[record_model]") {
    // A member function pointer as the memory projection: memory is the length, as a double.
    auto est = bcl::with_memory(squared_length{}, &sequence::length);
    STATIC_REQUIRE(bcl::cost_estimator<decltype(est), sequence>);
    STATIC_REQUIRE(bcl::memory_estimator<decltype(est), sequence>);
    STATIC_REQUIRE_FALSE(bcl::truncating_estimator<decltype(est), sequence>);
    STATIC_REQUIRE(std::is_same_v<decltype(est.memory(of_length(1))), double>);
    const sequence s = of_length(6);
    CHECK(est(s) == 36.0);       // 6^2, the wrapped cost
    CHECK(est.memory(s) == 6.0); // the projection
    // A data member pointer works the same.
    auto by_patches = bcl::with_memory(squared_length{}, &sequence::image_patches);
    CHECK(by_patches.memory(of_length(2, 17)) == 17.0);
    CHECK(by_patches(of_length(2, 17)) == 4.0);
}

TEST_CASE("record_model: with_truncation keeps the cost and calls the truncation it was given",
          "[record_model]") {
    int calls = 0;
    auto est = bcl::with_truncation(squared_length{}, cut_to_cap{&calls});
    STATIC_REQUIRE(bcl::cost_estimator<decltype(est), sequence>);
    STATIC_REQUIRE(bcl::truncating_estimator<decltype(est), sequence>);
    STATIC_REQUIRE_FALSE(bcl::memory_estimator<decltype(est), sequence>);
    sequence s = of_length(10);
    CHECK(est(s) == 100.0);
    est.truncate(s, 50.0); // the longest length with l^2 <= 50 is 7
    CHECK(calls == 1);
    CHECK(s.length() == 7);
    CHECK(est(s) == 49.0);
}

TEST_CASE("record_model: memory and truncation attached in either order are both kept",
          "[record_model]") {
    int calls = 0;
    auto memory_then_cut = bcl::with_truncation(
        bcl::with_memory(squared_length{}, &sequence::length), cut_to_cap{&calls});
    auto cut_then_memory = bcl::with_memory(
        bcl::with_truncation(squared_length{}, cut_to_cap{&calls}), &sequence::length);
    STATIC_REQUIRE(bcl::cost_estimator<decltype(memory_then_cut), sequence>);
    STATIC_REQUIRE(bcl::memory_estimator<decltype(memory_then_cut), sequence>);
    STATIC_REQUIRE(bcl::truncating_estimator<decltype(memory_then_cut), sequence>);
    STATIC_REQUIRE(bcl::cost_estimator<decltype(cut_then_memory), sequence>);
    STATIC_REQUIRE(bcl::memory_estimator<decltype(cut_then_memory), sequence>);
    STATIC_REQUIRE(bcl::truncating_estimator<decltype(cut_then_memory), sequence>);

    sequence a = of_length(9);
    sequence b = of_length(9);
    CHECK(memory_then_cut(a) == 81.0);
    CHECK(cut_then_memory(b) == 81.0);
    CHECK(memory_then_cut.memory(a) == 9.0);
    CHECK(cut_then_memory.memory(b) == 9.0);
    memory_then_cut.truncate(a, 16.0); // l^2 <= 16: 4
    cut_then_memory.truncate(b, 24.9); // l^2 <= 24.9: 4
    CHECK(calls == 2);
    CHECK(a.length() == 4);
    CHECK(b.length() == 4);
    CHECK(memory_then_cut.memory(a) == 4.0);
    CHECK(cut_then_memory(b) == 16.0);
}
