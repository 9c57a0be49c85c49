// bcl::detail::round_chooser, steps 1 and 2 of a round: the policy options::policy names chooses
// the round's records (all of them when it takes the whole buffer) and the buffer gathers them;
// the round's shape follows from how many it took.

#include "support/error_message.hpp"

#include <bcl/detail/intake/record_buffer.hpp>
#include <bcl/detail/rounds/round_policy.hpp>
#include <bcl/error.hpp>
#include <bcl/options.hpp>
#include <bcl/validate.hpp>

#include <catch2/catch.hpp>

#include <cmath>
#include <cstddef>
#include <variant>

namespace {

bcl::detail::record_buffer<int, false> filled(std::size_t n, std::size_t capacity) {
    bcl::detail::record_buffer<int, false> buffer;
    buffer.reserve(capacity);
    for (std::size_t i = 0; i < n; ++i)
        buffer.push(static_cast<int>(i), {static_cast<double>(i % 5), 0.0, 0.0, HUGE_VAL, false},
                    i);
    return buffer;
}

} // namespace

TEST_CASE("Each lookahead_policy value makes the component of its name, and no other value does",
          "[round-policy]") {
    bcl::options opt{.batch_size = 2, .lookahead = 3};
    opt.policy = bcl::lookahead_policy::tumbling;
    CHECK(
        std::holds_alternative<bcl::detail::tumbling_rounds>(bcl::detail::make_round_policy(opt)));
    opt.policy = bcl::lookahead_policy::sliding;
    CHECK(std::holds_alternative<bcl::detail::sliding_rounds>(bcl::detail::make_round_policy(opt)));
    opt.policy = static_cast<bcl::lookahead_policy>(2);
    CHECK_THAT(bcl_test::bcl_error_message([&] { (void)bcl::detail::make_round_policy(opt); }),
               Catch::Contains("no such lookahead policy (2)"));
}

TEST_CASE("A tumbling round takes the whole buffer, read in place", "[round-policy]") {
    const bcl::options opt{
        .batch_size = 2, .lookahead = 3, .policy = bcl::lookahead_policy::tumbling};
    bcl::detail::round_chooser rounds(opt);
    CHECK(rounds.capacity() == bcl::buffer_capacity(opt));
    auto buffer = filled(6, rounds.capacity());
    const bcl::detail::round_records r = rounds.choose(buffer, 0, false, 2.0);
    CHECK(r.whole_buffer);
    CHECK(r.take == 6);
    CHECK(r.packs == 3);
    CHECK(r.full);
    CHECK_FALSE(r.has_short);
    CHECK(r.costs.data() == buffer.costs().data());
}

TEST_CASE("A sliding round takes K*B of a fuller buffer, gathered; the drain's last round is short",
          "[round-policy]") {
    const bcl::options opt{.batch_size = 2, .lookahead = 3};
    bcl::detail::round_chooser rounds(opt);
    REQUIRE(rounds.capacity() == 12);
    auto buffer = filled(12, rounds.capacity());
    const bcl::detail::round_records r = rounds.choose(buffer, 0, false, 2.0);
    CHECK_FALSE(r.whole_buffer);
    CHECK(r.take == 6);
    CHECK(r.full);
    CHECK(r.costs.size() == 6);
    CHECK(r.costs.data() == buffer.round_costs().data());

    auto tail = filled(5, rounds.capacity());
    const bcl::detail::round_records last = rounds.choose(tail, 4, true, 2.0);
    CHECK(last.whole_buffer);
    CHECK(last.packs == 3);
    CHECK(last.has_short);
    CHECK_FALSE(last.full);
}
