// detail/distributed_sampler_archive.hpp, as a specification: a distributed_balanced_sampler's
// archive holds the header, every setting one 64-bit field each under a fixed key (booleans as 0
// or 1), the cap, the batches handed out and the epoch's plan digest (none before the epoch is
// planned), then the seal. Read by a sampler made alike it gives back the position; the plan is
// asked for only when the archive has a plan digest, and only for the saved epoch. A setting or
// cap that differs, bit for bit, is refused naming the field and both values; so are a position
// outside the epoch or without a started epoch, and a plan digest that is missing, doubled or
// not this sampler's; the seal is checked last. In token mode the archive has a format of its own
// (either mode's reader refuses the other's by name), the token settings and the lengths' digest
// instead of the fixed mode's settings, and the position is checked against the plan of the
// saved epoch. In either mode the order's kind is saved (bcl_order) only when keyed, so the
// default's archive is, byte for byte, the one written before the choice existed; an archive of
// the other kind is refused naming bcl_order and both kinds.

#include "../sampler_support.hpp"

#include <bcl/torch/detail/distributed_sampler_archive.hpp>
#include <bcl/torch/detail/distributed_token_archive.hpp>

#include <catch2/catch.hpp>
#include <torch/torch.h>

#include <bit>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <set>
#include <span>
#include <sstream>
#include <string>
#include <vector>

namespace {

using namespace sampler_support;
using bcl::torch::detail::archive_reader;
using bcl::torch::detail::distributed_identity;
using bcl::torch::detail::distributed_position;
using bcl::torch::detail::epoch_cursor;

// A sampler as constructed: every setting away from its default, 5 batches an epoch and rank.
distributed_identity identity() {
    distributed_identity id;
    id.settings = {.num_replicas = 4,
                   .rank = 2,
                   .batch_size = 5,
                   .lookahead = 3,
                   .shuffle = false,
                   .seed = 77,
                   .drop_last = true,
                   .plan = bcl::plan_options{
                       .batching = bcl::batch_cost::padded, .cap = 2.5, .level_steps = false}};
    id.dataset_size = 100;
    id.costs_digest = 0xfedcba9876543210ULL;
    id.batches = 5;
    return id;
}

// Epoch 4, started, 3 batches handed out, planned with digest 0x1234.
distributed_position midway() {
    epoch_cursor cursor(4, "test", "the epoch");
    cursor.mark_started();
    return {cursor, 3, 0x1234};
}

std::string written(const distributed_identity& id, const distributed_position& at) {
    torch::serialize::OutputArchive out;
    bcl::torch::detail::write_distributed_archive(out, id, at);
    return archive_bytes(out);
}

// Reads `bytes` as a sampler `id` whose plan of epoch 4 has digest `digest`, and of any other
// epoch another one; logs the epochs the plan is asked for.
struct reading {
    std::vector<std::size_t> planned;
    distributed_position read(const std::string& bytes, const distributed_identity& id,
                              std::uint64_t digest = 0x1234) {
        torch::serialize::InputArchive archive;
        std::istringstream stream(bytes);
        archive.load_from(stream);
        archive_reader in(archive, "dbs::load");
        return bcl::torch::detail::read_distributed_archive(in, id, [&](std::size_t e) {
            planned.push_back(e);
            return e == 4 ? digest : ~digest;
        });
    }
};

std::string refusal(const std::string& bytes, const distributed_identity& id,
                    std::uint64_t digest = 0x1234) {
    try {
        (void)reading().read(bytes, id, digest);
    } catch (const bcl::error& e) {
        return e.what();
    }
    return "";
}

} // namespace

TEST_CASE("distributed_sampler_archive: the settings are saved one field each under fixed keys, "
          "booleans as 0 or 1",
          "[torch][distributed_sampler_archive]") {
    const auto settings = bcl::torch::detail::distributed_settings(identity());
    const std::vector<std::pair<std::string, std::uint64_t>> expected = {
        {"bcl_dataset_size", 100}, {"bcl_num_replicas", 4},
        {"bcl_rank", 2},           {"bcl_batch_size", 5},
        {"bcl_lookahead", 3},      {"bcl_shuffle", 0},
        {"bcl_seed", 77},          {"bcl_drop_last", 1},
        {"bcl_batching", 1}, // padded
        {"bcl_level_steps", 0},    {"bcl_costs", 0xfedcba9876543210ULL}};
    REQUIRE(settings.size() == expected.size());
    for (std::size_t k = 0; k < expected.size(); ++k) {
        CAPTURE(k);
        REQUIRE(settings[k].key == expected[k].first);
        REQUIRE(settings[k].value == expected[k].second);
    }

    // The archive holds those, the header, the cap, the position, the plan digest and the seal,
    // each as the sampler's value.
    const archive_parts parts = archive_parts::of(written(identity(), midway()), false);
    std::set<std::string> keys;
    for (const auto& [key, t] : parts.fields) keys.insert(key);
    std::set<std::string> expected_keys = {"bcl_format",   "bcl_epoch",       "bcl_cap",
                                           "bcl_position", "bcl_plan_digest", "bcl_digest"};
    for (const auto& [key, value] : expected) {
        expected_keys.insert(key);
        REQUIRE(parts.ints(key) == int64s{static_cast<std::int64_t>(value)});
    }
    REQUIRE(keys == expected_keys);
    REQUIRE(parts.ints("bcl_position") == int64s{3});
    REQUIRE(parts.ints("bcl_plan_digest") == int64s{0x1234});
    REQUIRE(parts.ints("bcl_epoch") == int64s{4, 1, 0, 0});
}

TEST_CASE("distributed_sampler_archive: read by a sampler made alike, an archive gives back its "
          "position; the plan is asked for the saved epoch only when there is a plan digest",
          "[torch][distributed_sampler_archive]") {
    reading r;
    const distributed_position at = r.read(written(identity(), midway()), identity());
    REQUIRE(at.cursor == midway().cursor);
    REQUIRE(at.position == 3);
    REQUIRE(at.plan_digest == std::uint64_t{0x1234});
    REQUIRE(r.planned == std::vector<std::size_t>{4});

    // Epoch 6 chosen by set_epoch(), not planned: no digest saved, none asked for.
    epoch_cursor fresh(2, "test", "the epoch");
    fresh.set_epoch(6, "test");
    reading unplanned;
    const distributed_position back =
        unplanned.read(written(identity(), {fresh, 0, std::nullopt}), identity());
    REQUIRE(back.cursor == fresh);
    REQUIRE(back.position == 0);
    REQUIRE(!back.plan_digest.has_value());
    REQUIRE(unplanned.planned.empty());
    REQUIRE(archive_parts::of(written(identity(), {fresh, 0, std::nullopt}), false)
                .ints("bcl_plan_digest")
                .empty());

    // The last batch of the epoch handed out: position 5 of 5.
    REQUIRE(r.read(written(identity(), {midway().cursor, 5, 0x1234}), identity()).position == 5);
}

TEST_CASE("distributed_sampler_archive: a sampler whose setting or cap differs refuses the "
          "archive, naming the field and both values",
          "[torch][distributed_sampler_archive]") {
    const std::string bytes = written(identity(), midway());
    struct change {
        std::function<void(distributed_identity&)> apply;
        std::string message;
    };
    const std::vector<change> changes = {
        {[](auto& id) { id.dataset_size = 101; },
         "bcl_dataset_size is 100, but this sampler's dataset size is 101"},
        {[](auto& id) { id.settings.num_replicas = 8; },
         "bcl_num_replicas is 4, but this sampler's num_replicas is 8"},
        {[](auto& id) { id.settings.rank = 1; }, "bcl_rank is 2, but this sampler's rank is 1"},
        {[](auto& id) { id.settings.batch_size = 4; },
         "bcl_batch_size is 5, but this sampler's batch size is 4"},
        {[](auto& id) { id.settings.lookahead = 8; },
         "bcl_lookahead is 3, but this sampler's lookahead is 8"},
        {[](auto& id) { id.settings.shuffle = true; },
         "bcl_shuffle is 0, but this sampler's shuffle is 1"},
        {[](auto& id) { id.settings.seed = 78; }, "bcl_seed is 77, but this sampler's seed is 78"},
        {[](auto& id) { id.settings.drop_last = false; },
         "bcl_drop_last is 1, but this sampler's drop_last is 0"},
        {[](auto& id) { id.settings.plan.batching = bcl::batch_cost::packed; },
         "bcl_batching is 1, but this sampler's plan_options::batching is 0"},
        {[](auto& id) { id.settings.plan.level_steps = true; },
         "bcl_level_steps is 0, but this sampler's plan_options::level_steps is 1"},
        {[](auto& id) { id.costs_digest = 1; },
         "bcl_costs is 18364758544493064720, but this sampler's cost table's digest is 1 (the "
         "cost table differs from the saved run's)"},
        {[](auto& id) { id.settings.plan.cap = 3.0; },
         "bcl_cap is 2.5, but this sampler's plan_options::cap is 3"},
    };
    for (const change& c : changes) {
        distributed_identity other = identity();
        c.apply(other);
        CAPTURE(c.message);
        REQUIRE(refusal(bytes, other) == "dbs::load: the archive's " + c.message);
    }

    // The cap is compared bit for bit: 0 and -0 differ.
    distributed_identity zero = identity();
    zero.settings.plan.cap = 0.0;
    distributed_identity negative_zero = identity();
    negative_zero.settings.plan.cap = -0.0;
    REQUIRE_THAT(refusal(written(zero, midway()), negative_zero), Contains("bcl_cap is 0, but"));
    REQUIRE(refusal(written(zero, midway()), zero).empty());
}

TEST_CASE("distributed_sampler_archive: a position outside the epoch or without a started epoch, "
          "and a plan digest missing, doubled or not this sampler's are refused",
          "[torch][distributed_sampler_archive]") {
    const archive_parts genuine = archive_parts::of(written(identity(), midway()), false);
    // Each alteration resealed, as one who knows bcl's code could: only the field's check stops
    // it.
    const auto altered = [&](const std::string& key, const int64s& values) {
        archive_parts p = genuine;
        p.set(key, values);
        return refusal(p.bytes(/*reseal=*/true), identity());
    };
    const std::string prefix = "dbs::load: the archive's ";
    REQUIRE(altered("bcl_position", {6}) ==
            prefix + "bcl_position is 6, outside the epoch's 0 to 5 batches");
    REQUIRE(altered("bcl_position", {-1}) ==
            prefix + "bcl_position is -1, outside the epoch's 0 to 5 batches");
    REQUIRE(altered("bcl_epoch", {4, 0, 0, 0}) ==
            prefix + "bcl_epoch says the epoch has not started, but bcl_position says 3 batches "
                     "were handed out");
    REQUIRE(altered("bcl_plan_digest", {0x1234, 0x1234}) ==
            prefix + "bcl_plan_digest has 2 values, not 0 or 1");
    REQUIRE_THAT(altered("bcl_plan_digest", {}),
                 Contains(prefix + "bcl_plan_digest is empty (the epoch not planned), but "
                                   "bcl_epoch says the epoch has started"));
    REQUIRE_THAT(altered("bcl_epoch", {9, 1, 0, 0}),
                 Contains(prefix + "bcl_plan_digest does not match this sampler's plan of "
                                   "epoch 9 (bcl_epoch)") &&
                     !Contains("epoch 4")); // 0x1234 is the plan of epoch 4 only, below
    REQUIRE_THAT(refusal(genuine.bytes(false), identity(), 0x1235),
                 Contains(prefix + "bcl_plan_digest does not match this sampler's plan of "
                                   "epoch 4"));
}

TEST_CASE("distributed_sampler_archive: the seal is checked last, over every field",
          "[torch][distributed_sampler_archive]") {
    archive_parts p = archive_parts::of(written(identity(), midway()), false);
    p.set("bcl_position", {2}); // a position every other check allows
    REQUIRE(refusal(p.bytes(/*reseal=*/false), identity()) ==
            "dbs::load: the archive's bcl_digest does not match the archive's fields: the archive "
            "was altered or damaged after it was saved");
    REQUIRE(reading().read(p.bytes(/*reseal=*/true), identity()).position == 2);
}

namespace {

using bcl::torch::detail::token_epoch_check;

// A sampler in token mode as constructed: every setting away from its default.
distributed_identity token_identity() {
    distributed_identity id;
    id.settings = {.num_replicas = 4,
                   .rank = 3,
                   .lookahead = 2,
                   .shuffle = false,
                   .seed = 77,
                   .max_tokens = 4096,
                   .micro_batches = 6,
                   .multiple_of = 3,
                   .oversized_alone = true,
                   .pad_to_multiple_of = 8,
                   .padding = bcl::torch::token_padding::empty};
    id.dataset_size = 300;
    id.costs_digest = 0xfedcba9876543210ULL;
    id.lengths_digest = 0x0123456789abcdefULL;
    return id;
}

std::string token_written(const distributed_identity& id, const distributed_position& at) {
    torch::serialize::OutputArchive out;
    bcl::torch::detail::write_distributed_token_archive(out, id, at);
    return archive_bytes(out);
}

// Reads `bytes` as a token-mode sampler `id` whose plan of epoch 4 has digest 0x1234 and 9
// micro-batches (another epoch: another digest); logs the epochs the plan is asked for.
struct token_reading {
    std::vector<std::size_t> planned;
    distributed_position read(const std::string& bytes, const distributed_identity& id) {
        torch::serialize::InputArchive archive;
        std::istringstream stream(bytes);
        archive.load_from(stream);
        archive_reader in(archive, "dbs::load");
        return bcl::torch::detail::read_distributed_token_archive(in, id, [&](std::size_t e) {
            planned.push_back(e);
            return token_epoch_check{e == 4 ? 0x1234U : 0x4321U, 9};
        });
    }
};

std::string token_refusal(const std::string& bytes, const distributed_identity& id) {
    try {
        (void)token_reading().read(bytes, id);
    } catch (const bcl::error& e) {
        return e.what();
    }
    return "";
}

} // namespace

TEST_CASE("distributed_sampler_archive: in token mode the settings are saved one field each "
          "under fixed keys, with the lengths' digest, under a format of their own",
          "[torch][distributed_sampler_archive][tokens]") {
    const auto settings = bcl::torch::detail::distributed_token_settings(token_identity());
    const std::vector<std::pair<std::string, std::uint64_t>> expected = {
        {"bcl_dataset_size", 300},
        {"bcl_num_replicas", 4},
        {"bcl_rank", 3},
        {"bcl_lookahead", 2},
        {"bcl_shuffle", 0},
        {"bcl_seed", 77},
        {"bcl_max_tokens", 4096},
        {"bcl_micro_batches", 6},
        {"bcl_multiple_of", 3},
        {"bcl_oversized_alone", 1},
        {"bcl_pad_to_multiple_of", 8},
        {"bcl_padding", 1},
        {"bcl_lengths", 0x0123456789abcdefULL},
        {"bcl_costs", 0xfedcba9876543210ULL}};
    REQUIRE(settings.size() == expected.size());
    for (std::size_t k = 0; k < expected.size(); ++k) {
        CAPTURE(k);
        REQUIRE(settings[k].key == expected[k].first);
        REQUIRE(settings[k].value == expected[k].second);
    }
    const archive_parts parts = archive_parts::of(token_written(token_identity(), midway()), false);
    std::set<std::string> keys;
    for (const auto& [key, t] : parts.fields) keys.insert(key);
    std::set<std::string> expected_keys = {"bcl_format", "bcl_epoch", "bcl_position",
                                           "bcl_plan_digest", "bcl_digest"};
    for (const auto& [key, value] : expected) {
        expected_keys.insert(key);
        REQUIRE(parts.ints(key) == int64s{static_cast<std::int64_t>(value)});
    }
    REQUIRE(keys == expected_keys);
    const torch::Tensor format = parts.fields.at("bcl_format");
    REQUIRE(std::string(format.data_ptr<std::uint8_t>(),
                        format.data_ptr<std::uint8_t>() + format.numel()) ==
            "bcl::torch::distributed_balanced_sampler/tokens/1");

    // The lengths' digest: equal tables, equal digests; one length changed, another.
    const std::vector<std::uint64_t> lengths{5, 17, 4096, 0};
    std::vector<std::uint64_t> changed = lengths;
    changed[2] = 4095;
    using bcl::torch::detail::length_table_digest;
    REQUIRE(length_table_digest(lengths) ==
            length_table_digest(std::vector<std::uint64_t>(lengths.begin(), lengths.end())));
    REQUIRE(length_table_digest(lengths) != length_table_digest(changed));
    REQUIRE(length_table_digest(lengths) !=
            length_table_digest(std::span<const std::uint64_t>(lengths).first(3)));
}

TEST_CASE("distributed_sampler_archive: a token-mode archive gives back its position, checked "
          "against the plan of the saved epoch, asked for only when there is a plan digest; "
          "every setting that differs is named",
          "[torch][distributed_sampler_archive][tokens]") {
    token_reading r;
    const distributed_position at =
        r.read(token_written(token_identity(), midway()), token_identity());
    REQUIRE(at.cursor == midway().cursor);
    REQUIRE(at.position == 3);
    REQUIRE(at.plan_digest == std::uint64_t{0x1234});
    REQUIRE(r.planned == std::vector<std::size_t>{4});
    // All 9 micro-batches handed out; none planned, none asked for.
    REQUIRE(
        token_reading()
            .read(token_written(token_identity(), {midway().cursor, 9, 0x1234}), token_identity())
            .position == 9);
    token_reading unplanned;
    REQUIRE(unplanned
                .read(token_written(token_identity(), {epoch_cursor(), 0, std::nullopt}),
                      token_identity())
                .position == 0);
    REQUIRE(unplanned.planned.empty());

    const std::string prefix = "dbs::load: the archive's ";
    const archive_parts genuine =
        archive_parts::of(token_written(token_identity(), midway()), false);
    const auto altered = [&](const std::string& key, const int64s& values) {
        archive_parts p = genuine;
        p.set(key, values);
        return token_refusal(p.bytes(/*reseal=*/true), token_identity());
    };
    REQUIRE(altered("bcl_position", {10}) ==
            prefix + "bcl_position is 10, outside the epoch's 0 to 9 micro-batches");
    REQUIRE(altered("bcl_position", {-2}) ==
            prefix + "bcl_position is -2, outside the epoch's 0 to its micro-batches");
    REQUIRE(altered("bcl_epoch", {4, 0, 0, 0}) ==
            prefix + "bcl_epoch says the epoch has not started, but bcl_position says 3 "
                     "micro-batches were handed out");
    REQUIRE_THAT(altered("bcl_plan_digest", {}),
                 Contains(prefix + "bcl_plan_digest is empty") && Contains("3 micro-batches"));
    REQUIRE_THAT(altered("bcl_epoch", {5, 1, 0, 0}),
                 Contains(prefix + "bcl_plan_digest does not match this sampler's plan of "
                                   "epoch 5 (bcl_epoch)"));

    struct change {
        std::function<void(distributed_identity&)> apply;
        std::string message;
    };
    const std::vector<change> changes = {
        {[](auto& id) { id.settings.max_tokens = 8192; },
         "bcl_max_tokens is 4096, but this sampler's max_tokens is 8192"},
        {[](auto& id) { id.settings.micro_batches = 3; },
         "bcl_micro_batches is 6, but this sampler's micro_batches is 3"},
        {[](auto& id) { id.settings.multiple_of = 1; },
         "bcl_multiple_of is 3, but this sampler's multiple_of is 1"},
        {[](auto& id) { id.settings.oversized_alone = false; },
         "bcl_oversized_alone is 1, but this sampler's oversized_alone is 0"},
        {[](auto& id) { id.settings.pad_to_multiple_of = 1; },
         "bcl_pad_to_multiple_of is 8, but this sampler's pad_to_multiple_of is 1"},
        {[](auto& id) { id.settings.padding = bcl::torch::token_padding::error; },
         "bcl_padding is 1 (empty), but this sampler's padding is 2 (error)"},
        {[](auto& id) { id.lengths_digest = 1; },
         "bcl_lengths is 81985529216486895, but this sampler's lengths' digest is 1 (the "
         "lengths differ from the saved run's)"},
        {[](auto& id) { id.settings.lookahead = 8; },
         "bcl_lookahead is 2, but this sampler's lookahead is 8"},
    };
    const std::string bytes = token_written(token_identity(), midway());
    for (const change& c : changes) {
        distributed_identity other = token_identity();
        c.apply(other);
        CAPTURE(c.message);
        REQUIRE(token_refusal(bytes, other) == prefix + c.message);
    }

    // A fixed-mode archive read as a token-mode one, and the other way round: refused by format.
    REQUIRE_THAT(
        token_refusal(written(identity(), midway()), token_identity()),
        Contains(prefix + "bcl_format is \"bcl::torch::distributed_balanced_sampler/2\"") &&
            Contains("this one hands out token-budget micro-batches"));
    REQUIRE_THAT(refusal(bytes, identity()),
                 Contains(prefix + "bcl_format is "
                                   "\"bcl::torch::distributed_balanced_sampler/tokens/1\"") &&
                     Contains("this one hands out batches of batch_size"));
}

TEST_CASE("distributed_sampler_archive: one identity serves both modes; each format saves its own "
          "mode's settings and none of the other's",
          "[torch][distributed_sampler_archive][tokens]") {
    const auto same = [](const auto& a, const auto& b) {
        REQUIRE(a.size() == b.size());
        for (std::size_t k = 0; k < a.size(); ++k) {
            CAPTURE(k);
            REQUIRE(std::string(a[k].key) == b[k].key);
            REQUIRE(a[k].value == b[k].value);
        }
    };
    // The fixed mode's settings changed in a token identity, and the token mode's in a fixed one:
    // the other format's fields stay as they were.
    distributed_identity tokens = token_identity();
    tokens.settings.batch_size = 9;
    tokens.settings.drop_last = true;
    tokens.settings.plan.batching = bcl::batch_cost::padded;
    tokens.batches = 12;
    same(bcl::torch::detail::distributed_token_settings(tokens),
         bcl::torch::detail::distributed_token_settings(token_identity()));
    distributed_identity fixed = identity();
    fixed.settings.max_tokens = 4096;
    fixed.settings.micro_batches = 2;
    fixed.settings.padding = bcl::torch::token_padding::error;
    fixed.lengths_digest = 7;
    same(bcl::torch::detail::distributed_settings(fixed),
         bcl::torch::detail::distributed_settings(identity()));
    // And either archive, written from the changed identity, reads back as the genuine one's.
    REQUIRE(token_reading().read(token_written(tokens, midway()), token_identity()).position == 3);
    REQUIRE(reading().read(written(fixed, midway()), identity()).position == 3);
}

namespace {

using bcl::torch::epoch_order_kind;

// An archive of `id` standing at `at`, written field by field as the format was laid out before
// the order's kind existed (docs/torch.md's tables): the header, each mode's settings in their
// order (the cap after the fixed mode's), the position, the plan digest, the seal.
std::string written_by_hand(const distributed_identity& id, const distributed_position& at,
                            bool tokens) {
    torch::serialize::OutputArchive archive;
    bcl::torch::detail::archive_writer out(archive);
    const auto one = [](std::uint64_t v) { return int64s{std::bit_cast<std::int64_t>(v)}; };
    out.bytes("bcl_format", tokens ? "bcl::torch::distributed_balanced_sampler/tokens/1"
                                   : "bcl::torch::distributed_balanced_sampler/2");
    out.int64s("bcl_epoch", at.cursor.to_values());
    if (tokens)
        for (const auto& s : bcl::torch::detail::distributed_token_settings(id))
            out.int64s(s.key, one(s.value));
    else
        for (const auto& s : bcl::torch::detail::distributed_settings(id))
            out.int64s(s.key, one(s.value));
    if (!tokens) out.real("bcl_cap", id.settings.plan.cap);
    out.int64s("bcl_position", one(at.position));
    out.int64s("bcl_plan_digest", at.plan_digest ? one(*at.plan_digest) : int64s{});
    out.seal("bcl_digest");
    return archive_bytes(archive);
}

distributed_identity keyed(distributed_identity id) {
    id.settings.order = epoch_order_kind::keyed;
    return id;
}

} // namespace

TEST_CASE("distributed_sampler_archive: the order's kind is saved as bcl_order only when keyed: "
          "the default's archive is byte for byte the one written before the choice existed; "
          "either kind read by a sampler of the other is refused naming bcl_order and both kinds",
          "[torch][distributed_sampler_archive][keyed]") {
    const std::string prefix = "dbs::load: the archive's ";
    const std::string another_way = ": the saved run drew each epoch's order another way";

    SECTION("fixed mode") {
        REQUIRE(written(identity(), midway()) == written_by_hand(identity(), midway(), false));
        const distributed_position unplanned{epoch_cursor(), 0, std::nullopt};
        REQUIRE(written(identity(), unplanned) == written_by_hand(identity(), unplanned, false));

        const std::string bytes = written(keyed(identity()), midway());
        const archive_parts parts = archive_parts::of(bytes, false);
        REQUIRE(parts.ints("bcl_order") == int64s{1});
        REQUIRE(parts.fields.size() ==
                archive_parts::of(written(identity(), midway()), false).fields.size() + 1);
        reading r;
        REQUIRE(r.read(bytes, keyed(identity())).position == 3);
        REQUIRE(r.planned == std::vector<std::size_t>{4});

        REQUIRE(refusal(bytes, identity()) ==
                prefix + "bcl_order is 1 (keyed), but this sampler's order is 0 (fisher_yates)" +
                    another_way);
        REQUIRE(refusal(written(identity(), midway()), keyed(identity())) ==
                prefix +
                    "bcl_order is absent, so the archive's order is the default, 0 "
                    "(fisher_yates), but this sampler's order is 1 (keyed)" +
                    another_way);
        // The kind is checked before the plan is asked for.
        reading refused;
        REQUIRE_THROWS_AS(refused.read(bytes, identity()), bcl::error);
        REQUIRE(refused.planned.empty());
        // A bcl_order holding the default, where none was written, matches a default sampler's.
        archive_parts spelled = archive_parts::of(written(identity(), midway()), false);
        spelled.set("bcl_order", {0});
        REQUIRE(reading().read(spelled.bytes(/*reseal=*/true), identity()).position == 3);
    }
    SECTION("token mode") {
        REQUIRE(token_written(token_identity(), midway()) ==
                written_by_hand(token_identity(), midway(), true));

        const std::string bytes = token_written(keyed(token_identity()), midway());
        REQUIRE(archive_parts::of(bytes, false).ints("bcl_order") == int64s{1});
        token_reading r;
        REQUIRE(r.read(bytes, keyed(token_identity())).position == 3);
        REQUIRE(r.planned == std::vector<std::size_t>{4});

        REQUIRE(token_refusal(bytes, token_identity()) ==
                prefix + "bcl_order is 1 (keyed), but this sampler's order is 0 (fisher_yates)" +
                    another_way);
        REQUIRE(token_refusal(token_written(token_identity(), midway()), keyed(token_identity())) ==
                prefix +
                    "bcl_order is absent, so the archive's order is the default, 0 "
                    "(fisher_yates), but this sampler's order is 1 (keyed)" +
                    another_way);
    }
}
