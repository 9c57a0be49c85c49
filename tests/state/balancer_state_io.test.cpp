// bcl::detail::balancer_state_io, as a specification: collect() takes each record the balancer
// holds exactly once, through the given copy or move, the waiting batches' first and then the
// buffer's, beside a snapshot of the balancer's counters, options and estimates; restore() checks
// the whole state (counts, consistency, options, estimates) before it changes anything, so a
// refused state is a bcl::error that leaves the balancer exactly as it was, and an accepted one
// continues as the balancer that saved it would have.

#include "support/contract_checks.hpp"
#include "support/distributions.hpp"

#include <bcl/balancer.hpp>
#include <bcl/cost_estimator.hpp>
#include <bcl/detail/state/balancer_state_io.hpp>
#include <bcl/error.hpp>
#include <bcl/options.hpp>

#include <catch2/catch.hpp>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

using namespace bcl_test;
using bcl::detail::balancer_state_io;
using Catch::Matchers::Contains;

namespace {

using plain_balancer = bcl::balancer<rec, cost_of>;
const auto memory_estimator = bcl::with_memory(cost_of{}, &rec::cost);
using memory_balancer = bcl::balancer<rec, std::remove_const_t<decltype(memory_estimator)>>;

bcl::options tumbling_b4_k3() {
    bcl::options opt{.batch_size = 4, .lookahead = 3};
    opt.policy = bcl::lookahead_policy::tumbling;
    return opt;
}

/// Pushes records [from, to) of `costs`, popping whenever the buffer is full; returns the ids of
/// the batches popped.
template <class Balancer>
batch_ids feed(Balancer& b, const cost_list& costs, std::size_t from, std::size_t to) {
    batch_ids out;
    for (std::size_t i = from; i < to; ++i) {
        while (!b.can_push()) out.push_back(ids_of(*b.pop()));
        b.push(rec{i, costs[i]});
    }
    return out;
}

} // namespace

TEST_CASE("balancer_state_io: collect takes each held record once, through the given take, the "
          "waiting batches' first, then the buffer's",
          "[state][state-io]") {
    const cost_list costs = lognormal_costs(40, 3);
    plain_balancer b{cost_of{}, tumbling_b4_k3()};
    (void)feed(b, costs, 0, 20); // one round of 12 at the 13th push; 8 buffered
    REQUIRE(b.pop());            // 4 out, 8 waiting
    std::vector<std::uint64_t> taken;
    const auto st = balancer_state_io::collect(b, [&](const rec& r) {
        taken.push_back(r.id);
        return r;
    });
    REQUIRE(taken.size() == 16);
    CHECK(st.pending.size() == 16);
    CHECK(st.snapshot.pending_records() == 16);
    CHECK(st.snapshot.stats.records_in == 20);
    CHECK(st.snapshot.stats.records_out == 4);
    CHECK_FALSE(st.snapshot.finished);
    CHECK_FALSE(st.snapshot.tracks_memory);
    CHECK(st.snapshot.opt.batch_size == 4);
    // The buffer's records are the last 8 pushed, in arrival order; the waiting ones are what the
    // balancer pops next.
    CHECK(std::vector<std::uint64_t>(taken.begin() + 8, taken.end()) ==
          std::vector<std::uint64_t>{12, 13, 14, 15, 16, 17, 18, 19});
    std::vector<std::uint64_t> next;
    for (int k = 0; k < 2; ++k)
        for (const std::uint64_t id : ids_of(*b.pop())) next.push_back(id);
    CHECK(std::vector<std::uint64_t>(taken.begin(), taken.begin() + 8) == next);

    memory_balancer m{memory_estimator, tumbling_b4_k3()};
    (void)feed(m, costs, 0, 5);
    CHECK(balancer_state_io::snapshot(m).tracks_memory);
    CHECK(balancer_state_io::snapshot(m).buffer_memory.size() == 5);
}

TEST_CASE("balancer_state_io: records that can only move are moved out and back in",
          "[state][state-io]") {
    struct owned {
        std::unique_ptr<int> id;
    };
    const auto cost = [](const owned& r) { return static_cast<double>(*r.id % 5 + 1); };
    bcl::balancer<owned, decltype(cost)> b{cost, tumbling_b4_k3()};
    for (int i = 0; i < 7; ++i) b.push(owned{std::make_unique<int>(i)});
    auto st = std::move(b).take_state();
    REQUIRE(st.pending.size() == 7);
    for (int i = 0; i < 7; ++i) CHECK(*st.pending[static_cast<std::size_t>(i)].id == i);
    bcl::balancer<owned, decltype(cost)> again{cost, tumbling_b4_k3(), std::move(st)};
    again.finish();
    std::size_t out = 0;
    while (auto batch = again.pop()) out += batch->size();
    CHECK(out == 7);
}

TEST_CASE("balancer_state_io: a refused state changes nothing; the balancer goes on as if it had "
          "never been offered",
          "[state][state-io][errors]") {
    const cost_list costs = pareto_costs(90, 11);
    const auto used = [&] { // a balancer mid-stream: batches out, waiting and buffered
        plain_balancer b{cost_of{}, tumbling_b4_k3()};
        (void)feed(b, costs, 0, 30);
        (void)b.pop();
        return b;
    };
    plain_balancer twin = used();
    const std::string untouched = bcl::detail::to_bytes(balancer_state_io::snapshot(twin));
    batch_ids expected = feed(twin, costs, 30, 90);
    for (auto& batch : drain(twin)) expected.push_back(batch);

    const cost_list other = uniform_costs(50, 2);
    plain_balancer donor{cost_of{}, tumbling_b4_k3()};
    (void)feed(donor, other, 0, 17);
    memory_balancer memory_donor{memory_estimator, tumbling_b4_k3()};
    (void)feed(memory_donor, other, 0, 17);
    bcl::options longer = tumbling_b4_k3();
    longer.lookahead = 4;
    plain_balancer longer_donor{cost_of{}, longer};
    (void)feed(longer_donor, other, 0, 17);

    struct offer {
        const char* what;
        std::function<plain_balancer::state()> state;
        std::string message;
    };
    const std::vector<offer> offers{
        {"a record missing",
         [&] {
             auto s = donor.save();
             s.pending.pop_back();
             return s;
         },
         "16 pending records given, but the state was saved with 17"},
        {"a record too many pushed",
         [&] {
             auto s = donor.save();
             s.snapshot.stats.records_in += 1;
             return s;
         },
         "does not account for every record"},
        {"other options", [&] { return longer_donor.save(); },
         "saved with options::lookahead = 4, not 3"},
        {"a memory estimate this balancer lacks", [&] { return memory_donor.save(); },
         "estimator had memory estimate, unlike this one"},
    };
    for (const offer& o : offers) {
        INFO(o.what);
        plain_balancer b = used();
        CHECK_THROWS_WITH(balancer_state_io::restore(b, o.state()), Contains(o.message));
        const bool unchanged = bcl::detail::to_bytes(balancer_state_io::snapshot(b)) == untouched;
        CHECK(unchanged);
        batch_ids got = feed(b, costs, 30, 90);
        for (auto& batch : drain(b)) got.push_back(batch);
        CHECK(got == expected);
    }
}

TEST_CASE("balancer_state_io: an accepted state continues as the balancer that saved it",
          "[state][state-io]") {
    const cost_list costs = lognormal_costs(70, 8);
    memory_balancer original{memory_estimator, tumbling_b4_k3()};
    (void)feed(original, costs, 0, 29);
    (void)original.pop();
    memory_balancer restored{memory_estimator, tumbling_b4_k3()};
    balancer_state_io::restore(restored, original.save());
    CHECK(balancer_state_io::snapshot(restored).stats.records_in == 29);
    batch_ids a = feed(original, costs, 29, 70);
    batch_ids b = feed(restored, costs, 29, 70);
    for (auto& batch : drain(original)) a.push_back(batch);
    for (auto& batch : drain(restored)) b.push_back(batch);
    CHECK(a == b);
    const bool same_snapshot = bcl::detail::to_bytes(balancer_state_io::snapshot(original)) ==
                               bcl::detail::to_bytes(balancer_state_io::snapshot(restored));
    CHECK(same_snapshot);
}
