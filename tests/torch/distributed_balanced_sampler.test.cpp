// bcl::torch::distributed_balanced_sampler, as a specification: R ranks simulated in one process
// hand out every record of the epoch's kept order exactly once, in exact batches, equally many
// on every rank; the global order is the documented integer shuffle, or with
// epoch_order_kind::keyed bcl::keyed_order's (Python's order="keyed"); the batches are those of
// bcl::plan_window over the order's windows, bit for bit, with the chained digest; two samplers
// made alike agree; an archive resumes at every position and every refused field leaves the
// sampler unchanged, an archive of the other order kind too; bad costs and settings are errors
// naming what was wrong.

#include "allocation_counter.hpp"
#include "sampler_support.hpp"
#include "support/epoch_reference.hpp"

#include <bcl/bcl.hpp>
#include <bcl/global_plan.hpp>
#include <bcl/torch/distributed_balanced_sampler.hpp>

#include <catch2/catch.hpp>
#include <torch/torch.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <map>
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

// The settings of a sampler, as the tests vary them.
struct setup {
    std::size_t n = 70;
    std::size_t ranks = 3;
    std::size_t batch = 4;
    std::size_t lookahead = 2;
    bool shuffle = true;
    std::uint64_t seed = 5;
    bool drop_last = false;
    bcl::plan_options plan{};
    epoch_order_kind order = epoch_order_kind::fisher_yates;

    [[nodiscard]] std::vector<double> costs() const {
        const std::vector<std::size_t> lengths = make_lengths(n);
        std::vector<double> c(n);
        for (std::size_t i = 0; i < n; ++i)
            c[i] = double(lengths[i]) + double(lengths[i] * lengths[i]) / 256.0;
        return c;
    }
    [[nodiscard]] distributed_sampler_options options(std::size_t rank) const {
        return {.num_replicas = ranks,
                .rank = rank,
                .batch_size = batch,
                .lookahead = lookahead,
                .shuffle = shuffle,
                .seed = seed,
                .order = order,
                .drop_last = drop_last,
                .plan = plan};
    }
    // The positional constructor, which most callers use, unless an order is chosen: only the
    // options' form takes one.
    [[nodiscard]] distributed_balanced_sampler make(std::size_t rank) const {
        if (order != epoch_order_kind::fisher_yates)
            return distributed_balanced_sampler(costs(), std::vector<std::uint64_t>(),
                                                options(rank));
        return distributed_balanced_sampler(costs(), batch, ranks, rank, shuffle, seed, drop_last,
                                            lookahead, plan);
    }
};

using bcl_test::reference_epoch;
using bcl_test::reference_order;

// The global order `s` must draw in `epoch`: the documented integer shuffle, or bcl::keyed_order's.
index_batch expected_order(const setup& s, std::size_t epoch) {
    return s.order == epoch_order_kind::keyed ? keyed_reference_order(s.n, s.seed, epoch, s.shuffle)
                                              : reference_order(s.n, s.seed, epoch, s.shuffle);
}

// What every rank of an epoch of `s` must hand out (tests/support/epoch_reference.hpp).
bcl_test::reference_epoch reference(const setup& s, std::size_t epoch) {
    return bcl_test::reference_plan(expected_order(s, epoch), s.costs(), s.ranks, s.lookahead,
                                    s.batch, s.drop_last, s.plan);
}

std::vector<index_batch> drain_all(distributed_balanced_sampler& s) {
    return drain(s, s.batch_size());
}

std::vector<double> cost_table(std::size_t n) {
    return setup{.n = n}.costs();
}

// The snippet docs/torch.md shows (the test torch_doc_snippet keeps the two identical).
// snippet-begin
// One rank of `world_size`. `costs` holds the estimated cost of every dataset index (the whole
// table, on every rank); `agree` compares a digest across the ranks (one all-reduce).
template <class Dataset, class TrainStep, class Agree>
void train(Dataset& dataset, const std::vector<double>& costs, std::size_t world_size,
           std::size_t rank, std::size_t epochs, TrainStep train_step, Agree agree) {
    // Batches of 16, every rank planning every rank's batches alike, 8 steps at a time.
    bcl::torch::distributed_balanced_sampler sampler(costs, /*batch_size=*/16, world_size, rank,
                                                     /*shuffle=*/true, /*seed=*/0,
                                                     /*drop_last=*/false, /*lookahead=*/8);
    for (std::size_t epoch = 0; epoch < epochs; ++epoch) {
        sampler.set_epoch(epoch);
        sampler.reset();
        // Plans the epoch; ranks whose digests differ would train records twice or never.
        if (!agree(sampler.digest())) throw std::runtime_error("the ranks' plans differ");
        while (auto indices = sampler.next(sampler.batch_size())) // 16, the epoch's last the rest
            train_step(dataset.get_batch(*indices));
    }
}
// snippet-end

// The second snippet docs/torch.md shows ("The epoch's order: Fisher-Yates or keyed").
// snippet-begin
// Rank `rank` of `world_size`, each epoch's order drawn as Python's order="keyed" draws it: on
// the same seed and epoch, the same order, so the same plans and digests.
bcl::torch::distributed_balanced_sampler keyed_sampler(const std::vector<double>& costs,
                                                       std::size_t world_size, std::size_t rank) {
    return bcl::torch::distributed_balanced_sampler(costs, /*lengths=*/{},
                                                    {.num_replicas = world_size,
                                                     .rank = rank,
                                                     .batch_size = 16,
                                                     .seed = 0,
                                                     .order = bcl::torch::epoch_order_kind::keyed});
}
// snippet-end

} // namespace

TEST_CASE("torch distributed: the global order is the documented integer shuffle of (seed, "
          "epoch), the same for every sampler made alike, and 0..N-1 without shuffle",
          "[torch][distributed][order]") {
    const setup s{.n = 1000};
    const distributed_balanced_sampler a = s.make(0);
    const distributed_balanced_sampler b = s.make(2);
    for (std::size_t epoch : {0, 1, 2, 17}) {
        CAPTURE(epoch);
        const index_batch order = a.order_of(epoch);
        REQUIRE(order == reference_order(1000, 5, epoch, true));
        REQUIRE(order == b.order_of(epoch)); // every rank draws the same order
        index_batch sorted = order;
        std::sort(sorted.begin(), sorted.end());
        index_batch iota(1000);
        std::iota(iota.begin(), iota.end(), std::size_t{0});
        REQUIRE(sorted == iota);
        REQUIRE(order != iota);
    }
    REQUIRE(a.order_of(0) != a.order_of(1));
    setup other = s;
    other.seed = 6;
    REQUIRE(other.make(0).order_of(0) != a.order_of(0));
    other.shuffle = false;
    const index_batch plain = other.make(0).order_of(4);
    REQUIRE(std::is_sorted(plain.begin(), plain.end()));
    REQUIRE(plain.size() == 1000);
}

TEST_CASE("torch distributed: R ranks hand out every record of the kept order exactly once, in "
          "exact batches, equally many on every rank; each rank's batches are the global plan's",
          "[torch][distributed][contract]") {
    struct shape {
        std::size_t n, ranks, batch, lookahead;
    };
    // Full and short windows, N not a multiple of R (padding), N below R, one rank, one record
    // per batch, an empty dataset.
    const shape sh =
        GENERATE(shape{70, 3, 4, 2}, shape{240, 4, 5, 3}, shape{97, 8, 3, 2}, shape{5, 8, 2, 4},
                 shape{50, 1, 7, 3}, shape{33, 2, 1, 5}, shape{0, 3, 4, 2}, shape{1000, 5, 16, 8});
    const bool drop_last = GENERATE(false, true);
    const bool shuffle = GENERATE(true, false);
    const bcl::batch_cost batching = GENERATE(bcl::batch_cost::packed, bcl::batch_cost::padded);
    CAPTURE(sh.n, sh.ranks, sh.batch, sh.lookahead, drop_last, shuffle, batching);
    setup s{.n = sh.n,
            .ranks = sh.ranks,
            .batch = sh.batch,
            .lookahead = sh.lookahead,
            .shuffle = shuffle,
            .drop_last = drop_last};
    s.plan.batching = batching;
    std::vector<distributed_balanced_sampler> ranks;
    for (std::size_t r = 0; r < sh.ranks; ++r) ranks.push_back(s.make(r));
    for (std::size_t epoch = 0; epoch < 2; ++epoch) {
        CAPTURE(epoch);
        const reference_epoch ref = reference(s, epoch);
        // Batches per epoch from (N, R, B, drop_last) alone, as DistributedSampler counts the
        // records per rank: ceil(N / R), or floor with drop_last, then whole batches.
        const std::size_t m = ref.per_rank;
        const std::size_t expected_batches =
            drop_last ? m / sh.batch : (m + sh.batch - 1) / sh.batch;
        index_batch all;
        std::uint64_t digest = 0;
        for (std::size_t r = 0; r < sh.ranks; ++r) {
            CAPTURE(r);
            distributed_balanced_sampler& sampler = ranks[r];
            if (epoch > 0) sampler.reset();
            REQUIRE(sampler.epoch() == epoch);
            REQUIRE(sampler.size() == expected_batches);
            if (r == 0) digest = sampler.digest();
            REQUIRE(sampler.digest() == digest); // every rank planned alike
            REQUIRE(digest == ref.digest);
            const std::vector<index_batch> batches = drain_all(sampler);
            REQUIRE(batches.size() == expected_batches);
            for (std::size_t k = 0; k + 1 < batches.size(); ++k)
                REQUIRE(batches[k].size() == sh.batch);
            if (!batches.empty())
                REQUIRE(batches.back().size() == m - (expected_batches - 1) * sh.batch);
            REQUIRE(batches == ref.batches[r]);
            REQUIRE_FALSE(sampler.next(sh.batch).has_value());
            // Bounded delay: a record is handed out in one of its own window's K steps (an index
            // the padding repeats: in the window of one of its places in the order).
            const std::size_t window = sh.ranks * sh.lookahead * sh.batch;
            for (std::size_t k = 0; k < batches.size(); ++k)
                for (const std::size_t index : batches[k]) {
                    bool in_its_window = false;
                    for (std::size_t p = 0; p < ref.kept.size(); ++p)
                        in_its_window |= ref.kept[p] == index && p / window == k / sh.lookahead;
                    REQUIRE(in_its_window);
                }
            const index_batch mine = sorted_concat(batches);
            all.insert(all.end(), mine.begin(), mine.end());
        }
        std::sort(all.begin(), all.end());
        index_batch kept = ref.kept;
        std::sort(kept.begin(), kept.end());
        REQUIRE(all == kept); // exactly once (a padded index as often as it is padded)
        REQUIRE(kept.size() == m * sh.ranks);
    }
}

TEST_CASE("torch distributed: the plan balances the ranks of every step far better than the "
          "order dealt as it comes",
          "[torch][distributed][balance]") {
    const setup s{.n = 4096, .ranks = 8, .batch = 16, .lookahead = 8};
    const std::vector<double> table = s.costs();
    std::vector<std::vector<index_batch>> planned;
    for (std::size_t r = 0; r < s.ranks; ++r) {
        distributed_balanced_sampler sampler = s.make(r);
        planned.push_back(drain_all(sampler));
    }
    // Efficiency: mean rank's cost over the slowest rank's, summed over steps.
    const auto efficiency = [&](const std::vector<std::vector<index_batch>>& by_rank) {
        double total = 0.0;
        double slowest = 0.0;
        for (std::size_t k = 0; k < by_rank[0].size(); ++k) {
            double most = 0.0;
            for (const auto& batches : by_rank) {
                double cost = 0.0;
                for (const std::size_t i : batches[k]) cost += table[i];
                total += cost;
                most = std::max(most, cost);
            }
            slowest += most;
        }
        return total / (double(by_rank.size()) * slowest);
    };
    // The same order dealt as DistributedSampler deals it (rank r: positions r, r+R, ...).
    const index_batch order = reference_order(s.n, s.seed, 0, true);
    std::vector<std::vector<index_batch>> dealt(s.ranks);
    for (std::size_t r = 0; r < s.ranks; ++r)
        for (std::size_t k = 0; k < s.n / s.ranks / s.batch; ++k) {
            index_batch b;
            for (std::size_t j = 0; j < s.batch; ++j)
                b.push_back(order[(k * s.batch + j) * s.ranks + r]);
            dealt[r].push_back(b);
        }
    const double plain = efficiency(dealt);
    const double balanced = efficiency(planned);
    CAPTURE(plain, balanced);
    REQUIRE(plain < 0.95);
    REQUIRE(balanced > 0.995);
    distributed_balanced_sampler probe = s.make(0);
    REQUIRE(probe.summary().efficiency() > 0.995);
    REQUIRE(probe.summary().windows == 4096 / (8 * 8 * 16));
}

TEST_CASE("torch distributed: after its first epoch the sampler plans an epoch without "
          "allocating; next() allocates only the batch it returns",
          "[torch][distributed][allocation]") {
    const bcl::batch_cost batching = GENERATE(bcl::batch_cost::packed, bcl::batch_cost::padded);
    setup s{.n = 3000, .ranks = 7, .batch = 16, .lookahead = 8};
    s.plan.batching = batching;
    distributed_balanced_sampler sampler = s.make(3);
    (void)sampler.digest(); // the first epoch sizes the scratch
    for (std::size_t epoch = 1; epoch < 4; ++epoch) {
        CAPTURE(epoch);
        sampler.set_epoch(epoch);
        sampler.reset();
        const long before = allocation_count();
        const std::uint64_t digest = sampler.digest(); // plans the epoch
        REQUIRE(allocation_count() == before);
        REQUIRE(digest == reference(s, epoch).digest);
        std::size_t batches = 0;
        const long before_batches = allocation_count();
        while (torch::optional<index_batch> b = sampler.next(16)) ++batches;
        REQUIRE(batches == sampler.size());
        REQUIRE(allocation_count() - before_batches == long(batches));
    }
}

TEST_CASE("torch distributed: keyed, after its first epoch digest() allocates nothing (it plans "
          "nothing) and next() only the batch it returns, each window planned in the scratch of "
          "the last",
          "[torch][distributed][allocation][keyed]") {
    const setup s{
        .n = 3000, .ranks = 7, .batch = 16, .lookahead = 8, .order = epoch_order_kind::keyed};
    distributed_balanced_sampler sampler = s.make(3);
    (void)drain_all(sampler); // the first epoch sizes the scratch
    for (std::size_t epoch = 1; epoch < 4; ++epoch) {
        CAPTURE(epoch);
        sampler.set_epoch(epoch);
        sampler.reset();
        const long before = allocation_count();
        (void)sampler.digest();
        REQUIRE(allocation_count() == before);
        std::size_t batches = 0;
        const long before_batches = allocation_count();
        while (torch::optional<index_batch> b = sampler.next(16)) ++batches;
        REQUIRE(batches == sampler.size());
        REQUIRE(allocation_count() - before_batches == long(batches));
    }
}

TEST_CASE("torch distributed: samplers made alike agree, copies too; another seed, epoch, cost "
          "or setting gives another digest",
          "[torch][distributed][determinism]") {
    const setup s{.n = 500, .ranks = 4, .batch = 8, .lookahead = 3};
    distributed_balanced_sampler a = s.make(2);
    distributed_balanced_sampler b = s.make(2);
    const std::uint64_t digest = a.digest();
    distributed_balanced_sampler copy = a; // shares the table, plans on its own
    REQUIRE(drain_all(a) == drain_all(b));
    distributed_balanced_sampler fresh = s.make(2);
    REQUIRE(drain_all(copy) == drain_all(fresh));
    REQUIRE(copy.digest() == digest);
    // From a span, the table copied.
    const std::vector<double> table = s.costs();
    distributed_balanced_sampler spanned(std::span<const double>(table), 8, 4, 2, true, 5, false,
                                         3);
    REQUIRE(spanned.digest() == digest);

    std::vector<std::uint64_t> digests{digest};
    setup other = s;
    other.seed = 6;
    digests.push_back(other.make(2).digest());
    distributed_balanced_sampler later = s.make(2);
    later.set_epoch(1);
    later.reset();
    digests.push_back(later.digest());
    std::vector<double> changed = table;
    changed[table.size() / 2] += 1000.0; // one record much dearer
    digests.push_back(distributed_balanced_sampler(changed, 8, 4, 2, true, 5, false, 3).digest());
    other = s;
    other.lookahead = 4;
    digests.push_back(other.make(2).digest());
    other = s;
    other.plan.level_steps = false;
    other.plan.cap = 100.0;
    digests.push_back(other.make(2).digest());
    std::sort(digests.begin(), digests.end());
    REQUIRE(std::adjacent_find(digests.begin(), digests.end()) == digests.end());
}

TEST_CASE("torch distributed: reset() starts the next epoch, or epoch 0 again before any batch; "
          "set_epoch() chooses the next one; reset(n) must keep the table's size",
          "[torch][distributed][epoch]") {
    const setup s{.n = 200, .ranks = 2, .batch = 8, .lookahead = 2};
    distributed_balanced_sampler sampler = s.make(1);
    REQUIRE(sampler.epoch() == 0);
    sampler.reset(); // as a loader's first begin(): nothing handed out, epoch 0 again
    REQUIRE(sampler.epoch() == 0);
    REQUIRE(drain_all(sampler) == reference(s, 0).batches[1]);
    sampler.reset();
    REQUIRE(sampler.epoch() == 1);
    REQUIRE(drain_all(sampler) == reference(s, 1).batches[1]);
    sampler.set_epoch(7);
    REQUIRE(sampler.epoch() == 7);
    sampler.reset();
    REQUIRE(drain_all(sampler) == reference(s, 7).batches[1]);
    // Partway: the next epoch starts whole.
    sampler.reset();
    REQUIRE(sampler.next(8).has_value());
    sampler.reset();
    REQUIRE(sampler.epoch() == 9);
    REQUIRE(sampler.position() == 0);
    REQUIRE(drain_all(sampler) == reference(s, 9).batches[1]);
    // The same epoch started over hands out the same batches.
    sampler.set_epoch(9);
    sampler.reset();
    REQUIRE(drain_all(sampler) == reference(s, 9).batches[1]);
    REQUIRE_THROWS_WITH(sampler.reset(199),
                        Contains("dataset size given is 199") && Contains("covers 200"));
    REQUIRE(sampler.epoch() == 9);
    REQUIRE_FALSE(sampler.next(8).has_value()); // unchanged: epoch 9 handed out
    sampler.reset(200);
    REQUIRE(sampler.epoch() == 10);
}

TEST_CASE("torch distributed: an epoch or a seed of 2^63 or more is refused where it enters; the "
          "largest ones round-trip through an archive",
          "[torch][distributed][epoch]") {
    const setup s{.n = 60, .ranks = 2, .batch = 4, .lookahead = 2};
    distributed_balanced_sampler sampler = s.make(0);
    REQUIRE_THROWS_WITH(sampler.set_epoch(std::size_t{1} << 63),
                        Contains("the epoch must be below 2^63 (got 9223372036854775808)"));
    REQUIRE(sampler.epoch() == 0); // unchanged
    setup bad_seed = s;
    bad_seed.seed = std::uint64_t{1} << 63;
    REQUIRE_THROWS_WITH(bad_seed.make(0), Contains("the seed must be below 2^63"));
    setup largest = s;
    largest.seed = (std::uint64_t{1} << 63) - 1;
    distributed_balanced_sampler last = largest.make(0);
    last.set_epoch((std::size_t{1} << 63) - 1);
    last.reset();
    const index_batch first = *last.next(4);
    distributed_balanced_sampler restored = largest.make(0);
    load_bytes(restored, saved_bytes(last));
    REQUIRE(restored.epoch() == (std::size_t{1} << 63) - 1);
    REQUIRE(drain_all(restored) == drain_all(last));
    REQUIRE(first.size() == 4);
    // The epoch after the largest one is refused by reset(), which changes nothing.
    REQUIRE_THROWS_WITH(last.reset(), Contains("the next epoch must be below 2^63"));
    REQUIRE(last.epoch() == (std::size_t{1} << 63) - 1);
}

TEST_CASE("torch distributed: through a data loader made by bcl::torch::make_data_loader, the "
          "batch size given once, to the sampler",
          "[torch][distributed][loader]") {
    const setup s{.n = 301, .ranks = 3, .batch = 8, .lookahead = 4};
    std::vector<index_batch> all(2);
    for (std::size_t r = 0; r < s.ranks; ++r) {
        auto loader = bcl::torch::make_data_loader(index_dataset(s.n), s.make(r));
        for (std::size_t epoch = 0; epoch < 2; ++epoch) {
            std::vector<index_batch> batches;
            for (index_batch& x : *loader) batches.push_back(std::move(x));
            REQUIRE(batches == reference(s, epoch).batches[r]);
            const index_batch mine = sorted_concat(batches);
            all[epoch].insert(all[epoch].end(), mine.begin(), mine.end());
        }
    }
    for (std::size_t epoch = 0; epoch < 2; ++epoch) {
        index_batch kept = reference(s, epoch).kept;
        std::sort(kept.begin(), kept.end());
        std::sort(all[epoch].begin(), all[epoch].end());
        REQUIRE(all[epoch] == kept);
    }
    // Options that name the sampler's batch size, or leave it at the default, are taken; any
    // other size is refused before a loader exists.
    CHECK_NOTHROW(bcl::torch::make_data_loader(index_dataset(s.n), s.make(0),
                                               torch::data::DataLoaderOptions().batch_size(8)));
    CHECK_NOTHROW(bcl::torch::make_data_loader(index_dataset(s.n), s.make(0),
                                               torch::data::DataLoaderOptions().workers(0)));
    REQUIRE_THROWS_WITH(bcl::torch::make_data_loader(index_dataset(s.n), s.make(0),
                                                     torch::data::DataLoaderOptions(16)),
                        Contains("batches of 16 indices") && Contains("batch size is 8"));
    // A loader made by libtorch alone with another size fails at its first batch.
    auto other = torch::data::make_data_loader(index_dataset(s.n), s.make(0),
                                               torch::data::DataLoaderOptions(16));
    const auto iterate = [&] {
        for (index_batch& x : *other) (void)x;
    };
    REQUIRE_THROWS_WITH(iterate(),
                        Contains("a batch of 16 indices") && Contains("batch size is 8"));
}

TEST_CASE("torch distributed: a bad cost is a bcl::error at construction naming the dataset "
          "index and value; so is every bad setting",
          "[torch][distributed][errors]") {
    const double bad = GENERATE(std::numeric_limits<double>::quiet_NaN(), -1.0,
                                std::numeric_limits<double>::infinity(), 1e121);
    CAPTURE(bad);
    std::vector<double> costs = cost_table(100);
    costs[42] = bad;
    const std::string value = bcl::detail::number_text(bad);
    REQUIRE_THROWS_WITH(distributed_balanced_sampler(costs, 4, 2, 0),
                        Contains("dataset index 42") && Contains(value) &&
                            Contains("bcl::max_estimate"));
    // -0.0, 0 and bcl::max_estimate itself are costs.
    costs[42] = -0.0;
    costs[43] = 0.0;
    costs[44] = bcl::max_estimate;
    distributed_balanced_sampler ok(costs, 4, 2, 0);
    REQUIRE(sorted_concat(drain_all(ok)).size() == 50);

    const std::vector<double> good = cost_table(100);
    const auto refused = [&](auto make, const std::string& what) {
        CAPTURE(what);
        REQUIRE_THROWS_AS(make(), bcl::error);
        REQUIRE_THROWS_WITH(make(), Contains(what));
    };
    refused([&] { return distributed_balanced_sampler(good, 0, 2, 0); }, "at least 1");
    refused([&] { return distributed_balanced_sampler(good, 4, 0, 0); }, "at least 1");
    refused([&] { return distributed_balanced_sampler(good, 4, 2, 0, true, 0, false, 0); },
            "at least 1");
    refused([&] { return distributed_balanced_sampler(good, 4, 2, 2); },
            "rank 2 of num_replicas 2");
    refused([&] { return distributed_balanced_sampler(good, 2048, 1024, 0, true, 0, false, 1024); },
            "above the 1073741824 a window may hold");
    refused(
        [&] {
            return distributed_balanced_sampler(good, 4, 2, 0, true, 0, false, 8,
                                                bcl::plan_options{.cap = -1.0});
        },
        "cap -1");
    refused(
        [&] {
            return distributed_balanced_sampler(good, 4, 2, 0, true, 0, false, 8,
                                                bcl::plan_options{.batching = bcl::batch_cost(7)});
        },
        "batching");
    // A batch size other than the sampler's changes nothing.
    distributed_balanced_sampler sampler(good, 4, 2, 1);
    REQUIRE_THROWS_WITH(sampler.next(5),
                        Contains("a batch of 5 indices") && Contains("batch size is 4"));
    REQUIRE(sampler.position() == 0);
    REQUIRE(drain_all(sampler).size() == 13);
}

TEST_CASE("torch distributed: an archive saved at any position resumes exactly the rest of the "
          "epoch and the epochs after it",
          "[torch][distributed][resume]") {
    const bool drop_last = GENERATE(false, true);
    const std::size_t rank = GENERATE(0, 2);
    CAPTURE(drop_last, rank);
    const setup s{.n = 70, .ranks = 3, .batch = 4, .lookahead = 2, .drop_last = drop_last};
    // The uninterrupted run: epochs 0 and 1 (and set_epoch(1) then epoch 4 after).
    distributed_balanced_sampler reference_run = s.make(rank);
    const std::vector<index_batch> epoch0 = drain_all(reference_run);
    reference_run.reset();
    const std::vector<index_batch> epoch1 = drain_all(reference_run);
    REQUIRE(epoch0.size() == (drop_last ? 5 : 6));
    for (std::size_t taken = 0; taken <= epoch0.size(); ++taken) {
        for (const bool planned : {false, true}) {
            if (taken > 0 && !planned) continue; // handing out a batch plans the epoch
            CAPTURE(taken, planned);
            distributed_balanced_sampler saved = s.make(rank);
            if (planned) (void)saved.digest();
            for (std::size_t k = 0; k < taken; ++k) REQUIRE(saved.next(4) == epoch0[k]);
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
    // Saved after set_epoch(4) and before the reset() that starts it: the archive keeps both.
    distributed_balanced_sampler saved = s.make(rank);
    (void)saved.next(4);
    saved.set_epoch(4);
    const std::string bytes = saved_bytes(saved);
    distributed_balanced_sampler restored = s.make(rank);
    load_bytes(restored, bytes);
    REQUIRE(restored.epoch() == 4);
    REQUIRE(drain_all(restored) ==
            std::vector<index_batch>(epoch0.begin() + 1, epoch0.end())); // epoch 0 goes on
    restored.reset();
    REQUIRE(drain_all(restored) == reference(s, 4).batches[rank]);

    // torch::save and torch::load carry it through a file.
    distributed_balanced_sampler to_file = s.make(rank);
    (void)to_file.next(4);
    (void)to_file.next(4);
    const std::filesystem::path file =
        std::filesystem::temp_directory_path() / "bcl_torch_distributed_sampler_test.pt";
    torch::save(to_file, file.string());
    distributed_balanced_sampler from_file = s.make(rank);
    torch::load(from_file, file.string());
    std::filesystem::remove(file);
    REQUIRE(drain_all(from_file) == drain_all(to_file));
}

TEST_CASE("torch distributed: every refused archive field is a bcl::error naming it, and the "
          "sampler is unchanged, with the digest as saved and recomputed",
          "[torch][distributed][resume][tamper]") {
    const bool reseal = GENERATE(false, true);
    CAPTURE(reseal);
    const setup s{.n = 70, .ranks = 3, .batch = 4, .lookahead = 2};
    const auto make = [&] { return s.make(1); };
    distributed_balanced_sampler genuine = make();
    for (int k = 0; k < 3; ++k) (void)genuine.next(4);
    const std::string bytes = saved_bytes(genuine);
    archive_parts parts = archive_parts::of(bytes, /*nested=*/false);
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
            GENERATE("bcl_dataset_size", "bcl_num_replicas", "bcl_rank", "bcl_batch_size",
                     "bcl_lookahead", "bcl_shuffle", "bcl_seed", "bcl_drop_last", "bcl_batching",
                     "bcl_level_steps", "bcl_costs");
        CAPTURE(key);
        const std::int64_t saved = one(key);
        parts.set(key, {saved == 0 ? 1 : saved - 1});
        refused({key, "but this sampler's"});
    }
    SECTION("bcl_cap altered") {
        parts.fields["bcl_cap"] = torch::full({1}, 100.0, torch::kFloat64);
        refused({"bcl_cap is 100", "plan_options::cap is 0"});
    }
    SECTION("bcl_position out of range, or of another type") {
        const std::int64_t position = GENERATE(-1, 7, 1000);
        parts.set("bcl_position", {position});
        refused({"bcl_position is " + std::to_string(position), "0 to 6 batches"});
    }
    SECTION("bcl_position as a double") {
        parts.fields["bcl_position"] = torch::full({1}, 3.0, torch::kFloat64);
        refused({"bcl_position", "not a 1-d CPU tensor of Long"});
    }
    SECTION("bcl_epoch malformed") {
        const int64s epoch = GENERATE(int64s{-1, 1, 0, 0}, int64s{0, 2, 0, 0}, int64s{0, 1, 2, 0},
                                      int64s{0, 1, 0, 3}, int64s{0, 1, 0}, int64s{0, 1, 1, -4});
        parts.set("bcl_epoch", epoch);
        refused({"bcl_epoch is not"});
    }
    SECTION("bcl_epoch: not started, with batches handed out") {
        parts.set("bcl_epoch", {0, 0, 0, 0});
        refused({"bcl_epoch says the epoch has not started", "3 batches"});
    }
    SECTION("bcl_epoch: another epoch, whose plan is another") {
        parts.set("bcl_epoch", {1, 1, 0, 0});
        refused({"bcl_plan_digest does not match this sampler's plan of epoch 1 (bcl_epoch)"});
    }
    SECTION("bcl_plan_digest altered, or emptied while batches were handed out") {
        if (GENERATE(true, false)) {
            parts.set("bcl_plan_digest", {one("bcl_plan_digest") ^ 1});
            refused({"bcl_plan_digest does not match", "epoch 0"});
        } else {
            parts.set("bcl_plan_digest", {});
            refused({"bcl_plan_digest is empty", "3 batches handed out"});
        }
    }
    SECTION("bcl_plan_digest with two values") {
        parts.set("bcl_plan_digest", {1, 2});
        refused({"bcl_plan_digest has 2 values"});
    }
    SECTION("a field missing") {
        const std::string key = GENERATE("bcl_rank", "bcl_epoch", "bcl_position", "bcl_digest");
        parts.fields.erase(key);
        if (key != "bcl_digest" || !reseal) refused({key, "missing"});
    }
    SECTION("bcl_format: another tag, or a balanced_sampler's") {
        if (GENERATE(true, false)) {
            torch::Tensor t = torch::full({3}, std::int64_t{'x'}, torch::kUInt8);
            parts.fields["bcl_format"] = t;
            refused({"bcl_format is \"xxx\", not \"bcl::torch::distributed_balanced_sampler/2\""});
        } else {
            parts.set("bcl_format", {3});
            refused({"bcl_format", "bcl::torch::balanced_sampler"});
        }
    }
    SECTION("only the digest altered: the digest catches it") {
        if (!reseal) {
            parts.set("bcl_digest", {one("bcl_digest") ^ 1});
            refused({"bcl_digest", "altered or damaged"});
        }
    }
    SECTION("the set_epoch() choice altered: only the digest catches it") {
        parts.set("bcl_epoch", {0, 1, 1, 5});
        if (!reseal) refused({"bcl_digest"});
    }
}

TEST_CASE("torch distributed: a sampler with other settings or another cost table refuses a "
          "genuine archive by the field's name, and is unchanged",
          "[torch][distributed][resume]") {
    const setup s{.n = 70, .ranks = 3, .batch = 4, .lookahead = 2};
    distributed_balanced_sampler genuine = s.make(1);
    (void)genuine.next(4);
    const std::string bytes = saved_bytes(genuine);
    const std::string what = GENERATE("seed", "rank", "num_replicas", "costs", "shuffle", "cap",
                                      "dataset size", "batch size", "lookahead", "drop_last");
    CAPTURE(what);
    setup other = s;
    std::size_t rank = 1;
    std::string field = "bcl_" + what;
    if (what == "seed") other.seed = 6;
    if (what == "rank") rank = 2;
    if (what == "num_replicas") other.ranks = 4;
    if (what == "shuffle") other.shuffle = false;
    if (what == "cap") other.plan.cap = 300.0;
    if (what == "dataset size") {
        other.n = 71;
        field = "bcl_dataset_size";
    }
    if (what == "batch size") {
        other.batch = 5;
        field = "bcl_batch_size";
    }
    if (what == "lookahead") other.lookahead = 3;
    if (what == "drop_last") other.drop_last = true;
    std::vector<double> table = other.costs();
    if (what == "costs") table[7] += 1.0;
    const auto make = [&] {
        return distributed_balanced_sampler(table, other.batch, other.ranks, rank, other.shuffle,
                                            other.seed, other.drop_last, other.lookahead,
                                            other.plan);
    };
    require_distributed_refused(make, bytes, {field});
}

TEST_CASE("torch distributed: with epoch_order_kind::keyed the global order is bcl::keyed_order(N, "
          "seed, epoch) at positions 0..N-1, Python's order=\"keyed\": a permutation, the same on "
          "every rank, another for another epoch or seed; 0..N-1 without shuffle",
          "[torch][distributed][order][keyed]") {
    // The default is the documented integer shuffle, as before the choice existed.
    REQUIRE(distributed_sampler_options{}.order == epoch_order_kind::fisher_yates);
    const setup s{.n = 1000, .order = epoch_order_kind::keyed};
    const distributed_balanced_sampler a = s.make(0);
    const distributed_balanced_sampler b = s.make(2);
    REQUIRE(a.settings().order == epoch_order_kind::keyed);
    index_batch iota(1000);
    std::iota(iota.begin(), iota.end(), std::size_t{0});
    for (std::size_t epoch : {0, 1, 2, 17}) {
        CAPTURE(epoch);
        const index_batch order = a.order_of(epoch);
        const bcl::keyed_order keyed(1000, 5, epoch);
        REQUIRE(order.size() == 1000);
        for (std::size_t p = 0; p < order.size(); ++p) REQUIRE(order[p] == keyed.at(p));
        REQUIRE(order == b.order_of(epoch)); // every rank draws the same order
        index_batch sorted = order;
        std::sort(sorted.begin(), sorted.end());
        REQUIRE(sorted == iota);
        REQUIRE(order != iota);
        REQUIRE(order != reference_order(1000, 5, epoch, true)); // not the Fisher-Yates one
    }
    REQUIRE(a.order_of(0) != a.order_of(1));
    setup other = s;
    other.seed = 6;
    REQUIRE(other.make(0).order_of(0) != a.order_of(0));
    // Without shuffle the kind draws nothing: 0..N-1, as Python's sampler gives.
    other.shuffle = false;
    REQUIRE(other.make(0).order_of(4) == iota);
    // The snippet of docs/torch.md: seed 0, batches of 16, keyed.
    const setup snippet{.n = 300,
                        .ranks = 3,
                        .batch = 16,
                        .lookahead = 8,
                        .seed = 0,
                        .order = epoch_order_kind::keyed};
    distributed_balanced_sampler shown = keyed_sampler(snippet.costs(), 3, 1);
    REQUIRE(shown.order_of(2) == keyed_reference_order(300, 0, 2, true));
    REQUIRE(drain_all(shown) == reference(snippet, 0).batches[1]);
    // A permutation at every size, those below the network's smallest word (4) too.
    for (const std::size_t n : {0, 1, 2, 3, 5, 64, 65}) {
        CAPTURE(n);
        const index_batch small =
            setup{.n = n, .order = epoch_order_kind::keyed}.make(0).order_of(3);
        index_batch sorted = small;
        std::sort(sorted.begin(), sorted.end());
        index_batch expected(n);
        std::iota(expected.begin(), expected.end(), std::size_t{0});
        REQUIRE(sorted == expected);
        REQUIRE(small == keyed_reference_order(n, 5, 3, true));
    }
}

TEST_CASE("torch distributed: with epoch_order_kind::keyed R ranks hand out every record of the "
          "kept order exactly once, the global plan's batches over the keyed order (planned window "
          "by window); summary() chains the windows' plan digests; the digest, the inputs', is "
          "equal on every rank and another for another epoch",
          "[torch][distributed][contract][keyed]") {
    struct shape {
        std::size_t n, ranks, batch, lookahead;
    };
    const shape sh =
        GENERATE(shape{70, 3, 4, 2}, shape{97, 8, 3, 2}, shape{5, 8, 2, 4}, shape{1000, 5, 16, 8});
    const bool drop_last = GENERATE(false, true);
    CAPTURE(sh.n, sh.ranks, sh.batch, sh.lookahead, drop_last);
    const setup s{.n = sh.n,
                  .ranks = sh.ranks,
                  .batch = sh.batch,
                  .lookahead = sh.lookahead,
                  .drop_last = drop_last,
                  .order = epoch_order_kind::keyed};
    std::vector<distributed_balanced_sampler> ranks;
    for (std::size_t r = 0; r < sh.ranks; ++r) ranks.push_back(s.make(r));
    std::vector<std::uint64_t> digests;
    for (std::size_t epoch = 0; epoch < 3; ++epoch) {
        CAPTURE(epoch);
        const reference_epoch ref = reference(s, epoch);
        index_batch all;
        for (std::size_t r = 0; r < sh.ranks; ++r) {
            CAPTURE(r);
            distributed_balanced_sampler& sampler = ranks[r];
            if (epoch > 0) sampler.reset();
            REQUIRE(sampler.epoch() == epoch);
            // The inputs' digest, known without planning: equal on every rank.
            REQUIRE(sampler.digest() == ranks[0].digest());
            const std::vector<index_batch> batches = drain_all(sampler);
            REQUIRE(batches == ref.batches[r]);
            REQUIRE(sampler.summary().digest == ref.digest); // the whole epoch's plan
            REQUIRE(sampler.summary().windows ==
                    (ref.kept.size() + sh.ranks * sh.lookahead * sh.batch - 1) /
                        (sh.ranks * sh.lookahead * sh.batch));
            const index_batch mine = sorted_concat(batches);
            all.insert(all.end(), mine.begin(), mine.end());
        }
        std::sort(all.begin(), all.end());
        index_batch kept = ref.kept;
        std::sort(kept.begin(), kept.end());
        REQUIRE(all == kept); // exactly once (a padded index as often as it is padded)
        REQUIRE(kept.size() == ref.per_rank * sh.ranks);
        digests.push_back(ranks[0].digest());
    }
    // Another epoch, another plan; and the Fisher-Yates order's plan is another again.
    setup shuffled = s;
    shuffled.order = epoch_order_kind::fisher_yates;
    if (sh.n > 5) {
        digests.push_back(shuffled.make(0).digest());
        std::sort(digests.begin(), digests.end());
        REQUIRE(std::adjacent_find(digests.begin(), digests.end()) == digests.end());
    }
}

TEST_CASE("torch distributed: with epoch_order_kind::keyed an archive resumes exactly; an archive "
          "of the other order kind is refused naming bcl_order, the sampler unchanged; the "
          "default's archive has no bcl_order",
          "[torch][distributed][resume][keyed]") {
    const setup s{
        .n = 70, .ranks = 3, .batch = 4, .lookahead = 2, .order = epoch_order_kind::keyed};
    setup shuffled = s;
    shuffled.order = epoch_order_kind::fisher_yates;
    const std::size_t rank = GENERATE(0, 2);
    CAPTURE(rank);

    SECTION("saved at any position, a keyed archive resumes the rest of the epoch and the next") {
        distributed_balanced_sampler uninterrupted = s.make(rank);
        const std::vector<index_batch> epoch0 = drain_all(uninterrupted);
        uninterrupted.reset();
        const std::vector<index_batch> epoch1 = drain_all(uninterrupted);
        REQUIRE(epoch0 == reference(s, 0).batches[rank]);
        for (std::size_t taken = 0; taken <= epoch0.size(); ++taken) {
            CAPTURE(taken);
            distributed_balanced_sampler saved = s.make(rank);
            (void)saved.digest();
            for (std::size_t k = 0; k < taken; ++k) REQUIRE(saved.next(4) == epoch0[k]);
            const std::string bytes = saved_bytes(saved);
            REQUIRE(archive_parts::of(bytes, false).ints("bcl_order") == int64s{1});
            distributed_balanced_sampler restored = s.make(rank);
            move_distributed(restored);
            load_bytes(restored, bytes);
            REQUIRE(restored.position() == taken);
            REQUIRE(drain_all(restored) ==
                    std::vector<index_batch>(epoch0.begin() + std::ptrdiff_t(taken), epoch0.end()));
            restored.reset();
            REQUIRE(drain_all(restored) == epoch1);
        }
    }
    SECTION("a keyed archive into a Fisher-Yates sampler, and the other way round, planned or "
            "not") {
        const bool planned = GENERATE(false, true);
        CAPTURE(planned);
        const auto saved = [&](const setup& from) {
            distributed_balanced_sampler x = from.make(rank);
            if (planned) (void)x.next(4);
            return saved_bytes(x);
        };
        require_distributed_refused(
            [&] { return shuffled.make(rank); }, saved(s),
            {"bcl_order is 1 (keyed)", "but this sampler's order is 0 (fisher_yates)"});
        require_distributed_refused(
            [&] { return s.make(rank); }, saved(shuffled),
            {"bcl_order is absent, so the archive's order is the default, 0 (fisher_yates)",
             "but this sampler's order is 1 (keyed)"});
    }
    SECTION("without shuffle too: the order kind is a setting, compared as given, as Python's "
            "state compares it") {
        setup plain = s;
        plain.shuffle = false;
        setup plain_shuffled = shuffled;
        plain_shuffled.shuffle = false;
        distributed_balanced_sampler x = plain.make(rank);
        REQUIRE(drain_all(x) == reference(plain_shuffled, 0).batches[rank]); // 0..N-1 either way
        require_distributed_refused([&] { return plain_shuffled.make(rank); }, saved_bytes(x),
                                    {"bcl_order is 1 (keyed)"});
    }
    SECTION("the default's archive is the archive it was before the choice: no bcl_order, and the "
            "same bytes as a sampler told fisher_yates by name") {
        distributed_balanced_sampler by_default = shuffled.make(rank);
        distributed_balanced_sampler named(shuffled.costs(), std::vector<std::uint64_t>(),
                                           shuffled.options(rank));
        (void)by_default.next(4);
        (void)named.next(4);
        const std::string bytes = saved_bytes(by_default);
        REQUIRE(bytes == saved_bytes(named));
        const archive_parts parts = archive_parts::of(bytes, false);
        REQUIRE(parts.fields.count("bcl_order") == 0);
        // The keyed archive holds exactly one field more.
        distributed_balanced_sampler keyed = s.make(rank);
        (void)keyed.next(4);
        const archive_parts keyed_parts = archive_parts::of(saved_bytes(keyed), false);
        REQUIRE(keyed_parts.fields.size() == parts.fields.size() + 1);
        for (const auto& [key, t] : parts.fields) REQUIRE(keyed_parts.fields.count(key) == 1);
    }
}

TEST_CASE("torch distributed: a keyed archive's bcl_order altered, removed or of another type is "
          "refused naming it, the sampler unchanged, with the digest as saved and recomputed",
          "[torch][distributed][resume][tamper][keyed]") {
    const bool reseal = GENERATE(false, true);
    CAPTURE(reseal);
    const setup s{
        .n = 70, .ranks = 3, .batch = 4, .lookahead = 2, .order = epoch_order_kind::keyed};
    const auto make = [&] { return s.make(1); };
    distributed_balanced_sampler genuine = make();
    for (int k = 0; k < 3; ++k) (void)genuine.next(4);
    archive_parts parts = archive_parts::of(saved_bytes(genuine), /*nested=*/false);
    const auto refused = [&](const std::vector<std::string>& names) {
        require_distributed_refused(make, parts.bytes(reseal), names);
    };

    SECTION("the genuine archive loads and resumes exactly") {
        distributed_balanced_sampler restored = make();
        load_bytes(restored, parts.bytes(reseal));
        REQUIRE(same_distributed_course(restored, genuine));
    }
    SECTION("bcl_order set to the default, or to no kind") {
        parts.set("bcl_order", {0});
        refused({"bcl_order is 0 (fisher_yates), but this sampler's order is 1 (keyed)"});
        parts.set("bcl_order", {2});
        refused({"bcl_order is 2, but this sampler's order is 1 (keyed)"});
    }
    SECTION("bcl_order removed") {
        parts.fields.erase("bcl_order");
        refused({"bcl_order is absent"});
    }
    SECTION("bcl_order with two values, or as a double") {
        parts.set("bcl_order", {1, 1});
        refused({"bcl_order has 2 values, not 1"});
        parts.fields["bcl_order"] = torch::full({1}, 1.0, torch::kFloat64);
        refused({"bcl_order", "not a 1-d CPU tensor of Long"});
    }
}

TEST_CASE("torch distributed: the snippet of docs/torch.md trains every rank on exact batches of "
          "every index once per epoch, and stops when the ranks' digests differ",
          "[torch][distributed][docs]") {
    constexpr std::size_t ranks = 3;
    constexpr std::size_t n = 1000; // 334 per rank (2 padded): 20 batches of 16 and one of 14
    const std::vector<double> costs = cost_table(n);
    index_dataset dataset(n);
    // Rank 0's digest of each epoch, the one every rank must have.
    std::vector<std::uint64_t> digests;
    for (std::size_t epoch = 0; epoch < 2; ++epoch) {
        distributed_balanced_sampler probe(costs, 16, ranks, 0, true, 0, false, 8);
        probe.set_epoch(epoch);
        probe.reset();
        digests.push_back(probe.digest());
    }
    std::vector<index_batch> seen(2);
    for (std::size_t rank = 0; rank < ranks; ++rank) {
        std::size_t epoch = 0;
        std::vector<std::size_t> sizes;
        train(
            dataset, costs, ranks, rank, 2,
            [&](const index_batch& x) {
                sizes.push_back(x.size());
                seen[epoch].insert(seen[epoch].end(), x.begin(), x.end());
                if (sizes.size() % 21 == 0) ++epoch;
            },
            [&](std::uint64_t digest) { return digest == digests[epoch]; });
        REQUIRE(sizes.size() == 2 * 21);
        REQUIRE(std::count(sizes.begin(), sizes.end(), std::size_t{16}) == 2 * 20);
    }
    for (index_batch& all : seen) {
        REQUIRE(all.size() == 3 * 334);
        std::sort(all.begin(), all.end());
        REQUIRE(std::unique(all.begin(), all.end()) - all.begin() == std::ptrdiff_t(n));
    }
    // A rank with another cost table plans another epoch: the digest check stops it.
    std::vector<double> other = costs;
    other[500] = 1e6;
    REQUIRE_THROWS_WITH(train(
                            dataset, other, ranks, 1, 1, [](const index_batch&) {},
                            [&](std::uint64_t digest) { return digest == digests[0]; }),
                        "the ranks' plans differ");
}
