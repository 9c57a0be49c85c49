// bcl::multimodal_cost (multimodal_cost.hpp), as a specification: a record of T0 text tokens and
// images of P_1 .. P_k patches costs, in the vision encoder, the sum over its images of
// a_v*P + b_v*P^2 + c_v (0 for text alone), and in the language model a_l + b_l*T + c_l*T^2 for
// T = T0 + the sum of ceil(P / merge). Each stage is the dot product of its coefficients with its
// features (vision {images, sum P, sum P^2}, language {1, T, T^2}); a batch's features are its
// records' sums. The defaults are docs/stages.md's mix. The cost table a plan takes is the
// records' stage costs row after row, over any projection to a multimodal_record. A coefficient
// out of range, merge 0, a cost above bcl::max_estimate and a table of the wrong size are
// bcl::errors naming what was wrong. Expected values are worked by hand or by a transcription of
// the formula above in integers.

#include "support/distributions.hpp"
#include "support/error_message.hpp"

#include <bcl/error.hpp>
#include <bcl/multimodal_cost.hpp>

#include <catch2/catch.hpp>

#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace {

using bcl_test::bcl_error_message;
using Catch::Matchers::Contains;
using table = bcl::multimodal_cost::stage_table;

constexpr std::size_t vision = bcl::multimodal_cost::vision;
constexpr std::size_t language = bcl::multimodal_cost::language;

// A user's own record type, viewed through a projection.
struct conversation {
    std::vector<std::uint32_t> patches;
    std::uint64_t tokens = 0;
    [[nodiscard]] bcl::multimodal_record view() const { return {tokens, patches}; }
};

bcl::multimodal_record of(std::uint64_t text, const std::vector<std::uint32_t>& patches) {
    return {text, patches};
}

} // namespace

TEST_CASE("multimodal_cost: the defaults are docs/stages.md's mix", "[multimodal_cost]") {
    const bcl::multimodal_cost cost;
    CHECK(cost.merge() == 4);
    CHECK(cost.coefficients() == table{{{0.0, 0.09, 0.09 / 8192}, {0.0, 1.0, 1.0 / 24576}}});
    const bcl::multimodal_cost_options o{};
    CHECK(bcl::multimodal_cost(o).coefficients() == cost.coefficients());

    // One image of 4096 patches and 1000 text tokens: the encoder 0.09 * (4096 + 4096^2 / 8192)
    // = 0.09 * 6144 = 552.96; T = 1000 + 4096 / 4 = 2024, the language model
    // 2024 + 2024^2 / 24576 = 2024 + 4096576 / 24576.
    const std::vector<std::uint32_t> image{4096};
    const auto c = cost(of(1000, image));
    CHECK(c[vision] == Approx(552.96).epsilon(1e-14));
    CHECK(c[language] == Approx(2024.0 + 4096576.0 / 24576.0).epsilon(1e-14));
}

TEST_CASE("multimodal_cost: a record's stage costs, worked by hand", "[multimodal_cost]") {
    // c_v = 3, a_v = 1/2, b_v = 1/4; a_l = 2, b_l = 1, c_l = 1/8; merge 4 (binary fractions:
    // every sum below is exact).
    const bcl::multimodal_cost cost{{.vision_per_image = 3.0,
                                     .vision_per_patch = 0.5,
                                     .vision_per_patch_squared = 0.25,
                                     .language_per_record = 2.0,
                                     .language_per_token = 1.0,
                                     .language_per_token_squared = 0.125,
                                     .merge = 4}};
    SECTION("two images") {
        // Images of 16 and 7 patches: 8 + 64 + 3 = 75 and 3.5 + 12.25 + 3 = 18.75, so the encoder
        // costs 93.75. T = 100 + ceil(16/4) + ceil(7/4) = 100 + 4 + 2 = 106: the language model
        // 2 + 106 + 11236 / 8 = 1512.5.
        const std::vector<std::uint32_t> patches{16, 7};
        const auto r = of(100, patches);
        CHECK(cost.language_tokens(r) == 106.0);
        CHECK(cost.features(r) == table{{{2.0, 23.0, 305.0}, {1.0, 106.0, 11236.0}}});
        CHECK(cost(r) == std::array<double, 2>{93.75, 1512.5});
    }
    SECTION("text alone costs nothing in the encoder") {
        const auto r = of(8, {});
        CHECK(cost.features(r)[vision] == std::array<double, 3>{0.0, 0.0, 0.0});
        CHECK(cost(r) == std::array<double, 2>{0.0, 2.0 + 8.0 + 8.0}); // 2 + 8 + 64 / 8
    }
    SECTION("an empty record pays the language model's fixed cost") {
        CHECK(cost(bcl::multimodal_record{}) == std::array<double, 2>{0.0, 2.0});
    }
    SECTION("an image of no patches pays the encoder's fixed cost and adds no token") {
        const std::vector<std::uint32_t> none{0};
        CHECK(cost(of(4, none)) == std::array<double, 2>{3.0, 2.0 + 4.0 + 2.0});
    }
}

TEST_CASE("multimodal_cost: each image's patches are merged into ceil(P / merge) tokens",
          "[multimodal_cost]") {
    const auto tokens = [](std::uint32_t merge, const std::vector<std::uint32_t>& patches) {
        return bcl::multimodal_cost(bcl::multimodal_cost_options{.merge = merge})
            .language_tokens(of(10, patches));
    };
    CHECK(tokens(4, {1}) == 11.0);
    CHECK(tokens(4, {4}) == 11.0);
    CHECK(tokens(4, {5}) == 12.0);
    CHECK(tokens(4, {8}) == 12.0);
    // Per image, not over the sum: 3 + 3 patches are two partial groups, two tokens.
    CHECK(tokens(4, {3, 3}) == 12.0);
    CHECK(tokens(1, {3, 3}) == 16.0); // no merger: a token a patch
    // The largest patch count does not overflow: 2^32 - 1 patches by 2 is 2^31 tokens, and
    // 2^32 - 1 = 3 * 1431655765.
    const std::uint32_t most = std::numeric_limits<std::uint32_t>::max();
    CHECK(tokens(2, {most}) == 10.0 + 2147483648.0);
    CHECK(tokens(3, {most}) == 10.0 + 1431655765.0);
    CHECK(tokens(most, {most, 1}) == 12.0);
}

TEST_CASE("multimodal_cost: random records cost what the formula says, image by image",
          "[multimodal_cost]") {
    // Integer coefficients and patch counts small enough that every value is an exact double:
    // the estimator (dot products of summed features) must agree bit for bit with the formula
    // transcribed in integers (a sum over images, ceil as (P + m - 1) / m).
    std::mt19937_64 gen(2024);
    for (int trial = 0; trial < 2000; ++trial) {
        std::array<std::uint64_t, 6> k{};
        for (auto& x : k) x = bcl_test::uniform_integer(gen, 0, 50);
        const auto merge = static_cast<std::uint32_t>(bcl_test::uniform_integer(gen, 1, 9));
        const bcl::multimodal_cost cost{table{{{double(k[0]), double(k[1]), double(k[2])},
                                               {double(k[3]), double(k[4]), double(k[5])}}},
                                        merge};
        std::vector<std::uint32_t> patches(bcl_test::uniform_integer(gen, 0, 5));
        for (auto& p : patches)
            p = static_cast<std::uint32_t>(bcl_test::uniform_integer(gen, 0, 3000));
        const std::uint64_t text = bcl_test::uniform_integer(gen, 0, 20000);

        std::uint64_t encoder = 0;
        std::uint64_t t = text;
        for (const std::uint64_t p : patches) {
            encoder += k[1] * p + k[2] * p * p + k[0];
            t += (p + merge - 1) / merge;
        }
        const std::uint64_t lm = k[3] + k[4] * t + k[5] * t * t;
        const auto got = cost(of(text, patches));
        REQUIRE(got[vision] == static_cast<double>(encoder));
        REQUIRE(got[language] == static_cast<double>(lm));
        REQUIRE(cost.language_tokens(of(text, patches)) == static_cast<double>(t));
    }
}

TEST_CASE("multimodal_cost: a batch's features are its records' sums, and price it",
          "[multimodal_cost]") {
    const bcl::multimodal_cost cost;
    std::mt19937_64 gen(5);
    std::vector<conversation> batch(9);
    for (auto& c : batch) {
        c.tokens = bcl_test::uniform_integer(gen, 1, 4000);
        c.patches.resize(bcl_test::uniform_integer(gen, 0, 3));
        for (auto& p : c.patches)
            p = static_cast<std::uint32_t>(bcl_test::uniform_integer(gen, 1, 9000));
    }
    const table sum = cost.batch_features(batch, &conversation::view);
    table expected{};
    std::array<double, 2> costs{};
    for (const auto& c : batch) {
        const table x = cost.features(c.view());
        for (std::size_t s = 0; s < 2; ++s) {
            for (std::size_t j = 0; j < 3; ++j) expected[s][j] += x[s][j];
            costs[s] += cost(c.view())[s];
        }
    }
    CHECK(sum == expected);
    CHECK(sum[language][0] == 9.0); // one per record
    // Linear in the features: the batch's features priced are its records' costs summed.
    const auto priced = bcl::multimodal_cost::price(cost.coefficients(), sum);
    CHECK(priced[vision] == Approx(costs[vision]).epsilon(1e-12));
    CHECK(priced[language] == Approx(costs[language]).epsilon(1e-12));
    // Of no records: all zero.
    CHECK(cost.batch_features(std::vector<bcl::multimodal_record>{}) == table{});
}

TEST_CASE("multimodal_cost: the cost table holds each record's two stage costs, row after row",
          "[multimodal_cost]") {
    const bcl::multimodal_cost cost;
    const std::vector<conversation> records{{{}, 500}, {{1024}, 30}, {{64, 4096, 7}, 9}};
    const std::vector<double> t = cost.cost_table(records, &conversation::view);
    REQUIRE(t.size() == 6);
    for (std::size_t i = 0; i < records.size(); ++i) {
        const auto c = cost(records[i].view());
        CHECK(t[2 * i] == c[vision]);
        CHECK(t[2 * i + 1] == c[language]);
    }
    CHECK(t[0] == 0.0); // text alone
    // Into the caller's storage, over a lambda projection: the same table.
    std::vector<double> out(6, -1.0);
    cost.fill_cost_table(records, out, [](const conversation& c) { return c.view(); });
    CHECK(out == t);
    // Of multimodal_records themselves (the identity projection).
    const std::vector<bcl::multimodal_record> views{records[0].view(), records[1].view(),
                                                    records[2].view()};
    CHECK(cost.cost_table(views) == t);
}

TEST_CASE("multimodal_cost: projections give a multimodal_record", "[multimodal_cost]") {
    STATIC_REQUIRE(bcl::multimodal_projection<std::identity, const bcl::multimodal_record&>);
    STATIC_REQUIRE(bcl::multimodal_projection<decltype(&conversation::view), const conversation&>);
    STATIC_REQUIRE_FALSE(bcl::multimodal_projection<std::identity, const conversation&>);
    STATIC_REQUIRE_FALSE(
        bcl::multimodal_projection<decltype(&conversation::tokens), const conversation&>);
}

TEST_CASE("multimodal_cost: a coefficient out of range or merge 0 is a bcl::error naming it",
          "[multimodal_cost]") {
    const double inf = std::numeric_limits<double>::infinity();
    const auto message = [](const bcl::multimodal_cost_options& o) {
        return bcl_error_message([&] { (void)bcl::multimodal_cost(o); });
    };
    CHECK_THAT(message({.vision_per_image = -1.0}),
               Contains("bcl::multimodal_cost: vision_per_image is -1") &&
                   Contains("a coefficient must be from 0 to 1e300"));
    CHECK_THAT(message({.vision_per_patch = std::nan("")}), Contains("vision_per_patch is nan"));
    CHECK_THAT(message({.vision_per_patch_squared = inf}),
               Contains("vision_per_patch_squared is inf"));
    CHECK_THAT(message({.language_per_record = -inf}), Contains("language_per_record is -inf"));
    CHECK_THAT(message({.language_per_token = 2e300}), Contains("language_per_token is 2e+300"));
    CHECK_THAT(message({.language_per_token_squared = -0.5}),
               Contains("language_per_token_squared is -0.5"));
    CHECK_THAT(message({.merge = 0}), Contains("bcl::multimodal_cost: merge is 0"));
    // The coefficients in the features' order are checked alike, by the same names.
    CHECK_THAT(bcl_error_message([] {
                   (void)bcl::multimodal_cost(table{{{0.0, 1.0, 0.0}, {0.0, 1.0, -3.0}}}, 1);
               }),
               Contains("language_per_token_squared is -3"));
    // Zeros, 1e300 and -0 are coefficients.
    CHECK_NOTHROW(bcl::multimodal_cost(table{}, 1));
    CHECK_NOTHROW(bcl::multimodal_cost(table{{{1e300, -0.0, 0.0}, {0.0, 0.0, 1e300}}}, 1));
}

TEST_CASE("multimodal_cost: a cost above bcl::max_estimate is a bcl::error naming the stage and "
          "the record",
          "[multimodal_cost]") {
    // 1e300 * (2^64 - 1)^2 overflows to infinity; 1e300 * 2^2 = 4e300 is finite but above 1e120.
    const bcl::multimodal_cost dear{{.language_per_token_squared = 1e300}};
    const std::uint64_t most = std::numeric_limits<std::uint64_t>::max();
    CHECK_THAT(bcl_error_message([&] { (void)dear(of(most, {})); }),
               Contains("bcl::multimodal_cost: the language model's cost of a record of " +
                        std::to_string(most) + " text tokens and 0 images is inf") &&
                   Contains("at most bcl::max_estimate"));
    CHECK_THAT(bcl_error_message([&] { (void)dear(of(2, {})); }),
               Contains("language model's cost") && Contains("is 4e+300"));
    const bcl::multimodal_cost dear_images{{.vision_per_image = 1e300}};
    const std::vector<std::uint32_t> two{1, 1};
    CHECK_THAT(bcl_error_message([&] { (void)dear_images(of(0, two)); }),
               Contains("the vision encoder's cost of a record of 0 text tokens and 2 images is "
                        "2e+300"));

    SECTION("in a table: the record's position, the rows before it written") {
        // T + 5e119 * T^2: 5e119 (+ 1, lost) at T = 1, 2e120 at T = 2 (times 4 is exact).
        const std::vector<conversation> records{{{}, 1}, {{}, 1}, {{}, 2}, {{}, 1}};
        std::vector<double> out(8, -1.0);
        const bcl::multimodal_cost one_over{{.language_per_token_squared = 5e119}};
        CHECK_THAT(
            bcl_error_message([&] { one_over.fill_cost_table(records, out, &conversation::view); }),
            Contains("language model's cost of record 2 (2 text tokens, 0 images) is "
                     "2e+120"));
        CHECK(out[1] == 5e119); // record 0, written
        CHECK(out[5] == -1.0);  // record 2, not
    }
    SECTION("a table of the wrong size: nothing written") {
        const std::vector<conversation> records{{{}, 1}, {{}, 2}};
        std::vector<double> out(3, -1.0);
        CHECK_THAT(bcl_error_message([&] {
                       bcl::multimodal_cost{}.fill_cost_table(records, out, &conversation::view);
                   }),
                   Contains("fill_cost_table: 2 records need 4 costs, and the table has 3"));
        CHECK(out == std::vector<double>(3, -1.0));
    }
}
