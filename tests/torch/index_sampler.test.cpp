// index_sampler.hpp, as a specification: index_sampler_base is libtorch's sampler of index
// batches; a type satisfies index_sampler if 1. it derives from that base and 2. it is
// move-constructible, and need not be copyable nor hand out exactly n indices per next(n);
// epoch_sampler adds 3. set_epoch(e) and 4. a const epoch(). One model satisfies each concept,
// and one model per requirement fails it. libtorch's four stock samplers are index samplers, its
// distributed ones epoch samplers; balanced_sampler takes any index sampler by value and gives an
// epoch sampler its epoch at every reset().

#include "sampler_support.hpp"

#include <bcl/torch/balanced_sampler.hpp>
#include <bcl/torch/index_sampler.hpp>

#include <catch2/catch.hpp>
#include <torch/torch.h>

#include <concepts>
#include <cstddef>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

namespace {

using namespace sampler_support;
using bcl::torch::epoch_sampler;
using bcl::torch::index_sampler;
using bcl::torch::index_sampler_base;

// The model: move-only (it owns a unique_ptr), hands out at most 3 indices per next(n) whatever
// n is, and records the epochs it is given.
class move_only_sampler : public index_sampler_base {
public:
    explicit move_only_sampler(std::size_t n) : m_n(n), m_log(std::make_unique<log>()) {}
    void reset(torch::optional<std::size_t> /*new_size*/) override { m_next = 0; }
    torch::optional<index_batch> next(std::size_t batch_size) override {
        if (m_next == m_n) return torch::nullopt;
        index_batch out;
        for (std::size_t k = 0; k < std::min<std::size_t>(batch_size, 3) && m_next < m_n; ++k)
            out.push_back(m_next++);
        return out;
    }
    void save(torch::serialize::OutputArchive& /*archive*/) const override {}
    void load(torch::serialize::InputArchive& /*archive*/) override {}

    struct log {
        std::vector<std::size_t> epochs; // every set_epoch(e), in order
    };
    [[nodiscard]] log& history() const { return *m_log; }

private:
    std::size_t m_n;
    std::size_t m_next = 0;
    std::unique_ptr<log> m_log;
};

// The model with epochs: the above, plus set_epoch() and a const epoch(), starting at `epoch`.
class epoch_model : public move_only_sampler {
public:
    epoch_model(std::size_t n, std::size_t start) : move_only_sampler(n), m_epoch(start) {}
    void set_epoch(std::size_t e) {
        m_epoch = e;
        history().epochs.push_back(e);
    }
    [[nodiscard]] std::size_t epoch() const { return m_epoch; }

private:
    std::size_t m_epoch = 0;
};

// Fails requirement 1: a sampler in all but its base (the same four functions, no base).
struct not_derived {
    void reset(torch::optional<std::size_t> /*new_size*/) {}
    torch::optional<index_batch> next(std::size_t /*n*/) { return torch::nullopt; }
    void save(torch::serialize::OutputArchive& /*archive*/) const {}
    void load(torch::serialize::InputArchive& /*archive*/) {}
};
// Fails requirement 1 too: a libtorch sampler of another batch type.
struct other_batches : torch::data::samplers::Sampler<std::vector<std::int64_t>> {
    void reset(torch::optional<std::size_t> /*new_size*/) override {}
    torch::optional<std::vector<std::int64_t>> next(std::size_t /*n*/) override {
        return torch::nullopt;
    }
    void save(torch::serialize::OutputArchive& /*archive*/) const override {}
    void load(torch::serialize::InputArchive& /*archive*/) override {}
};
// Fails requirement 2: derived, but neither movable nor copyable.
struct pinned : move_only_sampler {
    using move_only_sampler::move_only_sampler;
    pinned(pinned&&) = delete;
};
// Fail requirement 3 and 4 of epoch_sampler, each alone.
struct no_set_epoch : move_only_sampler {
    using move_only_sampler::move_only_sampler;
    [[nodiscard]] std::size_t epoch() const { return 0; }
};
struct epoch_not_const : move_only_sampler {
    using move_only_sampler::move_only_sampler;
    void set_epoch(std::size_t /*e*/) {}
    [[nodiscard]] std::size_t epoch() { return 0; }
};
struct epoch_not_a_number : move_only_sampler {
    using move_only_sampler::move_only_sampler;
    void set_epoch(std::size_t /*e*/) {}
    [[nodiscard]] std::string epoch() const { return "0"; }
};
// Has epochs but is no index sampler: epoch_sampler asks for index_sampler first.
struct epochs_only : not_derived {
    void set_epoch(std::size_t /*e*/) {}
    [[nodiscard]] std::size_t epoch() const { return 0; }
};

} // namespace

TEST_CASE("index_sampler: the base is libtorch's sampler of index batches",
          "[torch][index_sampler]") {
    STATIC_REQUIRE(
        std::same_as<index_sampler_base, torch::data::samplers::Sampler<std::vector<std::size_t>>>);
    STATIC_REQUIRE(std::same_as<index_sampler_base::BatchRequestType, std::vector<std::size_t>>);
}

TEST_CASE("index_sampler: a move-only model derived from the base satisfies it; one model per "
          "requirement fails it",
          "[torch][index_sampler]") {
    STATIC_REQUIRE(index_sampler<move_only_sampler>);
    STATIC_REQUIRE(!std::copy_constructible<move_only_sampler>); // not required
    STATIC_REQUIRE(!index_sampler<not_derived>);                 // 1. not derived
    STATIC_REQUIRE(!index_sampler<other_batches>);               // 1. another batch type
    STATIC_REQUIRE(!index_sampler<pinned>);                      // 2. not move-constructible
}

TEST_CASE("index_sampler: libtorch's four stock samplers are index samplers, its distributed "
          "ones epoch samplers",
          "[torch][index_sampler]") {
    STATIC_REQUIRE(index_sampler<RandomSampler>);
    STATIC_REQUIRE(index_sampler<SequentialSampler>);
    STATIC_REQUIRE(index_sampler<DistributedRandomSampler>);
    STATIC_REQUIRE(index_sampler<DistributedSequentialSampler>);
    STATIC_REQUIRE(epoch_sampler<DistributedRandomSampler>);
    STATIC_REQUIRE(epoch_sampler<DistributedSequentialSampler>);
    STATIC_REQUIRE(!epoch_sampler<RandomSampler>);
    STATIC_REQUIRE(!epoch_sampler<SequentialSampler>);
}

TEST_CASE("index_sampler: epoch_sampler: the model with set_epoch() and a const epoch() "
          "satisfies it; one model per requirement fails it",
          "[torch][index_sampler]") {
    STATIC_REQUIRE(epoch_sampler<epoch_model>);
    STATIC_REQUIRE(!epoch_sampler<move_only_sampler>);  // neither
    STATIC_REQUIRE(!epoch_sampler<no_set_epoch>);       // 3. no set_epoch()
    STATIC_REQUIRE(!epoch_sampler<epoch_not_const>);    // 4. epoch() not const
    STATIC_REQUIRE(!epoch_sampler<epoch_not_a_number>); // 4. epoch() not a number
    STATIC_REQUIRE(!epoch_sampler<epochs_only>);        // an index_sampler first
}

TEST_CASE("index_sampler: balanced_sampler keeps a move-only inner sampler that hands out fewer "
          "indices than asked, and gives an epoch sampler its epoch at every reset()",
          "[torch][index_sampler]") {
    constexpr std::size_t n = 50;
    const std::vector<std::size_t> lengths = make_lengths(n);
    const bcl::options opt{.batch_size = 8, .lookahead = 2};
    index_batch all(n);
    std::iota(all.begin(), all.end(), std::size_t{0});

    bcl::torch::balanced_sampler plain(move_only_sampler(n), length_cost(lengths), opt);
    REQUIRE(sorted_concat(drain(plain, 8)) == all);

    epoch_model inner(n, 4);
    move_only_sampler::log& history = inner.history(); // the log outlives the move
    bcl::torch::balanced_sampler sampler(std::move(inner), length_cost(lengths), opt);
    // The sampler starts at the inner sampler's epoch, read, not set.
    REQUIRE(sampler.epoch() == 4);
    REQUIRE(history.epochs.empty());
    REQUIRE(sorted_concat(drain(sampler, 8)) == all);
    sampler.reset();      // epoch 4 started: epoch 5
    sampler.set_epoch(9); // chosen for the next reset(), not given to the inner sampler yet
    REQUIRE(history.epochs == std::vector<std::size_t>{5});
    sampler.reset();
    REQUIRE(sorted_concat(drain(sampler, 8)) == all);
    REQUIRE(history.epochs == std::vector<std::size_t>{5, 9});
}
