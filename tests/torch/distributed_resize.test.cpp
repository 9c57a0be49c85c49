// bcl::torch::distributed_balanced_sampler with epoch_order_kind::keyed, resumed at another world
// size, as a specification (docs/resume.md, "At another world size"; Python's
// python/tests/test_resize.py): an archive saved at R ranks at a step boundary loads into a
// sampler of R' ranks, any saving rank's archive serving every new rank, and the epoch goes on
// with every index exactly once over the epoch (the padding of either size aside), as many
// batches on every new rank; chains of resizes within an epoch; an archive of a pass over a rest
// resumes exactly at its own size; the rest's fields are written only for such a pass and a
// damaged one is refused naming the field, the sampler unchanged; Fisher-Yates still refuses
// another num_replicas, in either mode (keyed token mode's resize: distributed_token_resize).

#include "sampler_support.hpp"

#include <bcl/torch/distributed_balanced_sampler.hpp>

#include <catch2/catch.hpp>
#include <torch/torch.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace {

using namespace sampler_support;
using bcl::torch::distributed_balanced_sampler;
using bcl::torch::distributed_sampler_options;
using bcl::torch::epoch_order_kind;

constexpr std::size_t batch = 4;

std::vector<double> costs_of(std::size_t n) {
    const std::vector<std::size_t> lengths = make_lengths(n);
    std::vector<double> c;
    for (const std::size_t l : lengths) c.push_back(double(l) + double(l * l) / 256.0);
    return c;
}

distributed_balanced_sampler sampler(const std::vector<double>& costs, std::size_t ranks,
                                     std::size_t rank,
                                     epoch_order_kind order = epoch_order_kind::keyed,
                                     std::uint64_t seed = 1) {
    return distributed_balanced_sampler(costs, std::vector<std::uint64_t>(),
                                        {.num_replicas = ranks,
                                         .rank = rank,
                                         .batch_size = batch,
                                         .lookahead = 3,
                                         .seed = seed,
                                         .order = order});
}

std::vector<distributed_balanced_sampler> world(const std::vector<double>& costs, std::size_t ranks,
                                                std::uint64_t seed = 1) {
    std::vector<distributed_balanced_sampler> out;
    for (std::size_t r = 0; r < ranks; ++r)
        out.push_back(sampler(costs, ranks, r, epoch_order_kind::keyed, seed));
    return out;
}

// `steps` steps of every rank (fewer where the pass ends), appending the indices to `taken`.
void run(std::vector<distributed_balanced_sampler>& ranks, std::size_t steps, index_batch& taken) {
    for (std::size_t k = 0; k < steps; ++k)
        for (distributed_balanced_sampler& s : ranks)
            if (auto b = s.next(batch)) taken.insert(taken.end(), b->begin(), b->end());
}

// The rest of every rank's pass: each rank's batches, required equally many, each of B indices
// but the last.
std::vector<std::vector<index_batch>>
drain_world(std::vector<distributed_balanced_sampler>& ranks) {
    std::vector<std::vector<index_batch>> out;
    for (distributed_balanced_sampler& s : ranks) {
        const std::size_t left = s.size() - s.position();
        out.push_back(drain(s, batch));
        REQUIRE(out.back().size() == left);
        REQUIRE(out.back().size() == out.front().size()); // equal counts on every rank
        for (std::size_t i = 0; i + 1 < out.back().size(); ++i)
            REQUIRE(out.back()[i].size() == batch);
    }
    return out;
}

// Every index of 0..n-1 in `taken`, and no more repeats than `padding`.
void require_once(std::size_t n, const index_batch& taken, std::size_t padding) {
    std::vector<std::size_t> counts(n, 0);
    for (const std::size_t i : taken) {
        REQUIRE(i < n);
        ++counts[i];
    }
    std::size_t repeated = 0;
    for (std::size_t i = 0; i < n; ++i) {
        CAPTURE(i);
        REQUIRE(counts[i] >= 1); // every index of the epoch comes out
        repeated += counts[i] - 1;
    }
    REQUIRE(repeated <= padding);
}

// Loads `bytes` into a new world of `ranks`.
std::vector<distributed_balanced_sampler> resumed(const std::vector<double>& costs,
                                                  std::size_t ranks, const std::string& bytes,
                                                  std::uint64_t seed = 1) {
    std::vector<distributed_balanced_sampler> out = world(costs, ranks, seed);
    for (distributed_balanced_sampler& s : out) load_bytes(s, bytes);
    return out;
}

} // namespace

TEST_CASE("torch resize: a keyed archive saved at R ranks goes on at R' (1, R-1, R+1, 2R, R/2, a "
          "prime) at every step boundary, every index once over the epoch, equal counts",
          "[torch][distributed][resize][keyed]") {
    struct sizes {
        std::size_t from, to;
    };
    const sizes sz = GENERATE(sizes{4, 1}, sizes{4, 3}, sizes{4, 5}, sizes{4, 8}, sizes{4, 2},
                              sizes{4, 7}, sizes{6, 3}, sizes{1, 4}, sizes{3, 3}, sizes{2, 5});
    const std::uint64_t seed = GENERATE(1, 2);
    CAPTURE(sz.from, sz.to, seed);
    constexpr std::size_t n = 101;
    const std::vector<double> costs = costs_of(n);
    const std::size_t epoch_batches = sampler(costs, sz.from, 0).size();
    for (std::size_t steps = 0; steps <= epoch_batches; ++steps) { // the epoch's end too
        CAPTURE(steps);
        std::vector<distributed_balanced_sampler> old = world(costs, sz.from, seed);
        index_batch taken;
        run(old, steps, taken);
        // Any saving rank's archive serves every new rank.
        const std::string bytes = saved_bytes(old[steps % sz.from]);
        std::vector<distributed_balanced_sampler> next = resumed(costs, sz.to, bytes, seed);
        std::size_t digest_count = 0;
        for (distributed_balanced_sampler& s : next) {
            REQUIRE(s.epoch() == 0);
            REQUIRE(s.size() == next.front().size()); // size() counts the rest's batches
            REQUIRE(s.digest() == next.front().digest());
            digest_count += s.position() == (sz.to == sz.from ? steps : 0) ? 1 : 0;
        }
        REQUIRE(digest_count == sz.to);
        for (const auto& rank : drain_world(next))
            for (const index_batch& b : rank) taken.insert(taken.end(), b.begin(), b.end());
        // Padding: the old size's records never taken plus the new size's own repeats.
        require_once(n, taken, sz.from + sz.to);
        // The next epoch is whole again, at the new size.
        index_batch epoch1;
        for (distributed_balanced_sampler& s : next) {
            s.reset();
            REQUIRE(s.epoch() == 1);
            REQUIRE(s.size() == sampler(costs, sz.to, 0).size());
        }
        for (const auto& rank : drain_world(next))
            for (const index_batch& b : rank) epoch1.insert(epoch1.end(), b.begin(), b.end());
        require_once(n, epoch1, sz.to);
    }
}

TEST_CASE("torch resize: chains of two resizes within one epoch, every index once, and the "
          "archive a bitmap of about a window, never a list",
          "[torch][distributed][resize][keyed]") {
    struct chain {
        std::size_t a, b, c;
    };
    const chain ch =
        GENERATE(chain{4, 3, 5}, chain{2, 7, 2}, chain{8, 1, 3}, chain{5, 5, 2}, chain{3, 6, 6});
    CAPTURE(ch.a, ch.b, ch.c);
    constexpr std::size_t n = 1500;
    const std::vector<double> costs = costs_of(n);
    index_batch taken;
    std::vector<distributed_balanced_sampler> current = world(costs, ch.a);
    for (const std::size_t next_size : {ch.b, ch.c}) {
        run(current, 7, taken);
        const std::string bytes = saved_bytes(current.back());
        const archive_parts parts = archive_parts::of(bytes, false);
        if (parts.fields.count("bcl_rest_taken") != 0) {
            // The span stays within a window (of at most 8 ranks) per restart: the bitmap of two
            // windows at most, never N bits, let alone a list of indices.
            const auto bytes_held =
                static_cast<std::size_t>(parts.fields.at("bcl_rest_taken").numel());
            REQUIRE(bytes_held <= (2 * 8 * 3 * batch + 7) / 8);
        }
        current = resumed(costs, next_size, bytes);
    }
    for (const auto& rank : drain_world(current))
        for (const index_batch& b : rank) taken.insert(taken.end(), b.begin(), b.end());
    require_once(n, taken, ch.a + ch.b + ch.c);
}

TEST_CASE("torch resize: a pass over a rest resumes exactly at its own size, from any rank's "
          "archive; its archive holds the rest, an archive of a whole epoch does not",
          "[torch][distributed][resize][keyed]") {
    const std::vector<double> costs = costs_of(800);
    std::vector<distributed_balanced_sampler> old = world(costs, 4);
    index_batch taken;
    run(old, 5, taken);
    const std::string whole_bytes = saved_bytes(old[0]);
    const archive_parts whole = archive_parts::of(whole_bytes, false);
    for (const char* key : {"bcl_rest_start", "bcl_rest_span", "bcl_rest_taken"})
        REQUIRE(whole.fields.count(key) == 0);
    std::vector<distributed_balanced_sampler> next = resumed(costs, 3, whole_bytes);
    run(next, 4, taken);
    const std::string rest_bytes = saved_bytes(next[2]);
    const archive_parts rest = archive_parts::of(rest_bytes, false);
    REQUIRE(rest.fields.size() == whole.fields.size() + 3);
    REQUIRE(rest.ints("bcl_num_replicas") == int64s{3});
    REQUIRE(rest.ints("bcl_rest_start").size() == 1);
    for (std::size_t rank = 0; rank < 3; ++rank) {
        CAPTURE(rank);
        // From its own archive and from another rank's, at a step boundary alike.
        for (const std::size_t from : {rank, (rank + 1) % 3}) {
            distributed_balanced_sampler again = sampler(costs, 3, rank);
            move_distributed(again);
            load_bytes(again, saved_bytes(next[from]));
            REQUIRE(again.position() == 4);
            REQUIRE(again.size() == next[rank].size());
            REQUIRE(again.digest() == next[rank].digest());
            distributed_balanced_sampler twin = next[rank];
            REQUIRE(drain(again, batch) == drain(twin, batch));
        }
    }
    // The keyed archive of a whole epoch at the same size: today's exact resume, and of another
    // rank too, since the digest is every rank's.
    distributed_balanced_sampler same = sampler(costs, 4, 1);
    load_bytes(same, whole_bytes);
    REQUIRE(same.position() == 5);
    distributed_balanced_sampler twin = old[1];
    REQUIRE(drain(same, batch) == drain(twin, batch));
}

TEST_CASE("torch resize: a damaged rest, num_replicas or rank is refused naming the field, the "
          "sampler unchanged",
          "[torch][distributed][resize][keyed][tamper]") {
    const bool reseal = GENERATE(false, true);
    CAPTURE(reseal);
    const std::vector<double> costs = costs_of(700);
    std::vector<distributed_balanced_sampler> old = world(costs, 4);
    index_batch taken;
    run(old, 4, taken);
    std::vector<distributed_balanced_sampler> next = resumed(costs, 3, saved_bytes(old[0]));
    run(next, 1, taken);
    const std::string genuine = saved_bytes(next[0]);
    archive_parts parts = archive_parts::of(genuine, false);
    REQUIRE(parts.fields.count("bcl_rest_taken") == 1);
    const auto make = [&] { return sampler(costs, 3, 0); };
    const auto refused = [&](const std::vector<std::string>& names) {
        require_distributed_refused(make, parts.bytes(reseal), names);
    };
    const auto taken_bytes = [&] {
        const torch::Tensor t = parts.fields.at("bcl_rest_taken");
        return std::vector<std::uint8_t>(t.data_ptr<std::uint8_t>(),
                                         t.data_ptr<std::uint8_t>() + t.numel());
    };
    const auto set_taken = [&](const std::vector<std::uint8_t>& bytes) {
        torch::Tensor t = torch::empty({std::int64_t(bytes.size())}, torch::kUInt8);
        std::copy(bytes.begin(), bytes.end(), t.data_ptr<std::uint8_t>());
        parts.fields["bcl_rest_taken"] = t;
    };

    SECTION("the genuine archive loads, at its size and at another") {
        distributed_balanced_sampler restored = make();
        load_bytes(restored, parts.bytes(reseal));
        distributed_balanced_sampler twin = next[0];
        REQUIRE(drain(restored, batch) == drain(twin, batch));
        distributed_balanced_sampler other = sampler(costs, 5, 4);
        load_bytes(other, parts.bytes(reseal));
        REQUIRE(other.position() == 0);
    }
    SECTION("a start past the epoch, or negative") {
        parts.set("bcl_rest_start", {1000000});
        refused({"bcl_rest_start", "past the epoch's 700"});
        parts.set("bcl_rest_start", {-1});
        refused({"bcl_rest_start is -1, not a position"});
    }
    SECTION("a span past the epoch") {
        parts.set("bcl_rest_span", {700});
        refused({"past the epoch's 700"});
    }
    SECTION("a bitmap of another length, with bits past the span, or its start taken") {
        std::vector<std::uint8_t> bytes = taken_bytes();
        bytes.push_back(0);
        set_taken(bytes);
        refused({"bcl_rest_taken", "a bitmap of"});
        bytes.pop_back();
        const std::int64_t span = parts.ints("bcl_rest_span")[0];
        if (span % 8 != 0) {
            bytes.back() = static_cast<std::uint8_t>(bytes.back() | 0x80);
            set_taken(bytes);
            refused({"bits set past its span"});
            bytes.back() = static_cast<std::uint8_t>(bytes.back() & 0x7F);
        }
        bytes[0] = static_cast<std::uint8_t>(bytes[0] | 1);
        set_taken(bytes);
        refused({"starts at a position it marks taken"});
    }
    SECTION("a rest that from_parts takes but that is not the saved one: the digest") {
        std::vector<std::uint8_t> bytes = taken_bytes();
        const auto span = static_cast<std::size_t>(parts.ints("bcl_rest_span")[0]);
        std::size_t bit = 1;
        while (bit < span && (bytes[bit / 8] >> (bit % 8) & 1) != 0) ++bit;
        REQUIRE(bit < span); // the span holds records left besides its start
        bytes[bit / 8] = static_cast<std::uint8_t>(bytes[bit / 8] | (1u << (bit % 8)));
        set_taken(bytes);
        refused({"bcl_plan_digest does not match"});
    }
    SECTION("a field missing, or of another type") {
        parts.fields.erase("bcl_rest_taken");
        refused({"bcl_rest_taken is missing"});
        parts.fields = archive_parts::of(genuine, false).fields;
        parts.fields["bcl_rest_span"] = torch::full({1}, 1.0, torch::kFloat64);
        refused({"bcl_rest_span", "not a 1-d CPU tensor of Long"});
    }
    SECTION("a rest in an archive of an epoch not planned") {
        parts.set("bcl_plan_digest", {});
        parts.set("bcl_position", {0});
        parts.set("bcl_epoch", {0, 0, 0, 0});
        refused({"bcl_rest_start, bcl_rest_span and bcl_rest_taken are those of a pass"});
    }
    SECTION("num_replicas no plan takes, a rank not below it") {
        parts.set("bcl_num_replicas", {0});
        refused({"bcl_num_replicas is 0"});
        parts.set("bcl_num_replicas", {1LL << 40});
        refused({"bcl_num_replicas is 1099511627776", "records in one plan window"});
        parts.set("bcl_num_replicas", {3});
        parts.set("bcl_rank", {3});
        refused({"bcl_rank is 3, not below bcl_num_replicas (3)"});
    }
    SECTION("the position past the saved pass's batches") {
        parts.set("bcl_position", {1000});
        refused({"bcl_position is 1000, outside the epoch's 0 to"});
    }
}

TEST_CASE("torch resize: Fisher-Yates still refuses another num_replicas, in either mode, the "
          "sampler unchanged",
          "[torch][distributed][resize]") {
    const std::vector<double> costs = costs_of(300);
    distributed_balanced_sampler fy = sampler(costs, 4, 0, epoch_order_kind::fisher_yates);
    (void)fy.next(batch);
    require_distributed_refused(
        [&] { return sampler(costs, 2, 0, epoch_order_kind::fisher_yates); }, saved_bytes(fy),
        {"bcl_num_replicas is 4, but this sampler's num_replicas is 2"});
    // Nor another rank, as before.
    require_distributed_refused(
        [&] { return sampler(costs, 4, 1, epoch_order_kind::fisher_yates); }, saved_bytes(fy),
        {"bcl_rank is 0, but this sampler's rank is 1"});

    const std::vector<std::uint64_t> lengths(300, 100);
    const auto token = [&](std::size_t ranks) {
        return distributed_balanced_sampler(std::vector<double>(), lengths,
                                            {.num_replicas = ranks,
                                             .rank = 0,
                                             .order = epoch_order_kind::fisher_yates,
                                             .max_tokens = 1000,
                                             .micro_batches = 1});
    };
    distributed_balanced_sampler tok = token(4);
    (void)tok.next(1);
    const std::string bytes = saved_bytes(tok);
    distributed_balanced_sampler other = token(2);
    const std::vector<index_batch> before = drain(other, 1);
    distributed_balanced_sampler target = token(2);
    REQUIRE_THROWS_WITH(load_bytes(target, bytes),
                        Contains("bcl_num_replicas is 4, but this sampler's num_replicas is 2"));
    REQUIRE(drain(target, 1) == before);
}
