// A saved balancer over dataset indices is checked against the epoch it claims to continue
// (bcl::detail::check_index_epoch), the check the samplers run before they keep a state: every
// record it holds is named by its arrival position, so a position or a pending index that does
// not match the epoch is an error naming it.

#include "support/distributions.hpp"

#include <bcl/balancer.hpp>
#include <bcl/detail/state/index_epoch_check.hpp>
#include <bcl/error.hpp>
#include <bcl/options.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <numeric>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <vector>

namespace {

struct table_cost {
    const std::vector<double>* costs;
    double operator()(const std::int64_t& index) const {
        return (*costs)[static_cast<std::size_t>(index)];
    }
};

using index_balancer = bcl::balancer<std::int64_t, table_cost>;

struct saved_epoch {
    std::vector<std::int64_t> epoch; // the epoch's indices, in the order they are pushed
    std::size_t position = 0;        // pushed so far
    index_balancer::state state;
};

// Runs a sampler's loop over `epoch` (push while there is room, pop when a batch is ready) and
// saves after `batches` batches were handed out.
saved_epoch run_and_save(const std::vector<double>& costs, std::vector<std::int64_t> epoch,
                         const bcl::options& opt, std::size_t batches) {
    index_balancer b(table_cost{&costs}, opt);
    std::size_t position = 0;
    for (std::size_t out = 0; out < batches;) {
        if (b.pop()) {
            ++out;
            continue;
        }
        if (position < epoch.size()) {
            while (position < epoch.size() && b.can_push()) b.push(epoch[position++]);
        } else if (!b.finished()) {
            b.finish();
        } else {
            break;
        }
    }
    return {std::move(epoch), position, b.save()};
}

void check(const saved_epoch& s, std::size_t position, std::optional<std::uint64_t> size) {
    bcl::detail::check_index_epoch<std::int64_t>(
        "test", s.state.snapshot, std::span<const std::int64_t>(s.state.pending),
        std::span<const std::int64_t>(s.epoch).first(position), size);
}

std::vector<std::int64_t> shuffled_indices(std::size_t n, std::uint64_t seed) {
    std::vector<std::int64_t> v(n);
    std::iota(v.begin(), v.end(), 0);
    std::mt19937_64 gen(seed);
    for (std::size_t i = n; i > 1; --i) std::swap(v[i - 1], v[static_cast<std::size_t>(gen() % i)]);
    return v;
}

// 120 indices in batches of 4, lookahead 2, saved with both waiting and buffered records.
saved_epoch saved_after_nine_batches() {
    static const std::vector<double> costs = bcl_test::lognormal_costs(120, 3);
    return run_and_save(costs, shuffled_indices(120, 1), {.batch_size = 4, .lookahead = 2}, 9);
}

} // namespace

TEST_CASE("index epoch: a genuine state passes at every point of the epoch, both policies, "
          "every distribution",
          "[index_epoch]") {
    const std::size_t n = 157;
    for (const auto& dist : bcl_test::all_distributions())
        for (const bool sliding : {true, false}) {
            bcl::options opt{.batch_size = 4, .lookahead = 3};
            opt.policy = sliding ? bcl::lookahead_policy::sliding : bcl::lookahead_policy::tumbling;
            const std::vector<double> costs = dist.generate(n, 11);
            for (std::size_t batches = 0; batches <= 40; batches += 3) {
                const saved_epoch s = run_and_save(costs, shuffled_indices(n, 5), opt, batches);
                INFO(dist.name << ", sliding " << sliding << ", after " << batches);
                REQUIRE_NOTHROW(check(s, s.position, n));
            }
        }
}

TEST_CASE("index epoch: a position other than the balancer's count of pushed records is an "
          "error naming the position",
          "[index_epoch]") {
    const saved_epoch s = saved_after_nine_batches();
    for (const std::size_t wrong : {s.position - 1, s.position + 1, std::size_t{0}}) {
        REQUIRE_THROWS_WITH(check(s, wrong, 120),
                            Catch::Contains("the state's position is " + std::to_string(wrong)) &&
                                Catch::Contains("were pushed"));
    }
}

TEST_CASE("index epoch: a pending index that is not the epoch's record at its arrival position "
          "is an error naming it",
          "[index_epoch]") {
    const saved_epoch s = saved_after_nine_batches();
    const auto& snapshot = s.state.snapshot;
    REQUIRE(snapshot.waiting_records() > 0); // the checks below reach both parts
    REQUIRE(!snapshot.buffer_arrivals.empty());

    SECTION("a waiting record replaced by an index already emitted") {
        saved_epoch t = s;
        // The epoch's first index, pushed first, is long gone in a batch handed out.
        const std::int64_t emitted = t.epoch[0];
        REQUIRE(std::find(t.state.pending.begin(), t.state.pending.end(), emitted) ==
                t.state.pending.end());
        t.state.pending[0] = emitted;
        REQUIRE_THROWS_WITH(check(t, t.position, 120),
                            Catch::Contains("pending index 0 is " + std::to_string(emitted)));
    }
    SECTION("a buffered record duplicated in place of another") {
        saved_epoch t = s;
        const std::size_t last = t.state.pending.size() - 1;
        t.state.pending[last] = t.state.pending[last - 1];
        REQUIRE_THROWS_WITH(check(t, t.position, 120),
                            Catch::Contains("pending index " + std::to_string(last)));
    }
    SECTION("two pending records swapped") {
        saved_epoch t = s;
        std::swap(t.state.pending.front(), t.state.pending.back());
        REQUIRE_THROWS_AS(check(t, t.position, 120), bcl::error);
    }
    SECTION("an index outside the dataset, or one pending index fewer") {
        saved_epoch t = s;
        t.state.pending[1] = 120;
        REQUIRE_THROWS_WITH(check(t, t.position, 120),
                            Catch::Contains("pending index 1 is 120, outside the dataset's [0, "
                                            "120)"));
        t.state.pending.pop_back();
        REQUIRE_THROWS_WITH(check(t, t.position, 120), Catch::Contains("pending indices, but"));
    }
    SECTION("a smaller dataset than the indices the state holds") {
        const std::int64_t largest =
            *std::max_element(s.state.pending.begin(), s.state.pending.end());
        REQUIRE_THROWS_WITH(check(s, s.position, static_cast<std::uint64_t>(largest)),
                            Catch::Contains("outside the dataset's"));
        REQUIRE_NOTHROW(check(s, s.position, std::nullopt)); // no size known: the rest holds
    }
}

TEST_CASE("index epoch: the balancer refuses a state whose held records share an arrival "
          "position, or name one not yet pushed",
          "[index_epoch]") {
    const saved_epoch s = saved_after_nine_batches();
    bcl::detail::balancer_snapshot twice = s.state.snapshot;
    twice.waiting_arrivals[0] = twice.buffer_arrivals[0];
    REQUIRE_THROWS_WITH(bcl::detail::check_consistent(twice),
                        Catch::Contains("two records held with the same arrival position"));
    bcl::detail::balancer_snapshot later = s.state.snapshot;
    later.waiting_arrivals[0] = later.stats.records_in;
    REQUIRE_THROWS_WITH(bcl::detail::check_consistent(later),
                        Catch::Contains("arrived after the last record pushed"));
    // And through the bytes: a state whose waiting record names a position twice is refused.
    const std::string bytes = bcl::detail::to_bytes(twice);
    REQUIRE_THROWS_AS(index_balancer::state::from_bytes(bytes, s.state.pending), bcl::error);
}
