// bcl::detail::saved_state (bcl::balancer::state), as a specification: the records a balancer
// still holds, first the waiting batches' records in the order they will be popped, then the
// buffered ones in arrival order; and everything else as a snapshot. to_bytes() is the snapshot's
// byte string and holds no record; from_bytes() rebuilds the state from those bytes and the
// records, refusing bytes that are corrupted or describe no possible balancer, and a number of
// records other than the number saved, with an error that gives both numbers.

#include <bcl/balancer.hpp>
#include <bcl/detail/state/saved_state.hpp>
#include <bcl/error.hpp>
#include <bcl/options.hpp>

#include <catch2/catch.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

using Catch::Matchers::Contains;

namespace {

/// A record that carries a payload the state's bytes must not hold.
struct payload_item {
    std::uint64_t id = 0;
    std::string payload;
};

struct payload_cost {
    double operator()(const payload_item& r) const noexcept {
        return static_cast<double>((r.id * 7919) % 101 + 1); // scattered costs
    }
};

using payload_balancer = bcl::balancer<payload_item, payload_cost>;

bcl::options tumbling_to_save(std::size_t b, std::size_t k) {
    bcl::options opt{.batch_size = b, .lookahead = k};
    opt.policy = bcl::lookahead_policy::tumbling;
    return opt;
}

/// A balancer of B = 3, K = 4 fed 17 records with payloads of `payload_size` bytes, one batch
/// popped: one round of 12 formed (at the 13th push), 3 batches of 3 waiting, 5 buffered.
payload_balancer fed(std::size_t payload_size) {
    payload_balancer b{payload_cost{}, tumbling_to_save(3, 4)};
    for (std::uint64_t i = 0; i < 17; ++i) b.push(payload_item{i, std::string(payload_size, 'x')});
    REQUIRE(b.pop());
    return b;
}

std::vector<std::uint64_t> item_ids(const std::vector<payload_item>& records) {
    std::vector<std::uint64_t> out;
    for (const payload_item& r : records) out.push_back(r.id);
    return out;
}

} // namespace

TEST_CASE("saved_state: the pending records are the waiting batches' in pop order, then the "
          "buffered ones in arrival order",
          "[state][saved-state]") {
    payload_balancer b = fed(4);
    const payload_balancer::state st = b.save();
    REQUIRE(st.pending.size() == 14); // 17 pushed - 3 popped
    CHECK(st.snapshot.pending_records() == 14);
    // What the balancer itself pops next: its three waiting batches, in order.
    std::vector<std::uint64_t> popped;
    for (int k = 0; k < 3; ++k) {
        const auto batch = b.pop();
        REQUIRE(batch);
        for (const payload_item& r : *batch) popped.push_back(r.id);
    }
    const std::vector<std::uint64_t> pending = item_ids(st.pending);
    CHECK(std::vector<std::uint64_t>(pending.begin(), pending.begin() + 9) == popped);
    CHECK(std::vector<std::uint64_t>(pending.begin() + 9, pending.end()) ==
          std::vector<std::uint64_t>{12, 13, 14, 15, 16});
    for (const payload_item& r : st.pending) CHECK(r.payload == "xxxx");
}

TEST_CASE("saved_state: the bytes are the snapshot's alone, whatever the records carry",
          "[state][saved-state]") {
    const payload_balancer::state small = fed(1).save();
    const payload_balancer::state large = fed(100000).save();
    CHECK(small.to_bytes() == bcl::detail::to_bytes(small.snapshot));
    CHECK(large.to_bytes() == small.to_bytes()); // same costs, same counters, other payloads
    CHECK(large.to_bytes().size() < 4096);
}

TEST_CASE("saved_state: from_bytes rebuilds the state from its bytes and its records",
          "[state][saved-state]") {
    payload_balancer::state st = fed(8).save();
    const std::string bytes = st.to_bytes();
    const std::vector<std::uint64_t> before = item_ids(st.pending);
    const payload_balancer::state back =
        payload_balancer::state::from_bytes(bytes, std::move(st.pending));
    CHECK(item_ids(back.pending) == before);
    CHECK(back.pending.front().payload == "xxxxxxxx");
    CHECK(back.to_bytes() == bytes);
    CHECK_NOTHROW(back.require_pending());
}

TEST_CASE("saved_state: a number of records other than the number saved is refused, giving both",
          "[state][saved-state][errors]") {
    payload_balancer::state st = fed(2).save();
    const std::string bytes = st.to_bytes();
    std::vector<payload_item> fewer(st.pending.begin(), st.pending.end() - 1);
    CHECK_THROWS_WITH(payload_balancer::state::from_bytes(bytes, fewer),
                      Contains("13 pending records given, but the state was saved with 14"));
    std::vector<payload_item> more = st.pending;
    more.push_back(payload_item{99, ""});
    CHECK_THROWS_WITH(payload_balancer::state::from_bytes(bytes, more),
                      Contains("15 pending records given, but the state was saved with 14"));
    CHECK_THROWS_WITH(payload_balancer::state::from_bytes(bytes, {}),
                      Contains("0 pending records given"));
    st.pending.pop_back();
    CHECK_THROWS_WITH(st.require_pending(), Contains("13 pending records given"));
}

TEST_CASE("saved_state: from_bytes refuses corrupted bytes and bytes of no possible balancer",
          "[state][saved-state][errors]") {
    const payload_balancer::state st = fed(2).save();
    std::string corrupted = st.to_bytes();
    corrupted[20] = static_cast<char>(corrupted[20] ^ 0x10);
    CHECK_THROWS_WITH(payload_balancer::state::from_bytes(corrupted, st.pending),
                      Contains("checksum mismatch"));
    CHECK_THROWS_WITH(payload_balancer::state::from_bytes(st.to_bytes().substr(0, 40), st.pending),
                      Contains("bcl: saved state"));
    // A record pushed that the state does not hold: checksum-valid, but inconsistent.
    bcl::detail::balancer_snapshot odd = st.snapshot;
    odd.stats.records_in += 1;
    CHECK_THROWS_WITH(payload_balancer::state::from_bytes(bcl::detail::to_bytes(odd), st.pending),
                      Contains("saved state is inconsistent"));
}
