// bcl/detail/misuse.hpp, as a specification: the errors of balancer calls made at the wrong time.
// push() after finish() names the record it refused; push() into a full buffer says how many
// records it holds, how many batches wait and what to do (pop them); next_epoch() during an epoch
// says how many records are still held and, if so, that finish() was not called. Each is a
// bcl::error, thrown and never returned, and the balancer throws exactly these at those times.

#include <bcl/balancer.hpp>
#include <bcl/detail/misuse.hpp>
#include <bcl/error.hpp>

#include <catch2/catch.hpp>

#include <cstddef>
#include <string>
#include <type_traits>

namespace {

using bcl::detail::throw_cannot_push;
using bcl::detail::throw_epoch_under_way;

struct weight {
    double value = 1.0;
};
struct weight_of {
    double operator()(const weight& w) const { return w.value; }
};

/// The message of the bcl::error `f` throws, or a marker if it throws nothing or something else.
template <class F>
std::string message_of(F&& f) {
    try {
        f();
    } catch (const bcl::error& e) {
        return e.what();
    } catch (...) {
        return "<not a bcl::error>";
    }
    return "<no exception>";
}

} // namespace

TEST_CASE("misuse: the helpers throw bcl::error and never return", "[misuse]") {
    STATIC_REQUIRE(std::is_same_v<decltype(throw_cannot_push(true, 0, 0, 0)), void>);
    CHECK_THROWS_AS(throw_cannot_push(true, 0, 0, 0), bcl::error);
    CHECK_THROWS_AS(throw_cannot_push(false, 0, 0, 0), bcl::error);
    CHECK_THROWS_AS(throw_epoch_under_way(0, false), bcl::error);
    CHECK_THROWS_AS(throw_epoch_under_way(0, true), bcl::error);
}

TEST_CASE("misuse: push() after finish() names the record it refused", "[misuse]") {
    CHECK(message_of([] { throw_cannot_push(true, 7, 16, 3); }) ==
          "bcl::balancer::push: called after finish() (record 7)");
    // After finish() the buffer state does not matter: the same sentence.
    CHECK(message_of([] { throw_cannot_push(true, 7, 0, 0); }) ==
          message_of([] { throw_cannot_push(true, 7, 16, 3); }));
}

TEST_CASE("misuse: push() into a full buffer says what it holds, what waits and what to do",
          "[misuse]") {
    CHECK(message_of([] { throw_cannot_push(false, 42, 16, 3); }) ==
          "bcl::balancer::push: the buffer is full (16 records) and 3 batches are still waiting; "
          "pop() them before pushing record 42");
}

TEST_CASE("misuse: next_epoch() during an epoch says what is held, and whether finish() was "
          "called",
          "[misuse]") {
    CHECK(message_of([] { throw_epoch_under_way(5, false); }) ==
          "bcl::balancer::next_epoch: the epoch is under way (5 records still held, finish() not "
          "called); drain it first");
    CHECK(message_of([] { throw_epoch_under_way(5, true); }) ==
          "bcl::balancer::next_epoch: the epoch is under way (5 records still held); drain it "
          "first");
}

TEST_CASE("misuse: a balancer throws these messages with its own counts", "[misuse]") {
    // Tumbling, B = 2, K = 3: the buffer holds 6 records. The 7th push finds it full with
    // nothing waiting, so it runs the round (3 batches of 2 now wait) and holds the 7th record;
    // pushes 8 to 12 fill the buffer again, and the 13th (record 12) finds it full with the 3
    // batches still waiting.
    bcl::balancer<weight, weight_of> b{
        weight_of{}, {.batch_size = 2, .lookahead = 3, .policy = bcl::lookahead_policy::tumbling}};
    for (int i = 0; i < 12; ++i) b.push(weight{});
    CHECK_FALSE(b.can_push());
    CHECK(message_of([&] { b.push(weight{}); }) ==
          message_of([] { throw_cannot_push(false, 12, 6, 3); }));
    // 12 held: 6 in waiting batches and 6 buffered; finish() not called.
    CHECK(message_of([&] { b.next_epoch(); }) ==
          message_of([] { throw_epoch_under_way(12, false); }));
    b.finish();
    CHECK(message_of([&] { b.push(weight{}); }) ==
          message_of([] { throw_cannot_push(true, 12, 6, 3); }));
    CHECK(message_of([&] { b.next_epoch(); }) ==
          message_of([] { throw_epoch_under_way(12, true); }));
}
