// detail/distributed_options_check.hpp, as a specification: the settings of a distributed sampler
// read as the core's (the epoch's order: bcl::epoch_order's, or bcl::keyed_order's when keyed and
// shuffled; the fixed mode's epoch shape; the token mode's budget and the plan options Python's
// sampler passes); each mode's check passes good settings and tables and refuses a bad one with a
// bcl::error prefixed with the sampler's name and naming the setting, or the dataset index and
// value. What the core checks of its own settings is refused in the core's words, the same message
// the core's check throws; what only the sampler knows (the other mode's settings, the rank, the
// seed, the order's and the padding's values, the tables' sizes) in the sampler's own. The
// settings are checked before the tables.

#include <bcl/detail/tokens/token_records.hpp>
#include <bcl/epoch_plan.hpp>
#include <bcl/error.hpp>
#include <bcl/keyed_order.hpp>
#include <bcl/token_budget.hpp>
#include <bcl/torch/detail/distributed_options_check.hpp>

#include <catch2/catch.hpp>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <vector>

namespace {

using bcl::torch::distributed_sampler_options;
using bcl::torch::epoch_order_kind;
using bcl::torch::token_padding;
using bcl::torch::detail::check_fixed_mode;
using bcl::torch::detail::check_token_mode;
using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;
using lengths_t = std::vector<std::uint64_t>;

constexpr const char* who = "the sampler";

// The message `f` throws as a bcl::error, or "" if it passes.
std::string refusal(const std::function<void()>& f) {
    try {
        f();
    } catch (const bcl::error& e) {
        return e.what();
    }
    return "";
}

// A good fixed-mode setup: 3 ranks, batches of 4, 20 costs.
distributed_sampler_options fixed_options() {
    return {.num_replicas = 3, .rank = 2, .batch_size = 4, .lookahead = 2};
}
const std::vector<double> fixed_costs(20, 1.5);

std::string fixed_refusal(const distributed_sampler_options& o,
                          const std::vector<double>& costs = fixed_costs,
                          const lengths_t& lengths = {}) {
    return refusal([&] { check_fixed_mode(o, costs, lengths, who); });
}

// A good token-mode setup: 3 ranks, 2 steps of 2 micro-batches of at most 100 tokens, 30 lengths
// of 1 to 100 tokens, the default cost.
distributed_sampler_options token_options() {
    return {.num_replicas = 3, .rank = 1, .lookahead = 2, .max_tokens = 100, .micro_batches = 2};
}
lengths_t token_lengths() {
    lengths_t l;
    for (std::uint64_t i = 0; i < 30; ++i) l.push_back(1 + i * 3 % 100);
    return l;
}

std::string token_refusal(const distributed_sampler_options& o,
                          const lengths_t& lengths = token_lengths(),
                          const std::vector<double>& costs = {}) {
    return refusal([&] { check_token_mode(o, costs, lengths, who); });
}

} // namespace

TEST_CASE("distributed_options_check: the settings read as the core's: the fixed mode's shape, "
          "the token mode's budget and Python's plan options",
          "[torch][distributed_options_check]") {
    distributed_sampler_options o{.num_replicas = 4,
                                  .rank = 1,
                                  .batch_size = 16,
                                  .lookahead = 3,
                                  .drop_last = true,
                                  .max_tokens = 512,
                                  .multiple_of = 2,
                                  .oversized_alone = true,
                                  .pad_to_multiple_of = 8};
    const bcl::epoch_shape shape = bcl::torch::detail::epoch_shape_of(o);
    CHECK(shape.ranks == 4);
    CHECK(shape.lookahead == 3);
    CHECK(shape.batch == 16);
    CHECK(shape.drop_last);
    const bcl::token_budget budget = bcl::torch::detail::token_budget_of(o);
    CHECK(budget.ranks == 4);
    CHECK(budget.max_tokens == 512);
    CHECK(budget.multiple_of == 2);

    // As python/src/token_epoch.hpp sets them: empty micro-batches with padding "empty" only,
    // every field the sampler has no setting for at its default.
    for (const token_padding p :
         {token_padding::repeat, token_padding::empty, token_padding::error}) {
        CAPTURE(static_cast<int>(p));
        o.padding = p;
        const bcl::token_plan_options t = bcl::torch::detail::token_options_of(o);
        CHECK(t.oversized_alone);
        CHECK(t.pad_to_multiple_of == 8);
        CHECK(t.allow_empty_micro_batches == (p == token_padding::empty));
        CHECK(!t.group_together);
        CHECK(t.max_fill == 1.0);
    }
}

TEST_CASE("distributed_options_check: the epoch's order is bcl::epoch_order's Fisher-Yates "
          "shuffle by default, bcl::keyed_order's positions 0..N-1 when keyed, 0..N-1 without "
          "shuffle whichever kind; drawn into the vector given, reusing it",
          "[torch][distributed_options_check][keyed]") {
    using bcl::torch::detail::draw_epoch_order;
    for (const std::size_t n : {0, 1, 2, 3, 4, 5, 100, 257}) {
        for (const std::uint64_t epoch : {0, 1, 9}) {
            CAPTURE(n, epoch);
            distributed_sampler_options o{.seed = 13};
            std::vector<std::size_t> fisher_yates;
            bcl::epoch_order(n, true, 13, epoch, fisher_yates);
            std::vector<std::size_t> drawn{42, 43}; // whatever it held is replaced
            draw_epoch_order(o, n, epoch, drawn);
            REQUIRE(drawn == fisher_yates);

            o.order = epoch_order_kind::keyed;
            draw_epoch_order(o, n, epoch, drawn);
            const bcl::keyed_order keyed(n, 13, epoch);
            REQUIRE(drawn.size() == n);
            for (std::size_t p = 0; p < n; ++p) REQUIRE(drawn[p] == keyed.at(p));

            std::vector<std::size_t> iota(n);
            for (std::size_t i = 0; i < n; ++i) iota[i] = i;
            for (const epoch_order_kind kind :
                 {epoch_order_kind::fisher_yates, epoch_order_kind::keyed}) {
                o.order = kind;
                o.shuffle = false;
                draw_epoch_order(o, n, epoch, drawn);
                REQUIRE(drawn == iota);
            }
        }
    }
    // Drawn again into a vector of the same size, the order reuses its storage.
    const distributed_sampler_options keyed{.seed = 1, .order = epoch_order_kind::keyed};
    std::vector<std::size_t> out;
    draw_epoch_order(keyed, 500, 0, out);
    const std::size_t* storage = out.data();
    draw_epoch_order(keyed, 500, 1, out);
    REQUIRE(out.data() == storage);
    // Both modes accept either kind.
    distributed_sampler_options fixed = fixed_options();
    fixed.order = epoch_order_kind::keyed;
    REQUIRE(fixed_refusal(fixed).empty());
    distributed_sampler_options tokens = token_options();
    tokens.order = epoch_order_kind::keyed;
    REQUIRE(token_refusal(tokens).empty());
}

TEST_CASE("distributed_options_check: fixed mode passes good settings and refuses a token-mode "
          "setting, a bad shape, rank, seed, order, plan option or cost, naming it",
          "[torch][distributed_options_check]") {
    REQUIRE(fixed_refusal(fixed_options()).empty());
    REQUIRE(fixed_refusal(fixed_options(), {}).empty()); // an empty dataset is no setting

    struct change {
        std::function<void(distributed_sampler_options&)> apply;
        std::string message;
    };
    const std::string token_only = ", but it is for token-budget micro-batches: set max_tokens "
                                   "too (or leave it at its default for batches of batch_size)";
    const std::vector<change> changes = {
        {[](auto& o) { o.micro_batches = 2; }, "micro_batches is 2" + token_only},
        {[](auto& o) { o.multiple_of = 3; }, "multiple_of is 3" + token_only},
        {[](auto& o) { o.oversized_alone = true; }, "oversized_alone is true" + token_only},
        {[](auto& o) { o.pad_to_multiple_of = 8; }, "pad_to_multiple_of is 8" + token_only},
        {[](auto& o) { o.padding = token_padding::empty; },
         "padding is not token_padding::repeat" + token_only},
        {[](auto& o) { o.rank = 3; },
         "rank 3 of num_replicas 3: the rank must be below num_replicas"},
        {[](auto& o) { o.seed = std::uint64_t{1} << 63; },
         "the seed must be below 2^63 (got 9223372036854775808)"},
        {[](auto& o) { o.order = epoch_order_kind(2); },
         "order is 2, not an epoch_order_kind (fisher_yates or keyed)"},
    };
    for (const change& c : changes) {
        distributed_sampler_options o = fixed_options();
        c.apply(o);
        CAPTURE(c.message);
        REQUIRE(fixed_refusal(o) == std::string(who) + ": " + c.message);
    }
    REQUIRE(fixed_refusal(fixed_options(), fixed_costs, lengths_t(20, 5)) ==
            std::string(who) + ": lengths has 20 entries" + token_only);

    // The shape, the plan options and the costs: the core's checks, in its words.
    const auto core = [](const std::function<void()>& f) {
        const std::string message = refusal(f);
        REQUIRE(!message.empty());
        return message;
    };
    distributed_sampler_options o = fixed_options();
    o.batch_size = 0;
    REQUIRE(fixed_refusal(o) ==
            core([&] { bcl::check_epoch_shape(bcl::torch::detail::epoch_shape_of(o), who); }));
    REQUIRE_THAT(fixed_refusal(o), Contains("batch size (0)"));
    o = fixed_options();
    o.plan.cap = -1.0;
    REQUIRE(fixed_refusal(o) == core([&] { bcl::check_plan_options(o.plan, who); }));
    std::vector<double> bad = fixed_costs;
    bad[7] = std::numeric_limits<double>::quiet_NaN();
    REQUIRE(fixed_refusal(fixed_options(), bad) == core([&] { bcl::check_cost_table(bad, who); }));
    REQUIRE_THAT(fixed_refusal(fixed_options(), bad), Contains("dataset index 7"));

    // A token-mode setting is named before anything else is looked at.
    o = fixed_options();
    o.batch_size = 0;
    o.micro_batches = 2;
    REQUIRE_THAT(fixed_refusal(o, bad), StartsWith(std::string(who) + ": micro_batches is 2"));
}

TEST_CASE("distributed_options_check: token mode passes good settings and tables, with or "
          "without costs, records above T alone with oversized_alone",
          "[torch][distributed_options_check][tokens]") {
    REQUIRE(token_refusal(token_options()).empty());
    REQUIRE(token_refusal(token_options(), token_lengths(), std::vector<double>(30, 2.0)).empty());
    distributed_sampler_options o = token_options();
    o.oversized_alone = true;
    lengths_t long_ones = token_lengths();
    long_ones[4] = 101;
    long_ones[9] = std::uint64_t{1} << 31; // the most a record may hold
    REQUIRE(token_refusal(o, long_ones).empty());
    // Padded: 97 counts as 100 (a multiple of 4, at most T).
    o = token_options();
    o.pad_to_multiple_of = 4;
    lengths_t padded = token_lengths();
    padded[0] = 97;
    REQUIRE(token_refusal(o, padded).empty());
    // R*m indices: 3 of them suffice for 3 ranks.
    REQUIRE(token_refusal(token_options(), lengths_t{1, 2, 3}).empty());
}

TEST_CASE("distributed_options_check: token mode refuses the core's bad settings in the core's "
          "words, the sampler's name first",
          "[torch][distributed_options_check][tokens]") {
    const auto core = [](const std::function<void()>& f) {
        const std::string message = refusal(f);
        REQUIRE_THAT(message, StartsWith(std::string(who) + ": "));
        return message;
    };
    struct change {
        std::function<void(distributed_sampler_options&)> apply;
        std::string words; // what the message must hold, derived from the core's documentation
    };
    const std::vector<change> budget = {
        {[](auto& o) { o.num_replicas = 0; }, "the ranks (0)"},
        {[](auto& o) { o.multiple_of = 0; }, "multiple_of (0)"},
        {[](auto& o) { o.lookahead = 0; }, "steps (0)"},
        {[](auto& o) { o.max_tokens = (std::uint64_t{1} << 31) + 1; },
         "max_tokens is 2147483649, above 2^31"},
        {[](auto& o) { o.lookahead = std::size_t{1} << 29; }, "3 ranks * 536870912 steps"},
    };
    for (const change& c : budget) {
        distributed_sampler_options o = token_options();
        c.apply(o);
        CAPTURE(c.words);
        const std::string message = token_refusal(o);
        REQUIRE(message == core([&] {
                    bcl::check_token_budget(bcl::torch::detail::token_budget_of(o), o.lookahead,
                                            who);
                }));
        REQUIRE_THAT(message, Contains(c.words));
    }
    const std::vector<change> window = {
        {[](auto& o) { o.micro_batches = 0; }, "micro_batches is 0"},
        {[](auto& o) {
             o.micro_batches = 3;
             o.multiple_of = 2;
         },
         "micro_batches is 3; it must be a positive multiple of multiple_of (2)"},
        {[](auto& o) {
             o.lookahead = std::size_t{1} << 20;
             o.micro_batches = std::size_t{1} << 10;
         },
         "3 ranks * 1048576 steps * 1024 micro-batches is above the 1073741824 cells"},
    };
    for (const change& c : window) {
        distributed_sampler_options o = token_options();
        c.apply(o);
        CAPTURE(c.words);
        const std::string message = token_refusal(o, lengths_t(30, 1));
        REQUIRE(message == core([&] {
                    bcl::check_token_window(bcl::torch::detail::token_budget_of(o), o.micro_batches,
                                            o.lookahead, who);
                }));
        REQUIRE_THAT(message, Contains(c.words));
    }
    for (const std::uint64_t pad : {std::uint64_t{0}, std::uint64_t{101}}) {
        distributed_sampler_options o = token_options();
        o.pad_to_multiple_of = pad;
        CAPTURE(pad);
        const std::string message = token_refusal(o);
        REQUIRE(message == core([&] {
                    bcl::check_token_options(bcl::torch::detail::token_options_of(o),
                                             bcl::torch::detail::token_budget_of(o), who);
                }));
        REQUIRE_THAT(message, Contains("pad_to_multiple_of is " + std::to_string(pad) +
                                       "; it must be at least 1 and at most max_tokens (100)"));
    }

    // A length above T (rounded up to pad_to_multiple_of) without oversized_alone, or above 2^31
    // with it: the core's rule for a record, named by its dataset index.
    const auto length_refusal = [&](std::size_t index, std::uint64_t length, bool alone,
                                    std::uint64_t pad) {
        distributed_sampler_options o = token_options();
        o.oversized_alone = alone;
        o.pad_to_multiple_of = pad;
        lengths_t l = token_lengths();
        l[index] = length;
        const std::string message = token_refusal(o, l);
        REQUIRE(message == core([&] {
                    (void)bcl::detail::tokens::checked_length(length, index, "dataset index", 100,
                                                              alone, pad, who);
                }));
        return message;
    };
    REQUIRE(length_refusal(7, 101, false, 1) ==
            std::string(who) + ": dataset index 7 has 101 tokens, above max_tokens (100); "
                               "truncate it, or let such records have a micro-batch of their own");
    REQUIRE(length_refusal(12, 98, false, 8) ==
            std::string(who) + ": dataset index 12 has 98 tokens (104 padded to a multiple of 8), "
                               "above max_tokens (100); truncate it, or let such records have a "
                               "micro-batch of their own");
    REQUIRE(length_refusal(3, (std::uint64_t{1} << 31) + 1, true, 1) ==
            std::string(who) + ": dataset index 3 has 2147483649 tokens, above max_tokens (100): "
                               "no record may have more than 2^31");
}

TEST_CASE("distributed_options_check: token mode refuses what only the sampler knows in its own "
          "words: a fixed-mode setting, the rank, the seed, the padding, the order, the tables' "
          "sizes",
          "[torch][distributed_options_check][tokens]") {
    const std::string fixed_only =
        ", but it is for batches of batch_size; with max_tokens a micro-batch holds as many "
        "records as fit and every record is planned, packed, at its own cost (leave it at its "
        "default)";
    struct change {
        std::function<void(distributed_sampler_options&)> apply;
        std::string message;
    };
    const std::vector<change> changes = {
        {[](auto& o) { o.batch_size = 16; }, "batch_size is 16" + fixed_only},
        {[](auto& o) { o.drop_last = true; }, "drop_last is true" + fixed_only},
        {[](auto& o) { o.plan.batching = bcl::batch_cost::padded; },
         "plan_options::batching is not packed" + fixed_only},
        {[](auto& o) { o.plan.cap = 5.0; }, "plan_options::cap is 5" + fixed_only},
        {[](auto& o) { o.plan.cap = -0.0; }, "plan_options::cap is -0" + fixed_only},
        {[](auto& o) { o.plan.level_steps = false; },
         "plan_options::level_steps is false" + fixed_only},
        {[](auto& o) { o.rank = 3; },
         "rank 3 of num_replicas 3: the rank must be below num_replicas"},
        {[](auto& o) { o.seed = ~std::uint64_t{0}; },
         "the seed must be below 2^63 (got 18446744073709551615)"},
        {[](auto& o) { o.padding = token_padding(3); },
         "padding is 3, not a token_padding (repeat, empty or error)"},
        {[](auto& o) { o.order = epoch_order_kind(7); },
         "order is 7, not an epoch_order_kind (fisher_yates or keyed)"},
    };
    for (const change& c : changes) {
        distributed_sampler_options o = token_options();
        c.apply(o);
        CAPTURE(c.message);
        REQUIRE(token_refusal(o) == std::string(who) + ": " + c.message);
    }
    REQUIRE(token_refusal(token_options(), token_lengths(), std::vector<double>(29, 1.0)) ==
            std::string(who) + ": costs has 29 entries, but lengths has 30; give one cost per "
                               "length, or none for the default L + L^2/24576");
    distributed_sampler_options two = token_options();
    two.multiple_of = 2;
    REQUIRE(token_refusal(two, lengths_t(5, 1)) ==
            std::string(who) + ": 5 dataset indices (lengths) cannot give one to each of the "
                               "num_replicas * multiple_of = 3 * 2 micro-batches of a step");
    std::vector<double> bad(30, 1.0);
    bad[11] = -2.0;
    REQUIRE_THAT(token_refusal(token_options(), token_lengths(), bad),
                 StartsWith(std::string(who) + ": the cost of dataset index 11 is -2"));

    // The settings before the tables, and the costs before the lengths.
    lengths_t long_one = token_lengths();
    long_one[2] = 1000;
    distributed_sampler_options o = token_options();
    o.drop_last = true;
    REQUIRE_THAT(token_refusal(o, long_one, bad), Contains("drop_last is true"));
    REQUIRE_THAT(token_refusal(token_options(), long_one, bad), Contains("dataset index 11"));
    REQUIRE_THAT(token_refusal(token_options(), long_one), Contains("dataset index 2 has 1000"));
    // The rank after the budget: with no ranks the budget is named, not the rank.
    o = token_options();
    o.num_replicas = 0;
    REQUIRE_THAT(token_refusal(o), Contains("the ranks (0)") && !Contains("rank 1 of"));
}
