// bcl::torch::distributed_balanced_sampler in token mode, as a specification: R ranks simulated
// in one process hand out, for several shapes and seeds, as many micro-batches each, none above
// max_tokens tokens (but a record above it, alone, with oversized_alone), every index of the
// epoch's order exactly once over all ranks (plus the order's first ones the "repeat" padding
// plans again), empty micro-batches only with token_padding::empty; the micro-batches and the
// digest are those of bcl::token_epoch_planner::share called directly on the documented order with
// the arguments Python's sampler passes, with epoch_order_kind::keyed on bcl::keyed_order's; an
// archive resumes at every position, and a tampered or mismatched one (another order kind too) is
// refused naming the field, the sampler unchanged; bad options are errors naming the option, in
// either mode.

#include "sampler_support.hpp"
#include "support/epoch_reference.hpp"

#include <bcl/epoch_plan.hpp>
#include <bcl/token_epoch_plan.hpp>
#include <bcl/token_plan.hpp>
#include <bcl/torch/distributed_balanced_sampler.hpp>

#include <catch2/catch.hpp>
#include <torch/torch.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <functional>
#include <limits>
#include <numeric>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace {

using namespace sampler_support;
using bcl::torch::distributed_balanced_sampler;
using bcl::torch::distributed_sampler_options;
using bcl::torch::epoch_order_kind;
using bcl::torch::token_padding;
using Catch::Matchers::StartsWith;
using token_table = std::vector<std::uint64_t>;

// The settings of a token-mode sampler, as the tests vary them.
struct token_setup {
    std::size_t n = 200;
    std::size_t ranks = 3;
    std::size_t lookahead = 2;
    std::uint64_t max_tokens = 1024;
    std::size_t micro_batches = 2;
    std::size_t multiple_of = 1;
    std::uint64_t pad = 1; // pad_to_multiple_of
    bool oversized_alone = false;
    bool with_costs = false;   // a cost table, or the default cost
    std::uint64_t uniform = 0; // every length this, or (0) make_lengths' table
    token_padding padding = token_padding::repeat;
    bool shuffle = true;
    std::uint64_t seed = 5;
    epoch_order_kind order = epoch_order_kind::fisher_yates;

    [[nodiscard]] token_table lengths() const {
        token_table out(n, uniform);
        if (uniform == 0) {
            const std::vector<std::size_t> made = make_lengths(n);
            out.assign(made.begin(), made.end());
        }
        return out;
    }
    [[nodiscard]] std::vector<double> costs() const {
        if (!with_costs) return {};
        std::vector<double> c;
        for (const std::uint64_t l : lengths()) c.push_back(double(l) + double(l * l) / 256.0);
        return c;
    }
    [[nodiscard]] distributed_sampler_options options(std::size_t rank) const {
        return {.num_replicas = ranks,
                .rank = rank,
                .lookahead = lookahead,
                .shuffle = shuffle,
                .seed = seed,
                .order = order,
                .max_tokens = max_tokens,
                .micro_batches = micro_batches,
                .multiple_of = multiple_of,
                .oversized_alone = oversized_alone,
                .pad_to_multiple_of = pad,
                .padding = padding};
    }
    [[nodiscard]] distributed_balanced_sampler make(std::size_t rank) const {
        return distributed_balanced_sampler(costs(), lengths(), options(rank));
    }
};

// The order `s` must draw in `epoch`: the documented integer shuffle
// (tests/support/epoch_reference.hpp, written apart from the sampler), or bcl::keyed_order's.
index_batch expected_order(const token_setup& s, std::size_t epoch) {
    return s.order == epoch_order_kind::keyed
               ? keyed_reference_order(s.n, s.seed, epoch, s.shuffle)
               : bcl_test::reference_order(s.n, s.seed, epoch, s.shuffle);
}

// What rank `rank` must hand out in `epoch`: bcl::token_epoch_planner::share called directly on
// the order expected_order gives, with the arguments python/src/token_epoch.hpp passes for padding
// "repeat", "empty" or "error".
bcl::token_epoch_share<std::size_t> expected_share(const token_setup& s, std::size_t epoch,
                                                   std::size_t rank) {
    const std::vector<std::size_t> order = expected_order(s, epoch);
    const token_table lengths = s.lengths();
    const std::vector<double> costs = s.costs();
    bcl::token_plan_options opt;
    opt.oversized_alone = s.oversized_alone;
    opt.group_together = false;
    opt.allow_empty_micro_batches = s.padding == token_padding::empty;
    opt.pad_to_multiple_of = s.pad;
    bcl::token_epoch_planner planner;
    bcl::token_epoch_share<std::size_t> out;
    planner.share<std::size_t>(
        lengths, costs, order,
        bcl::token_budget{
            .ranks = s.ranks, .max_tokens = s.max_tokens, .multiple_of = s.multiple_of},
        s.micro_batches, s.lookahead, rank, opt, out, "test", s.padding == token_padding::repeat);
    return out;
}

std::vector<index_batch> micro_batches_of(const bcl::token_epoch_share<std::size_t>& share) {
    std::vector<index_batch> out;
    for (std::size_t i = 0; i < share.micro_batches(); ++i) {
        const auto b = share.micro_batch(i);
        out.emplace_back(b.begin(), b.end());
    }
    return out;
}

std::vector<index_batch> drain_all(distributed_balanced_sampler& s) {
    return drain(s, s.batch_size());
}

// A 1-d tensor of the bytes of `text`, as an archive holds a format tag.
torch::Tensor text_tensor(const std::string& text) {
    torch::Tensor t = torch::empty({static_cast<std::int64_t>(text.size())}, torch::kUInt8);
    std::memcpy(t.data_ptr<std::uint8_t>(), text.data(), text.size());
    return t;
}

// A record's tokens as the budget counts them: its length rounded up to a multiple of `pad`.
std::uint64_t padded(std::uint64_t length, std::uint64_t pad) {
    return (length + pad - 1) / pad * pad;
}

// The shapes the properties are checked on: full and short windows, a multiple_of of 2 and 3,
// costs given or the default, records above T alone, lengths padded to a multiple, a dataset
// whose records of T tokens each cannot give every rank as many micro-batches (the epoch's end
// padded), one rank, and the order unshuffled.
std::vector<token_setup> shapes() {
    std::vector<token_setup> out;
    out.push_back({});
    out.push_back({.n = 157,
                   .ranks = 4,
                   .lookahead = 1,
                   .max_tokens = 800,
                   .micro_batches = 4,
                   .multiple_of = 2,
                   .with_costs = true});
    out.push_back({.n = 300,
                   .ranks = 2,
                   .lookahead = 3,
                   .max_tokens = 512,
                   .micro_batches = 3,
                   .multiple_of = 3,
                   .pad = 16,
                   .oversized_alone = true});
    out.push_back({.n = 45,
                   .ranks = 5,
                   .lookahead = 2,
                   .max_tokens = 700,
                   .micro_batches = 2,
                   .pad = 8,
                   .with_costs = true});
    out.push_back({.n = 7,
                   .ranks = 2,
                   .lookahead = 1,
                   .max_tokens = 100,
                   .micro_batches = 1,
                   .uniform = 100});
    out.push_back({.n = 9,
                   .ranks = 2,
                   .lookahead = 2,
                   .max_tokens = 300,
                   .micro_batches = 2,
                   .uniform = 300});
    out.push_back({.n = 1000,
                   .ranks = 8,
                   .lookahead = 4,
                   .max_tokens = 4096,
                   .micro_batches = 2,
                   .multiple_of = 2});
    out.push_back({.n = 60, .ranks = 1, .lookahead = 2, .max_tokens = 2048, .micro_batches = 3});
    out.push_back({.n = 250,
                   .ranks = 3,
                   .lookahead = 2,
                   .max_tokens = 1500,
                   .micro_batches = 2,
                   .shuffle = false});
    return out;
}

// The snippet docs/torch.md shows (the test torch_doc_snippet keeps the two identical).
// snippet-begin
// One rank of `world_size`, in token mode. `lengths` holds the tokens of every dataset index (the
// whole table, on every rank); `agree` compares a digest across the ranks (one all-reduce).
template <class Dataset, class MicroStep, class OptimizerStep, class Agree>
void train_tokens(Dataset& dataset, const std::vector<std::uint64_t>& lengths,
                  std::size_t world_size, std::size_t rank, std::size_t epochs,
                  MicroStep micro_step, OptimizerStep optimizer_step, Agree agree) {
    // Micro-batches of at most 8192 tokens, 4 a step on every rank, 8 steps planned together;
    // no cost table: a record of L tokens costs L + L^2/24576.
    constexpr std::size_t micro_batches = 4;
    bcl::torch::distributed_balanced_sampler sampler(/*costs=*/{}, lengths,
                                                     {.num_replicas = world_size,
                                                      .rank = rank,
                                                      .lookahead = 8,
                                                      .max_tokens = 8192,
                                                      .micro_batches = micro_batches});
    for (std::size_t epoch = 0; epoch < epochs; ++epoch) {
        sampler.set_epoch(epoch);
        sampler.reset();
        // Plans the epoch; ranks whose digests differ would train records twice or never.
        if (!agree(sampler.digest())) throw std::runtime_error("the ranks' plans differ");
        std::size_t in_step = 0;
        while (auto indices = sampler.next(1)) {     // one micro-batch: at most 8192 tokens
            micro_step(dataset.get_batch(*indices)); // forward and backward; gradients add up
            if (++in_step == micro_batches) {
                optimizer_step();
                in_step = 0;
            }
        }
        if (in_step > 0) optimizer_step(); // the epoch's last step: fewer micro-batches
    }
}
// snippet-end

} // namespace

TEST_CASE("torch tokens: the sampler's micro-batches and digest are bcl::token_epoch_planner's "
          "share of the documented order, with the arguments Python's sampler passes",
          "[torch][distributed][tokens][digest]") {
    const std::vector<token_setup> all = shapes();
    const std::size_t which = GENERATE(range(std::size_t{0}, std::size_t{9}));
    const token_padding padding = GENERATE(token_padding::repeat, token_padding::empty);
    token_setup s = all.at(which);
    s.padding = padding;
    CAPTURE(which, s.n, s.ranks, static_cast<int>(padding));
    for (const std::uint64_t seed : {5, 11}) {
        s.seed = seed;
        std::vector<distributed_balanced_sampler> ranks;
        for (std::size_t r = 0; r < s.ranks; ++r) ranks.push_back(s.make(r));
        for (std::size_t epoch = 0; epoch < 2; ++epoch) {
            CAPTURE(seed, epoch);
            for (std::size_t r = 0; r < s.ranks; ++r) {
                CAPTURE(r);
                distributed_balanced_sampler& sampler = ranks[r];
                if (epoch > 0) sampler.reset();
                REQUIRE(sampler.order_of(epoch) ==
                        bcl_test::reference_order(s.n, seed, epoch, s.shuffle));
                const bcl::token_epoch_share<std::size_t> expected = expected_share(s, epoch, r);
                REQUIRE(sampler.digest() == expected.digest);
                REQUIRE(sampler.token_plan().digest == expected.digest);
                REQUIRE(drain_all(sampler) == micro_batches_of(expected));
            }
        }
    }
}

TEST_CASE("torch tokens: every rank hands out as many micro-batches, none above max_tokens, every "
          "index of the order exactly once over all ranks (plus the repeated ones), empty ones "
          "only with token_padding::empty",
          "[torch][distributed][tokens][contract]") {
    const std::vector<token_setup> all = shapes();
    const std::size_t which = GENERATE(range(std::size_t{0}, std::size_t{9}));
    const token_padding padding = GENERATE(token_padding::repeat, token_padding::empty);
    const std::uint64_t seed = GENERATE(5, 11, 2024);
    token_setup s = all.at(which);
    s.padding = padding;
    s.seed = seed;
    CAPTURE(which, s.n, s.ranks, s.max_tokens, s.micro_batches, static_cast<int>(padding), seed);
    const token_table lengths = s.lengths();
    std::vector<distributed_balanced_sampler> ranks;
    for (std::size_t r = 0; r < s.ranks; ++r) ranks.push_back(s.make(r));
    for (std::size_t epoch = 0; epoch < 2; ++epoch) {
        CAPTURE(epoch);
        index_batch seen;
        std::size_t count = 0;
        std::size_t empties = 0;
        std::size_t repeated = 0;
        std::uint64_t digest = 0;
        for (std::size_t r = 0; r < s.ranks; ++r) {
            CAPTURE(r);
            distributed_balanced_sampler& sampler = ranks[r];
            if (epoch > 0) sampler.reset();
            REQUIRE(sampler.epoch() == epoch);
            const std::size_t size = sampler.size(); // plans the epoch
            const bcl::torch::token_epoch_share& plan = sampler.token_plan();
            if (r == 0) {
                count = size;
                digest = plan.digest;
                repeated = plan.repeated;
            }
            REQUIRE(size == count); // the same on every rank
            REQUIRE(plan.digest == digest);
            REQUIRE(plan.repeated == repeated);
            // Steps of M micro-batches, but the epoch's last: a positive multiple of m.
            REQUIRE(plan.steps.front() == 0);
            REQUIRE(plan.steps.back() == size);
            for (std::size_t k = 1; k < plan.steps.size(); ++k) {
                const std::size_t in_step = plan.steps[k] - plan.steps[k - 1];
                if (k + 1 < plan.steps.size())
                    REQUIRE(in_step == s.micro_batches);
                else
                    REQUIRE((in_step > 0 && in_step <= s.micro_batches &&
                             in_step % s.multiple_of == 0));
            }
            const std::vector<index_batch> batches = drain_all(sampler);
            REQUIRE(batches.size() == size);
            REQUIRE_FALSE(sampler.next(1).has_value());
            for (const index_batch& b : batches) {
                if (b.empty()) {
                    REQUIRE(padding == token_padding::empty);
                    ++empties;
                    continue;
                }
                std::uint64_t tokens = 0;
                for (const std::size_t i : b) tokens += padded(lengths[i], s.pad);
                const bool alone = b.size() == 1 && s.oversized_alone;
                CAPTURE(b.size(), tokens);
                REQUIRE((tokens <= s.max_tokens || alone));
                seen.insert(seen.end(), b.begin(), b.end());
            }
        }
        REQUIRE(count > 0);
        // Exactly once: the order, and (token_padding::repeat) its first `repeated` indices again.
        const index_batch order = bcl_test::reference_order(s.n, seed, epoch, s.shuffle);
        index_batch expected(order.begin(), order.end());
        if (padding == token_padding::repeat)
            expected.insert(expected.end(), order.begin(),
                            order.begin() + static_cast<std::ptrdiff_t>(repeated));
        else
            REQUIRE(repeated == 0);
        std::sort(expected.begin(), expected.end());
        std::sort(seen.begin(), seen.end());
        REQUIRE(seen == expected);
        REQUIRE(empties ==
                (padding == token_padding::empty ? ranks[0].token_plan().padding : std::size_t{0}));
    }
}

TEST_CASE("torch tokens: an epoch whose records cannot fill every rank's micro-batches ends as "
          "padding says: the order's first records again, empty micro-batches, or a bcl::error "
          "that changes nothing",
          "[torch][distributed][tokens][padding]") {
    // 7 records of T tokens each on 2 ranks: one a micro-batch, and 7 does not split in two.
    token_setup s{
        .n = 7, .ranks = 2, .lookahead = 1, .max_tokens = 100, .micro_batches = 1, .uniform = 100};
    SECTION("repeat: the order's first index planned again at its end, 4 micro-batches each") {
        distributed_balanced_sampler a = s.make(0);
        distributed_balanced_sampler b = s.make(1);
        REQUIRE(a.token_plan().repeated == 1);
        const std::vector<index_batch> all0 = drain_all(a);
        const std::vector<index_batch> all1 = drain_all(b);
        REQUIRE(all0.size() == 4);
        REQUIRE(all1.size() == 4);
        index_batch seen = sorted_concat(all0);
        const index_batch other = sorted_concat(all1);
        seen.insert(seen.end(), other.begin(), other.end());
        std::sort(seen.begin(), seen.end());
        index_batch expected = a.order_of(0);
        expected.push_back(expected.front());
        std::sort(expected.begin(), expected.end());
        REQUIRE(seen == expected);
    }
    SECTION("empty: one rank gets an empty micro-batch, the counts still equal") {
        s.padding = token_padding::empty;
        std::size_t empties = 0;
        for (std::size_t r = 0; r < 2; ++r) {
            distributed_balanced_sampler sampler = s.make(r);
            REQUIRE(sampler.token_plan().padding == 1);
            const std::vector<index_batch> batches = drain_all(sampler);
            REQUIRE(batches.size() == 4);
            for (const index_batch& b : batches) empties += b.empty() ? 1 : 0;
        }
        REQUIRE(empties == 1);
    }
    SECTION("error: the first next() is a bcl::error; the sampler is unchanged") {
        s.padding = token_padding::error;
        distributed_balanced_sampler sampler = s.make(0);
        REQUIRE_THROWS_AS(sampler.next(1), bcl::error);
        REQUIRE_THROWS_AS(sampler.digest(), bcl::error);
        REQUIRE_THROWS_AS(sampler.size(), bcl::error);
        REQUIRE(sampler.position() == 0);
        REQUIRE(sampler.epoch() == 0);
        // An archive saved now holds no plan, and loads.
        distributed_balanced_sampler restored = s.make(0);
        load_bytes(restored, saved_bytes(sampler));
        REQUIRE(restored.position() == 0);
        // 8 records split: the same sampler with one more record plans.
        token_setup even = s;
        even.n = 8;
        distributed_balanced_sampler fine = even.make(0);
        REQUIRE(drain_all(fine).size() == 4);
    }
}

TEST_CASE("torch tokens: an archive saved at any position resumes exactly the rest of the epoch "
          "and the epoch after it",
          "[torch][distributed][tokens][resume]") {
    const std::vector<token_setup> all = shapes();
    const std::size_t which = GENERATE(0, 2, 4, 5);
    const token_padding padding = GENERATE(token_padding::repeat, token_padding::empty);
    token_setup s = all.at(which);
    s.padding = padding;
    const std::size_t rank = GENERATE(0, 1);
    CAPTURE(which, static_cast<int>(padding), rank);
    distributed_balanced_sampler uninterrupted = s.make(rank);
    const std::vector<index_batch> epoch0 = drain_all(uninterrupted);
    uninterrupted.reset();
    const std::vector<index_batch> epoch1 = drain_all(uninterrupted);
    REQUIRE(!epoch0.empty());
    for (std::size_t taken = 0; taken <= epoch0.size(); ++taken) {
        for (const bool planned : {false, true}) {
            if (taken > 0 && !planned) continue; // handing out a micro-batch plans the epoch
            CAPTURE(taken, planned);
            distributed_balanced_sampler saved = s.make(rank);
            if (planned) (void)saved.digest();
            for (std::size_t k = 0; k < taken; ++k) REQUIRE(saved.next(1) == epoch0[k]);
            const std::string bytes = saved_bytes(saved);
            distributed_balanced_sampler restored = s.make(rank);
            move_distributed(restored);
            load_bytes(restored, bytes);
            REQUIRE(restored.epoch() == 0);
            REQUIRE(restored.position() == taken);
            REQUIRE(drain_all(restored) ==
                    std::vector<index_batch>(epoch0.begin() + std::ptrdiff_t(taken), epoch0.end()));
            restored.reset();
            REQUIRE(drain_all(restored) == epoch1);
        }
    }
    // torch::save and torch::load carry it too; a copy shares the tables and plans alike.
    distributed_balanced_sampler to_file = s.make(rank);
    (void)to_file.next(1);
    const std::filesystem::path file =
        std::filesystem::temp_directory_path() / "bcl_torch_token_sampler_test.pt";
    torch::save(to_file, file.string());
    distributed_balanced_sampler from_file = s.make(rank);
    torch::load(from_file, file.string());
    std::filesystem::remove(file);
    distributed_balanced_sampler copy = to_file;
    REQUIRE(drain_all(from_file) == drain_all(to_file));
    REQUIRE(drain_all(copy).size() == epoch0.size() - 1);
}

TEST_CASE("torch tokens: every refused archive field is a bcl::error naming it, and the sampler "
          "is unchanged, with the digest as saved and recomputed",
          "[torch][distributed][tokens][resume][tamper]") {
    const bool reseal = GENERATE(false, true);
    CAPTURE(reseal);
    const token_setup s{.with_costs = true};
    const auto make = [&] { return s.make(1); };
    distributed_balanced_sampler genuine = make();
    for (int k = 0; k < 3; ++k) (void)genuine.next(1);
    const std::size_t count = genuine.size();
    archive_parts parts = archive_parts::of(saved_bytes(genuine), /*nested=*/false);
    const auto refused = [&](const std::vector<std::string>& names) {
        require_distributed_refused(make, parts.bytes(reseal), names);
    };
    const auto one = [&](const std::string& key) {
        return parts.fields.at(key).item<std::int64_t>();
    };

    SECTION("the genuine archive loads and resumes exactly") {
        distributed_balanced_sampler restored = make();
        load_bytes(restored, parts.bytes(reseal));
        REQUIRE(same_distributed_course(restored, genuine));
    }
    SECTION("a setting altered: each one is named") {
        const std::string key =
            GENERATE("bcl_dataset_size", "bcl_num_replicas", "bcl_rank", "bcl_lookahead",
                     "bcl_shuffle", "bcl_seed", "bcl_max_tokens", "bcl_micro_batches",
                     "bcl_multiple_of", "bcl_oversized_alone", "bcl_pad_to_multiple_of",
                     "bcl_padding", "bcl_lengths", "bcl_costs");
        CAPTURE(key);
        const std::int64_t saved = one(key);
        parts.set(key, {saved == 0 ? 1 : saved - 1});
        refused({key, "but this sampler's"});
    }
    SECTION("bcl_position out of range") {
        const std::int64_t position = GENERATE_COPY(
            std::int64_t{-1}, static_cast<std::int64_t>(count) + 1, std::int64_t{100000});
        parts.set("bcl_position", {position});
        refused({"bcl_position is " + std::to_string(position)});
    }
    SECTION("bcl_epoch: another epoch, whose plan is another; or not started") {
        if (GENERATE(true, false)) {
            parts.set("bcl_epoch", {1, 1, 0, 0});
            refused({"bcl_plan_digest does not match this sampler's plan of epoch 1"});
        } else {
            parts.set("bcl_epoch", {0, 0, 0, 0});
            refused({"bcl_epoch says the epoch has not started", "3 micro-batches"});
        }
    }
    SECTION("bcl_plan_digest altered, emptied, or doubled") {
        const int which = GENERATE(0, 1, 2);
        if (which == 0) {
            parts.set("bcl_plan_digest", {one("bcl_plan_digest") ^ 1});
            refused({"bcl_plan_digest does not match", "epoch 0"});
        } else if (which == 1) {
            parts.set("bcl_plan_digest", {});
            refused({"bcl_plan_digest is empty", "3 micro-batches handed out"});
        } else {
            parts.set("bcl_plan_digest", {1, 2});
            refused({"bcl_plan_digest has 2 values"});
        }
    }
    SECTION("a field missing") {
        const std::string key = GENERATE("bcl_max_tokens", "bcl_lengths", "bcl_position");
        parts.fields.erase(key);
        refused({key, "missing"});
    }
    SECTION("only the digest altered: the digest catches it") {
        if (!reseal) {
            parts.set("bcl_digest", {one("bcl_digest") ^ 1});
            refused({"bcl_digest", "altered or damaged"});
        }
    }
}

TEST_CASE("torch tokens: a sampler with other settings, lengths or costs refuses a genuine "
          "archive by the field's name, and is unchanged; so does a sampler of the other mode",
          "[torch][distributed][tokens][resume]") {
    const token_setup s{.with_costs = true};
    distributed_balanced_sampler genuine = s.make(1);
    (void)genuine.next(1);
    const std::string bytes = saved_bytes(genuine);

    SECTION("a setting or table differs") {
        const std::string what =
            GENERATE("max_tokens", "micro_batches", "multiple_of", "oversized_alone",
                     "pad_to_multiple_of", "padding", "lengths", "costs", "seed", "lookahead");
        CAPTURE(what);
        token_setup other = s;
        if (what == "max_tokens") other.max_tokens = 1100;
        if (what == "micro_batches") other.micro_batches = 4;
        if (what == "multiple_of") other.multiple_of = 2;
        if (what == "oversized_alone") other.oversized_alone = true;
        if (what == "pad_to_multiple_of") other.pad = 2;
        if (what == "padding") other.padding = token_padding::empty;
        if (what == "seed") other.seed = 6;
        if (what == "lookahead") other.lookahead = 3;
        token_table lengths = other.lengths();
        std::vector<double> costs = other.costs();
        if (what == "lengths") lengths[7] += 1;
        if (what == "costs") costs[7] += 1.0;
        const auto make = [&] {
            return distributed_balanced_sampler(costs, lengths, other.options(1));
        };
        require_distributed_refused(make, bytes, {"bcl_" + what, "but this sampler's"});
    }
    SECTION("the default cost where the archive's run had a cost table") {
        token_setup other = s;
        other.with_costs = false;
        require_distributed_refused([&] { return other.make(1); }, bytes,
                                    {"bcl_costs", "the cost table differs"});
    }
    SECTION("a fixed-mode sampler refuses the token archive, and the other way round") {
        const auto make_fixed = [&] {
            return distributed_balanced_sampler(std::vector<double>(s.n, 1.0), 4, 3, 1);
        };
        require_distributed_refused(make_fixed, bytes,
                                    {"bcl_format", "token-budget micro-batches",
                                     "this one hands out batches of batch_size"});
        distributed_balanced_sampler fixed = make_fixed();
        (void)fixed.next(4);
        require_distributed_refused([&] { return s.make(1); }, saved_bytes(fixed),
                                    {"bcl_format", "batches of batch_size",
                                     "this one hands out token-budget micro-batches"});
    }
    SECTION("a balanced_sampler's archive") {
        archive_parts parts = archive_parts::of(bytes, /*nested=*/false);
        parts.fields["bcl_format"] = text_tensor("bcl::torch::balanced_sampler/4");
        require_distributed_refused([&] { return s.make(1); }, parts.bytes(true),
                                    {"bcl_format is that of a bcl::torch::balanced_sampler"});
    }
}

TEST_CASE("torch tokens: with epoch_order_kind::keyed the order is bcl::keyed_order's; the "
          "micro-batches and the plans' digest chain are bcl::token_epoch_planner's share of it, "
          "planned window by window; the digest equal on every rank, another for another epoch; "
          "every index comes out exactly once; token_plan() is refused",
          "[torch][distributed][tokens][keyed]") {
    const std::vector<token_setup> all = shapes();
    const std::size_t which = GENERATE(0, 1, 2, 4, 8);
    const token_padding padding = GENERATE(token_padding::repeat, token_padding::empty);
    token_setup s = all.at(which);
    s.padding = padding;
    s.order = epoch_order_kind::keyed;
    CAPTURE(which, s.n, s.ranks, s.shuffle, static_cast<int>(padding));
    std::vector<distributed_balanced_sampler> ranks;
    for (std::size_t r = 0; r < s.ranks; ++r) ranks.push_back(s.make(r));
    std::vector<std::uint64_t> digests;
    for (std::size_t epoch = 0; epoch < 3; ++epoch) {
        CAPTURE(epoch);
        const index_batch order = expected_order(s, epoch);
        index_batch seen;
        std::size_t repeated = 0;
        for (std::size_t r = 0; r < s.ranks; ++r) {
            CAPTURE(r);
            distributed_balanced_sampler& sampler = ranks[r];
            if (epoch > 0) sampler.reset();
            REQUIRE(sampler.order_of(epoch) == order);
            const bcl::token_epoch_share<std::size_t> expected = expected_share(s, epoch, r);
            REQUIRE(sampler.digest() == ranks[0].digest()); // the inputs', known without planning
            REQUIRE(sampler.size() == expected.micro_batches());
            REQUIRE_THROWS_WITH(sampler.token_plan(), Contains("window by window"));
            const std::vector<index_batch> batches = drain_all(sampler);
            REQUIRE(batches == micro_batches_of(expected));
            const bcl::torch::token_epoch_summary& planned = sampler.token_summary();
            REQUIRE(planned.digest == expected.digest); // the windows' plans, chained
            REQUIRE(planned.micro_steps == expected.micro_steps);
            REQUIRE(planned.repeated == expected.repeated);
            repeated = planned.repeated;
            for (const index_batch& b : batches) seen.insert(seen.end(), b.begin(), b.end());
        }
        // Exactly once: the order, and (token_padding::repeat) its first `repeated` indices again.
        index_batch expected(order.begin(), order.end());
        expected.insert(expected.end(), order.begin(),
                        order.begin() + static_cast<std::ptrdiff_t>(repeated));
        std::sort(expected.begin(), expected.end());
        std::sort(seen.begin(), seen.end());
        REQUIRE(seen == expected);
        digests.push_back(ranks[0].digest());
    }
    if (s.shuffle) REQUIRE(expected_order(s, 0) != expected_order(s, 1));
    if (s.shuffle && s.uniform == 0) {
        // Another epoch, another plan (records of one length plan alike in any order); the
        // Fisher-Yates order's plan is another again.
        token_setup shuffled = s;
        shuffled.order = epoch_order_kind::fisher_yates;
        digests.push_back(shuffled.make(0).digest());
        std::sort(digests.begin(), digests.end());
        REQUIRE(std::adjacent_find(digests.begin(), digests.end()) == digests.end());
    }
    if (!s.shuffle) REQUIRE(expected_order(s, 1) == bcl_test::reference_order(s.n, 0, 0, false));
}

TEST_CASE("torch tokens: with epoch_order_kind::keyed an archive resumes exactly; an archive of "
          "the other order kind is refused naming bcl_order, the sampler unchanged",
          "[torch][distributed][tokens][resume][keyed]") {
    token_setup s = shapes().at(2);
    s.order = epoch_order_kind::keyed;
    token_setup shuffled = s;
    shuffled.order = epoch_order_kind::fisher_yates;
    const std::size_t rank = GENERATE(0, 1);
    CAPTURE(rank);
    distributed_balanced_sampler uninterrupted = s.make(rank);
    const std::vector<index_batch> epoch0 = drain_all(uninterrupted);
    uninterrupted.reset();
    const std::vector<index_batch> epoch1 = drain_all(uninterrupted);
    REQUIRE(!epoch0.empty());
    for (std::size_t taken = 0; taken <= epoch0.size(); ++taken) {
        CAPTURE(taken);
        distributed_balanced_sampler saved = s.make(rank);
        (void)saved.digest();
        for (std::size_t k = 0; k < taken; ++k) REQUIRE(saved.next(1) == epoch0[k]);
        const std::string bytes = saved_bytes(saved);
        REQUIRE(archive_parts::of(bytes, false).ints("bcl_order") == int64s{1});
        distributed_balanced_sampler restored = s.make(rank);
        move_distributed(restored);
        load_bytes(restored, bytes);
        // Counted from the start of the window the archive was saved in.
        REQUIRE(restored.size() - restored.position() == epoch0.size() - taken);
        REQUIRE(drain_all(restored) ==
                std::vector<index_batch>(epoch0.begin() + std::ptrdiff_t(taken), epoch0.end()));
        restored.reset();
        REQUIRE(drain_all(restored) == epoch1);
    }

    distributed_balanced_sampler keyed = s.make(rank);
    (void)keyed.next(1);
    require_distributed_refused(
        [&] { return shuffled.make(rank); }, saved_bytes(keyed),
        {"bcl_order is 1 (keyed)", "but this sampler's order is 0 (fisher_yates)"});
    distributed_balanced_sampler by_default = shuffled.make(rank);
    (void)by_default.next(1);
    const std::string default_bytes = saved_bytes(by_default);
    REQUIRE(archive_parts::of(default_bytes, false).fields.count("bcl_order") == 0);
    require_distributed_refused(
        [&] { return s.make(rank); }, default_bytes,
        {"bcl_order is absent, so the archive's order is the default, 0 (fisher_yates)",
         "but this sampler's order is 1 (keyed)"});
}

TEST_CASE("torch tokens: bad options are a bcl::error at construction naming the option, in "
          "either mode",
          "[torch][distributed][tokens][errors]") {
    const token_setup s;
    const token_table lengths = s.lengths();
    const auto refused = [&](const std::function<void(distributed_sampler_options&)>& change,
                             const std::vector<std::string>& names, const token_table& table = {}) {
        distributed_sampler_options o = s.options(0);
        change(o);
        const token_table& l = table.empty() ? lengths : table;
        bool thrown = false;
        try {
            (void)distributed_balanced_sampler(std::vector<double>(), l, o);
        } catch (const bcl::error& e) {
            thrown = true;
            const std::string what = e.what();
            CAPTURE(what);
            // The sampler's name first, also where the words are the core's.
            CHECK_THAT(what, StartsWith("bcl::torch::distributed_balanced_sampler: "));
            for (const std::string& name : names) CHECK_THAT(what, Contains(name));
        }
        REQUIRE(thrown);
    };
    refused([](auto& o) { o.max_tokens = (std::uint64_t{1} << 31) + 1; },
            {"max_tokens is 2147483649", "above 2^31"});
    refused([](auto& o) { o.micro_batches = 0; },
            {"micro_batches is 0", "a positive multiple of multiple_of (1)"});
    refused(
        [](auto& o) {
            o.micro_batches = 3;
            o.multiple_of = 2;
        },
        {"micro_batches is 3", "a positive multiple of multiple_of (2)"});
    // R, m and K (lookahead) of 0: the core's budget check names each with its value.
    refused([](auto& o) { o.multiple_of = 0; }, {"multiple_of (0)", "must all be at least 1"});
    refused([](auto& o) { o.pad_to_multiple_of = 0; }, {"pad_to_multiple_of is 0"});
    refused([](auto& o) { o.pad_to_multiple_of = 1025; },
            {"pad_to_multiple_of is 1025", "at most max_tokens (1024)"});
    refused([](auto& o) { o.padding = token_padding(7); }, {"padding is 7", "token_padding"});
    refused([](auto& o) { o.num_replicas = 0; }, {"the ranks (0)", "must all be at least 1"});
    refused([](auto& o) { o.rank = 3; }, {"rank 3 of num_replicas 3"});
    refused([](auto& o) { o.lookahead = 0; }, {"steps (0)", "must all be at least 1"});
    refused([](auto& o) { o.seed = std::uint64_t{1} << 63; }, {"the seed must be below 2^63"});
    refused(
        [](auto& o) {
            o.lookahead = std::size_t{1} << 20;
            o.micro_batches = std::size_t{1} << 10;
        },
        {"3 ranks * 1048576 steps * 1024 micro-batches", "above the 1073741824 cells"});
    // A fixed-mode setting in token mode.
    refused([](auto& o) { o.batch_size = 16; }, {"batch_size is 16", "batches of batch_size"});
    refused([](auto& o) { o.drop_last = true; }, {"drop_last is true"});
    refused([](auto& o) { o.plan.cap = 5.0; }, {"plan_options::cap is 5"});
    refused([](auto& o) { o.plan.batching = bcl::batch_cost::padded; }, {"plan_options::batching"});
    refused([](auto& o) { o.plan.level_steps = false; }, {"plan_options::level_steps"});
    // Lengths: one above T (named by its dataset index), or above 2^31 with oversized_alone;
    // too few indices for a step's micro-batches.
    token_table long_one = lengths;
    long_one[42] = 1025;
    refused(
        [](auto&) {},
        {"dataset index 42 has 1025 tokens, above max_tokens (1024)", "a micro-batch of their own"},
        long_one);
    token_table padded_over = lengths;
    padded_over[17] = 1010; // 1032 once rounded up to a multiple of 24
    refused([](auto& o) { o.pad_to_multiple_of = 24; },
            {"dataset index 17 has 1010 tokens (1032 padded to a multiple of 24), above "
             "max_tokens (1024)"},
            padded_over);
    token_table huge = lengths;
    huge[5] = (std::uint64_t{1} << 31) + 1;
    refused([](auto& o) { o.oversized_alone = true; },
            {"dataset index 5 has 2147483649 tokens", "no record may have more than 2^31"}, huge);
    refused([](auto&) {}, {"2 dataset indices", "num_replicas * multiple_of = 3 * 1"},
            token_table{5, 6});
    // Costs neither empty nor one per length, and a bad cost.
    const auto with_costs = [&](std::vector<double> costs, const std::string& name) {
        REQUIRE_THROWS_WITH(distributed_balanced_sampler(costs, lengths, s.options(0)),
                            Contains(name));
    };
    with_costs(std::vector<double>(5, 1.0), "costs has 5 entries, but lengths has 200");
    std::vector<double> bad(200, 1.0);
    bad[9] = -1.0;
    with_costs(bad, "dataset index 9");

    // A token-mode setting in fixed mode.
    const std::vector<double> costs(100, 1.0);
    const auto fixed_refused = [&](distributed_sampler_options o, const token_table& l,
                                   const std::string& name) {
        CAPTURE(name);
        REQUIRE_THROWS_WITH(distributed_balanced_sampler(costs, l, o),
                            Contains(name) && Contains("set max_tokens too"));
    };
    const distributed_sampler_options fixed{.num_replicas = 2, .rank = 0, .batch_size = 4};
    REQUIRE(distributed_balanced_sampler(costs, {}, fixed).size() == 13);
    auto o = fixed;
    o.micro_batches = 2;
    fixed_refused(o, {}, "micro_batches is 2");
    o = fixed;
    o.multiple_of = 2;
    fixed_refused(o, {}, "multiple_of is 2");
    o = fixed;
    o.oversized_alone = true;
    fixed_refused(o, {}, "oversized_alone is true");
    o = fixed;
    o.pad_to_multiple_of = 8;
    fixed_refused(o, {}, "pad_to_multiple_of is 8");
    o = fixed;
    o.padding = token_padding::empty;
    fixed_refused(o, {}, "padding is not token_padding::repeat");
    fixed_refused(fixed, token_table(100, 5), "lengths has 100 entries");
    // And fixed mode without a batch size.
    REQUIRE_THROWS_WITH(distributed_balanced_sampler(
                            costs, {}, distributed_sampler_options{.num_replicas = 2, .rank = 0}),
                        Contains("batch size (0) must all be at least 1"));
}

TEST_CASE("torch tokens: through a data loader, one micro-batch a request; a loader asking for "
          "more is refused at its first batch",
          "[torch][distributed][tokens][loader]") {
    const token_setup s{.n = 301, .ranks = 3};
    index_batch seen;
    std::size_t count = 0;
    for (std::size_t r = 0; r < s.ranks; ++r) {
        distributed_balanced_sampler probe = s.make(r);
        const std::vector<index_batch> expected = drain_all(probe);
        auto loader = bcl::torch::make_data_loader(index_dataset(s.n), s.make(r));
        std::vector<index_batch> batches;
        for (index_batch& x : *loader) batches.push_back(std::move(x));
        REQUIRE(batches == expected);
        if (r == 0) count = batches.size();
        REQUIRE(batches.size() == count);
        const index_batch mine = sorted_concat(batches);
        seen.insert(seen.end(), mine.begin(), mine.end());
    }
    std::sort(seen.begin(), seen.end());
    REQUIRE(seen.size() >= s.n);
    REQUIRE(std::unique(seen.begin(), seen.end()) - seen.begin() == std::ptrdiff_t(s.n));
    auto other = torch::data::make_data_loader(index_dataset(s.n), s.make(0),
                                               torch::data::DataLoaderOptions(16));
    const auto iterate = [&] {
        for (index_batch& x : *other) (void)x;
    };
    REQUIRE_THROWS_WITH(iterate(), Contains("a batch of 16 indices") && Contains("token mode"));
    distributed_balanced_sampler fixed_only = s.make(0);
    REQUIRE_THROWS_WITH(fixed_only.summary(), Contains("token_plan()"));
    distributed_balanced_sampler fixed(std::vector<double>(10, 1.0), 2, 1, 0);
    REQUIRE_THROWS_WITH(fixed.token_plan(), Contains("summary()"));
}

TEST_CASE("torch tokens: the snippet of docs/torch.md trains every rank on as many micro-batches "
          "and optimizer steps, every index once per epoch, and stops when the digests differ",
          "[torch][distributed][tokens][docs]") {
    constexpr std::size_t ranks = 3;
    constexpr std::size_t n = 2000;
    token_table lengths(n);
    for (std::size_t i = 0; i < n; ++i) lengths[i] = i % 41 == 0 ? 6000 : 50 + (i * 7919) % 1500;
    index_dataset dataset(n);
    std::vector<std::uint64_t> digests;
    for (std::size_t epoch = 0; epoch < 2; ++epoch) {
        distributed_balanced_sampler probe(
            std::vector<double>{}, lengths,
            {.num_replicas = ranks, .rank = 0, .max_tokens = 8192, .micro_batches = 4});
        probe.set_epoch(epoch);
        probe.reset();
        digests.push_back(probe.digest());
    }
    std::vector<std::size_t> micro_steps(ranks);
    std::vector<std::size_t> steps(ranks);
    index_batch seen;
    for (std::size_t rank = 0; rank < ranks; ++rank) {
        std::size_t epoch = 0; // the epochs agreed on so far
        train_tokens(
            dataset, lengths, ranks, rank, 2,
            [&](const index_batch& x) {
                ++micro_steps[rank];
                std::uint64_t tokens = 0;
                for (const std::size_t i : x) tokens += lengths[i];
                REQUIRE(tokens <= 8192);
                if (epoch == 1) seen.insert(seen.end(), x.begin(), x.end()); // epoch 0's
            },
            [&] { ++steps[rank]; },
            [&](std::uint64_t digest) { return digest == digests[epoch++]; });
    }
    REQUIRE(micro_steps[0] == micro_steps[1]);
    REQUIRE(micro_steps[1] == micro_steps[2]);
    REQUIRE(steps[0] == steps[1]);
    REQUIRE(steps[0] >= micro_steps[0] / 4);
    std::sort(seen.begin(), seen.end());
    REQUIRE(std::unique(seen.begin(), seen.end()) - seen.begin() == std::ptrdiff_t(n));
    token_table other = lengths;
    other[500] = 17;
    REQUIRE_THROWS_WITH(train_tokens(
                            dataset, other, ranks, 1, 1, [](const index_batch&) {}, [] {},
                            [&](std::uint64_t digest) { return digest == digests[0]; }),
                        "the ranks' plans differ");
}
