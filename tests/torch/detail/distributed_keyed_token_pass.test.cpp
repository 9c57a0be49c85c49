// detail/distributed_keyed_token_pass.hpp, as a specification: the digest of a keyed token pass's
// inputs changes with the lengths, the costs and every setting that shapes a token plan, and not
// with num_replicas or rank (which the pass's digest mixes in, with the epoch and the rest); the
// pass is the core's bcl::keyed_token_pass over the sampler's tables, micro-batch for micro-batch;
// a rest of another epoch size is refused naming both sizes, the pass unchanged; digest_over(rest)
// is the digest a pass of its epoch and ranks over that rest has.

#include <bcl/epoch_rest.hpp>
#include <bcl/error.hpp>
#include <bcl/keyed_epoch.hpp>
#include <bcl/keyed_token_epoch.hpp>
#include <bcl/torch/detail/distributed_keyed_token_pass.hpp>
#include <bcl/torch/distributed_sampler_options.hpp>

#include <catch2/catch.hpp>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <set>
#include <vector>

namespace {

using bcl::torch::distributed_sampler_options;
using bcl::torch::detail::distributed_keyed_token_pass;
using bcl::torch::detail::keyed_token_inputs_digest;
using Catch::Matchers::Contains;

distributed_sampler_options token_settings() {
    return {.num_replicas = 3,
            .rank = 1,
            .lookahead = 2,
            .seed = 4,
            .order = bcl::torch::epoch_order_kind::keyed,
            .max_tokens = 256,
            .micro_batches = 2,
            .padding = bcl::torch::token_padding::empty};
}

bcl::token_epoch_shape shape_of(const distributed_sampler_options& o) {
    bcl::token_epoch_shape shape;
    shape.budget = {.ranks = o.num_replicas, .max_tokens = o.max_tokens, .multiple_of = 1};
    shape.micro_batches = o.micro_batches;
    shape.lookahead = o.lookahead;
    shape.options.allow_empty_micro_batches = true;
    return shape;
}

std::vector<std::uint64_t> lengths_of(std::size_t n) {
    std::vector<std::uint64_t> out(n);
    for (std::size_t i = 0; i < n; ++i) out[i] = (i * 37) % 200 + (i % 11 == 0 ? 50 : 0);
    return out;
}

} // namespace

TEST_CASE("distributed_keyed_token_pass: the inputs' digest changes with the tables and each "
          "setting of a token plan, not with num_replicas or rank",
          "[torch][tokens][keyed]") {
    const distributed_sampler_options base = token_settings();
    const std::uint64_t d = keyed_token_inputs_digest(base, 1, 2);
    std::set<std::uint64_t> seen{d, keyed_token_inputs_digest(base, 7, 2),
                                 keyed_token_inputs_digest(base, 1, 7)};
    const std::vector<std::function<void(distributed_sampler_options&)>> changes{
        [](auto& o) { o.lookahead = 3; },
        [](auto& o) { o.shuffle = false; },
        [](auto& o) { o.seed = 5; },
        [](auto& o) { o.max_tokens = 512; },
        [](auto& o) { o.micro_batches = 4; },
        [](auto& o) { o.multiple_of = 2; },
        [](auto& o) { o.oversized_alone = true; },
        [](auto& o) { o.pad_to_multiple_of = 8; },
        [](auto& o) { o.padding = bcl::torch::token_padding::repeat; },
        [](auto& o) { o.order = bcl::torch::epoch_order_kind::fisher_yates; }};
    for (const auto& change : changes) {
        distributed_sampler_options o = base;
        change(o);
        seen.insert(keyed_token_inputs_digest(o, 1, 2));
    }
    REQUIRE(seen.size() == 3 + changes.size());
    distributed_sampler_options other = base;
    other.num_replicas = 8;
    other.rank = 5;
    REQUIRE(keyed_token_inputs_digest(other, 1, 2) == d);
}

TEST_CASE("distributed_keyed_token_pass: the core's pass over the sampler's tables; a rest of "
          "another epoch size is refused, the pass unchanged; digest_over is a pass's digest",
          "[torch][tokens][keyed]") {
    const std::size_t n = 240;
    auto lengths = std::make_shared<const std::vector<std::uint64_t>>(lengths_of(n));
    auto costs = std::make_shared<const std::vector<double>>();
    const distributed_sampler_options o = token_settings();
    const bcl::token_epoch_shape shape = shape_of(o);
    distributed_keyed_token_pass pass(lengths, costs);
    pass.start(o.seed, 2, true, shape, o.rank, 77, bcl::epoch_rest(n), "test");
    bcl::keyed_token_pass<std::size_t> core;
    core.start(o.seed, 2, true, shape, o.rank, false, 77, bcl::epoch_rest(n));
    const auto tokens_of = [&](std::uint64_t i) { return (*lengths)[i]; };
    const auto cost_of = [](std::uint64_t) { return 0.0; };
    const std::size_t count = pass.micro_batches("test");
    REQUIRE(count == core.micro_batches(tokens_of, cost_of));
    for (std::size_t i = 0; i < count; ++i) {
        const auto mine = pass.micro_batch(i, "test");
        const auto theirs = core.micro_batch(i, tokens_of, cost_of);
        REQUIRE(mine.has_value());
        REQUIRE(std::vector<std::size_t>(mine->begin(), mine->end()) ==
                std::vector<std::size_t>(theirs->begin(), theirs->end()));
    }
    REQUIRE(pass.digest() == core.digest());
    REQUIRE(pass.digest_over(bcl::epoch_rest(n)) == pass.digest());
    const bcl::epoch_rest left = pass.rest_after(0, "test");
    REQUIRE(pass.digest_over(left) == bcl::keyed_epoch_digest(77, 2, 3, left));
    const std::uint64_t before = pass.digest();
    REQUIRE_THROWS_WITH(
        pass.start(o.seed, 2, true, shape, o.rank, 77, bcl::epoch_rest(n + 1), "test"),
        Contains("an epoch of " + std::to_string(n + 1) + " records, not " + std::to_string(n)));
    REQUIRE(pass.digest() == before);
    REQUIRE(pass.micro_batches("test") == count);
}
