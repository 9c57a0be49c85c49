// The header every archive of bcl's libtorch samplers has (detail/archive_header.hpp), as a
// specification: bcl_format is the sampler's tag, bcl_epoch the epoch cursor's four values (the
// same shape for both samplers), bcl_digest the seal over every other field. An archive of the
// other sampler is refused naming bcl_format and both samplers, either way; one of an earlier
// format, written here field by field as that bcl wrote it, is refused with what to do instead,
// while the same fields under this format's tag load and resume exactly; any other bcl_format is
// quoted. Every refusal leaves the sampler as a twin that never saw the archive.

#include "../sampler_support.hpp"

#include <bcl/bcl.hpp>
#include <bcl/epoch_plan.hpp>
#include <bcl/torch/balanced_sampler.hpp>
#include <bcl/torch/detail/archive.hpp>
#include <bcl/torch/distributed_balanced_sampler.hpp>

#include <catch2/catch.hpp>
#include <torch/torch.h>

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace {

using namespace sampler_support;
using bcl::torch::distributed_balanced_sampler;
using bcl::torch::detail::archive_writer;

constexpr std::size_t n = 160; // 80 indices a rank: 20 batches of 4

const std::vector<std::size_t>& lengths() {
    static const std::vector<std::size_t> table = make_lengths(n);
    return table;
}

std::vector<double> cost_table() {
    std::vector<double> costs;
    for (std::size_t i = 0; i < n; ++i) costs.push_back(length_cost(lengths())(i));
    return costs;
}

auto make_local() {
    return bcl::torch::balanced_sampler(DistributedRandomSampler(n, 2, 1), length_cost(lengths()),
                                        bcl::options{.batch_size = 4, .lookahead = 2});
}

distributed_balanced_sampler make_distributed() {
    return distributed_balanced_sampler(cost_table(), 4, 2, 1, true, 5, false, 2);
}

std::string text_of(const torch::Tensor& bytes) {
    const torch::Tensor t = bytes.contiguous();
    return std::string(t.data_ptr<std::uint8_t>(), t.data_ptr<std::uint8_t>() + t.numel());
}

torch::Tensor bytes_tensor(const std::string& text) {
    torch::Tensor t = torch::empty({static_cast<std::int64_t>(text.size())}, torch::kUInt8);
    std::copy(text.begin(), text.end(), t.data_ptr<std::uint8_t>());
    return t;
}

// The archive of a balanced_sampler, `genuine` (taken apart), written again field by field with
// archive_writer: as format 3 was written if `format3` (bcl_format the number 3, bcl_epoch three
// values: the epoch, or the one set_epoch() chose; a batch handed out; set_epoch() called), else
// as this bcl writes it (the tag, the cursor's four values). Every other field is the same in
// both formats.
std::string local_by_hand(const archive_parts& genuine, bool format3) {
    torch::serialize::OutputArchive out;
    torch::serialize::OutputArchive inner(out.compilation_unit());
    for (const auto& [key, t] : genuine.inner) inner.write(key, t, /*is_buffer=*/true);
    out.write("inner", inner);
    archive_writer w(out);
    const int64s cursor = genuine.ints("bcl_epoch");
    if (format3) {
        w.int64s("bcl_format", int64s{3});
        w.int64s("bcl_epoch", int64s{cursor[2] != 0 ? cursor[3] : cursor[0], cursor[1], cursor[2]});
    } else {
        w.bytes("bcl_format", "bcl::torch::balanced_sampler/4");
        w.int64s("bcl_epoch", cursor);
    }
    w.bytes("bcl_inner_kind", text_of(genuine.fields.at("bcl_inner_kind")));
    w.int64s("bcl_dataset_size", genuine.ints("bcl_dataset_size"));
    w.int64s("bcl_draw", genuine.ints("bcl_draw"));
    w.real("bcl_mean_cost", genuine.fields.at("bcl_mean_cost").item<double>());
    for (const char* key : {"bcl_pushed", "bcl_staged", "bcl_pending"})
        w.int64s(key, genuine.ints(key));
    w.bytes("bcl_balancer_state", text_of(genuine.fields.at("bcl_balancer_state")));
    w.seal("bcl_digest");
    return archive_bytes(out);
}

// The archive of distributed sampler `s` (made by make_distributed, `epoch` its bcl_epoch), in
// the epoch it is planned for, written field by field with archive_writer under bcl_format `tag`:
// "/1" was written exactly so, and so is "/2".
std::string distributed_by_hand(distributed_balanced_sampler& s, const std::string& tag,
                                const int64s& epoch) {
    torch::serialize::OutputArchive out;
    archive_writer w(out);
    const auto one = [](std::uint64_t v) { return int64s{std::bit_cast<std::int64_t>(v)}; };
    w.bytes("bcl_format", tag);
    w.int64s("bcl_epoch", epoch);
    w.int64s("bcl_dataset_size", one(s.dataset_size()));
    w.int64s("bcl_num_replicas", one(s.num_replicas()));
    w.int64s("bcl_rank", one(s.rank()));
    w.int64s("bcl_batch_size", one(s.batch_size()));
    w.int64s("bcl_lookahead", one(s.lookahead()));
    w.int64s("bcl_shuffle", one(s.shuffle() ? 1U : 0U));
    w.int64s("bcl_seed", one(s.seed()));
    w.int64s("bcl_drop_last", one(s.drop_last() ? 1U : 0U));
    w.int64s("bcl_batching", one(static_cast<std::uint64_t>(s.plan_settings().batching)));
    w.int64s("bcl_level_steps", one(s.plan_settings().level_steps ? 1U : 0U));
    w.int64s("bcl_costs", one(bcl::cost_table_digest(cost_table())));
    w.real("bcl_cap", s.plan_settings().cap);
    w.int64s("bcl_position", one(s.position()));
    w.int64s("bcl_plan_digest", one(s.digest()));
    w.seal("bcl_digest");
    return archive_bytes(out);
}

// Requires that `parts` is sealed: bcl_digest is the digest of every other bcl_ field.
void require_sealed(const archive_parts& parts) {
    bcl::torch::detail::archive_digest digest;
    for (const auto& [key, t] : parts.fields)
        if (key != "bcl_digest") digest.add(key, t);
    REQUIRE(parts.ints("bcl_digest") == int64s{std::bit_cast<std::int64_t>(digest.value())});
}

constexpr const char* local_name = "bcl::torch::balanced_sampler";
constexpr const char* distributed_name = "bcl::torch::distributed_balanced_sampler";
constexpr const char* start_over =
    "start the epoch it was saved in over instead (set_epoch(), then reset())";

} // namespace

TEST_CASE("torch archive header: both samplers' archives hold their format tag, the epoch cursor "
          "in the same four values, and the seal",
          "[torch][resume][header]") {
    auto local = make_local();
    distributed_balanced_sampler distributed = make_distributed();
    const auto headers = [&](const int64s& epoch) {
        const archive_parts l = archive_parts::of(saved_bytes(local));
        const archive_parts d = archive_parts::of(saved_bytes(distributed), /*nested=*/false);
        CHECK(text_of(l.fields.at("bcl_format")) == "bcl::torch::balanced_sampler/4");
        CHECK(text_of(d.fields.at("bcl_format")) == "bcl::torch::distributed_balanced_sampler/2");
        CHECK(l.ints("bcl_epoch") == epoch);
        CHECK(d.ints("bcl_epoch") == epoch);
        require_sealed(l);
        require_sealed(d);
    };
    // The epoch under way, whether it started, whether set_epoch() chose one, the one it chose.
    headers({0, 0, 0, 0});
    REQUIRE(local.next(4).has_value());
    REQUIRE(distributed.next(4).has_value());
    headers({0, 1, 0, 0});
    local.set_epoch(5);
    distributed.set_epoch(5);
    headers({0, 1, 1, 5});
    local.reset();
    distributed.reset();
    headers({5, 0, 0, 0});
    local.reset();
    distributed.reset();
    headers({5, 0, 0, 0}); // nothing started: the same epoch
}

TEST_CASE("torch archive header: an archive of the other sampler, of this format or an earlier "
          "one, is refused naming bcl_format and both samplers; the sampler is unchanged",
          "[torch][resume][header]") {
    auto local = make_local();
    for (int k = 0; k < 3; ++k) REQUIRE(local.next(4).has_value());
    const std::string local_bytes = saved_bytes(local);
    distributed_balanced_sampler distributed = make_distributed();
    for (int k = 0; k < 3; ++k) REQUIRE(distributed.next(4).has_value());
    const std::string distributed_bytes = saved_bytes(distributed);

    const std::string of_local =
        "bcl_format is that of a " + std::string(local_name) + ", not of a " + distributed_name;
    require_distributed_refused(make_distributed, local_bytes, {of_local});
    require_distributed_refused(make_distributed,
                                local_by_hand(archive_parts::of(local_bytes), /*format3=*/true),
                                {of_local});

    const std::string of_distributed =
        "bcl_format is that of a " + std::string(distributed_name) + ", not of a " + local_name;
    require_refused(make_local, distributed_bytes, {of_distributed});
    require_refused(make_local,
                    distributed_by_hand(distributed, "bcl::torch::distributed_balanced_sampler/1",
                                        {0, 1, 0, 0}),
                    {of_distributed});
}

TEST_CASE("torch archive header: a balanced_sampler archive of format 3, written by an earlier "
          "bcl, is refused with what to do instead; its fields under this format's tag resume",
          "[torch][resume][header]") {
    const bool chosen = GENERATE(false, true);
    CAPTURE(chosen);
    auto saved = make_local();
    for (int k = 0; k < 5; ++k) REQUIRE(saved.next(4).has_value());
    if (chosen) saved.set_epoch(2);
    const archive_parts genuine = archive_parts::of(saved_bytes(saved));
    const std::vector<index_batch> rest = drain(saved, 4);

    // The same fields under this format's tag and cursor: the archive as save() writes it.
    auto restored = make_local();
    move_elsewhere(restored);
    load_bytes(restored, local_by_hand(genuine, /*format3=*/false));
    REQUIRE(restored.epoch() == (chosen ? 2 : 0));
    REQUIRE(drain(restored, 4) == rest);

    require_refused(make_local, local_by_hand(genuine, /*format3=*/true),
                    {"bcl_format is 3: it was written by an earlier bcl", start_over});
}

TEST_CASE("torch archive header: a distributed_balanced_sampler archive of format /1, written by "
          "an earlier bcl, is refused with what to do instead; its fields under /2 resume",
          "[torch][distributed][resume][header]") {
    distributed_balanced_sampler saved = make_distributed();
    for (int k = 0; k < 3; ++k) REQUIRE(saved.next(4).has_value());
    const int64s epoch{0, 1, 0, 0}; // epoch 0, started, none chosen
    const std::string current =
        distributed_by_hand(saved, "bcl::torch::distributed_balanced_sampler/2", epoch);
    const std::string earlier =
        distributed_by_hand(saved, "bcl::torch::distributed_balanced_sampler/1", epoch);

    distributed_balanced_sampler restored = make_distributed();
    move_distributed(restored);
    load_bytes(restored, current);
    REQUIRE(restored.position() == 3);
    REQUIRE(same_distributed_course(restored, saved));

    require_distributed_refused(
        make_distributed, earlier,
        {"bcl_format is \"bcl::torch::distributed_balanced_sampler/1\": it was written by an "
         "earlier bcl",
         start_over});
    // What the message asks for: the epoch it was saved in, started over.
    distributed_balanced_sampler again = make_distributed();
    move_distributed(again);
    again.set_epoch(0);
    again.reset();
    distributed_balanced_sampler fresh = make_distributed();
    REQUIRE(drain(again, 4) == drain(fresh, 4));
}

TEST_CASE("torch archive header: a bcl_format that is no format of bcl's is refused, quoted",
          "[torch][resume][header]") {
    const bool distributed = GENERATE(false, true);
    const bool reseal = GENERATE(false, true);
    CAPTURE(distributed, reseal);
    auto local = make_local();
    distributed_balanced_sampler planned = make_distributed();
    REQUIRE(local.next(4).has_value());
    REQUIRE(planned.next(4).has_value());
    archive_parts parts = distributed ? archive_parts::of(saved_bytes(planned), /*nested=*/false)
                                      : archive_parts::of(saved_bytes(local));
    const std::string tag = distributed ? "\"bcl::torch::distributed_balanced_sampler/2\""
                                        : "\"bcl::torch::balanced_sampler/4\"";
    std::string expected;
    SECTION("a later format of this sampler") {
        const std::string later = distributed ? "bcl::torch::distributed_balanced_sampler/3"
                                              : "bcl::torch::balanced_sampler/5";
        parts.fields["bcl_format"] = bytes_tensor(later);
        expected = "bcl_format is \"" + later + "\", not " + tag + " (not saved by this sampler)";
    }
    SECTION("no tag at all") {
        parts.fields["bcl_format"] = bytes_tensor("");
        expected = "bcl_format is \"\", not " + tag;
    }
    SECTION("a number no bcl wrote") {
        parts.set("bcl_format", {7});
        expected = "bcl_format is 7, not " + tag;
    }
    SECTION("two numbers") {
        parts.set("bcl_format", {3, 3});
        expected = "bcl_format holds 2 numbers, not a format";
    }
    SECTION("a double") {
        parts.fields["bcl_format"] = torch::full({1}, 4.0, torch::kFloat64);
        expected = "bcl_format is not a 1-d CPU tensor of Byte";
    }
    if (distributed)
        require_distributed_refused(make_distributed, parts.bytes(reseal), {expected});
    else
        require_refused(make_local, parts.bytes(reseal), {expected});
}
