// data_loader.hpp, as a specification: sized_batch_sampler is a libtorch sampler (1.) whose const
// batch_size() says how many indices its next() hands out (2.); bcl's two samplers satisfy it.
// make_data_loader(dataset, sampler, options) is libtorch's make_data_loader with the loader's
// batch size set to the sampler's, so the sampler is only ever asked for its own batch size. The
// options keep everything else; their batch size may be left at libtorch's default of 1 (read as
// "not given") or be the sampler's, and any other is a bcl::error naming both sizes, raised
// before a loader exists (so before the sampler is asked for anything).

#include "sampler_support.hpp"

#include <bcl/torch/balanced_sampler.hpp>
#include <bcl/torch/data_loader.hpp>
#include <bcl/torch/distributed_balanced_sampler.hpp>

#include <catch2/catch.hpp>
#include <torch/torch.h>

#include <chrono>
#include <concepts>
#include <cstddef>
#include <memory>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

namespace {

using namespace sampler_support;
using bcl::torch::sized_batch_sampler;
using index_base = torch::data::samplers::Sampler<index_batch>;

// What a sampler was asked: every next(k)'s k, and how many reset()s.
struct request_log {
    std::vector<std::size_t> asked;
    std::size_t resets = 0;
};

// The model: hands out 0, 1, ..., n-1 in order, as many per next(k) as asked, and says its batch
// size. Its log is shared, so it can be read after the sampler moved into a loader.
class sized_sampler : public index_base {
public:
    sized_sampler(std::size_t n, std::size_t batch, std::shared_ptr<request_log> log)
        : m_n(n), m_batch(batch), m_log(std::move(log)) {}
    [[nodiscard]] std::size_t batch_size() const { return m_batch; }
    void reset(torch::optional<std::size_t> /*new_size*/ = torch::nullopt) override {
        m_next = 0;
        ++m_log->resets;
    }
    torch::optional<index_batch> next(std::size_t k) override {
        m_log->asked.push_back(k);
        if (m_next == m_n) return torch::nullopt;
        index_batch out;
        while (out.size() < k && m_next < m_n) out.push_back(m_next++);
        return out;
    }
    void save(torch::serialize::OutputArchive& /*archive*/) const override {}
    void load(torch::serialize::InputArchive& /*archive*/) override {}

private:
    std::size_t m_n;
    std::size_t m_batch;
    std::size_t m_next = 0;
    std::shared_ptr<request_log> m_log;
};

// Fails requirement 1: a batch size, but no libtorch sampler.
struct not_a_sampler {
    [[nodiscard]] std::size_t batch_size() const { return 4; }
};
// Fail requirement 2: a libtorch sampler whose batch_size() is missing, not const, or no number.
struct batch_size_not_const : sized_sampler {
    using sized_sampler::sized_sampler;
    [[nodiscard]] std::size_t batch_size() { return 4; }
};
struct batch_size_not_a_number : sized_sampler {
    using sized_sampler::sized_sampler;
    [[nodiscard]] std::string batch_size() const { return "4"; }
};

template <class Loader>
std::vector<index_batch> batches_of(Loader& loader) {
    std::vector<index_batch> out;
    for (index_batch& b : loader) out.push_back(std::move(b));
    return out;
}

// 0, 1, ..., n-1 in batches of `b` (the last one shorter): what the model hands out.
std::vector<index_batch> in_order(std::size_t n, std::size_t b) {
    std::vector<index_batch> out;
    for (std::size_t first = 0; first < n; first += b) {
        index_batch batch(std::min(b, n - first));
        std::iota(batch.begin(), batch.end(), first);
        out.push_back(std::move(batch));
    }
    return out;
}

} // namespace

TEST_CASE("data_loader: sized_batch_sampler: bcl's samplers and the model satisfy it; one model "
          "per requirement fails it",
          "[torch][data_loader]") {
    STATIC_REQUIRE(sized_batch_sampler<
                   bcl::torch::balanced_sampler<length_cost_type, DistributedRandomSampler>>);
    STATIC_REQUIRE(sized_batch_sampler<bcl::torch::distributed_balanced_sampler>);
    STATIC_REQUIRE(sized_batch_sampler<sized_sampler>);
    STATIC_REQUIRE(!sized_batch_sampler<not_a_sampler>);           // 1.
    STATIC_REQUIRE(!sized_batch_sampler<RandomSampler>);           // 2. no batch_size()
    STATIC_REQUIRE(!sized_batch_sampler<batch_size_not_const>);    // 2. not const
    STATIC_REQUIRE(!sized_batch_sampler<batch_size_not_a_number>); // 2. not a number
}

TEST_CASE("data_loader: the loader takes the sampler's batch size, and asks the sampler for "
          "nothing else; it is what libtorch's make_data_loader returns",
          "[torch][data_loader]") {
    constexpr std::size_t n = 23;
    using loader_type = decltype(torch::data::make_data_loader(
        index_dataset(n), std::declval<sized_sampler>(), torch::data::DataLoaderOptions()));
    STATIC_REQUIRE(std::same_as<decltype(bcl::torch::make_data_loader(
                                    index_dataset(n), std::declval<sized_sampler>())),
                                loader_type>);

    // Options left out, given with the default batch size of 1, or with the sampler's own 5.
    for (const std::size_t given : {std::size_t{0}, std::size_t{1}, std::size_t{5}}) {
        CAPTURE(given);
        auto log = std::make_shared<request_log>();
        auto loader = given == 0
                          ? bcl::torch::make_data_loader(index_dataset(n), sized_sampler(n, 5, log))
                          : bcl::torch::make_data_loader(index_dataset(n), sized_sampler(n, 5, log),
                                                         torch::data::DataLoaderOptions(given));
        REQUIRE(loader->options().batch_size == 5);
        // 23 indices in batches of 5: 0-4, 5-9, 10-14, 15-19, 20-22.
        REQUIRE(batches_of(*loader) == in_order(n, 5));
        REQUIRE(!log->asked.empty());
        for (const std::size_t k : log->asked) REQUIRE(k == 5);
    }
}

TEST_CASE("data_loader: every option but the batch size is kept as given", "[torch][data_loader]") {
    constexpr std::size_t n = 12;
    auto log = std::make_shared<request_log>();
    const auto timeout = std::chrono::milliseconds(1500);
    auto loader = bcl::torch::make_data_loader(index_dataset(n), sized_sampler(n, 4, log),
                                               torch::data::DataLoaderOptions()
                                                   .workers(2)
                                                   .max_jobs(3)
                                                   .timeout(timeout)
                                                   .enforce_ordering(true)
                                                   .drop_last(true));
    const torch::data::FullDataLoaderOptions& o = loader->options();
    REQUIRE(o.batch_size == 4);
    REQUIRE(o.workers == 2);
    REQUIRE(o.max_jobs == 3);
    REQUIRE(o.timeout == timeout);
    REQUIRE(o.enforce_ordering);
    REQUIRE(o.drop_last);
    // Two workers, in order: 0-3, 4-7, 8-11.
    REQUIRE(batches_of(*loader) == in_order(n, 4));
}

TEST_CASE("data_loader: options asking for another batch size are a bcl::error naming both "
          "sizes, before the sampler is asked for anything",
          "[torch][data_loader]") {
    struct mismatch {
        std::size_t options; // the options' batch size
        std::size_t sampler; // the sampler's
    };
    // 1 is "not given" only in the options: a sampler of batch size 1 still refuses 2.
    for (const mismatch m :
         {mismatch{32, 16}, mismatch{8, 16}, mismatch{17, 16}, mismatch{0, 16}, mismatch{2, 1}}) {
        CAPTURE(m.options, m.sampler);
        auto log = std::make_shared<request_log>();
        try {
            (void)bcl::torch::make_data_loader(index_dataset(40), sized_sampler(40, m.sampler, log),
                                               torch::data::DataLoaderOptions(m.options));
            FAIL("options of batch size " << m.options << " were accepted");
        } catch (const bcl::error& e) {
            const std::string what = e.what();
            CAPTURE(what);
            REQUIRE_THAT(what, Catch::Matchers::StartsWith("bcl::torch::make_data_loader: "));
            REQUIRE_THAT(what, Contains("batches of " + std::to_string(m.options) + " indices"));
            REQUIRE_THAT(what, Contains("batch size is " + std::to_string(m.sampler)));
        }
        REQUIRE(log->asked.empty());
        REQUIRE(log->resets == 0);
    }
}

TEST_CASE("data_loader: a loader over a distributed_balanced_sampler hands out the batches the "
          "sampler does, each of its batch size",
          "[torch][data_loader]") {
    // 2 ranks over 60 indices, batches of 6: 30 indices a rank, 5 batches.
    const std::vector<std::size_t> lengths = make_lengths(60);
    std::vector<double> costs;
    for (std::size_t i = 0; i < lengths.size(); ++i) costs.push_back(length_cost(lengths)(i));
    const auto make = [&] {
        return bcl::torch::distributed_balanced_sampler(costs, 6, 2, 1, true, 7, false, 2);
    };
    auto twin = make();
    auto loader = bcl::torch::make_data_loader(index_dataset(60), make());
    REQUIRE(loader->options().batch_size == 6);
    const std::vector<index_batch> got = batches_of(*loader);
    REQUIRE(got == drain(twin, 6));
    REQUIRE(got.size() == 5);
    for (const index_batch& b : got) REQUIRE(b.size() == 6);
}
