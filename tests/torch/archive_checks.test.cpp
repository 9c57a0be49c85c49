// What bcl::torch::balanced_sampler::load checks in an archive. A tamper matrix: each case an
// archive altered as a careless or hostile user might, refused with a bcl::error that names the
// field, after which the sampler hands out exactly what an untouched one does; every case with
// the digest left as it was and with it recomputed, so that the digest is not what catches a
// structurally wrong archive. Then the dataset size, the inner samplers libtorch ships, one that
// cannot be copied, and a randomized tamper harness (the archive fuzzer).

#include "sampler_support.hpp"

#include <bcl/bcl.hpp>
#include <bcl/torch/balanced_sampler.hpp>
#include <bcl/torch/detail/archive.hpp>

#include <catch2/catch.hpp>
#include <torch/torch.h>

#include <algorithm>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <iterator>
#include <limits>
#include <map>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace {

using namespace sampler_support;

// Appends `extra` to `v`, or drops its last entry.
void add_or_drop(int64s& v, bool add, std::int64_t extra) {
    if (add)
        v.push_back(extra);
    else
        v.pop_back();
}

// Moves `n` entries from the end of `from` to the front of `to`.
void move_back_to_front(int64s& from, int64s& to, std::size_t n) {
    to.insert(to.begin(), from.end() - std::ptrdiff_t(n), from.end());
    from.resize(from.size() - n);
}

// A sampler over `n` indices with rank 1 of 2 drawing from them: 420 each for n = 840, 26
// batches of 16 and one of 4.
struct matrix_setup {
    std::size_t n = 2 * 420;
    std::vector<std::size_t> lengths = make_lengths(2000);
    bcl::options opt;

    [[nodiscard]] auto make(std::size_t size) const {
        return bcl::torch::balanced_sampler(DistributedRandomSampler(size, 2, 1),
                                            length_cost(lengths), opt);
    }
    [[nodiscard]] auto make() const { return make(n); }
};

} // namespace

TEST_CASE("torch archive checks: the tamper matrix: every altered field is a bcl::error naming "
          "it, and the sampler is unchanged, with the digest as saved and recomputed",
          "[torch][resume][tamper]") {
    const std::string policy = GENERATE("sliding", "tumbling");
    const double mean_cost = GENERATE(0.0, 1500.0); // the epoch's own mean, or a fixed one
    const bool reseal = GENERATE(false, true);
    CAPTURE(policy, mean_cost, reseal);
    matrix_setup m;
    m.opt = {
        .batch_size = 16, .lookahead = 4, .policy = policy_named(policy), .mean_cost = mean_cost};
    const auto make = [&] { return m.make(); };
    // 9 batches in: 3 formed batches wait (windows of 4), a sliding buffer holds more, and most
    // of the share is drawn and not yet pushed.
    const saved_point genuine = save_after(m.make(), 9);
    archive_parts parts = archive_parts::of(genuine.bytes);
    int64s pushed = parts.ints("bcl_pushed");
    int64s staged = parts.ints("bcl_staged");
    int64s pending = parts.ints("bcl_pending");
    REQUIRE(pushed.size() >= 9 * 16);
    REQUIRE(staged.size() > 100);
    REQUIRE(pending.size() >= 3 * 16);
    const auto refused = [&](const std::vector<std::string>& names) {
        require_refused(make, parts.bytes(reseal), names);
    };
    // `key` set to `values`, and the archive refused with a message naming `names`.
    const auto refused_with = [&](const std::string& key, const int64s& values,
                                  const std::vector<std::string>& names) {
        parts.set(key, values);
        refused(names);
    };

    SECTION("the genuine archive loads and resumes exactly") {
        auto restored = make();
        load_bytes(restored, parts.bytes(reseal));
        REQUIRE(drain(restored, 16) == genuine.rest);
    }
    SECTION("position +1: the first staged index moved into bcl_pushed") {
        pushed.push_back(staged.front());
        staged.erase(staged.begin());
        parts.set("bcl_pushed", pushed);
        refused_with("bcl_staged", staged, {"bcl_pushed", "position"});
    }
    SECTION("position -1: the last pushed index moved back into bcl_staged") {
        move_back_to_front(pushed, staged, 1);
        parts.set("bcl_pushed", pushed);
        refused_with("bcl_staged", staged, {"bcl_pushed", "position"});
    }
    SECTION("position +1 and -1: an index added to or dropped from bcl_pushed") {
        add_or_drop(pushed, GENERATE(true, false), staged.back());
        refused_with("bcl_pushed", pushed, {"bcl_pushed", "position"});
    }
    SECTION("a pending index outside the dataset") {
        pending[5] = std::int64_t(m.n);
        refused_with("bcl_pending", pending, {"bcl_pending", "outside the dataset's [0, 840)"});
    }
    SECTION("a pending index duplicated over its neighbour") {
        pending[1] = pending[0];
        refused_with("bcl_pending", pending, {"bcl_pending", "pending index 1"});
    }
    SECTION("a pending index dropped, or one added") {
        add_or_drop(pending, GENERATE(true, false), staged.front());
        refused_with("bcl_pending", pending, {"bcl_pending", "pending records given"});
    }
    SECTION("a pending index replaced by one already handed out: in a formed batch, or buffered") {
        const std::size_t at = GENERATE(0, 1);
        const std::size_t i = at == 0 ? 0 : pending.size() - 1;
        pending[i] = std::int64_t(genuine.handed[2][3]);
        refused_with("bcl_pending", pending, {"bcl_pending", "pending index " + std::to_string(i)});
    }
    SECTION("bcl_staged: five indices dropped (an epoch one batch short), or one added") {
        const bool add = GENERATE(true, false);
        if (add)
            staged.push_back(staged.front());
        else
            staged.resize(staged.size() - 5);
        refused_with("bcl_staged", staged, {"bcl_staged", "inner sampler handed out"});
    }
    SECTION("bcl_staged: an index outside the dataset") {
        staged[7] = std::int64_t(m.n) + 5;
        refused_with("bcl_staged", staged, {"bcl_staged", "outside the dataset's [0, 840)"});
    }
    SECTION("bcl_staged: an index duplicated over its neighbour") {
        staged[8] = staged[7];
        refused_with("bcl_staged", staged, {"bcl_staged", "hands out"});
    }
    SECTION("a finished epoch's balancer in this archive, or a finished archive staging more") {
        const saved_point over = save_after(m.make(), 1000); // the whole epoch, then the save
        REQUIRE(over.rest.empty());
        const archive_parts finished = archive_parts::of(over.bytes);
        const bool splice = GENERATE(true, false);
        if (splice) {
            parts.fields["bcl_balancer_state"] = finished.fields.at("bcl_balancer_state");
            parts.fields["bcl_pending"] = finished.fields.at("bcl_pending");
            refused({"bcl_pushed", "position"});
        } else {
            parts = finished;
            parts.set("bcl_staged", int64s(pushed.begin(), pushed.begin() + 5));
            refused({"bcl_staged", "finished the epoch"});
        }
    }
    SECTION("the archive of a sampler over 1000 indices into one over 500") {
        parts = archive_parts::of(save_after(m.make(1000), 9).bytes);
        const auto make500 = [&] { return m.make(500); };
        if (!reseal) {
            require_refused(make500, parts.bytes(false),
                            {"bcl_dataset_size is 1000", "dataset size is 500"});
        } else { // the size rewritten too: the indices are still the larger dataset's
            parts.set("bcl_dataset_size", {500});
            require_refused(make500, parts.bytes(true),
                            {"bcl_pushed", "outside the dataset's [0, 500)"});
        }
    }
    SECTION("the archive of a sampler over another kind of inner sampler") {
        parts =
            archive_parts::of(save_after(bcl::torch::balanced_sampler(
                                             SequentialSampler(m.n), length_cost(m.lengths), m.opt),
                                         9)
                                  .bytes);
        if (!reseal) {
            refused({"bcl_inner_kind", "SequentialSampler", "DistributedRandomSampler"});
        } else { // the kind rewritten too: the inner sampler's own state does not fit
            const std::string kind = bcl::torch::detail::inner_kind<DistributedRandomSampler>();
            torch::Tensor t = torch::empty({std::int64_t(kind.size())}, torch::kUInt8);
            std::copy(kind.begin(), kind.end(), t.data_ptr<std::uint8_t>());
            parts.fields["bcl_inner_kind"] = t;
            refused({"inner", "does not load"});
        }
    }
    SECTION("a sampler with other options") {
        const std::string option = GENERATE("batch_size", "lookahead", "mean_cost");
        matrix_setup other = m;
        if (option == "batch_size") other.opt.batch_size = 8;
        if (option == "lookahead") other.opt.lookahead = 8;
        if (option == "mean_cost") other.opt.mean_cost = mean_cost > 0.0 ? 0.0 : 1500.0;
        require_refused([&] { return other.make(); }, parts.bytes(reseal),
                        {option == "mean_cost" ? "options::mean_cost" : option});
    }
    SECTION("another epoch in bcl_epoch") {
        int64s epoch = parts.ints("bcl_epoch");
        epoch[0] += 1;
        refused_with("bcl_epoch", epoch, {"bcl_epoch is 1", "inner sampler's epoch is 0"});
    }
    SECTION("another epoch under way in bcl_epoch, with a set_epoch() choice too") {
        refused_with("bcl_epoch", {1, 1, 1, 1}, {"bcl_epoch is 1", "inner sampler's epoch is 0"});
    }
    SECTION("bcl_epoch says no batch was handed out") {
        parts.set("bcl_epoch", {0, 0, 0, 0});
        refused({"bcl_epoch", "handed out 9"});
    }
    SECTION("bcl_epoch malformed: the three values of format 3, a flag of 2, a negative epoch") {
        const int64s epoch = GENERATE(int64s{0, 1, 0}, int64s{0, 2, 0, 0}, int64s{-1, 1, 0, 0},
                                      int64s{0, 1, 0, 4}, int64s{0, 1, 1, -3});
        refused_with("bcl_epoch", epoch, {"bcl_epoch is not an epoch"});
    }
    SECTION("bcl_draw says another draw phase") {
        parts.set("bcl_draw", {mean_cost > 0.0 ? 1 : 0});
        refused({"bcl_draw"});
    }
    SECTION("bcl_mean_cost altered") {
        const double level = parts.fields.at("bcl_mean_cost").item<double>();
        parts.fields["bcl_mean_cost"] = torch::full({1}, level * 1.01, torch::kFloat64);
        refused({"bcl_mean_cost"});
    }
    SECTION("the inner sampler's position moved by one") {
        parts.inner["sample_index_"] += 1;
        refused({"bcl_staged", "inner sampler handed out"});
    }
    SECTION("bcl_format of an earlier bcl") {
        parts.set("bcl_format", {2});
        refused({"bcl_format is 2", "earlier bcl", "cannot be verified"});
    }
    SECTION("only the digest altered: the digest catches it") {
        if (!reseal) { // resealed, the archive is the genuine one again
            int64s digest = parts.ints("bcl_digest");
            digest[0] ^= 1;
            parts.set("bcl_digest", digest);
            refused({"bcl_digest", "altered or damaged"});
        }
    }
    SECTION("the set_epoch flag flipped: only the digest catches it; resealed, only the epoch the "
            "next reset() starts is changed") {
        parts.set("bcl_epoch", {0, 1, 1, 0});
        if (!reseal) {
            refused({"bcl_digest"});
        } else {
            auto restored = make();
            load_bytes(restored, parts.bytes(true));
            REQUIRE(drain(restored, 16) == genuine.rest);
            restored.reset();
            REQUIRE(restored.epoch() == 0); // as after set_epoch(0)
        }
    }
}

namespace {

// A SequentialSampler that cannot be copied, so load() reads its state in place, last.
class move_only_sampler : public SequentialSampler {
public:
    explicit move_only_sampler(std::size_t n)
        : SequentialSampler(n), m_token(std::make_unique<int>(0)) {}

private:
    std::unique_ptr<int> m_token;
};

} // namespace

TEST_CASE("torch archive checks: with a dataset size, an index the inner sampler hands out beyond "
          "it is a bcl::error naming both; the index is kept, and asking again throws again",
          "[torch][dataset_size][errors]") {
    const double mean_cost = GENERATE(0.0, 50.0);
    CAPTURE(mean_cost);
    const std::vector<std::size_t> lengths = make_lengths(200); // the table is larger: no UB here
    bcl::torch::balanced_sampler sampler(
        SequentialSampler(100), length_cost(lengths),
        bcl::options{.batch_size = 16, .lookahead = 2, .mean_cost = mean_cost}, 90);
    REQUIRE(sampler.dataset_size() == 90);
    std::vector<index_batch> handed;
    const auto ask = [&] {
        while (torch::optional<index_batch> x = sampler.next(16)) handed.push_back(std::move(*x));
    };
    REQUIRE_THROWS_WITH(ask(), Contains("dataset index 90") && Contains("dataset size is 90"));
    const std::uint64_t pushed = sampler.stats().records_in;
    REQUIRE_THROWS_WITH(ask(), Contains("dataset index 90"));
    REQUIRE(sampler.stats().records_in == pushed); // nothing pushed twice, nothing skipped
    for (const index_batch& x : handed)
        for (const std::size_t i : x) REQUIRE(i < 90);
    // Index 90 is still drawn and not yet pushed (with the epoch's mean, nothing is pushed yet).
    const archive_parts parts = archive_parts::of(saved_bytes(sampler));
    const int64s staged = parts.ints("bcl_staged");
    REQUIRE(staged.at(mean_cost > 0.0 ? 0 : 90) == 90);
    REQUIRE(parts.ints("bcl_pushed").size() == (mean_cost > 0.0 ? 90 : 0));
}

TEST_CASE("torch archive checks: the dataset size is read from a distributed inner sampler, "
          "given to the constructor, or passed to reset(); a given size that differs from a "
          "distributed sampler's is refused",
          "[torch][dataset_size]") {
    const std::vector<std::size_t> lengths = make_lengths(1000);
    const bcl::options opt{.batch_size = 16, .lookahead = 4};
    const bcl::torch::balanced_sampler distributed(DistributedRandomSampler(840, 2, 1),
                                                   length_cost(lengths), opt);
    REQUIRE(distributed.dataset_size() == 840);
    REQUIRE(bcl::torch::balanced_sampler(DistributedSequentialSampler(840, 3, 2),
                                         length_cost(lengths), opt, 840)
                .dataset_size() == 840);
    REQUIRE_THROWS_WITH(bcl::torch::balanced_sampler(DistributedRandomSampler(840, 2, 1),
                                                     length_cost(lengths), opt, 500),
                        Contains("dataset size given is 500") && Contains("840"));
    // libtorch's RandomSampler and SequentialSampler keep their size private.
    bcl::torch::balanced_sampler sequential(SequentialSampler(300), length_cost(lengths), opt);
    REQUIRE_FALSE(sequential.dataset_size().has_value());
    sequential.reset(400);
    REQUIRE(sequential.dataset_size() == 400);
    REQUIRE(drain(sequential, 16).size() == 25);
    REQUIRE(bcl::torch::balanced_sampler(RandomSampler(300), length_cost(lengths), opt, 300)
                .dataset_size() == 300);
}

TEST_CASE("torch archive checks: with RandomSampler or SequentialSampler, the dataset size given "
          "refuses an archive over another; without it, only a SequentialSampler's is caught",
          "[torch][dataset_size][resume]") {
    const std::vector<std::size_t> lengths = make_lengths(1000);
    const bcl::options opt{.batch_size = 16, .lookahead = 4};
    const auto random_over = [&](std::size_t n, std::optional<std::size_t> size) {
        torch::manual_seed(7);
        return size ? bcl::torch::balanced_sampler(RandomSampler(std::int64_t(n)),
                                                   length_cost(lengths), opt, *size)
                    : bcl::torch::balanced_sampler(RandomSampler(std::int64_t(n)),
                                                   length_cost(lengths), opt);
    };
    const saved_point large = save_after(random_over(1000, 1000), 3);
    require_refused([&] { return random_over(500, 500); }, large.bytes,
                    {"bcl_dataset_size is 1000", "dataset size is 500"});
    // Without the size, the permutation of 1000 replaces the sampler's of 500: the archive is
    // consistent, and nothing in it says what the dataset is. This is why to give the size.
    const saved_point unknown = save_after(random_over(1000, std::nullopt), 3);
    auto loose = random_over(500, std::nullopt);
    load_bytes(loose, unknown.bytes);
    REQUIRE(sorted_concat(drain(loose, 16)).back() >= 500);
    // A SequentialSampler keeps its own size: the indices it would hand out again differ.
    const saved_point sequential = save_after(
        bcl::torch::balanced_sampler(SequentialSampler(1000), length_cost(lengths), opt), 40);
    require_refused(
        [&] {
            return bcl::torch::balanced_sampler(SequentialSampler(500), length_cost(lengths), opt);
        },
        sequential.bytes, {"bcl_staged", "inner sampler handed out"});
}

TEST_CASE("torch archive checks: every inner sampler libtorch ships is checked: what it handed "
          "out this epoch, in its order, is what the archive says was drawn",
          "[torch][resume][inner]") {
    const std::vector<std::size_t> lengths = make_lengths(600);
    const std::string kind = GENERATE("random", "sequential", "distributed sequential");
    const double mean_cost = GENERATE(0.0, 500.0);
    CAPTURE(kind, mean_cost);
    const bcl::options opt{.batch_size = 8, .lookahead = 2, .mean_cost = mean_cost};
    const auto run = [&](auto make) {
        const saved_point genuine = require_resumes(make, 5);
        archive_parts parts = archive_parts::of(genuine.bytes);
        int64s staged = parts.ints("bcl_staged");
        REQUIRE(staged.size() > 10);
        SECTION("three staged indices dropped") {
            staged.resize(staged.size() - 3);
        }
        SECTION("a staged index replaced by another of the dataset") {
            staged[4] = (staged[4] + 1) % 600;
        }
        SECTION("two staged indices swapped") {
            std::swap(staged[2], staged[6]);
        }
        parts.set("bcl_staged", staged);
        require_refused(make, parts.bytes(true), {"bcl_staged", "inner sampler handed out"});
    };
    if (kind == "random")
        run([&] {
            torch::manual_seed(3);
            return bcl::torch::balanced_sampler(RandomSampler(600), length_cost(lengths), opt, 600);
        });
    if (kind == "sequential")
        run([&] {
            return bcl::torch::balanced_sampler(SequentialSampler(600), length_cost(lengths), opt,
                                                600);
        });
    if (kind == "distributed sequential")
        run([&] {
            return bcl::torch::balanced_sampler(DistributedSequentialSampler(600, 3, 1),
                                                length_cost(lengths), opt);
        });
}

TEST_CASE("torch archive checks: a RandomSampler's saved permutation is checked: an index twice, "
          "one outside the dataset, or another element type is refused",
          "[torch][resume][inner]") {
    const std::vector<std::size_t> lengths = make_lengths(600);
    const bcl::options opt{.batch_size = 8, .lookahead = 2};
    const auto make = [&] {
        torch::manual_seed(5);
        return bcl::torch::balanced_sampler(RandomSampler(300), length_cost(lengths), opt, 300);
    };
    archive_parts parts = archive_parts::of(save_after(make(), 4).bytes);
    torch::Tensor& perm = parts.inner.at("indices");
    std::string expected;
    SECTION("an index twice, in the part not yet handed out") {
        perm[299] = perm[298].item<std::int64_t>();
        expected = "holds an index twice";
    }
    SECTION("an index outside the dataset") {
        perm[299] = 300;
        expected = "outside the dataset";
    }
    SECTION("32-bit indices, which its load() would read as 64-bit ones") {
        perm = perm.to(torch::kInt32);
        expected = "inner";
    }
    require_refused(make, parts.bytes(false), {"inner", expected});
}

TEST_CASE("torch archive checks: no loop without progress: an inner SequentialSampler past its "
          "end (which would hand out indices forever) is refused, even with bcl_staged to match",
          "[torch][resume][inner]") {
    const std::vector<std::size_t> lengths = make_lengths(400);
    const bcl::options opt{.batch_size = 8, .lookahead = 2, .mean_cost = 100.0};
    const auto make = [&] {
        return bcl::torch::balanced_sampler(SequentialSampler(200), length_cost(lengths), opt);
    };
    archive_parts parts = archive_parts::of(save_after(make(), 10).bytes); // all 200 drawn
    int64s staged = parts.ints("bcl_staged");
    for (std::int64_t i = 200; i < 210; ++i) staged.push_back(i);
    parts.set("bcl_staged", staged);
    parts.inner["index"] = torch::tensor(std::int64_t{210});
    require_refused(make, parts.bytes(true), {"bcl_staged", "inner sampler handed out"});
}

TEST_CASE("torch archive checks: an inner sampler that cannot be copied is loaded last: a refused "
          "archive changes nothing, a genuine one resumes exactly",
          "[torch][resume][inner]") {
    static_assert(!std::copy_constructible<move_only_sampler>);
    const std::vector<std::size_t> lengths = make_lengths(300);
    const bcl::options opt{.batch_size = 8, .lookahead = 2};
    const auto make = [&] {
        return bcl::torch::balanced_sampler(move_only_sampler(300), length_cost(lengths), opt, 300);
    };
    const saved_point genuine = require_resumes(make, 7);
    archive_parts parts = archive_parts::of(genuine.bytes);
    int64s pending = parts.ints("bcl_pending");
    pending[0] = 299;
    parts.set("bcl_pending", pending);
    require_refused(make, parts.bytes(true), {"bcl_pending"});
}

TEST_CASE("torch archive checks: an archive of an epoch whose balancer carried on from a drained "
          "one resumes exactly, with what it learned, and is refused as any other",
          "[torch][resume][carry]") {
    const double mean_cost = GENERATE(0.0, 1500.0);
    const bool reseal = GENERATE(false, true);
    CAPTURE(mean_cost, reseal);
    matrix_setup m;
    m.opt = {.batch_size = 16, .lookahead = 4, .mean_cost = mean_cost};
    m.opt.cap = {.kind = bcl::cap_kind::quantile, .quantile = 0.9, .warmup = 200};
    const auto make = [&] { return m.make(); };
    // Epoch 0 drained, then 9 batches of epoch 1, whose balancer carried on from epoch 0's.
    const saved_point genuine = save_after(m.make(), 9, /*epochs=*/1);
    archive_parts parts = archive_parts::of(genuine.bytes);

    SECTION("the genuine archive resumes exactly, and the epoch after it carries on too") {
        auto uninterrupted = make();
        drain(uninterrupted, 16);
        uninterrupted.reset();
        REQUIRE(drain(uninterrupted, 16).size() == genuine.handed.size() + genuine.rest.size());
        uninterrupted.reset();
        auto restored = make();
        move_elsewhere(restored);
        load_bytes(restored, parts.bytes(reseal));
        REQUIRE(drain(restored, 16) == genuine.rest);
        restored.reset();
        REQUIRE(drain(restored, 16) == drain(uninterrupted, 16));
    }
    SECTION("a sampler with other options refuses it, by the option's name") {
        const std::string option = GENERATE("lookahead", "mean_cost", "cap");
        matrix_setup other = m;
        if (option == "lookahead") other.opt.lookahead = 8;
        if (option == "mean_cost") other.opt.mean_cost = mean_cost > 0.0 ? 0.0 : 1500.0;
        if (option == "cap") other.opt.cap.quantile = 0.95;
        require_refused([&] { return other.make(); }, parts.bytes(reseal),
                        {option == "mean_cost" ? "options::mean_cost" : option});
    }
    SECTION("a pending index altered") {
        int64s pending = parts.ints("bcl_pending");
        pending[1] = pending[0];
        parts.set("bcl_pending", pending);
        require_refused(make, parts.bytes(reseal), {"bcl_pending", "pending index 1"});
    }
    SECTION("a new balancer's state at the same point spliced in: as consistent with the epoch "
            "as the genuine one, so only the digest tells them apart") {
        // The same epoch, started without a drained epoch before it: a new balancer, which has
        // handed out other batches from the same indices pushed.
        auto renewed = m.make();
        renewed.set_epoch(1);
        seeded_reset(renewed);
        for (int k = 0; k < 9; ++k) REQUIRE(renewed.next(16).has_value());
        const archive_parts fresh = archive_parts::of(saved_bytes(renewed));
        REQUIRE(fresh.fields.at("bcl_pushed").equal(parts.fields.at("bcl_pushed")));
        parts.fields["bcl_balancer_state"] = fresh.fields.at("bcl_balancer_state");
        parts.fields["bcl_pending"] = fresh.fields.at("bcl_pending");
        if (!reseal) {
            require_refused(make, parts.bytes(false), {"bcl_digest"});
        } else { // it loads, and goes on as the new balancer does
            auto restored = make();
            load_bytes(restored, parts.bytes(true));
            const std::vector<index_batch> rest = drain(restored, 16);
            REQUIRE(rest == drain(renewed, 16));
            REQUIRE(rest != genuine.rest);
        }
    }
}
