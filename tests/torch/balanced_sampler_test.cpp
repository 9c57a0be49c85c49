// bcl::torch::balanced_sampler: the README's contract through libtorch's data loader, epochs,
// exact resume through libtorch archives, and bad input as clear errors.

#include <bcl/bcl.hpp>
#include <bcl/torch/balanced_sampler.hpp>

#include <catch2/catch.hpp>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <filesystem>
#include <limits>
#include <memory>
#include <numeric>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace {

using index_batch = std::vector<std::size_t>;
using Catch::Matchers::Contains;
using torch::data::samplers::DistributedRandomSampler;
using torch::data::samplers::DistributedSequentialSampler;
using torch::data::samplers::RandomSampler;
using torch::data::samplers::SequentialSampler;

// A table of token counts: items of 10..400 tokens, scattered by a multiplicative hash, and, if
// `heavy`, every 37th item 600 tokens long.
std::vector<std::size_t> make_lengths(std::size_t n, bool heavy = true) {
    std::vector<std::size_t> lengths(n);
    for (std::size_t i = 0; i < n; ++i)
        lengths[i] = heavy && i % 37 == 0 ? 600 : 10 + (i * 2654435761U) % 391;
    return lengths;
}

// The cost of a dataset index: its length plus an attention-like quadratic term.
auto length_cost(const std::vector<std::size_t>& lengths) {
    return bcl::affine_quadratic(0.0, 1.0, 1.0 / 256,
                                 [&lengths](std::size_t i) { return lengths.at(i); });
}
using length_cost_type = decltype(length_cost(std::declval<const std::vector<std::size_t>&>()));

// A dataset whose examples are their own indices, so a loader's batches are the sampler's.
class index_dataset : public torch::data::datasets::Dataset<index_dataset, std::size_t> {
public:
    explicit index_dataset(std::size_t n) : m_n(n) {}
    std::size_t get(std::size_t index) override { return index; }
    [[nodiscard]] torch::optional<std::size_t> size() const override { return m_n; }

private:
    std::size_t m_n;
};

template <class Sampler>
std::vector<index_batch> drain(Sampler& sampler, std::size_t batch_size) {
    std::vector<index_batch> out;
    while (torch::optional<index_batch> b = sampler.next(batch_size)) out.push_back(std::move(*b));
    return out;
}

index_batch sorted_concat(const std::vector<index_batch>& batches) {
    index_batch all;
    for (const index_batch& b : batches) all.insert(all.end(), b.begin(), b.end());
    std::sort(all.begin(), all.end());
    return all;
}

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

bcl::lookahead_policy policy_named(const std::string& name) {
    return name == "tumbling" ? bcl::lookahead_policy::tumbling : bcl::lookahead_policy::sliding;
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
    auto loader = torch::data::make_data_loader(std::move(dataset), std::move(sampler),
                                                torch::data::DataLoaderOptions().batch_size(16));
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
          "one would have, mid-window and across epochs",
          "[torch][resume]") {
    const std::string policy = GENERATE("tumbling", "sliding");
    CAPTURE(policy);
    constexpr std::size_t n = 2 * 420; // rank 1 of 2: 420 indices, 26 batches of 16 and one of 4
    constexpr std::size_t b = 16;
    const std::vector<std::size_t> lengths = make_lengths(n);
    const bcl::options opt{.batch_size = b, .lookahead = 4, .policy = policy_named(policy)};
    const auto make = [&] {
        return bcl::torch::balanced_sampler(DistributedRandomSampler(n, 2, 1), length_cost(lengths),
                                            opt);
    };

    // The uninterrupted run: three epochs.
    auto reference = make();
    std::vector<std::vector<index_batch>> epochs;
    for (std::size_t e = 0; e < 3; ++e) {
        if (e > 0) reference.reset();
        epochs.push_back(drain(reference, b));
        REQUIRE(epochs.back().size() == 27);
    }

    // Save after `taken` batches of `epoch`: before the first, mid-window (windows of 4 batches),
    // at a window's end, before and after the epoch's last batch, and in a later epoch.
    struct point {
        std::size_t epoch;
        std::size_t taken;
    };
    const point at = GENERATE(point{0, 0}, point{0, 3}, point{0, 4}, point{0, 9}, point{0, 26},
                              point{0, 27}, point{1, 13});
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
    const std::vector<index_batch>& rest = epochs[at.epoch];
    REQUIRE(drain(restored, b) ==
            std::vector<index_batch>(rest.begin() + std::ptrdiff_t(at.taken), rest.end()));
    for (std::size_t e = at.epoch + 1; e < epochs.size(); ++e) {
        restored.reset();
        REQUIRE(drain(restored, b) == epochs[e]);
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

    // An archive of libtorch's own sampler has none of the balancer's state.
    DistributedRandomSampler plain(n);
    torch::serialize::OutputArchive plain_out;
    plain.save(plain_out);
    std::ostringstream plain_bytes;
    plain_out.save_to(plain_bytes);
    REQUIRE_THROWS(other.load(*archive(plain_bytes.str())));
}

TEST_CASE("torch: a batch size other than the sampler's is an error naming both",
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
}

TEST_CASE("torch: a bad cost is an error naming the dataset index, and the index is kept",
          "[torch][errors]") {
    constexpr std::size_t n = 100;
    const double bad = GENERATE(std::numeric_limits<double>::quiet_NaN(), -1.0, 1e200);
    CAPTURE(bad);
    // Index 42 costs `bad`; every other index costs 1.
    const auto cost = [bad](std::size_t i) { return i == 42 ? bad : 1.0; };
    bcl::torch::balanced_sampler sampler(SequentialSampler(n), cost,
                                         bcl::options{.batch_size = 16, .lookahead = 8});
    REQUIRE_THROWS_AS(sampler.next(16), bcl::error);
    // Asking again meets the same index again: it was neither skipped nor lost.
    REQUIRE_THROWS_WITH(sampler.next(16), Contains("dataset index 42:"));

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
