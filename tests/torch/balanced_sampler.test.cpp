// bcl::torch::balanced_sampler: the README's contract through libtorch's data loader, epochs,
// each epoch's balancer at the epoch's own mean cost, exact resume through libtorch archives (and
// the refusal of those of earlier formats), and bad input as clear errors. What load() checks
// in an archive is archive_checks.test.cpp's.

#include "sampler_support.hpp"

#include <bcl/bcl.hpp>
#include <bcl/torch/balanced_sampler.hpp>

#include <catch2/catch.hpp>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <limits>
#include <memory>
#include <numeric>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace {

using namespace sampler_support;

index_batch iota(std::size_t n) {
    index_batch all(n);
    std::iota(all.begin(), all.end(), std::size_t{0});
    return all;
}

// What libtorch's own distributed sampler gives a rank in an epoch, sorted: the set of indices
// the balanced sampler must hand out, in some order.
index_batch plain_share(std::size_t n, std::size_t ranks, std::size_t rank, std::size_t epoch) {
    DistributedRandomSampler plain(n, ranks, rank);
    plain.set_epoch(epoch);
    plain.reset();
    return sorted_concat(drain(plain, 1000));
}

// The indices rank `rank` of `ranks` gets from libtorch's distributed sampler in an epoch, in
// the order it hands them out: what the balanced sampler pushes into its balancer.
index_batch inner_order(std::size_t n, std::size_t ranks, std::size_t rank, std::size_t epoch) {
    DistributedRandomSampler plain(n, ranks, rank);
    plain.set_epoch(epoch);
    plain.reset();
    index_batch all;
    for (const index_batch& b : drain(plain, 1000)) all.insert(all.end(), b.begin(), b.end());
    return all;
}

// The batches balancer `b` makes of `indices`, pushed in this order, then finished and drained:
// what the sampler must hand out of an epoch it runs through that balancer.
template <class Balancer>
std::vector<index_batch> feed(Balancer& b, const index_batch& indices) {
    std::vector<index_batch> out;
    const auto take = [&] {
        while (const auto batch = b.pop()) out.emplace_back(batch->begin(), batch->end());
    };
    for (const std::size_t i : indices) {
        if (!b.can_push()) take();
        b.push(std::size_t{i});
    }
    b.finish();
    take();
    return out;
}

// The batches one new bcl::balancer with `opt` makes of `indices`, pushed in this order.
template <class Cost>
std::vector<index_batch> direct_batches(const index_batch& indices, const Cost& cost,
                                        const bcl::options& opt) {
    bcl::balancer<std::size_t, Cost> b(cost, opt);
    return feed(b, indices);
}

std::vector<double> costs_of(const index_batch& indices, const length_cost_type& cost) {
    std::vector<double> costs;
    for (const std::size_t i : indices) costs.push_back(cost(i));
    return costs;
}

// `opt` with the epoch's own mean as options::mean_cost, the level the sampler must give the
// balancer of an epoch of these indices when its options::mean_cost is 0.
bcl::options at_epoch_mean(bcl::options opt, const index_batch& indices,
                           const length_cost_type& cost) {
    opt.mean_cost = bcl::stream_mean_cost(indices, cost, opt.cap);
    return opt;
}

// A SequentialSampler that notes how many indices each next() asks for.
class counting_sampler : public SequentialSampler {
public:
    using SequentialSampler::SequentialSampler;
    torch::optional<index_batch> next(std::size_t batch_size) override {
        asked.push_back(batch_size);
        return SequentialSampler::next(batch_size);
    }
    std::vector<std::size_t> asked;
};

torch::Tensor int64_values(const std::vector<std::size_t>& values) {
    const std::vector<std::int64_t> v(values.begin(), values.end());
    return torch::tensor(v, torch::TensorOptions().dtype(torch::kInt64)).reshape({-1});
}

torch::Tensor byte_values(const std::string& bytes) {
    torch::Tensor t = torch::empty({static_cast<std::int64_t>(bytes.size())},
                                   torch::TensorOptions().dtype(torch::kUInt8));
    if (!bytes.empty()) std::memcpy(t.data_ptr<std::uint8_t>(), bytes.data(), bytes.size());
    return t;
}

// An archive as balanced_sampler::save wrote it in format 1 (before the sampler used the epoch's
// mean) or 2 (which added bcl_draw and bcl_mean_cost), after handing out `taken` batches of its
// first epoch (appended to `handed`). This is that version's next() and save(), replayed: its
// balancer ran at options::mean_cost as given (0, the running mean), fed from bulk draws of
// max(buffer, 1024) indices up to a full buffer.
std::string early_archive(std::int64_t format, DistributedRandomSampler inner,
                          const length_cost_type& cost, const bcl::options& opt, std::size_t taken,
                          std::vector<index_batch>& handed) {
    bcl::balancer<std::size_t, length_cost_type> b(cost, opt);
    const std::size_t capacity = bcl::buffer_capacity(opt);
    const std::size_t pull = std::max<std::size_t>(capacity, 1024);
    index_batch staged;
    std::size_t next = 0;
    while (handed.size() < taken) {
        if (const auto batch = b.pop()) {
            handed.emplace_back(batch->begin(), batch->end());
            continue;
        }
        REQUIRE(!b.finished());
        if (next == staged.size()) {
            torch::optional<index_batch> more = inner.next(pull);
            if (!more || more->empty()) {
                b.finish();
                continue;
            }
            staged = std::move(*more);
            next = 0;
        }
        for (std::size_t room = capacity - std::min(capacity, b.buffered());
             room != 0 && next < staged.size(); --room)
            b.push(std::size_t{staged[next++]});
    }
    torch::serialize::OutputArchive out;
    torch::serialize::OutputArchive nested(out.compilation_unit());
    inner.save(nested);
    out.write("inner", nested);
    const auto state = b.save();
    out.write("bcl_format", int64_values({std::size_t(format)}), /*is_buffer=*/true);
    out.write("bcl_balancer_state", byte_values(state.to_bytes()), /*is_buffer=*/true);
    out.write("bcl_pending", int64_values(state.pending), /*is_buffer=*/true);
    out.write("bcl_staged",
              int64_values(index_batch(staged.begin() + std::ptrdiff_t(next), staged.end())),
              /*is_buffer=*/true);
    out.write("bcl_epoch", int64_values({0, taken > 0 ? 1U : 0U, 0}), /*is_buffer=*/true);
    if (format >= 2) {
        out.write("bcl_draw", int64_values({2}), /*is_buffer=*/true);
        out.write("bcl_mean_cost", torch::zeros({1}, torch::kFloat64), /*is_buffer=*/true);
    }
    return archive_bytes(out);
}

double batch_cost(const index_batch& b, const length_cost_type& cost) {
    double sum = 0.0;
    for (const std::size_t i : b) sum += cost(i);
    return sum;
}

// Population coefficient of variation of the costs of the full batches.
double full_batch_cv(const std::vector<index_batch>& batches, const length_cost_type& cost,
                     std::size_t batch_size) {
    bcl::running_stats s;
    for (const index_batch& b : batches)
        if (b.size() == batch_size) s.add(batch_cost(b, cost));
    return s.cv();
}

// The snippet docs/torch.md shows (the test torch_doc_snippet keeps the two identical).
// snippet-begin
template <class Dataset, class TrainStep>
void train(Dataset dataset, const std::vector<std::size_t>& lengths, std::size_t world_size,
           std::size_t rank, std::size_t epochs, TrainStep train_step) {
    // What an index costs to train on: b*L + c*L^2 of its token count L, c/b fitted on the model.
    auto cost = bcl::affine_quadratic(0.0, 1.0, 1.0 / 250,
                                      [&lengths](std::size_t i) { return lengths[i]; });
    // Each rank draws its share of a shuffled epoch and balances it, 8 batches at a time.
    bcl::torch::balanced_sampler sampler(
        torch::data::samplers::DistributedRandomSampler(lengths.size(), world_size, rank), cost,
        bcl::options{.batch_size = 16, .lookahead = 8});
    // The loader asks for the sampler's batch size.
    auto loader = bcl::torch::make_data_loader(std::move(dataset), std::move(sampler));
    for (std::size_t epoch = 0; epoch < epochs; ++epoch) // each begin() starts the next epoch
        for (auto& batch : *loader) train_step(batch);   // 16 examples, the epoch's last the rest
}
// snippet-end

} // namespace

TEST_CASE("torch: through a data loader, 3 ranks over 3 epochs get exact batches of every index "
          "once, equally many on every rank",
          "[torch][loader]") {
    const std::string policy = GENERATE("tumbling", "sliding");
    CAPTURE(policy);
    constexpr std::size_t ranks = 3;
    constexpr std::size_t share = 401; // 25 batches of 16 and one of 1 per rank
    constexpr std::size_t n = ranks * share;
    constexpr std::size_t b = 16;
    const std::vector<std::size_t> lengths = make_lengths(n);
    const bcl::options opt{.batch_size = b, .lookahead = 4, .policy = policy_named(policy)};

    using sampler_type = bcl::torch::balanced_sampler<length_cost_type>;
    using loader_type = torch::data::StatelessDataLoader<index_dataset, sampler_type>;
    std::vector<std::unique_ptr<loader_type>> loaders;
    for (std::size_t r = 0; r < ranks; ++r)
        loaders.push_back(torch::data::make_data_loader(
            index_dataset(n),
            sampler_type(DistributedRandomSampler(n, ranks, r), length_cost(lengths), opt),
            torch::data::DataLoaderOptions().batch_size(b)));

    std::vector<std::vector<index_batch>> previous(ranks);
    for (std::size_t epoch = 0; epoch < 3; ++epoch) {
        CAPTURE(epoch);
        std::vector<index_batch> all_ranks;
        for (std::size_t r = 0; r < ranks; ++r) {
            CAPTURE(r);
            std::vector<index_batch> batches;
            for (index_batch& x : *loaders[r]) batches.push_back(std::move(x));
            REQUIRE(batches.size() == 26);
            for (std::size_t k = 0; k + 1 < batches.size(); ++k) REQUIRE(batches[k].size() == b);
            REQUIRE(batches.back().size() == 1);
            // The rank's indices are its share of this epoch: reset() reached the inner sampler
            // with the epoch, and the balancer neither lost nor repeated one.
            REQUIRE(sorted_concat(batches) == plain_share(n, ranks, r, epoch));
            if (epoch > 0) REQUIRE(batches != previous[r]);
            all_ranks.insert(all_ranks.end(), batches.begin(), batches.end());
            previous[r] = std::move(batches);
        }
        REQUIRE(sorted_concat(all_ranks) == iota(n));
    }
}

TEST_CASE("torch: the batches are balanced: their cost varies far less than the inner sampler's "
          "own batches",
          "[torch][balance]") {
    const std::string policy = GENERATE("tumbling", "sliding");
    CAPTURE(policy);
    constexpr std::size_t n = 4096;
    constexpr std::size_t b = 16;
    const std::vector<std::size_t> lengths = make_lengths(n, /*heavy=*/false);
    const auto cost = length_cost(lengths);
    bcl::torch::balanced_sampler sampler(
        DistributedRandomSampler(n), cost,
        bcl::options{.batch_size = b, .lookahead = 8, .policy = policy_named(policy)});
    const std::vector<index_batch> balanced = drain(sampler, b);
    DistributedRandomSampler plain_sampler(n);
    const std::vector<index_batch> plain = drain(plain_sampler, b);
    REQUIRE(balanced.size() == n / b);
    REQUIRE(sorted_concat(balanced) == iota(n));
    // Item costs vary by a factor of 100 (L + L^2/256 from 10 to 400 tokens), so plain batches
    // of 16 vary by well over 10%. Tumbling evens out each window of K = 8 batches around the
    // window's own mean, which still varies about 1/sqrt(K) as much as a plain batch: the cv
    // falls to about a third. Sliding balances toward the long-run mean: far less is left.
    const double plain_cv = full_batch_cv(plain, cost, b);
    const double balanced_cv = full_batch_cv(balanced, cost, b);
    CAPTURE(plain_cv, balanced_cv);
    REQUIRE(plain_cv > 0.1);
    REQUIRE(balanced_cv < plain_cv / (policy == "tumbling" ? 2.0 : 4.0));
}

TEST_CASE("torch: an epoch of 2^63 or more is refused where it enters, changing nothing",
          "[torch][epoch]") {
    constexpr std::size_t n = 40;
    const std::vector<std::size_t> lengths = make_lengths(n);
    const bcl::options opt{.batch_size = 4, .lookahead = 2};
    bcl::torch::balanced_sampler sampler(DistributedRandomSampler(n, 2, 1), length_cost(lengths),
                                         opt);
    REQUIRE_THROWS_WITH(sampler.set_epoch(std::size_t{1} << 63),
                        Contains("the epoch must be below 2^63 (got 9223372036854775808)"));
    REQUIRE(sampler.epoch() == 0);
    sampler.set_epoch((std::size_t{1} << 63) - 1);
    sampler.reset();
    REQUIRE(sampler.next(4).has_value());
    REQUIRE_THROWS_WITH(sampler.reset(), Contains("the next epoch must be below 2^63"));
    REQUIRE(sampler.epoch() == (std::size_t{1} << 63) - 1);
}

TEST_CASE("torch: an inner sampler at an epoch of 2^63 or more is refused at construction",
          "[torch][epoch]") {
    const std::vector<std::size_t> lengths = make_lengths(40);
    DistributedRandomSampler inner(40, 2, 1);
    inner.set_epoch(std::size_t{1} << 63);
    REQUIRE_THROWS_WITH(bcl::torch::balanced_sampler(inner, length_cost(lengths),
                                                     bcl::options{.batch_size = 4, .lookahead = 2}),
                        Contains("the inner sampler's epoch must be below 2^63"));
    inner.set_epoch((std::size_t{1} << 63) - 1);
    const bcl::torch::balanced_sampler largest(inner, length_cost(lengths),
                                               bcl::options{.batch_size = 4, .lookahead = 2});
    REQUIRE(largest.epoch() == (std::size_t{1} << 63) - 1);
}

TEST_CASE("torch: epochs: reset() starts the next epoch and reaches the inner sampler; "
          "set_epoch() chooses the epoch the next reset() starts",
          "[torch][epoch]") {
    constexpr std::size_t n = 300;
    constexpr std::size_t b = 8;
    const std::vector<std::size_t> lengths = make_lengths(n);
    const bcl::options opt{.batch_size = b, .lookahead = 4};
    bcl::torch::balanced_sampler sampler(DistributedRandomSampler(n, 2, 1), length_cost(lengths),
                                         opt);
    REQUIRE(sampler.epoch() == 0);
    sampler.reset(); // as a loader's first begin(): nothing handed out, epoch 0 again
    REQUIRE(sampler.epoch() == 0);
    REQUIRE(sampler.inner().epoch() == 0);
    REQUIRE(sorted_concat(drain(sampler, b)) == plain_share(n, 2, 1, 0));
    sampler.reset();
    REQUIRE(sampler.epoch() == 1);
    REQUIRE(sorted_concat(drain(sampler, b)) == plain_share(n, 2, 1, 1));
    sampler.set_epoch(7);
    REQUIRE(sampler.epoch() == 7);
    sampler.reset();
    REQUIRE(sampler.epoch() == 7);
    REQUIRE(sampler.inner().epoch() == 7);
    REQUIRE(sorted_concat(drain(sampler, b)) == plain_share(n, 2, 1, 7));
    // A reset partway through an epoch drops its rest and starts the next one whole.
    sampler.reset();
    REQUIRE(sampler.epoch() == 8);
    REQUIRE(sampler.next(b).has_value());
    sampler.reset();
    REQUIRE(sampler.epoch() == 9);
    REQUIRE(sorted_concat(drain(sampler, b)) == plain_share(n, 2, 1, 9));
}

TEST_CASE("torch: any libtorch index sampler can be the inner one", "[torch][inner]") {
    constexpr std::size_t n = 250;
    constexpr std::size_t b = 16;
    const std::vector<std::size_t> lengths = make_lengths(n);
    const bcl::options opt{.batch_size = b, .lookahead = 4};
    const auto check = [&](auto inner, const index_batch& expected) {
        bcl::torch::balanced_sampler sampler(std::move(inner), length_cost(lengths), opt);
        const std::vector<index_batch> batches = drain(sampler, b);
        REQUIRE(batches.size() == (expected.size() + b - 1) / b);
        for (std::size_t k = 0; k + 1 < batches.size(); ++k) REQUIRE(batches[k].size() == b);
        REQUIRE(sorted_concat(batches) == expected);
    };
    torch::manual_seed(3);
    check(RandomSampler(static_cast<std::int64_t>(n)), iota(n));
    check(SequentialSampler(n), iota(n));
    // Rank 1 of 2 over 250 indices: 125 of them, 125..249.
    index_batch upper(125);
    std::iota(upper.begin(), upper.end(), std::size_t{125});
    check(DistributedSequentialSampler(n, 2, 1), upper);
}

TEST_CASE("torch: drop_last drops the epoch's last n mod B indices and every batch is full",
          "[torch][drop_last]") {
    constexpr std::size_t n = 100; // 6 batches of 16, 4 indices over
    constexpr std::size_t b = 16;
    const std::vector<std::size_t> lengths = make_lengths(n);
    bcl::torch::balanced_sampler sampler(SequentialSampler(n), length_cost(lengths),
                                         bcl::options{.batch_size = b,
                                                      .lookahead = 4,
                                                      .drop_last = true,
                                                      .policy = bcl::lookahead_policy::tumbling});
    const std::vector<index_batch> batches = drain(sampler, b);
    REQUIRE(batches.size() == 6);
    for (const index_batch& x : batches) REQUIRE(x.size() == b);
    // Tumbling drops exactly the indices an unbalanced loader would: the last 4 drawn, 96..99.
    REQUIRE(sorted_concat(batches) == iota(96));
}

TEST_CASE("torch: the inner sampler is asked for indices in bulk", "[torch][bulk]") {
    constexpr std::size_t n = 5000;
    constexpr std::size_t b = 16;
    const std::vector<std::size_t> lengths = make_lengths(n);
    const bcl::options opt{.batch_size = b, .lookahead = 8};
    bcl::torch::balanced_sampler sampler(counting_sampler(n), length_cost(lengths), opt);
    REQUIRE(drain(sampler, b).size() == (n + b - 1) / b);
    const std::vector<std::size_t>& asked = sampler.inner().asked;
    CAPTURE(asked);
    // Each request covers at least the balancer's whole buffer (2 windows of 8 batches of 16),
    // so there are at most n / 256 of them, plus the one that finds the epoch over.
    for (const std::size_t k : asked) REQUIRE(k >= bcl::buffer_capacity(opt));
    REQUIRE(asked.size() <= n / bcl::buffer_capacity(opt) + 1);
}

TEST_CASE("torch: a sampler restored from an archive hands out exactly the batches the saved "
          "one would have, mid-window and across epochs, at the epoch's mean or a fixed one",
          "[torch][resume]") {
    const std::string policy = GENERATE("tumbling", "sliding");
    // 0: each epoch at its own mean, which the archive must carry; 1500: fixed, about three
    // times the mean.
    const double mean_cost = GENERATE(0.0, 1500.0);
    CAPTURE(policy, mean_cost);
    constexpr std::size_t n = 2 * 420; // rank 1 of 2: 420 indices, 26 batches of 16 and one of 4
    constexpr std::size_t b = 16;
    const std::vector<std::size_t> lengths = make_lengths(n);
    const bcl::options opt{
        .batch_size = b, .lookahead = 4, .policy = policy_named(policy), .mean_cost = mean_cost};
    const auto make = [&] {
        return bcl::torch::balanced_sampler(DistributedRandomSampler(n, 2, 1), length_cost(lengths),
                                            opt);
    };

    // The uninterrupted run: three epochs.
    auto reference = make();
    std::vector<std::vector<index_batch>> epochs;
    std::vector<double> levels;
    for (std::size_t e = 0; e < 3; ++e) {
        if (e > 0) reference.reset();
        epochs.push_back(drain(reference, b));
        levels.push_back(reference.mean_cost());
        REQUIRE(epochs.back().size() == 27);
    }
    // Each epoch's mean is its own (so a restored sampler must carry it, not recompute one).
    if (mean_cost == 0.0) REQUIRE((levels[0] != levels[1] && levels[1] != levels[2]));

    // Save after `taken` batches of `epoch`: before the first (the epoch not drawn yet),
    // mid-window (windows of 4 batches), at a window's end, before and after the epoch's last
    // batch, after a reset before the next epoch is drawn, and in a later epoch.
    struct point {
        std::size_t epoch;
        std::size_t taken;
    };
    const point at = GENERATE(point{0, 0}, point{0, 3}, point{0, 4}, point{0, 9}, point{0, 26},
                              point{0, 27}, point{1, 0}, point{1, 13});
    CAPTURE(at.epoch, at.taken);
    auto saved = make();
    for (std::size_t e = 0; e < at.epoch; ++e) {
        drain(saved, b);
        saved.reset();
    }
    for (std::size_t k = 0; k < at.taken; ++k) REQUIRE(saved.next(b) == epochs[at.epoch][k]);
    torch::serialize::OutputArchive out;
    saved.save(out);
    std::ostringstream bytes;
    out.save_to(bytes);

    // A sampler constructed alike, then moved elsewhere, so load() must overwrite its state.
    auto restored = make();
    restored.set_epoch(5);
    restored.reset();
    REQUIRE(restored.next(b).has_value());
    torch::serialize::InputArchive in;
    std::istringstream stream(bytes.str());
    in.load_from(stream);
    restored.load(in);

    REQUIRE(restored.epoch() == at.epoch);
    REQUIRE(restored.mean_cost() == saved.mean_cost());
    const std::vector<index_batch>& rest = epochs[at.epoch];
    REQUIRE(drain(restored, b) ==
            std::vector<index_batch>(rest.begin() + std::ptrdiff_t(at.taken), rest.end()));
    REQUIRE(restored.mean_cost() == levels[at.epoch]);
    for (std::size_t e = at.epoch + 1; e < epochs.size(); ++e) {
        restored.reset();
        REQUIRE(drain(restored, b) == epochs[e]);
        REQUIRE(restored.mean_cost() == levels[e]);
    }
}

TEST_CASE("torch: torch::save and torch::load carry the sampler through a file, with any inner "
          "sampler",
          "[torch][resume]") {
    constexpr std::size_t n = 500;
    constexpr std::size_t b = 16;
    const std::vector<std::size_t> lengths = make_lengths(n);
    const bcl::options opt{.batch_size = b, .lookahead = 8};
    torch::manual_seed(11);
    bcl::torch::balanced_sampler saved(RandomSampler(static_cast<std::int64_t>(n)),
                                       length_cost(lengths), opt);
    for (std::size_t k = 0; k < 11; ++k) REQUIRE(saved.next(b).has_value());
    const std::filesystem::path file =
        std::filesystem::temp_directory_path() / "bcl_torch_sampler_test.pt";
    torch::save(saved, file.string());
    // A fresh RandomSampler draws another permutation; load() replaces it with the saved one.
    bcl::torch::balanced_sampler restored(RandomSampler(static_cast<std::int64_t>(n)),
                                          length_cost(lengths), opt);
    torch::load(restored, file.string());
    std::filesystem::remove(file);
    REQUIRE(drain(restored, b) == drain(saved, b));
}

TEST_CASE("torch: load() refuses an archive saved under other options, or by another sampler",
          "[torch][resume]") {
    constexpr std::size_t n = 200;
    const std::vector<std::size_t> lengths = make_lengths(n);
    bcl::torch::balanced_sampler saved(DistributedRandomSampler(n), length_cost(lengths),
                                       bcl::options{.batch_size = 16, .lookahead = 4});
    REQUIRE(saved.next(16).has_value());
    torch::serialize::OutputArchive out;
    saved.save(out);
    std::ostringstream bytes;
    out.save_to(bytes);
    const auto archive = [&](const std::string& data) {
        auto in = std::make_unique<torch::serialize::InputArchive>();
        std::istringstream stream(data);
        in->load_from(stream);
        return in;
    };

    bcl::torch::balanced_sampler other(DistributedRandomSampler(n), length_cost(lengths),
                                       bcl::options{.batch_size = 8, .lookahead = 4});
    const auto before = other.inner().index();
    REQUIRE_THROWS_MATCHES(other.load(*archive(bytes.str())), bcl::error,
                           Catch::Matchers::Predicate<bcl::error>([](const bcl::error& e) {
                               return std::string(e.what()).find("batch_size") != std::string::npos;
                           }));
    // Refused before anything changed: the inner sampler was not loaded either.
    REQUIRE(other.inner().index() == before);

    // An archive of a sampler at the epoch's mean does not load into one at a fixed mean cost,
    // nor the other way round, even where the fixed level is the epoch's mean itself.
    bcl::torch::balanced_sampler fixed(
        DistributedRandomSampler(n), length_cost(lengths),
        bcl::options{.batch_size = 16, .lookahead = 4, .mean_cost = saved.mean_cost()});
    REQUIRE(saved.mean_cost() > 0.0);
    REQUIRE_THROWS_WITH(fixed.load(*archive(bytes.str())), Contains("options::mean_cost is 0"));
    REQUIRE(fixed.mean_cost() == saved.mean_cost());
    REQUIRE(fixed.next(16).has_value());
    bcl::torch::balanced_sampler at_mean(DistributedRandomSampler(n), length_cost(lengths),
                                         bcl::options{.batch_size = 16, .lookahead = 4});
    REQUIRE_THROWS_WITH(at_mean.load(*archive(saved_bytes(fixed))),
                        Contains("but this one's is 0"));
    REQUIRE(at_mean.mean_cost() == 0.0);

    // Another bcl_format (a later one, say) is refused by name.
    torch::serialize::OutputArchive later;
    later.write("bcl_format", byte_values("bcl::torch::balanced_sampler/5"), /*is_buffer=*/true);
    REQUIRE_THROWS_WITH(at_mean.load(*archive(archive_bytes(later))),
                        Contains("bcl_format is \"bcl::torch::balanced_sampler/5\", not "
                                 "\"bcl::torch::balanced_sampler/4\""));

    // An archive of libtorch's own sampler has none of the balancer's state.
    DistributedRandomSampler plain(n);
    torch::serialize::OutputArchive plain_out;
    plain.save(plain_out);
    std::ostringstream plain_bytes;
    plain_out.save_to(plain_bytes);
    REQUIRE_THROWS(other.load(*archive(plain_bytes.str())));
}

TEST_CASE("torch: the batch size is given once, to the sampler: bcl::torch::make_data_loader "
          "takes it, and a loader asking for another size is an error naming both",
          "[torch][errors]") {
    constexpr std::size_t n = 100;
    const std::vector<std::size_t> lengths = make_lengths(n);
    const bcl::options opt{.batch_size = 16, .lookahead = 4};
    bcl::torch::balanced_sampler sampler(SequentialSampler(n), length_cost(lengths), opt);
    REQUIRE_THROWS_AS(sampler.next(8), bcl::error);
    REQUIRE_THROWS_WITH(sampler.next(8),
                        Contains("a batch of 8 indices") && Contains("batch_size is 16"));
    // Nothing was consumed: the sampler still hands out all 100 indices.
    REQUIRE(sorted_concat(drain(sampler, 16)) == iota(n));

    // A data loader asking for other batch sizes gets the same error at its first batch.
    auto loader = torch::data::make_data_loader(
        index_dataset(n),
        bcl::torch::balanced_sampler(SequentialSampler(n), length_cost(lengths), opt),
        torch::data::DataLoaderOptions().batch_size(32));
    const auto iterate = [&] {
        for (index_batch& x : *loader) (void)x;
    };
    REQUIRE_THROWS_WITH(iterate(),
                        Contains("a batch of 32 indices") && Contains("batch_size is 16"));

    // bcl::torch::make_data_loader takes the sampler's batch size, and refuses options that ask
    // for another before a loader exists.
    auto given_once = bcl::torch::make_data_loader(
        index_dataset(n),
        bcl::torch::balanced_sampler(SequentialSampler(n), length_cost(lengths), opt));
    std::vector<index_batch> batches;
    for (index_batch& x : *given_once) batches.push_back(std::move(x));
    REQUIRE(batches.size() == 7);
    REQUIRE(sorted_concat(batches) == iota(n));
    REQUIRE_THROWS_WITH(
        bcl::torch::make_data_loader(
            index_dataset(n),
            bcl::torch::balanced_sampler(SequentialSampler(n), length_cost(lengths), opt),
            torch::data::DataLoaderOptions(32).workers(0)),
        Contains("batches of 32 indices") && Contains("batch size is 16"));
}

TEST_CASE("torch: a bad cost is an error naming the dataset index, and the index is kept",
          "[torch][errors]") {
    constexpr std::size_t n = 100;
    const double bad = GENERATE(std::numeric_limits<double>::quiet_NaN(), -1.0, 1e200);
    // 0: the epoch's mean, which meets the bad cost before any index is pushed; 1: fixed, so the
    // balancer's push meets it.
    const double mean_cost = GENERATE(0.0, 1.0);
    CAPTURE(bad, mean_cost);
    // Index 42 costs `bad` until it is mended; every other index costs 1 (index 0 costs 3, so
    // the rounds have something to balance).
    auto mended = std::make_shared<bool>(false);
    const auto cost = [bad, mended](std::size_t i) {
        return i == 42 && !*mended ? bad : i == 0 ? 3.0 : 1.0;
    };
    const bcl::options opt{.batch_size = 16, .lookahead = 2, .mean_cost = mean_cost};
    bcl::torch::balanced_sampler sampler(SequentialSampler(n), cost, opt);
    REQUIRE_THROWS_AS(sampler.next(16), bcl::error);
    // Asking again meets the same index again: it was neither skipped nor lost.
    REQUIRE_THROWS_WITH(sampler.next(16), Contains("dataset index 42:"));
    REQUIRE(sampler.mean_cost() == mean_cost);
    // Once it costs what it should, every index comes out once, in the batches of a sampler
    // that never met the bad cost: nothing drawn before the error was lost or pushed twice.
    *mended = true;
    const std::vector<index_batch> batches = drain(sampler, 16);
    REQUIRE(sorted_concat(batches) == iota(n));
    bcl::torch::balanced_sampler fresh(SequentialSampler(n), cost, opt);
    REQUIRE(batches == drain(fresh, 16));

    // What the estimator itself throws propagates unchanged.
    const auto throwing = [](std::size_t i) -> double {
        if (i == 5) throw std::runtime_error("no length for item 5");
        return 1.0;
    };
    bcl::torch::balanced_sampler other(SequentialSampler(n), throwing,
                                       bcl::options{.batch_size = 16, .lookahead = 8});
    REQUIRE_THROWS_WITH(other.next(16), "no length for item 5");
}

TEST_CASE("torch: the snippet of docs/torch.md trains every rank on exact batches",
          "[torch][docs]") {
    constexpr std::size_t n = 2 * 200; // each rank: 12 batches of 16 and one of 8
    const std::vector<std::size_t> lengths = make_lengths(n);
    for (std::size_t rank = 0; rank < 2; ++rank) {
        std::vector<std::size_t> sizes;
        index_batch seen;
        train(index_dataset(n), lengths, 2, rank, 2, [&](const index_batch& x) {
            sizes.push_back(x.size());
            seen.insert(seen.end(), x.begin(), x.end());
        });
        REQUIRE(sizes.size() == 2 * 13);
        REQUIRE(std::count(sizes.begin(), sizes.end(), std::size_t{16}) == 2 * 12);
        std::sort(seen.begin(), seen.end());
        index_batch expected = plain_share(n, 2, rank, 0);
        const index_batch second = plain_share(n, 2, rank, 1);
        expected.insert(expected.end(), second.begin(), second.end());
        std::sort(expected.begin(), expected.end());
        REQUIRE(seen == expected);
    }
}

TEST_CASE("torch: with mean_cost 0 every epoch's balancer aims at the epoch's own mean cost, "
          "under the cap, not at its running mean; drained epochs carry the balancer on",
          "[torch][mean_cost]") {
    const std::string policy = GENERATE("sliding", "tumbling");
    const std::string cap = GENERATE("none", "fixed", "quantile");
    CAPTURE(policy, cap);
    constexpr std::size_t n = 2 * 420; // rank 1 of 2: 420 indices, 7 rounds of 64 and the rest
    constexpr std::size_t b = 16;
    const std::vector<std::size_t> lengths = make_lengths(n); // every 37th item 600 tokens
    const auto cost = length_cost(lengths);
    bcl::options opt{.batch_size = b, .lookahead = 4, .policy = policy_named(policy)};
    if (cap == "fixed") opt.cap = {.kind = bcl::cap_kind::fixed, .value = 1200.0};
    if (cap == "quantile") opt.cap = {.kind = bcl::cap_kind::quantile, .quantile = 0.95};
    bcl::torch::balanced_sampler sampler(DistributedRandomSampler(n, 2, 1), cost, opt);
    // One balancer over the epochs, each drained and followed by next_epoch() at the next
    // epoch's mean: what the sampler must run.
    std::optional<bcl::balancer<std::size_t, length_cost_type>> carried;
    for (std::size_t epoch = 0; epoch < 3; ++epoch) {
        CAPTURE(epoch);
        if (epoch > 0) sampler.reset();
        REQUIRE(sampler.mean_cost() == 0.0); // the epoch is not drawn yet
        const index_batch order = inner_order(n, 2, 1, epoch);
        // The epoch's mean as the cap clips it, computed here apart from the library: a fixed
        // cap clips at its value (1200 clips the 600-token items, 2006), a quantile cap at the
        // 95th percentile of the epoch's costs by nearest rank (the 399th smallest of 420).
        std::vector<double> costs = costs_of(order, cost);
        double clip = HUGE_VAL;
        if (cap == "fixed") clip = 1200.0;
        if (cap == "quantile") {
            std::vector<double> sorted = costs;
            std::sort(sorted.begin(), sorted.end());
            clip = sorted[399 - 1];
        }
        double sum = 0.0;
        for (const double c : costs) sum += std::min(c, clip);
        const double expected = sum / static_cast<double>(costs.size());

        const std::vector<index_batch> batches = drain(sampler, b);
        REQUIRE(sampler.mean_cost() == Approx(expected).epsilon(1e-12));
        // The epoch's batches are those of the balancer carried over the epochs, at that level.
        const bcl::options at_mean = at_epoch_mean(opt, order, cost);
        REQUIRE(sampler.mean_cost() == at_mean.mean_cost);
        if (carried)
            carried->next_epoch(at_mean.mean_cost);
        else
            carried.emplace(cost, at_mean);
        REQUIRE(batches == feed(*carried, order));
        // Sliding aims at the level: its running mean over these heavy-tailed costs gives other
        // batches, so the comparison above tells the two apart.
        if (policy == "sliding") REQUIRE(batches != direct_batches(order, cost, opt));
    }
}

TEST_CASE("torch: a drained epoch carries its balancer into the next, what it learned kept; an "
          "epoch left partway starts a new one",
          "[torch][carry]") {
    const std::string policy = GENERATE("sliding", "tumbling");
    const double mean_cost = GENERATE(0.0, 1500.0); // the epoch's own mean, or a fixed one
    CAPTURE(policy, mean_cost);
    constexpr std::size_t n = 2 * 420; // rank 1 of 2: 420 indices, 26 batches of 16 and one of 4
    constexpr std::size_t b = 16;
    const std::vector<std::size_t> lengths = make_lengths(n);
    const auto cost = length_cost(lengths);
    // A quantile cap that a new balancer applies only after 200 indices: one carried on applies
    // it at once, so its batches tell the two apart.
    bcl::options opt{
        .batch_size = b, .lookahead = 4, .policy = policy_named(policy), .mean_cost = mean_cost};
    opt.cap = {.kind = bcl::cap_kind::quantile, .quantile = 0.9, .warmup = 200};
    const auto level = [&](const index_batch& order) {
        return mean_cost > 0.0 ? mean_cost : at_epoch_mean(opt, order, cost).mean_cost;
    };
    const auto at = [&](const index_batch& order) {
        bcl::options o = opt;
        o.mean_cost = level(order);
        return o;
    };
    bcl::torch::balanced_sampler sampler(DistributedRandomSampler(n, 2, 1), cost, opt);
    std::vector<index_batch> order;
    for (std::size_t e = 0; e < 5; ++e) order.push_back(inner_order(n, 2, 1, e));

    // The reference: one balancer that saw epochs 0, 1 and 2 whole, with next_epoch() between.
    bcl::balancer<std::size_t, length_cost_type> carried(cost, at(order[0]));
    const std::vector<index_batch> epoch0 = feed(carried, order[0]);
    carried.next_epoch(level(order[1]));
    const std::vector<index_batch> epoch1 = feed(carried, order[1]);
    carried.next_epoch(level(order[2]));
    const std::vector<index_batch> epoch2 = feed(carried, order[2]);
    carried.next_epoch(level(order[3]));
    const std::vector<index_batch> epoch3 = feed(carried, order[3]);

    // Epoch 0 drained through to the end (next() returns nothing), as a data loader does.
    REQUIRE(drain(sampler, b) == epoch0);
    sampler.reset();
    const std::vector<index_batch> got1 = drain(sampler, b);
    REQUIRE(got1 == epoch1);
    // A new balancer would balance epoch 1 otherwise (the cap still warming up).
    REQUIRE(got1 != direct_batches(order[1], cost, at(order[1])));
    // Epoch 2: its 27 batches taken, and no next() after them: all of it was handed out, so it
    // carries on just the same.
    sampler.reset();
    for (const index_batch& expected : epoch2) REQUIRE(sampler.next(b) == expected);
    sampler.reset();
    // Epoch 3 left partway: 5 batches, then the next epoch starts a new balancer.
    for (std::size_t k = 0; k < 5; ++k) REQUIRE(sampler.next(b) == epoch3[k]);
    sampler.reset();
    REQUIRE(sampler.epoch() == 4);
    REQUIRE(drain(sampler, b) == direct_batches(order[4], cost, at(order[4])));
}

TEST_CASE("torch: a fixed mean_cost is every epoch's level, and the indices are drawn in bulk as "
          "the balancer needs them; with mean_cost 0 the first next() draws the epoch whole",
          "[torch][mean_cost][bulk]") {
    constexpr std::size_t n = 5000;
    constexpr std::size_t b = 16;
    const std::vector<std::size_t> lengths = make_lengths(n);
    const auto cost = length_cost(lengths);
    const bcl::options opt{.batch_size = b, .lookahead = 8, .mean_cost = 1500.0};
    const bcl::options at_mean = at_epoch_mean(opt, iota(n), cost);
    CAPTURE(at_mean.mean_cost);
    REQUIRE(at_mean.mean_cost < 1000.0); // so the fixed level of 1500 is far from the mean

    bcl::torch::balanced_sampler sampler(counting_sampler(n), cost, opt);
    REQUIRE(sampler.mean_cost() == 1500.0);
    std::vector<index_batch> batches{*sampler.next(b)};
    // One bulk draw (1024 indices, more than the buffer of 256) feeds the first rounds.
    REQUIRE(sampler.inner().asked == std::vector<std::size_t>{1024});
    for (index_batch& x : drain(sampler, b)) batches.push_back(std::move(x));
    REQUIRE(sampler.mean_cost() == 1500.0);
    bcl::balancer<std::size_t, length_cost_type> carried(cost, opt);
    REQUIRE(batches == feed(carried, iota(n)));
    REQUIRE(batches != direct_batches(iota(n), cost, at_mean));
    sampler.reset(); // a SequentialSampler hands out the same indices every epoch
    REQUIRE(sampler.mean_cost() == 1500.0);
    carried.next_epoch(); // the epoch was drained: its balancer carries on, at the same level
    REQUIRE(drain(sampler, b) == feed(carried, iota(n)));

    bcl::options epoch_mean = opt;
    epoch_mean.mean_cost = 0.0;
    bcl::torch::balanced_sampler whole(counting_sampler(n), cost, epoch_mean);
    REQUIRE(whole.mean_cost() == 0.0);
    REQUIRE(whole.inner().asked.empty()); // constructing it draws nothing
    std::vector<index_batch> whole_batches{*whole.next(b)};
    // 4 draws of 1024 and one of 904 indices, and the one that finds the epoch over; none after.
    REQUIRE(whole.inner().asked == std::vector<std::size_t>(6, 1024));
    REQUIRE(whole.mean_cost() == at_mean.mean_cost);
    for (index_batch& x : drain(whole, b)) whole_batches.push_back(std::move(x));
    REQUIRE(whole.inner().asked.size() == 6);
    REQUIRE(whole_batches == direct_batches(iota(n), cost, at_mean));
}

namespace {

// An estimator that throws for dataset index 7 while *failing.
struct flaky_cost {
    length_cost_type cost;
    std::shared_ptr<bool> failing;
    double operator()(std::size_t i) const {
        if (*failing && i == 7) throw std::runtime_error("index 7 is unavailable");
        return cost(i);
    }
};

// A SequentialSampler that throws, while *failing, when asked for indices past the first 1024.
class failing_sampler : public SequentialSampler {
public:
    failing_sampler(std::size_t n, std::shared_ptr<bool> failing)
        : SequentialSampler(n), m_failing(std::move(failing)) {}
    torch::optional<index_batch> next(std::size_t batch_size) override {
        if (*m_failing && index() >= 1024) throw std::runtime_error("the storage is offline");
        return SequentialSampler::next(batch_size);
    }

private:
    std::shared_ptr<bool> m_failing;
};

} // namespace

TEST_CASE("torch: a failure while an epoch is drawn loses no index: asked again, or saved and "
          "restored, the sampler hands out the batches of one that never failed",
          "[torch][mean_cost][errors][resume]") {
    const std::string failing = GENERATE("estimator", "inner sampler");
    CAPTURE(failing);
    constexpr std::size_t n = 3000; // three bulk draws of 1024
    constexpr std::size_t b = 16;
    const std::vector<std::size_t> lengths = make_lengths(n);
    const auto cost = length_cost(lengths);
    const bcl::options opt{.batch_size = b, .lookahead = 4};
    const auto estimator_fails = std::make_shared<bool>(failing == "estimator");
    const auto inner_fails = std::make_shared<bool>(failing == "inner sampler");
    const auto make = [&] {
        return bcl::torch::balanced_sampler(failing_sampler(n, inner_fails),
                                            flaky_cost{cost, estimator_fails}, opt);
    };
    const std::string message =
        failing == "estimator" ? "index 7 is unavailable" : "the storage is offline";

    auto sampler = make();
    REQUIRE_THROWS_WITH(sampler.next(b), message);
    REQUIRE_THROWS_WITH(sampler.next(b), message); // still failing, still nothing lost
    REQUIRE(sampler.mean_cost() == 0.0);
    const std::string bytes = saved_bytes(sampler);
    *estimator_fails = false;
    *inner_fails = false;

    const std::vector<index_batch> expected =
        direct_batches(iota(n), cost, at_epoch_mean(opt, iota(n), cost));
    REQUIRE(drain(sampler, b) == expected);
    auto restored = make();
    load_bytes(restored, bytes);
    REQUIRE(drain(restored, b) == expected);
}

TEST_CASE("torch: an archive of format 1 or 2, written by an earlier bcl, is refused: it cannot be "
          "verified; the sampler is unchanged, and the epoch started over runs at its own mean",
          "[torch][resume]") {
    const std::int64_t format = GENERATE(1, 2);
    const std::string policy = GENERATE("sliding", "tumbling");
    // Batches handed out before the save: none, mid-window, and past the first bulk draw's
    // pushes.
    const std::size_t taken = GENERATE(0, 3, 50);
    CAPTURE(format, policy, taken);
    constexpr std::size_t n = 2 * 1500; // rank 1 of 2: 1500 indices, more than a bulk of 1024
    constexpr std::size_t b = 16;
    const std::vector<std::size_t> lengths = make_lengths(n);
    const auto cost = length_cost(lengths);
    const bcl::options opt{.batch_size = b, .lookahead = 4, .policy = policy_named(policy)};
    const auto make = [&] {
        return bcl::torch::balanced_sampler(DistributedRandomSampler(n, 2, 1), cost, opt);
    };

    // Epoch 0 as the early sampler ran it: one balancer at the running mean (mean_cost 0).
    const index_batch order0 = inner_order(n, 2, 1, 0);
    std::vector<index_batch> handed;
    const std::string archive =
        early_archive(format, DistributedRandomSampler(n, 2, 1), cost, opt, taken, handed);
    const std::vector<index_batch> epoch0 = direct_batches(order0, cost, opt);
    REQUIRE(handed ==
            std::vector<index_batch>(epoch0.begin(), epoch0.begin() + std::ptrdiff_t(taken)));

    // A sampler two batches into its first epoch refuses it, and carries on as its twin does.
    auto restored = make();
    auto twin = make();
    for (auto* s : {&restored, &twin}) REQUIRE(s->next(b).has_value());
    REQUIRE(restored.next(b) == twin.next(b));
    REQUIRE_THROWS_AS(load_bytes(restored, archive), bcl::error);
    REQUIRE_THROWS_WITH(load_bytes(restored, archive),
                        Contains("bcl_format is " + std::to_string(format)) &&
                            Contains("earlier bcl") && Contains("cannot be verified") &&
                            Contains("start the epoch it was saved in over"));
    REQUIRE(restored.epoch() == twin.epoch());
    REQUIRE(restored.mean_cost() == twin.mean_cost());
    REQUIRE(drain(restored, b) == drain(twin, b));

    // What the message asks for: the epoch it was saved in, started over, at its own mean (by
    // the balancer of the epoch 0 it drained above, carried on).
    restored.set_epoch(0);
    restored.reset();
    const bcl::options at_mean0 = at_epoch_mean(opt, order0, cost);
    bcl::balancer<std::size_t, length_cost_type> carried(cost, at_mean0);
    (void)feed(carried, order0); // the epoch 0 it drained
    carried.next_epoch(at_mean0.mean_cost);
    REQUIRE(drain(restored, b) == feed(carried, order0));
}

TEST_CASE("torch: an empty epoch hands out no batch", "[torch][mean_cost]") {
    const double mean_cost = GENERATE(0.0, 50.0);
    CAPTURE(mean_cost);
    const std::vector<std::size_t> lengths = make_lengths(10);
    const bcl::options opt{.batch_size = 16, .lookahead = 4, .mean_cost = mean_cost};
    bcl::torch::balanced_sampler sampler(SequentialSampler(0), length_cost(lengths), opt);
    for (std::size_t epoch = 0; epoch < 2; ++epoch) {
        if (epoch > 0) sampler.reset();
        REQUIRE_FALSE(sampler.next(16).has_value());
        REQUIRE_FALSE(sampler.next(16).has_value());
        REQUIRE(sampler.mean_cost() == mean_cost);
        REQUIRE(sampler.stats().batches == 0);
    }
    auto loader = torch::data::make_data_loader(
        index_dataset(0),
        bcl::torch::balanced_sampler(SequentialSampler(0), length_cost(lengths), opt),
        torch::data::DataLoaderOptions().batch_size(16));
    std::size_t batches = 0;
    for (index_batch& x : *loader) batches += x.empty() ? 0 : 1;
    REQUIRE(batches == 0);
}

TEST_CASE("torch: over epochs, seeds and ranks, under both policies, every index comes out once "
          "in exact batches, as many as the share asks",
          "[torch][contract]") {
    const std::string policy = GENERATE("tumbling", "sliding");
    const bool drop_last = GENERATE(false, true);
    CAPTURE(policy, drop_last);
    constexpr std::size_t b = 16;
    constexpr std::size_t ranks = 3;
    for (std::size_t seed = 1; seed <= 4; ++seed) {
        // Shares that are not multiples of B; for seeds 1, 2 and 4 the distributed sampler pads
        // them with an index or two handed out twice.
        const std::size_t n = 3 * (200 + 37 * seed) + seed;
        const std::size_t rank = seed % ranks;
        CAPTURE(seed, n, rank);
        const std::vector<std::size_t> lengths = make_lengths(n);
        bcl::options opt{.batch_size = b,
                         .lookahead = 2 + seed,
                         .drop_last = drop_last,
                         .seed = seed,
                         .policy = policy_named(policy)};
        if (seed % 2 == 0) opt.cap = {.kind = bcl::cap_kind::quantile, .quantile = 0.9};
        bcl::torch::balanced_sampler sampler(DistributedRandomSampler(n, ranks, rank),
                                             length_cost(lengths), opt);
        sampler.set_epoch(10 * seed);
        for (std::size_t e = 0; e < 4; ++e) {
            CAPTURE(e);
            sampler.reset();
            REQUIRE(sampler.epoch() == 10 * seed + e);
            const index_batch share = plain_share(n, ranks, rank, sampler.epoch());
            const std::vector<index_batch> batches = drain(sampler, b);
            const std::size_t m = share.size();
            REQUIRE(batches.size() == (drop_last ? m / b : (m + b - 1) / b));
            for (std::size_t k = 0; k + 1 < batches.size(); ++k) REQUIRE(batches[k].size() == b);
            REQUIRE(batches.back().size() == (drop_last || m % b == 0 ? b : m % b));
            // The share itself may hold an index twice (a distributed sampler pads the shares
            // to equal size): each comes out as often as the inner sampler handed it out.
            const index_batch out = sorted_concat(batches);
            if (drop_last) {
                REQUIRE(std::includes(share.begin(), share.end(), out.begin(), out.end()));
                REQUIRE(out.size() == m / b * b);
            } else {
                REQUIRE(out == share);
            }
            REQUIRE(sampler.mean_cost() > 0.0);
        }
    }
}
