// bcl::token_budget, bcl::token_plan_options and their checks, as a specification: a budget of R,
// T, m and K steps of at least 1, T at most 2^31, m and R*K (and a window's R*K*M) at most
// bcl::max_plan_records; pad_to_multiple_of in [1, T] and max_fill in (0, 1]; each refusal a
// bcl::error prefixed with the caller's name that names the field and its value; the planner and
// the epoch planner refuse the same settings in the same words.

#include <bcl/token_budget.hpp>
#include <bcl/token_epoch_plan.hpp>
#include <bcl/token_plan.hpp>

#include <catch2/catch.hpp>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace {

using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;

std::string refusal_of_settings(const bcl::token_budget& b, std::size_t micro, std::size_t steps,
                                const bcl::token_plan_options& opt) {
    try {
        bcl::check_token_budget(b, steps, "who");
        bcl::check_token_window(b, micro, steps, "who");
        bcl::check_token_options(opt, b, "who");
    } catch (const bcl::error& e) {
        return e.what();
    }
    return {};
}

} // namespace

TEST_CASE("token budget: the defaults and sound settings pass", "[tokens][token_budget]") {
    const bcl::token_plan_options opt;
    CHECK_FALSE(opt.oversized_alone);
    CHECK_FALSE(opt.group_together);
    CHECK(opt.max_fill == 1.0);
    CHECK_FALSE(opt.allow_empty_micro_batches);
    CHECK(opt.pad_to_multiple_of == 1);
    CHECK(refusal_of_settings({.ranks = 8, .max_tokens = 131072, .multiple_of = 2}, 4, 8, opt)
              .empty());
    CHECK(refusal_of_settings({.ranks = 1, .max_tokens = std::uint64_t{1} << 31}, 1, 1,
                              {.pad_to_multiple_of = std::uint64_t{1} << 31})
              .empty());
}

TEST_CASE("token budget: each bad setting is refused naming the field and its value",
          "[tokens][token_budget]") {
    const bcl::token_budget good{.ranks = 4, .max_tokens = 1000, .multiple_of = 2};
    const auto refused = [&](bcl::token_budget b, std::size_t micro, std::size_t steps,
                             bcl::token_plan_options opt, const std::string& what) {
        const std::string message = refusal_of_settings(b, micro, steps, opt);
        CAPTURE(message);
        CHECK_THAT(message, StartsWith("who: ") && Contains(what));
    };
    refused({.ranks = 0, .max_tokens = 1000}, 2, 1, {}, "the ranks (0)");
    refused({.ranks = 4, .max_tokens = 0}, 2, 1, {}, "max_tokens (0)");
    refused({.ranks = 4, .max_tokens = 1000, .multiple_of = 0}, 2, 1, {}, "multiple_of (0)");
    refused(good, 2, 0, {}, "steps (0)");
    refused({.ranks = 4, .max_tokens = (std::uint64_t{1} << 31) + 1}, 2, 1, {},
            "max_tokens is 2147483649, above 2^31");
    refused({.ranks = 4, .max_tokens = 1000, .multiple_of = std::size_t{1} << 40}, 1 << 20, 1, {},
            "multiple_of is 1099511627776");
    refused(good, 3, 1, {},
            "micro_batches is 3; it must be a positive multiple of multiple_of (2)");
    refused(good, 0, 1, {}, "micro_batches is 0");
    refused(good, std::size_t{1} << 30, 1, {}, "micro-batches is above the 1073741824 cells");
    refused(good, 2, 1, {.pad_to_multiple_of = 0}, "pad_to_multiple_of is 0");
    refused(good, 2, 1, {.pad_to_multiple_of = 1001},
            "pad_to_multiple_of is 1001; it must be at least 1 and at most max_tokens (1000)");
    refused(good, 2, 1, {.max_fill = 0.0}, "max_fill must be in (0, 1] (got 0");
    refused(good, 2, 1, {.max_fill = 1.5}, "max_fill must be in (0, 1]");
    refused(good, 2, 1, {.max_fill = std::numeric_limits<double>::quiet_NaN()},
            "max_fill must be in (0, 1]");
}

TEST_CASE("token budget: the planner and the epoch planner refuse a setting in the check's words",
          "[tokens][token_budget]") {
    const std::vector<std::uint64_t> tokens(64, 10);
    std::vector<bcl::micro_slot> out(tokens.size());
    std::vector<std::size_t> order(tokens.size());
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
    const bcl::token_budget b{.ranks = 2, .max_tokens = 100, .multiple_of = 2};
    for (const bcl::token_plan_options opt : {bcl::token_plan_options{.pad_to_multiple_of = 0},
                                              bcl::token_plan_options{.max_fill = -1.0},
                                              bcl::token_plan_options{.pad_to_multiple_of = 101}}) {
        const std::string expected = refusal_of_settings(b, 2, 1, opt);
        REQUIRE_FALSE(expected.empty());
        bcl::token_planner planner;
        CHECK_THROWS_WITH(planner.plan_held(tokens, {}, {}, b, 1, opt, out, "who"), expected);
        CHECK_THROWS_WITH(planner.plan_stream(tokens, {}, b, 2, 1, true, opt, out, "who"),
                          expected);
        bcl::token_epoch_planner epochs;
        bcl::token_epoch_share<std::size_t> share;
        CHECK_THROWS_WITH(
            epochs.share<std::size_t>(tokens, {}, order, b, 2, 1, 0, opt, share, "who"), expected);
    }
}

TEST_CASE("token budget: longest_token_length is the longest length check_token_length takes, "
          "padded or not, alone or not",
          "[tokens][token_budget]") {
    for (const std::uint64_t t : {std::uint64_t{1}, std::uint64_t{7}, std::uint64_t{100},
                                  std::uint64_t{4096}, std::uint64_t{1} << 31})
        for (const std::uint64_t pad : {std::uint64_t{1}, std::uint64_t{2}, std::uint64_t{3},
                                        std::uint64_t{64}, std::uint64_t{1000}})
            for (const bool alone : {false, true}) {
                if (pad > t) continue;
                const bcl::token_budget b{.ranks = 2, .max_tokens = t, .multiple_of = 1};
                const bcl::token_plan_options opt{.oversized_alone = alone,
                                                  .pad_to_multiple_of = pad};
                const std::uint64_t longest = bcl::longest_token_length(b, opt);
                CAPTURE(t, pad, alone, longest);
                const auto takes = [&](std::uint64_t length) {
                    try {
                        (void)bcl::check_token_length(length, 0, "record", b, opt, "who");
                        return true;
                    } catch (const bcl::error&) {
                        return false;
                    }
                };
                REQUIRE(takes(longest));
                REQUIRE_FALSE(takes(longest + 1));
                REQUIRE(takes(0));
                REQUIRE_FALSE(takes(std::uint64_t{1} << 40));
                for (std::uint64_t l = longest > 5 ? longest - 5 : 0; l < longest + 5; ++l)
                    REQUIRE(takes(l) == (l <= longest));
            }
}
