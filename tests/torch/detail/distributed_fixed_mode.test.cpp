// detail/distributed_fixed_mode.hpp, as a specification: the fixed mode of a distributed sampler
// checks its settings at construction (check_fixed_mode), knows an epoch's layout without
// planning it, plans epoch e as the documented global plan of the documented order
// (tests/support/epoch_reference.hpp, written apart from bcl::epoch_planner), batch after batch
// for its rank, with the chained digest; its identity is the settings, the dataset size, the cost
// table's digest and the batches of an epoch; and what it saves it reads back, with the saved
// epoch's plan when the archive has one, while an archive it refuses changes nothing. Keyed, it
// plans window by window the documented plan of the keyed order, and reads an archive of another
// num_replicas back as a pass over the rest of its epoch.

#include "../sampler_support.hpp"
#include "support/epoch_reference.hpp"

#include <bcl/epoch_plan.hpp>
#include <bcl/torch/detail/distributed_fixed_mode.hpp>

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
using bcl::torch::detail::archive_reader;
using bcl::torch::detail::distributed_fixed_mode;
using bcl::torch::detail::distributed_position;
using bcl::torch::detail::epoch_cursor;
using Catch::Matchers::StartsWith;

constexpr const char* who = "fixed";

// 70 costs; 3 ranks, batches of 4, windows of 2 steps.
std::vector<double> costs() {
    const std::vector<std::size_t> lengths = make_lengths(70);
    std::vector<double> c;
    for (const std::size_t l : lengths) c.push_back(double(l) + double(l * l) / 256.0);
    return c;
}
distributed_sampler_options options(std::size_t rank, bool drop_last = false) {
    return {.num_replicas = 3,
            .rank = rank,
            .batch_size = 4,
            .lookahead = 2,
            .seed = 9,
            .drop_last = drop_last};
}

std::vector<index_batch> batches_of(distributed_fixed_mode& m) {
    std::vector<index_batch> out;
    for (std::size_t i = 0; i < m.batches(); ++i) {
        const auto b = m.batch(i, who);
        out.emplace_back(b.begin(), b.end());
    }
    return out;
}

std::string saved(const distributed_fixed_mode& m, const distributed_position& at) {
    torch::serialize::OutputArchive out;
    m.save(out, at);
    return archive_bytes(out);
}

distributed_position loaded(distributed_fixed_mode& m, const std::string& bytes) {
    torch::serialize::InputArchive archive;
    std::istringstream stream(bytes);
    archive.load_from(stream);
    archive_reader in(archive, "fixed::load");
    return m.load(in, who);
}

} // namespace

TEST_CASE("distributed_fixed_mode: checks its settings at construction and knows the layout of "
          "an epoch without planning it",
          "[torch][distributed_fixed_mode]") {
    REQUIRE_THROWS_WITH(
        distributed_fixed_mode(costs(), std::vector<std::uint64_t>(70, 5), options(0), who),
        StartsWith("fixed: lengths has 70 entries"));
    distributed_sampler_options bad = options(0);
    bad.rank = 3;
    REQUIRE_THROWS_WITH(distributed_fixed_mode(costs(), {}, bad, who),
                        Contains("fixed: rank 3 of num_replicas 3"));

    for (const bool drop_last : {false, true}) {
        CAPTURE(drop_last);
        const distributed_fixed_mode m(costs(), {}, options(1, drop_last), who);
        CHECK(m.dataset_size() == 70);
        CHECK(m.options().batch_size == 4);
        // 70 records on 3 ranks: padded to 72, 24 each, 6 batches; cut to 69, 23 each, cut to
        // 20, 5 batches.
        CHECK(m.layout().per_rank == (drop_last ? 20U : 24U));
        CHECK(m.layout().batches == (drop_last ? 5U : 6U));
    }
}

TEST_CASE("distributed_fixed_mode: plans an epoch as the documented global plan of the documented "
          "order, batch after batch for its rank, with the chained digest",
          "[torch][distributed_fixed_mode]") {
    for (const bool drop_last : {false, true}) {
        for (std::size_t rank = 0; rank < 3; ++rank) {
            distributed_fixed_mode m(costs(), {}, options(rank, drop_last), who);
            for (const std::size_t epoch : {0U, 1U, 7U}) {
                CAPTURE(drop_last, rank, epoch);
                m.plan(epoch, who);
                const bcl_test::reference_epoch expected = bcl_test::reference_plan(
                    bcl_test::reference_order(70, 9, epoch, true), costs(), 3, 2, 4, drop_last);
                REQUIRE(batches_of(m) == expected.batches[rank]);
                REQUIRE(m.batches() == m.layout().batches);
                REQUIRE(m.digest() == expected.digest);
                REQUIRE(m.planned().summary.digest == expected.digest);
            }
        }
    }
}

TEST_CASE("distributed_fixed_mode: its identity is the settings, the dataset size, the cost "
          "table's digest and an epoch's batches",
          "[torch][distributed_fixed_mode]") {
    const distributed_fixed_mode m(costs(), {}, options(2, true), who);
    const bcl::torch::detail::distributed_identity id = m.identity();
    CHECK(id.settings.rank == 2);
    CHECK(id.settings.num_replicas == 3);
    CHECK(id.settings.drop_last);
    CHECK(id.settings.seed == 9);
    CHECK(id.dataset_size == 70);
    CHECK(id.costs_digest == bcl::cost_table_digest(costs()));
    CHECK(id.batches == 5);
    CHECK(id.lengths_digest == 0);
}

TEST_CASE("distributed_fixed_mode: what it saves it reads back, with the saved epoch's plan when "
          "the archive has one; an archive it refuses changes nothing",
          "[torch][distributed_fixed_mode][resume]") {
    distributed_fixed_mode saver(costs(), {}, options(1), who);
    saver.plan(4, who);
    epoch_cursor at_four(4, "test", "the epoch");
    at_four.mark_started();
    const std::string planned = saved(saver, {at_four, 2, saver.digest()});

    distributed_fixed_mode reader(costs(), {}, options(1), who);
    reader.plan(0, who);
    const std::vector<index_batch> epoch_zero = batches_of(reader);
    const distributed_position at = loaded(reader, planned);
    REQUIRE(at.cursor == at_four);
    REQUIRE(at.position == 2);
    REQUIRE(at.plan_digest == saver.digest());
    REQUIRE(batches_of(reader) == batches_of(saver)); // epoch 4's plan, read back
    REQUIRE(reader.digest() == saver.digest());

    // An archive without a plan digest leaves the plan as it was.
    distributed_fixed_mode unplanned(costs(), {}, options(1), who);
    unplanned.plan(0, who);
    const distributed_position fresh =
        loaded(unplanned, saved(saver, {epoch_cursor(6, "test", "the epoch"), 0, std::nullopt}));
    REQUIRE(!fresh.plan_digest.has_value());
    REQUIRE(batches_of(unplanned) == epoch_zero);

    // Refused: another rank's archive, and a plan digest not this mode's plan of epoch 4.
    distributed_fixed_mode other(costs(), {}, options(2), who);
    other.plan(0, who);
    const std::vector<index_batch> before = batches_of(other);
    REQUIRE_THROWS_WITH(loaded(other, planned),
                        Contains("bcl_rank is 1, but this sampler's rank is 2"));
    REQUIRE(batches_of(other) == before);
    distributed_fixed_mode same(costs(), {}, options(1), who);
    same.plan(0, who);
    REQUIRE_THROWS_WITH(loaded(same, saved(saver, {at_four, 2, saver.digest() ^ 1})),
                        Contains("bcl_plan_digest does not match this sampler's plan of epoch 4"));
    REQUIRE(batches_of(same) == epoch_zero);
}

TEST_CASE("distributed_fixed_mode: keyed, each window planned when a batch of it is first asked, "
          "the documented plan of the keyed order; the digest the inputs'; an archive of another "
          "num_replicas read back as a pass over the rest of its epoch, whose archive holds it",
          "[torch][distributed_fixed_mode][keyed]") {
    using bcl::torch::detail::keyed_inputs_digest;
    using bcl::torch::detail::keyed_pass_digest;
    const auto keyed = [](std::size_t ranks, std::size_t rank) {
        distributed_sampler_options o = options(rank);
        o.num_replicas = ranks;
        o.order = bcl::torch::epoch_order_kind::keyed;
        return o;
    };
    const bcl_test::reference_epoch expected =
        bcl_test::reference_plan(keyed_reference_order(70, 9, 2, true), costs(), 3, 2, 4, false);
    for (std::size_t rank = 0; rank < 3; ++rank) {
        CAPTURE(rank);
        distributed_fixed_mode m(costs(), {}, keyed(3, rank), who);
        REQUIRE(m.keyed());
        m.plan(2, who);
        REQUIRE(m.pass().rest().whole());
        REQUIRE(m.digest() ==
                keyed_pass_digest(keyed_inputs_digest(m.options(), bcl::cost_table_digest(costs())),
                                  2, 3, bcl::epoch_rest(70)));
        REQUIRE(batches_of(m) == expected.batches[rank]);
        REQUIRE(m.summary(who).digest == expected.digest);
    }

    // Saved at 3 ranks after 2 batches (one whole window of 24 records) of epoch 2, read at 2.
    distributed_fixed_mode saver(costs(), {}, keyed(3, 0), who);
    saver.plan(2, who);
    epoch_cursor at_two(2, "test", "the epoch");
    at_two.mark_started();
    const std::string whole = saved(saver, {at_two, 2, saver.digest()});
    distributed_fixed_mode reader(costs(), {}, keyed(2, 1), who);
    const distributed_position at = loaded(reader, whole);
    REQUIRE(at.cursor == at_two);
    REQUIRE(at.position == 0);
    REQUIRE(at.plan_digest == reader.digest());
    REQUIRE(reader.pass().rest().start() == 24);
    REQUIRE(reader.pass().rest().size() == 46);
    REQUIRE(reader.batches() == 6); // 23 records on each of 2 ranks
    REQUIRE(reader.records_per_rank() == 23);
    // Its archive holds the rest, and reads back at 2 ranks exactly.
    const std::string rest = saved(reader, {at_two, 1, reader.digest()});
    distributed_fixed_mode back(costs(), {}, keyed(2, 1), who);
    const distributed_position p = loaded(back, rest);
    REQUIRE(p.position == 1);
    REQUIRE(back.pass().rest().start() == 24);
    REQUIRE(batches_of(back) == batches_of(reader));
}
