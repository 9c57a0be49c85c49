// distributed_sampler_options.hpp, as a specification: the settings of a
// bcl::torch::distributed_balanced_sampler are an aggregate whose defaults are the documented
// ones (fixed mode, K = 8, shuffled from seed 0 by Fisher-Yates, packed plans, every token-mode
// setting at the value that leaves fixed mode alone), and token_padding's values are repeat, empty,
// error in that order (an archive saves them as 0, 1 and 2), epoch_order_kind's fisher_yates and
// keyed (a keyed archive saves 1). The header needs no libtorch.

#include <bcl/torch/distributed_sampler_options.hpp>

#include <catch2/catch.hpp>

#include <bit>
#include <cstdint>
#include <type_traits>

namespace {

using bcl::torch::distributed_sampler_options;
using bcl::torch::epoch_order_kind;
using bcl::torch::token_padding;

} // namespace

TEST_CASE("distributed_sampler_options: an aggregate whose defaults are the documented ones",
          "[torch][distributed_sampler_options]") {
    STATIC_REQUIRE(std::is_aggregate_v<distributed_sampler_options>);
    const distributed_sampler_options o;
    CHECK(o.num_replicas == 0); // no default that could be right: refused
    CHECK(o.rank == 0);
    CHECK(o.batch_size == 0);
    CHECK(o.lookahead == 8);
    CHECK(o.shuffle);
    CHECK(o.seed == 0);
    CHECK(o.order == epoch_order_kind::fisher_yates); // the order it drew before the choice
    CHECK(!o.drop_last);
    CHECK(o.plan.batching == bcl::batch_cost::packed);
    CHECK(std::bit_cast<std::uint64_t>(o.plan.cap) == 0); // +0.0: no cap
    CHECK(o.plan.level_steps);
    CHECK(o.max_tokens == 0); // fixed mode
    CHECK(o.micro_batches == 0);
    CHECK(o.multiple_of == 1);
    CHECK(!o.oversized_alone);
    CHECK(o.pad_to_multiple_of == 1);
    CHECK(o.padding == token_padding::repeat);

    // The two forms the documentation shows, each field named.
    const distributed_sampler_options fixed{.num_replicas = 8, .rank = 3, .batch_size = 16};
    CHECK(fixed.batch_size == 16);
    CHECK(fixed.max_tokens == 0);
    const distributed_sampler_options tokens{
        .num_replicas = 8, .rank = 3, .max_tokens = 16384, .micro_batches = 4};
    CHECK(tokens.batch_size == 0);
    CHECK(tokens.max_tokens == 16384);
    CHECK(tokens.micro_batches == 4);
    CHECK(tokens.lookahead == 8);
}

TEST_CASE("distributed_sampler_options: token_padding is repeat, empty, error, as an archive "
          "numbers them",
          "[torch][distributed_sampler_options]") {
    STATIC_REQUIRE(static_cast<unsigned>(token_padding::repeat) == 0);
    STATIC_REQUIRE(static_cast<unsigned>(token_padding::empty) == 1);
    STATIC_REQUIRE(static_cast<unsigned>(token_padding::error) == 2);
    STATIC_REQUIRE(sizeof(token_padding) == 1);
}

TEST_CASE("distributed_sampler_options: epoch_order_kind is fisher_yates, keyed, as an archive "
          "numbers them; a designated initializer chooses it beside the seed",
          "[torch][distributed_sampler_options]") {
    STATIC_REQUIRE(static_cast<unsigned>(epoch_order_kind::fisher_yates) == 0);
    STATIC_REQUIRE(static_cast<unsigned>(epoch_order_kind::keyed) == 1);
    STATIC_REQUIRE(sizeof(epoch_order_kind) == 1);
    const distributed_sampler_options keyed{.num_replicas = 8,
                                            .rank = 3,
                                            .batch_size = 16,
                                            .seed = 7,
                                            .order = epoch_order_kind::keyed};
    CHECK(keyed.order == epoch_order_kind::keyed);
    CHECK(keyed.seed == 7);
    CHECK(keyed.shuffle);
}
