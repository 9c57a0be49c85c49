// detail/distributed_token_mode.hpp, as a specification: the token mode of a distributed sampler
// checks its settings and tables at construction (check_token_mode), plans epoch e as
// bcl::token_epoch_planner::share called directly on the documented order
// (tests/support/epoch_reference.hpp) with the arguments python/src/token_epoch.hpp passes for
// each padding; its identity is the settings, the dataset size and the digests of the costs and
// the lengths; and what it saves it reads back, with the saved epoch's share when the archive has
// one, while an archive it refuses changes nothing.

#include "../sampler_support.hpp"
#include "support/epoch_reference.hpp"

#include <bcl/epoch_plan.hpp>
#include <bcl/token_epoch_plan.hpp>
#include <bcl/torch/detail/distributed_token_mode.hpp>

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
using bcl::torch::distributed_sampler_options;
using bcl::torch::token_padding;
using bcl::torch::detail::archive_reader;
using bcl::torch::detail::distributed_position;
using bcl::torch::detail::distributed_token_mode;
using bcl::torch::detail::epoch_cursor;
using lengths_t = std::vector<std::uint64_t>;

constexpr const char* who = "tokens";

// 90 lengths of 10 to 600 tokens; costs L + L^2/256, or none (the default cost).
lengths_t lengths() {
    const std::vector<std::size_t> made = make_lengths(90);
    return {made.begin(), made.end()};
}
std::vector<double> costs(bool given) {
    std::vector<double> c;
    if (given)
        for (const std::uint64_t l : lengths()) c.push_back(double(l) + double(l * l) / 256.0);
    return c;
}
// 3 ranks, 2 steps of 2 micro-batches of at most 1024 tokens, lengths padded to a multiple of 8.
distributed_sampler_options options(std::size_t rank, token_padding padding) {
    return {.num_replicas = 3,
            .rank = rank,
            .lookahead = 2,
            .seed = 4,
            .max_tokens = 1024,
            .micro_batches = 2,
            .pad_to_multiple_of = 8,
            .padding = padding};
}

// What rank `rank` must hand out in `epoch`: bcl::token_epoch_planner::share on the documented
// order, with the budget, options and repeat_to_fill Python's sampler passes.
bcl::token_epoch_share<std::size_t> expected(std::size_t rank, token_padding padding, bool given,
                                             std::size_t epoch) {
    bcl::token_plan_options opt;
    opt.pad_to_multiple_of = 8;
    opt.allow_empty_micro_batches = padding == token_padding::empty;
    const std::vector<std::size_t> order = bcl_test::reference_order(90, 4, epoch, true);
    bcl::token_epoch_planner planner;
    bcl::token_epoch_share<std::size_t> out;
    planner.share<std::size_t>(lengths(), costs(given), order,
                               bcl::token_budget{.ranks = 3, .max_tokens = 1024},
                               /*micro_batches=*/2, /*lookahead=*/2, rank, opt, out, "test",
                               /*repeat_to_fill=*/padding == token_padding::repeat);
    return out;
}

std::vector<index_batch> batches_of(const distributed_token_mode& m) {
    std::vector<index_batch> out;
    for (std::size_t i = 0; i < m.batches("test"); ++i) {
        const auto b = m.batch(i, "test");
        out.emplace_back(b.begin(), b.end());
    }
    return out;
}

std::vector<index_batch> batches_of(const bcl::token_epoch_share<std::size_t>& share) {
    std::vector<index_batch> out;
    for (std::size_t i = 0; i < share.micro_batches(); ++i) {
        const auto b = share.micro_batch(i);
        out.emplace_back(b.begin(), b.end());
    }
    return out;
}

std::string saved(const distributed_token_mode& m, const distributed_position& at) {
    torch::serialize::OutputArchive out;
    m.save(out, at);
    return archive_bytes(out);
}

distributed_position loaded(distributed_token_mode& m, const std::string& bytes) {
    torch::serialize::InputArchive archive;
    std::istringstream stream(bytes);
    archive.load_from(stream);
    archive_reader in(archive, "tokens::load");
    return m.load(in, who);
}

} // namespace

TEST_CASE("distributed_token_mode: checks its settings and tables at construction",
          "[torch][distributed_token_mode]") {
    lengths_t long_one = lengths();
    long_one[30] = 2000;
    REQUIRE_THROWS_WITH(
        distributed_token_mode({}, long_one, options(0, token_padding::repeat), who),
        Contains("tokens: dataset index 30 has 2000 tokens"));
    distributed_sampler_options bad = options(0, token_padding::repeat);
    bad.batch_size = 4;
    REQUIRE_THROWS_WITH(distributed_token_mode({}, lengths(), bad, who),
                        Contains("tokens: batch_size is 4"));
    const distributed_token_mode m(costs(true), lengths(), options(2, token_padding::empty), who);
    CHECK(m.dataset_size() == 90);
    CHECK(m.options().micro_batches == 2);
}

TEST_CASE("distributed_token_mode: plans an epoch as bcl::token_epoch_planner::share of the "
          "documented order, with the arguments Python's sampler passes",
          "[torch][distributed_token_mode]") {
    for (const token_padding padding : {token_padding::repeat, token_padding::empty}) {
        for (const bool given : {false, true}) {
            for (std::size_t rank = 0; rank < 3; ++rank) {
                distributed_token_mode m(costs(given), lengths(), options(rank, padding), who);
                for (const std::size_t epoch : {0U, 3U}) {
                    CAPTURE(static_cast<int>(padding), given, rank, epoch);
                    m.plan(epoch, who);
                    const bcl::token_epoch_share<std::size_t> e =
                        expected(rank, padding, given, epoch);
                    REQUIRE(batches_of(m) == batches_of(e));
                    REQUIRE(m.batches("test") == e.micro_batches());
                    REQUIRE(m.digest() == e.digest);
                    REQUIRE(m.planned().repeated == e.repeated);
                    REQUIRE(m.planned().padding == e.padding);
                }
            }
        }
    }
}

TEST_CASE("distributed_token_mode: its identity is the settings, the dataset size and the "
          "digests of the costs and the lengths",
          "[torch][distributed_token_mode]") {
    const distributed_token_mode m(costs(true), lengths(), options(1, token_padding::error), who);
    const bcl::torch::detail::distributed_identity id = m.identity();
    CHECK(id.settings.rank == 1);
    CHECK(id.settings.max_tokens == 1024);
    CHECK(id.settings.padding == token_padding::error);
    CHECK(id.dataset_size == 90);
    CHECK(id.costs_digest == bcl::cost_table_digest(costs(true)));
    CHECK(id.lengths_digest == bcl::torch::detail::length_table_digest(lengths()));
    CHECK(id.batches == 0);
    const distributed_token_mode no_costs({}, lengths(), options(1, token_padding::error), who);
    CHECK(no_costs.identity().costs_digest == bcl::cost_table_digest({}));
}

TEST_CASE("distributed_token_mode: what it saves it reads back, with the saved epoch's share when "
          "the archive has one; an archive it refuses changes nothing",
          "[torch][distributed_token_mode][resume]") {
    const auto make = [](std::size_t rank) {
        return distributed_token_mode({}, lengths(), options(rank, token_padding::repeat), who);
    };
    distributed_token_mode saver = make(0);
    saver.plan(5, who);
    epoch_cursor at_five(5, "test", "the epoch");
    at_five.mark_started();
    const std::string planned = saved(saver, {at_five, 3, saver.digest()});

    distributed_token_mode reader = make(0);
    reader.plan(0, who);
    const std::vector<index_batch> epoch_zero = batches_of(reader);
    const distributed_position at = loaded(reader, planned);
    REQUIRE(at.cursor == at_five);
    REQUIRE(at.position == 3);
    REQUIRE(at.plan_digest == saver.digest());
    REQUIRE(batches_of(reader) == batches_of(saver));
    REQUIRE(reader.digest() == saver.digest());

    // An archive without a plan digest leaves the share as it was.
    distributed_token_mode unplanned = make(0);
    unplanned.plan(0, who);
    REQUIRE(!loaded(unplanned, saved(saver, {epoch_cursor(), 0, std::nullopt}))
                 .plan_digest.has_value());
    REQUIRE(batches_of(unplanned) == epoch_zero);

    // Refused: another rank's archive; a position beyond the saved epoch's share.
    distributed_token_mode other = make(1);
    other.plan(0, who);
    const std::vector<index_batch> before = batches_of(other);
    REQUIRE_THROWS_WITH(loaded(other, planned),
                        Contains("bcl_rank is 0, but this sampler's rank is 1"));
    REQUIRE(batches_of(other) == before);
    distributed_token_mode same = make(0);
    same.plan(0, who);
    const std::size_t beyond = saver.batches("test") + 1;
    REQUIRE_THROWS_WITH(loaded(same, saved(saver, {at_five, beyond, saver.digest()})),
                        Contains("bcl_position is " + std::to_string(beyond)));
    REQUIRE(batches_of(same) == epoch_zero);
}
