// bcl::balance wraps the ranges a loader really has: a sampler of dataset indices whose iterator
// cannot be default-constructed, and std::views::istream over a stream of indices. Each gives
// exactly the batches of the same records pushed through bcl::balancer by hand.

#include "support/contract_checks.hpp"

#include <bcl/balance.hpp>
#include <bcl/balancer.hpp>
#include <bcl/options.hpp>

#include <catch2/catch.hpp>

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <ranges>
#include <sstream>
#include <type_traits>
#include <vector>

namespace {

/// The cost of a dataset index: a table lookup, as a loader with a length per index has.
struct index_cost {
    const std::vector<double>* lengths;
    double operator()(std::size_t index) const { return (*lengths)[index]; }
};

/// A sampler in the style of a training loop's: it yields the dataset indices of an epoch in a
/// seeded order, and its iterator needs the sampler to exist, so it has no default constructor.
class epoch_sampler {
public:
    class iterator {
    public:
        using value_type = std::size_t;
        using difference_type = std::ptrdiff_t;
        explicit iterator(const epoch_sampler& s, std::size_t at) : m_sampler(&s), m_at(at) {}
        std::size_t operator*() const { return m_sampler->order()[m_at]; }
        iterator& operator++() {
            ++m_at;
            return *this;
        }
        void operator++(int) { ++m_at; }
        friend bool operator==(const iterator& it, std::default_sentinel_t) {
            return it.m_at == it.m_sampler->order().size();
        }

    private:
        const epoch_sampler* m_sampler;
        std::size_t m_at;
    };

    explicit epoch_sampler(std::size_t n) {
        for (std::size_t i = 0; i < n; ++i)
            m_order.push_back((i * 7919) %
                              n); // a fixed permutation (7919 is prime, n is not its multiple)
    }
    iterator begin() const { return iterator{*this, 0}; }
    std::default_sentinel_t end() const { return {}; }
    const std::vector<std::size_t>& order() const { return m_order; }

private:
    std::vector<std::size_t> m_order;
};

/// The batches of `indices` pushed through bcl::balancer by hand.
std::vector<std::vector<std::size_t>> by_hand(const std::vector<std::size_t>& indices,
                                              const index_cost& cost, const bcl::options& opt) {
    bcl::balancer<std::size_t, index_cost> b{cost, opt};
    std::vector<std::vector<std::size_t>> out;
    for (const std::size_t i : indices) {
        b.push(std::size_t{i});
        while (auto batch = b.pop()) out.emplace_back(batch->begin(), batch->end());
    }
    b.finish();
    while (auto batch = b.pop()) out.emplace_back(batch->begin(), batch->end());
    return out;
}

} // namespace

static_assert(!std::is_default_constructible_v<epoch_sampler::iterator>);
static_assert(std::ranges::input_range<epoch_sampler>);

TEST_CASE("bcl::balance takes a sampler whose iterator has no default constructor", "[balance]") {
    const bcl_test::cost_list lengths = bcl_test::lognormal_costs(1000, 8);
    const index_cost cost{&lengths};
    const bcl::options opt{.batch_size = 16, .lookahead = 4};
    const epoch_sampler sampler(lengths.size());
    std::vector<std::vector<std::size_t>> got;
    for (auto batch : bcl::balance(std::views::all(sampler), cost, opt))
        got.emplace_back(batch.begin(), batch.end());
    CHECK(got == by_hand(sampler.order(), cost, opt));
    CHECK(got.size() == (lengths.size() + 15) / 16);
}

TEST_CASE("bcl::balance takes std::views::istream of indices", "[balance]") {
    const bcl_test::cost_list lengths = bcl_test::lognormal_costs(500, 9);
    const index_cost cost{&lengths};
    const bcl::options opt{.batch_size = 8, .lookahead = 3};
    std::vector<std::size_t> indices;
    std::ostringstream text;
    for (std::size_t i = 0; i < lengths.size(); ++i) {
        indices.push_back((i * 31) % lengths.size());
        text << indices.back() << '\n';
    }
    std::istringstream in(text.str());
    std::vector<std::vector<std::size_t>> got;
    for (auto batch : bcl::balance(std::views::istream<std::size_t>(in), cost, opt))
        got.emplace_back(batch.begin(), batch.end());
    CHECK(got == by_hand(indices, cost, opt));
}
