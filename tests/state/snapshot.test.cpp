// bcl::detail::balancer_snapshot and its byte format, as a specification: to_bytes writes the
// magic word "bclstat1", the format version, every option in the order bcl::options lists them,
// then each part's fields, the balancer's own first (the finished flag, the last batch cost, the
// record counters, ...); read_snapshot reads back exactly what was written. It refuses bytes of
// another kind or with invalid options before it reads any part, and bounds every count it reads
// by the options just read; whether the parts agree with each other is left to
// snapshot_from_bytes. A snapshot's pending records are its waiting records and its buffered ones.

#include "support/contract_checks.hpp"
#include "support/distributions.hpp"

#include <bcl/balancer.hpp>
#include <bcl/detail/state/bytes.hpp>
#include <bcl/detail/state/snapshot.hpp>
#include <bcl/error.hpp>
#include <bcl/options.hpp>

#include <catch2/catch.hpp>

#include <bit>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

using namespace bcl_test;
using bcl::detail::balancer_snapshot;
using Catch::Matchers::Contains;

namespace {

/// The options below and 10 records of costs 1..10 pushed into a tumbling balancer, one batch
/// popped: by hand, B = 3, K = 2 make one round of 6 records (run at the 7th push), one batch of 3
/// out, one of 3 waiting, records 6..9 buffered.
bcl::options options_used() {
    bcl::options opt{.batch_size = 3, .lookahead = 2, .drop_last = true, .seed = 0x1234};
    opt.policy = bcl::lookahead_policy::tumbling;
    return opt;
}

balancer_snapshot saved() {
    bcl::balancer<rec, cost_of> b{cost_of{}, options_used()};
    for (std::size_t i = 0; i < 10; ++i) b.push(rec{i, static_cast<double>(i + 1)});
    REQUIRE(b.pop());
    return b.save().snapshot;
}

std::uint64_t word_at(const std::string& bytes, std::size_t index) {
    std::uint64_t v = 0;
    for (std::size_t i = 0; i < 8; ++i)
        v |= std::uint64_t{static_cast<unsigned char>(bytes[8 * index + i])} << (8 * i);
    return v;
}

/// `bytes` without their checksum, with word `index` replaced (when given), cut to `words` words
/// (when given) and sealed again.
std::string altered(const std::string& bytes, std::size_t index, std::uint64_t v,
                    std::size_t words = SIZE_MAX) {
    std::string body = bytes.substr(0, bytes.size() - 8);
    for (std::size_t i = 0; i < 8; ++i)
        body[8 * index + i] = static_cast<char>((v >> (8 * i)) & 0xffU);
    if (words != SIZE_MAX) body.resize(8 * words);
    const std::uint64_t sum = bcl::detail::fnv1a(body);
    for (std::size_t i = 0; i < 8; ++i) body.push_back(static_cast<char>((sum >> (8 * i)) & 0xffU));
    return body;
}

std::size_t option_count() {
    std::size_t n = 0;
    bcl::for_each_option_field([&](const char*, auto) { ++n; });
    return n;
}

} // namespace

TEST_CASE("snapshot: the bytes are the magic word, the version, the options in their declared "
          "order, then the balancer's own fields",
          "[state][snapshot]") {
    const balancer_snapshot s = saved();
    const std::string bytes = bcl::detail::to_bytes(s);
    REQUIRE(bytes.size() % 8 == 0);
    CHECK(bytes.substr(0, 8) == "bclstat1");
    CHECK(word_at(bytes, 1) == 9);
    // batch_size, lookahead, drop_last, seed: bcl::options' first four members, in that order.
    CHECK(word_at(bytes, 2) == 3);
    CHECK(word_at(bytes, 3) == 2);
    CHECK(word_at(bytes, 4) == 1);
    CHECK(word_at(bytes, 5) == 0x1234);
    // One word an option; then the finished flag, the last batch cost, records_in, records_out.
    const std::size_t own = 2 + option_count();
    CHECK(word_at(bytes, own) == 0);
    const double first_batch_cost = s.last_batch_cost;
    CHECK(first_batch_cost > 0.0);
    CHECK(word_at(bytes, own + 1) == std::bit_cast<std::uint64_t>(first_batch_cost));
    CHECK(word_at(bytes, own + 2) == 10);
    CHECK(word_at(bytes, own + 3) == 3);
}

TEST_CASE("snapshot: read_snapshot reads back exactly what to_bytes wrote, consistent or not",
          "[state][snapshot]") {
    const balancer_snapshot s = saved();
    const std::string bytes = bcl::detail::to_bytes(s);
    const balancer_snapshot back = bcl::detail::read_snapshot(bytes);
    CHECK(back.opt.seed == 0x1234);
    CHECK(back.opt.drop_last);
    CHECK(back.stats.records_in == 10);
    CHECK(back.stats.windows == 1);
    CHECK(back.waiting_arrivals == s.waiting_arrivals);
    CHECK(back.buffer_arrivals == std::vector<std::uint64_t>{6, 7, 8, 9});
    CHECK(back.buffer_costs == std::vector<double>{7.0, 8.0, 9.0, 10.0});
    CHECK(bcl::detail::to_bytes(back) == bytes);
    // A record too many in the counters is the consistency check's business, not the reader's.
    balancer_snapshot odd = s;
    odd.stats.records_in += 1;
    CHECK(bcl::detail::read_snapshot(bcl::detail::to_bytes(odd)).stats.records_in == 11);
}

TEST_CASE("snapshot: the pending records are the waiting records, then the buffered ones",
          "[state][snapshot]") {
    balancer_snapshot s;
    CHECK(s.pending_records() == 0);
    s.waiting_arrivals = {0, 1, 2};
    CHECK(s.pending_records() == 3);
    s.buffer_costs.assign(5, 1.0);
    CHECK(s.pending_records() == 8);
    CHECK(saved().pending_records() == 7); // 3 waiting + 4 buffered, by hand
}

TEST_CASE("snapshot: bytes of another kind or with invalid options are refused before any part "
          "is read, and every count is bounded by the options read",
          "[state][snapshot][errors]") {
    const balancer_snapshot s = saved();
    const std::string bytes = bcl::detail::to_bytes(s);
    CHECK_THROWS_WITH(bcl::detail::read_snapshot(altered(bytes, 0, 0x316574617473636cULL)),
                      Contains("these bytes are not a saved balancer state"));
    // batch_size = 0, and the bytes end right after the options: the options are refused, not
    // the missing parts.
    const std::size_t own = 2 + option_count();
    CHECK_THROWS_WITH(bcl::detail::read_snapshot(altered(bytes, 2, 0, own)),
                      Contains("batch_size"));
    CHECK_THROWS_WITH(bcl::detail::read_snapshot(altered(bytes, 2, 3, own)),
                      Contains("ends before the finished flag"));
    // Four waiting batches under lookahead = 2, and seven buffered records where a tumbling
    // buffer holds K * B = 6: the writer writes what it is given, the reader bounds the counts.
    balancer_snapshot waiting = s;
    waiting.waiting_batch_costs.assign(4, 1.0);
    CHECK_THROWS_WITH(bcl::detail::read_snapshot(bcl::detail::to_bytes(waiting)),
                      Contains("the waiting batch count = 4, more than the possible 2"));
    balancer_snapshot buffered = s;
    buffered.buffer_costs.assign(7, 1.0);
    buffered.buffer_arrivals.assign(7, 0);
    CHECK_THROWS_WITH(bcl::detail::read_snapshot(bcl::detail::to_bytes(buffered)),
                      Contains("the buffered record count = 7, more than the possible 6"));
}
