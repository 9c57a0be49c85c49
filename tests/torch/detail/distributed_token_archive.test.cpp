// detail/distributed_token_archive.hpp, as a specification, for what a keyed token-mode sampler
// adds to the token format (the format itself, read by a sampler made alike, is specified with
// the fixed mode's in distributed_sampler_archive.test.cpp): a rest is written as bcl_rest_start,
// bcl_rest_span and bcl_rest_taken only when given; read as resizable, an archive of another
// num_replicas or rank is taken, the saved pass asked for at the saved ones with the rest and the
// position, and its answer decides: another digest, or a pass that does not hold the position, is
// refused naming the field; num_replicas a token window cannot plan for, a rank not below it and
// a damaged rest are refused naming the field; read as not resizable, another num_replicas is
// refused as any setting.

#include "../sampler_support.hpp"

#include <bcl/epoch_rest.hpp>
#include <bcl/error.hpp>
#include <bcl/torch/detail/distributed_sampler_archive.hpp>
#include <bcl/torch/detail/distributed_token_archive.hpp>

#include <catch2/catch.hpp>
#include <torch/torch.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

namespace {

using namespace sampler_support;
using bcl::torch::detail::archive_reader;
using bcl::torch::detail::distributed_identity;
using bcl::torch::detail::distributed_position;
using bcl::torch::detail::epoch_cursor;
using bcl::torch::detail::token_pass_check;

distributed_identity token_sampler(std::size_t ranks, std::size_t rank) {
    distributed_identity id;
    id.settings = {.num_replicas = ranks,
                   .rank = rank,
                   .lookahead = 2,
                   .seed = 9,
                   .order = bcl::torch::epoch_order_kind::keyed,
                   .max_tokens = 512,
                   .micro_batches = 2,
                   .padding = bcl::torch::token_padding::empty};
    id.dataset_size = 100;
    id.lengths_digest = 0x0123456789abcdefULL;
    return id;
}

distributed_position saved_at(std::size_t position) {
    epoch_cursor cursor(3, "test", "the epoch");
    cursor.mark_started();
    return {cursor, position, 0x5151};
}

std::string token_written(const distributed_identity& id, const distributed_position& at,
                          const bcl::epoch_rest* rest = nullptr) {
    torch::serialize::OutputArchive out;
    bcl::torch::detail::write_distributed_token_archive(out, id, at, rest);
    return archive_bytes(out);
}

// What the reader asked the pass for.
struct asked {
    std::size_t epoch = 0, ranks = 0, rank = 0, position = 0;
    std::optional<bcl::epoch_rest> rest;
};

// Reads `bytes` as sampler `id` (resizable or not); the pass answers `answer`.
distributed_position read(const std::string& bytes, const distributed_identity& id, bool resizable,
                          const token_pass_check& answer, asked& log) {
    torch::serialize::InputArchive archive;
    std::istringstream stream(bytes);
    archive.load_from(stream);
    archive_reader in(archive, "dbs::load");
    return bcl::torch::detail::read_distributed_token_pass(
        in, id, resizable,
        [&](std::size_t epoch, std::size_t ranks, std::size_t rank,
            const std::optional<bcl::epoch_rest>& rest, std::size_t position) {
            log = {epoch, ranks, rank, position, rest};
            return answer;
        });
}

std::string refusal(const std::string& bytes, const distributed_identity& id, bool resizable,
                    const token_pass_check& answer = {0x5151, true, std::nullopt}) {
    asked log;
    try {
        (void)read(bytes, id, resizable, answer, log);
    } catch (const bcl::error& e) {
        return e.what();
    }
    return "";
}

bcl::epoch_rest some_rest() {
    const std::uint8_t taken[] = {0x06, 0x01}; // positions 11, 12 and 18 of [10, 20) taken
    return bcl::epoch_rest::from_parts(100, 10, 10, taken, "test");
}

} // namespace

TEST_CASE("distributed_token_archive: the rest's fields are written only when a rest is given",
          "[torch][archive][tokens][keyed]") {
    const bcl::epoch_rest rest = some_rest();
    const archive_parts with =
        archive_parts::of(token_written(token_sampler(4, 1), saved_at(3), &rest), false);
    REQUIRE(with.ints("bcl_rest_start") == int64s{10});
    REQUIRE(with.ints("bcl_rest_span") == int64s{10});
    const archive_parts without =
        archive_parts::of(token_written(token_sampler(4, 1), saved_at(3)), false);
    for (const char* key : {"bcl_rest_start", "bcl_rest_span", "bcl_rest_taken"})
        REQUIRE(without.fields.count(key) == 0);
}

TEST_CASE("distributed_token_archive: read as resizable, an archive of another num_replicas and "
          "rank asks for the saved pass at the saved ones, with its rest and position",
          "[torch][archive][tokens][keyed]") {
    const bcl::epoch_rest rest = some_rest();
    asked log;
    const distributed_position at =
        read(token_written(token_sampler(4, 1), saved_at(3), &rest), token_sampler(2, 0), true,
             {0x5151, true, std::nullopt}, log);
    REQUIRE(at.position == 3);
    REQUIRE(at.plan_digest == 0x5151U);
    REQUIRE(log.epoch == 3);
    REQUIRE(log.ranks == 4);
    REQUIRE(log.rank == 1);
    REQUIRE(log.position == 3);
    REQUIRE(log.rest.has_value());
    REQUIRE(log.rest->start() == 10);
    REQUIRE(log.rest->size() == rest.size());
    // Without rest fields, the whole epoch.
    (void)read(token_written(token_sampler(4, 1), saved_at(0)), token_sampler(2, 0), true,
               {0x5151, true, std::nullopt}, log);
    REQUIRE_FALSE(log.rest.has_value());
}

TEST_CASE("distributed_token_archive: another digest, a pass that does not hold the position, "
          "a shape the planner refuses, a rank not below num_replicas and a damaged rest are "
          "refused naming the field; not resizable, another num_replicas is refused",
          "[torch][archive][tokens][keyed]") {
    const bcl::epoch_rest rest = some_rest();
    const std::string bytes = token_written(token_sampler(4, 1), saved_at(3), &rest);
    CHECK_THAT(refusal(bytes, token_sampler(2, 0), true, {0x9999, true, std::nullopt}),
               Contains("bcl_plan_digest does not match"));
    CHECK_THAT(refusal(bytes, token_sampler(2, 0), true, {0x5151, false, std::nullopt}),
               Contains("bcl_position is 3, outside the epoch's pass of micro-batches"));
    CHECK_THAT(refusal(bytes, token_sampler(2, 0), true, {0x5151, false, 2}),
               Contains("bcl_position is 3, outside the epoch's 0 to 2 micro-batches"));
    CHECK_THAT(refusal(bytes, token_sampler(2, 0), false), Contains("bcl_num_replicas is 4"));
    CHECK(refusal(bytes, token_sampler(2, 0), true).empty());

    archive_parts parts = archive_parts::of(bytes, false);
    parts.set("bcl_num_replicas", {0});
    CHECK_THAT(refusal(parts.bytes(true), token_sampler(2, 0), true),
               Contains("bcl_num_replicas is 0"));
    parts = archive_parts::of(bytes, false);
    parts.set("bcl_rank", {4});
    CHECK_THAT(refusal(parts.bytes(true), token_sampler(2, 0), true),
               Contains("bcl_rank is 4, not below bcl_num_replicas (4)"));
    parts = archive_parts::of(bytes, false);
    parts.set("bcl_rest_start", {95});
    CHECK_THAT(refusal(parts.bytes(true), token_sampler(2, 0), true),
               Contains("past the epoch's 100"));
    parts = archive_parts::of(bytes, false);
    parts.set("bcl_rest_span", {-1});
    CHECK_THAT(refusal(parts.bytes(true), token_sampler(2, 0), true),
               Contains("bcl_rest_span is -1"));
}
