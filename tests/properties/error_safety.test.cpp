// A bcl::error leaves the balancer exactly as it was: a push or a round that fails changes
// nothing, what is buffered can still be taken out, and the batches that follow are those of a
// run that never saw the failed call. "Exactly as it was" is checked on the saved state (its
// bytes and its records), which holds everything the balancer will act on.

#include "support/contract_checks.hpp"
#include "support/distributions.hpp"

#include <bcl/balance.hpp>
#include <bcl/balancer.hpp>
#include <bcl/cost_estimator.hpp>
#include <bcl/error.hpp>
#include <bcl/options.hpp>
#include <bcl/partition/lpt_swap.hpp>
#include <bcl/partition/partitioner.hpp>
#include <bcl/record_model.hpp>

#include <catch2/catch.hpp>

#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <utility>
#include <vector>

using namespace bcl_test;

namespace {

/// The saved state as one comparable value: its bytes and the ids of its pending records.
template <class Balancer>
std::pair<std::string, std::vector<std::uint64_t>> fingerprint(const Balancer& b) {
    auto st = b.save();
    std::vector<std::uint64_t> ids;
    for (const rec& r : st.pending) ids.push_back(r.id);
    return {st.to_bytes(), ids};
}

const bcl::lookahead_policy both_policies[] = {bcl::lookahead_policy::tumbling,
                                               bcl::lookahead_policy::sliding};

/// A partitioner that breaks its contract on every window short of `full_window` items (the
/// last round of a drain after finish()): it puts every item into a pack that does not exist.
/// Otherwise it is the default partitioner.
struct faulty_partitioner {
    std::size_t full_window = 0;
    bcl::lpt_swap_partitioner inner{};

    bcl::partition_summary operator()(std::span<const double> costs, bcl::pack_shape shape,
                                      std::span<std::uint32_t> pack_of) {
        if (costs.size() < full_window) {
            for (std::uint32_t& p : pack_of) p = static_cast<std::uint32_t>(shape.packs);
            return {};
        }
        return inner(costs, shape, pack_of);
    }
};

} // namespace

TEST_CASE("A push that fails for a bad cost changes nothing, even when the buffer is full",
          "[errors][error-safety]") {
    const double bad_costs[] = {std::numeric_limits<double>::quiet_NaN(), -1.0,
                                std::numeric_limits<double>::infinity(), bcl::max_estimate * 2.0};
    for (const bcl::lookahead_policy policy : both_policies)
        for (const double bad : bad_costs) {
            bcl::options opt{.batch_size = 4, .lookahead = 3, .seed = 5};
            opt.policy = policy;
            const std::size_t capacity = bcl::buffer_capacity(opt);
            const cost_list costs = lognormal_costs(3 * capacity + 5, 11);
            using balancer_t = bcl::balancer<rec, cost_of>;
            balancer_t with_error{cost_of{}, opt};
            balancer_t reference{cost_of{}, opt};
            // Fill the buffer without popping: the next push would have to run a round.
            for (std::size_t i = 0; i < capacity; ++i) {
                with_error.push(rec{i, costs[i]});
                reference.push(rec{i, costs[i]});
            }
            REQUIRE(with_error.can_push());
            const auto before = fingerprint(with_error);
            rec record{999999, bad};
            REQUIRE_THROWS_AS(with_error.push(std::move(record)), bcl::error);
            CHECK(fingerprint(with_error) == before);
            CHECK(with_error.stats().batches == 0);
            // Then both carry on alike, and drain alike.
            batch_ids got;
            batch_ids want;
            for (std::size_t i = capacity; i < costs.size(); ++i) {
                with_error.push(rec{i, costs[i]});
                reference.push(rec{i, costs[i]});
                while (auto batch = with_error.pop()) got.push_back(ids_of(*batch));
                while (auto batch = reference.pop()) want.push_back(ids_of(*batch));
            }
            for (auto& batch : drain(with_error)) got.push_back(std::move(batch));
            for (auto& batch : drain(reference)) want.push_back(std::move(batch));
            CHECK(got == want);
        }
}

TEST_CASE("Costs up to bcl::max_estimate are balanced without overflow; a larger finite cost is "
          "an error naming the record",
          "[errors][error-safety]") {
    // Sums of costs near the largest double overflow to infinity, which once made a partitioner
    // take an open pack for a full one. The largest accepted estimate keeps every sum finite.
    for (const bcl::lookahead_policy policy : both_policies) {
        bcl::options opt{.batch_size = 8, .lookahead = 4};
        opt.policy = policy;
        cost_list costs;
        for (std::size_t i = 0; i < 200; ++i)
            costs.push_back(i % 3 == 0 ? bcl::max_estimate : bcl::max_estimate / double(i + 2));
        const run_result out = run(driver::eager, costs, opt);
        CHECK(check_cardinality(out.batches, costs.size(), 8, false).empty());
        CHECK(check_exactly_once(out.batches, costs.size(), 8, false).empty());
        CHECK(out.stats.batch_cost.mean() < std::numeric_limits<double>::infinity());

        bcl::balancer<rec, cost_of> b{cost_of{}, opt};
        b.push(rec{0, 1.0});
        const double huge = std::numeric_limits<double>::max();
        REQUIRE_THROWS_WITH(b.push(rec{1, huge}), Catch::Contains("record 1") &&
                                                      Catch::Contains("1.7976931348623157e+308") &&
                                                      Catch::Contains("max_estimate"));
        REQUIRE(b.buffered() == 1);
    }
}

TEST_CASE("A state whose costs reach bcl::max_estimate saves, restores and continues exactly",
          "[errors][error-safety][resume]") {
    bcl::options opt{.batch_size = 4, .lookahead = 2};
    const cost_list costs(100, bcl::max_estimate);
    using balancer_t = bcl::balancer<rec, cost_of>;
    balancer_t first{cost_of{}, opt};
    balancer_t reference{cost_of{}, opt};
    batch_ids got;
    batch_ids want;
    for (std::size_t i = 0; i < 50; ++i) {
        first.push(rec{i, costs[i]});
        reference.push(rec{i, costs[i]});
        while (auto batch = first.pop()) got.push_back(ids_of(*batch));
        while (auto batch = reference.pop()) want.push_back(ids_of(*batch));
    }
    auto st = first.save();
    st = balancer_t::state::from_bytes(st.to_bytes(), std::move(st.pending));
    balancer_t second{cost_of{}, opt, std::move(st)};
    for (std::size_t i = 50; i < costs.size(); ++i) {
        second.push(rec{i, costs[i]});
        reference.push(rec{i, costs[i]});
        while (auto batch = second.pop()) got.push_back(ids_of(*batch));
        while (auto batch = reference.pop()) want.push_back(ids_of(*batch));
    }
    for (auto& batch : drain(second)) got.push_back(std::move(batch));
    for (auto& batch : drain(reference)) want.push_back(std::move(batch));
    CHECK(got == want);
}

TEST_CASE("A partitioner that returns wrong pack sizes is an error that leaves the balancer as it "
          "was; the same round fails again, and save() still works",
          "[errors][error-safety]") {
    for (const bcl::lookahead_policy policy : both_policies) {
        bcl::options opt{.batch_size = 3, .lookahead = 4, .seed = 9};
        opt.policy = policy;
        const std::size_t n = 200; // not a multiple of K*B = 12: the drain ends in a short round
        const cost_list costs = lognormal_costs(n, 3);
        using balancer_t = bcl::balancer<rec, cost_of, faulty_partitioner>;
        balancer_t b{cost_of{}, opt, faulty_partitioner{12}};
        std::size_t popped = 0;
        for (std::size_t i = 0; i < n; ++i) {
            b.push(rec{i, costs[i]});
            while (auto batch = b.pop()) popped += batch->size();
        }
        b.finish();
        bool failed = false;
        while (!failed) {
            const auto before = fingerprint(b);
            try {
                auto batch = b.pop();
                REQUIRE(batch);
                REQUIRE(batch->size() == 3);
                popped += batch->size();
            } catch (const bcl::error& e) {
                CHECK_THAT(e.what(), Catch::Contains("the partitioner put item 0 in pack"));
                CHECK(fingerprint(b) == before);
                failed = true;
            }
        }
        // Every full window was handed out, and nothing of the short one. The balancer is
        // intact: the same round fails the same way and every record not handed out is held.
        CHECK(popped == n - n % 12);
        const auto held = fingerprint(b);
        CHECK_THROWS_AS(b.pop(), bcl::error);
        CHECK(fingerprint(b) == held);
        CHECK(b.stats().batches == popped / 3);
        CHECK(b.buffered() == n - popped);
        CHECK(std::move(b).take_state().pending.size() == n - popped);
    }
}

TEST_CASE("After a failed round inside bcl::balance the iterator is at its end and shows no "
          "batch twice; the balancer still holds every record not handed out",
          "[errors][error-safety]") {
    for (const bcl::lookahead_policy policy : both_policies) {
        const std::size_t n = 100; // K*B = 8: the drain ends in a round of 4
        const cost_list costs = lognormal_costs(n, 4);
        std::vector<rec> records = make_records(costs);
        bcl::options opt{.batch_size = 4, .lookahead = 2};
        opt.policy = policy;
        auto batches = bcl::balance(records, cost_of{}, opt, faulty_partitioner{8});
        std::vector<std::uint64_t> seen;
        bool failed = false;
        auto it = batches.begin();
        try {
            for (; it != batches.end(); ++it)
                for (const std::uint64_t id : ids_of(*it)) seen.push_back(id);
        } catch (const bcl::error& e) {
            CHECK_THAT(e.what(), Catch::Contains("the partitioner put item 0 in pack"));
            failed = true;
        }
        REQUIRE(failed);
        CHECK(seen.size() == n - n % 8);
        CHECK(it == batches.end());
        CHECK(batches.balancer().buffered() == n - seen.size());
        CHECK(batches.balancer().stats().records_in == n);
    }
}
