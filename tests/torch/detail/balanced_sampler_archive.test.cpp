// detail/balanced_sampler_archive.hpp, as a specification: a balanced_sampler's archive (the
// inner sampler's own, nested, then the header, the inner sampler's kind, the dataset size, the
// draw phase and level, the epoch's indices pushed and staged, the balancer's state, the seal)
// reads back into exactly the epoch that was saved: its cursor, draw, indices and a balancer on
// the same course, the inner sampler standing where the saved one stood. Each field is checked
// against the sampler it is loaded into and against the others: the kind, a known dataset size,
// the draw phase and level against the options (every case of read_draw's table), the balancer's
// level, that its pending indices continue bcl_pushed, the draw phase, the staged indices and the
// cursor against the balancer, and, for a stock inner sampler, what it handed out and its epoch.
// A refusal names the field; the inner sampler loaded into is unchanged by any refusal.

#include "../sampler_support.hpp"

#include <bcl/torch/detail/balanced_sampler_archive.hpp>

#include <catch2/catch.hpp>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

namespace {

using namespace sampler_support;
namespace torch_detail = bcl::torch::detail;
using torch_detail::draw_phase;
using torch_detail::epoch_cursor;
using torch_detail::epoch_draw;
using torch_detail::sampler_identity;
using balancer_type = bcl::balancer<std::size_t, length_cost_type>;

constexpr std::size_t n = 40;

const std::vector<std::size_t>& lengths() {
    static const std::vector<std::size_t> table = make_lengths(n);
    return table;
}

// Batches of 4, windows of 2, at the level `mean_cost` (0: the epoch's mean).
bcl::options opts(double mean_cost) {
    return bcl::options{.batch_size = 4, .lookahead = 2, .mean_cost = mean_cost};
}

template <class Inner = SequentialSampler>
sampler_identity identity(double mean_cost, std::optional<std::size_t> size = std::nullopt) {
    return {torch_detail::inner_kind<Inner>(), size, opts(mean_cost)};
}

// A balancer aiming at `level` that took the epoch's indices 0 .. pushed-1 (or those of `order`)
// and handed out `popped` batches, then finished if `finish`.
balancer_type balancer_after(double level, std::size_t pushed, std::size_t popped,
                             bool finish = false, const index_batch& order = {}) {
    balancer_type b(length_cost(lengths()), opts(level));
    for (std::size_t k = 0; k < pushed; ++k) b.push(order.empty() ? k : order[k]);
    if (finish) b.finish();
    for (std::size_t k = 0; k < popped; ++k) REQUIRE(b.pop().has_value());
    return b;
}

epoch_cursor started(std::size_t epoch = 0) {
    epoch_cursor c(epoch, "test", "the epoch");
    c.mark_started();
    return c;
}

index_batch first(std::size_t count) {
    index_batch out(count);
    for (std::size_t k = 0; k < count; ++k) out[k] = k;
    return out;
}

template <class Inner>
std::string archive_of(const Inner& inner, const sampler_identity& id, const epoch_cursor& cursor,
                       const epoch_draw& draw, const balancer_type& b, const index_batch& drawn,
                       std::size_t pushed) {
    torch::serialize::OutputArchive out;
    torch_detail::write_balanced_archive(out, inner, id, cursor, draw, b.save(), drawn, pushed);
    return archive_bytes(out);
}

// The genuine archive: 20 of 40 indices drawn in order, 16 pushed, one batch handed out, at the
// fixed level 100.
SequentialSampler inner_at(std::size_t drawn, std::size_t size = n) {
    SequentialSampler s(size);
    if (drawn != 0) (void)s.next(drawn);
    return s;
}
std::string genuine() {
    return archive_of(inner_at(20), identity(100), started(), {draw_phase::bulk, 100},
                      balancer_after(100, 16, 1), first(20), 16);
}

// Reads `bytes` as load() does into `target`.
template <class Inner>
torch_detail::restored_epoch<balancer_type> load(const std::string& bytes,
                                                 const sampler_identity& id, Inner& target) {
    torch::serialize::InputArchive archive;
    std::istringstream stream(bytes);
    archive.load_from(stream);
    torch_detail::archive_reader in(archive, "bs::load");
    auto r = torch_detail::read_balanced_archive<balancer_type>(in, id, length_cost(lengths()));
    torch_detail::load_inner(in, archive, target, r, id.dataset_size);
    return r;
}

// The message load() refuses `bytes` with; `target` is required unchanged: it still hands out
// `next_index` next.
template <class Inner = SequentialSampler>
std::string refusal(const std::string& bytes, const sampler_identity& id,
                    Inner target = inner_at(3), std::size_t next_index = 3) {
    std::string what;
    try {
        (void)load(bytes, id, target);
    } catch (const bcl::error& e) {
        what = e.what();
    }
    REQUIRE(target.index() == next_index);
    return what;
}

// What read_draw says of a bcl_draw and bcl_mean_cost under options::mean_cost `mean_cost`.
std::string draw_refusal(std::int64_t phase, double level, double mean_cost) {
    torch::serialize::OutputArchive out;
    torch_detail::archive_writer w(out);
    w.int64s("bcl_draw", int64s{phase});
    w.real("bcl_mean_cost", level);
    torch::serialize::InputArchive archive;
    std::istringstream stream(archive_bytes(out));
    archive.load_from(stream);
    torch_detail::archive_reader in(archive, "w");
    try {
        const epoch_draw d = torch_detail::read_draw(in, opts(mean_cost));
        REQUIRE(static_cast<std::int64_t>(d.phase) == phase);
        REQUIRE(d.level == level);
    } catch (const bcl::error& e) {
        return e.what();
    }
    return "";
}

} // namespace

TEST_CASE("balanced_sampler_archive: an archive reads back into the epoch saved: cursor, draw, "
          "indices, a balancer on the same course, the inner sampler where it stood",
          "[torch][balanced_sampler_archive]") {
    STATIC_REQUIRE(static_cast<int>(draw_phase::pending) == 0);
    STATIC_REQUIRE(static_cast<int>(draw_phase::whole) == 1);
    STATIC_REQUIRE(static_cast<int>(draw_phase::bulk) == 2);

    balancer_type saved = balancer_after(100, 16, 1);
    SequentialSampler target(n);
    auto r = load(genuine(), identity(100), target);
    REQUIRE(r.cursor == started());
    REQUIRE(r.draw.phase == draw_phase::bulk);
    REQUIRE(r.draw.level == 100.0);
    REQUIRE(r.drawn == first(20));
    REQUIRE(r.pushed == 16);
    REQUIRE(!r.exhausted);
    REQUIRE(target.index() == 20);
    // The same course: the same batches, fed the same indices to the epoch's end as a sampler
    // feeds them (pushed while it takes them, else a batch popped).
    REQUIRE(r.balancer.has_value());
    const auto course = [](balancer_type& b) {
        std::vector<index_batch> out;
        for (std::size_t k = 16; k < n;) {
            if (b.can_push()) {
                b.push(k++);
            } else {
                auto x = b.pop();
                REQUIRE(x.has_value());
                out.emplace_back(x->begin(), x->end());
            }
        }
        b.finish();
        while (auto x = b.pop()) out.emplace_back(x->begin(), x->end());
        return out;
    };
    const std::vector<index_batch> ahead = course(saved);
    REQUIRE(course(*r.balancer) == ahead);
    REQUIRE(ahead.size() == 9); // 40 indices, one batch of 4 handed out before

    // Drawn whole (mean_cost 0, the level the epoch's mean): the inner sampler must be empty.
    SequentialSampler whole_target(20);
    const auto w =
        load(archive_of(inner_at(20, 20), identity(0), started(), {draw_phase::whole, 100},
                        balancer_after(100, 16, 1), first(20), 16),
             identity(0), whole_target);
    REQUIRE(w.exhausted);
    REQUIRE(w.draw.phase == draw_phase::whole);
}

TEST_CASE("balanced_sampler_archive: read_draw: the phase is 0, 1 or 2, the level a mean cost its "
          "phase allows, and both those of the options",
          "[torch][balanced_sampler_archive]") {
    const double inf = std::numeric_limits<double>::infinity();
    const double nan = std::numeric_limits<double>::quiet_NaN();
    // Accepted: pending at 0, drawn whole at the epoch's mean (options 0), in bulk at the fixed
    // options::mean_cost.
    REQUIRE(draw_refusal(0, 0.0, 0.0).empty());
    REQUIRE(draw_refusal(1, 7.5, 0.0).empty());
    REQUIRE(draw_refusal(1, 0.0, 0.0).empty()); // an epoch of zero costs
    REQUIRE(draw_refusal(2, 3.0, 3.0).empty());
    // A level is a cost (bcl::valid_cost): up to bcl::max_estimate, -0 as 0.
    REQUIRE(draw_refusal(1, bcl::max_estimate, 0.0).empty());
    REQUIRE(draw_refusal(0, -0.0, 0.0).empty());

    const std::string p = "w: the archive's ";
    REQUIRE(draw_refusal(3, 0.0, 0.0) == p + "bcl_draw is 3, not 0, 1 or 2");
    REQUIRE(draw_refusal(-1, 0.0, 0.0) == p + "bcl_draw is -1, not 0, 1 or 2");
    for (const double bad : {-1.0, nan, inf, bcl::max_estimate * 2}) {
        CAPTURE(bad);
        REQUIRE_THAT(draw_refusal(1, bad, 0.0), Contains("not a mean cost its bcl_draw allows"));
    }
    REQUIRE(draw_refusal(2, 0.0, 0.0) ==
            p + "bcl_mean_cost is 0, not a mean cost its bcl_draw allows");
    REQUIRE(draw_refusal(2, 3.0, 4.0) ==
            p + "bcl_draw and bcl_mean_cost are those of a sampler whose options::mean_cost is "
                "3, but this one's is 4");
    REQUIRE(draw_refusal(1, 7.5, 7.5) ==
            p + "bcl_draw and bcl_mean_cost are those of a sampler whose options::mean_cost is "
                "0, but this one's is 7.5");
    REQUIRE(draw_refusal(0, 0.0, 5.0) ==
            p + "bcl_draw and bcl_mean_cost are those of a sampler whose options::mean_cost is "
                "0, but this one's is 5");
    REQUIRE(draw_refusal(0, 0.5, 0.0) ==
            p + "bcl_draw says the epoch is not drawn yet, but its bcl_mean_cost is 0.5, not 0");
}

TEST_CASE("balanced_sampler_archive: another inner sampler's kind, another known dataset size, "
          "an index beyond it or other options are refused, naming the field",
          "[torch][balanced_sampler_archive]") {
    const std::string p = "bs::load: the archive's ";
    REQUIRE(refusal(genuine(), identity<RandomSampler>(100)) ==
            p + "bcl_inner_kind is \"torch::data::samplers::SequentialSampler\", but this "
                "sampler's inner sampler is torch::data::samplers::RandomSampler");
    const std::string sized =
        archive_of(inner_at(20), identity(100, 40), started(), {draw_phase::bulk, 100},
                   balancer_after(100, 16, 1), first(20), 16);
    REQUIRE(refusal(sized, identity(100, 50)) ==
            p + "bcl_dataset_size is 40, but this sampler's dataset size is 50");
    // A size saved but unknown to this sampler, or known here but not saved, is no mismatch.
    SequentialSampler target(n);
    REQUIRE(load(sized, identity(100), target).pushed == 16);
    // Staged are 16 .. 19: 18 is the third, and not below 18.
    REQUIRE(refusal(genuine(), identity(100, 18)) ==
            p + "bcl_staged holds 18 at entry 2, outside the dataset's [0, 18)");
    REQUIRE(refusal(genuine(), identity(100, 12)) ==
            p + "bcl_pushed holds 12 at entry 12, outside the dataset's [0, 12)");
    REQUIRE_THAT(refusal(genuine(), identity(50)),
                 Contains(p + "bcl_draw and bcl_mean_cost are those of a sampler whose "
                              "options::mean_cost is 100, but this one's is 50"));
}

TEST_CASE("balanced_sampler_archive: fields that contradict the balancer are refused: its level, "
          "indices it did not take, a phase before any draw, staged indices after its end, the "
          "cursor's started flag",
          "[torch][balanced_sampler_archive]") {
    const std::string p = "bs::load: the archive's ";
    const auto written = [](const epoch_cursor& c, const epoch_draw& d, const balancer_type& b,
                            std::size_t drawn = 20) {
        return archive_of(inner_at(drawn), identity(d.phase == draw_phase::bulk ? d.level : 0), c,
                          d, b, first(drawn), 16);
    };
    const epoch_draw bulk{draw_phase::bulk, 100};
    REQUIRE(refusal(written(started(), bulk, balancer_after(50, 16, 1)), identity(100)) ==
            p + "bcl_mean_cost is 100, but its balancer (bcl_balancer_state) aims at 50");
    // The balancer took 15, 14, ..., 0: the archive says it took 0, 1, ..., 15.
    index_batch reversed = first(16);
    std::reverse(reversed.begin(), reversed.end());
    REQUIRE_THAT(refusal(written(started(), bulk, balancer_after(100, 16, 1, false, reversed)),
                         identity(100)),
                 Contains("bs::load: the archive's bcl_pushed and bcl_pending do not continue its "
                          "epoch"));
    REQUIRE(refusal(written(started(), {draw_phase::pending, 0}, balancer_after(0, 16, 1)),
                    identity(0)) ==
            p + "bcl_draw says the epoch is not drawn yet, but its balancer has taken 16 indices");
    REQUIRE(
        refusal(written(epoch_cursor(), bulk, balancer_after(100, 16, 0, true)), identity(100)) ==
        p + "bcl_staged holds 4 indices not yet pushed, but its balancer has finished the "
            "epoch");
    REQUIRE(refusal(written(epoch_cursor(), bulk, balancer_after(100, 16, 1)), identity(100)) ==
            p + "bcl_epoch says no batch was handed out, but its balancer has handed out 1");
    REQUIRE(refusal(written(started(), bulk, balancer_after(100, 16, 0)), identity(100)) ==
            p + "bcl_epoch says a batch was handed out, but its balancer has handed out 0");
}

TEST_CASE("balanced_sampler_archive: the inner sampler is checked and the seal last, and a "
          "refusal leaves the sampler loaded into unchanged",
          "[torch][balanced_sampler_archive]") {
    const std::string p = "bs::load: the archive's ";
    const epoch_draw bulk{draw_phase::bulk, 100};
    // The inner sampler handed out 21, the archive says 20.
    REQUIRE_THAT(refusal(archive_of(inner_at(21), identity(100), started(), bulk,
                                    balancer_after(100, 16, 1), first(20), 16),
                         identity(100)),
                 Contains(p + "bcl_pushed and bcl_staged (16 and 4 indices) are not what its "
                              "inner sampler handed out this epoch: it has handed out 21"));
    // Drawn whole, but 20 of the inner sampler's 40 are left.
    REQUIRE_THAT(refusal(archive_of(inner_at(20), identity(0), started(), {draw_phase::whole, 100},
                                    balancer_after(100, 16, 1), first(20), 16),
                         identity(0)),
                 Contains("the epoch is drawn whole or over, but "));
    // A distributed inner sampler's epoch is the archive's: here 0, the archive's 2.
    DistributedRandomSampler at_epoch_0(n, 2, 0);
    const index_batch drawn = *at_epoch_0.next(20);
    DistributedRandomSampler target(n, 2, 0);
    (void)target.next(3);
    const std::size_t target_index = target.index();
    REQUIRE(refusal(archive_of(at_epoch_0, identity<DistributedRandomSampler>(100), started(2),
                               bulk, balancer_after(100, 16, 1, false, drawn), drawn, 16),
                    identity<DistributedRandomSampler>(100), target,
                    target_index) == p + "bcl_epoch is 2, but its inner sampler's epoch is 0");

    // The inner sampler's archive missing, or broken (what libtorch throws, named).
    archive_parts parts = archive_parts::of(genuine());
    archive_parts no_inner = archive_parts::of(genuine(), /*nested=*/false);
    REQUIRE(refusal(no_inner.bytes(false), identity(100)) ==
            p + "inner (the inner sampler) is missing");
    parts.inner.clear();
    REQUIRE_THAT(refusal(parts.bytes(false), identity(100)),
                 Contains(p + "inner (the inner sampler's state) does not load: "));

    // A field no other check covers, altered: only the seal refuses it.
    archive_parts sized =
        archive_parts::of(archive_of(inner_at(20), identity(100, 40), started(), bulk,
                                     balancer_after(100, 16, 1), first(20), 16));
    sized.set("bcl_dataset_size", {41});
    REQUIRE(refusal(sized.bytes(false), identity(100)) ==
            p + "bcl_digest does not match the archive's fields: the archive was altered or "
                "damaged after it was saved");
    SequentialSampler resealed(n);
    REQUIRE(load(sized.bytes(true), identity(100), resealed).pushed == 16);
}
