// detail/archive.hpp, as a specification: archive_writer puts int64 values, dataset indices,
// bytes and doubles into a libtorch archive, each a 1-d CPU buffer of its element type, and
// archive_reader reads them back exactly, refusing a field that is missing, not a tensor, of
// another type or shape, or of another count where one value is asked (a bcl::error naming the
// key, prefixed with the reader's name). archive_digest is the documented mix (SplitMix64's
// finalizer over each field's key, type, length and values, the fields' hashes summed): it does
// not depend on the order of the fields and changes with any of them. The seal is the digest of
// every field written, and check_seal passes only when the fields read are those. checked_indices
// refuses a negative index and one not below a known dataset size, naming the entry.

#include "../sampler_support.hpp"

#include <bcl/torch/detail/archive.hpp>

#include <catch2/catch.hpp>
#include <torch/torch.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace {

using namespace sampler_support;
using bcl::torch::detail::archive_digest;
using bcl::torch::detail::archive_reader;
using bcl::torch::detail::archive_writer;
using bcl::torch::detail::checked_indices;
using std::uint64_t;

// SplitMix64's output function, as published (Steele, Lea, Flood 2014; Vigna's splitmix64.c),
// with the state step folded in: mix(k * golden) is the k+1-th output of the generator seeded 0.
constexpr uint64_t mix(uint64_t z) {
    z += 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}
// The generator seeded 0 begins e220a8397b1dcdaf, 6e789e6aa1b965f4.
static_assert(mix(0) == 0xe220a8397b1dcdafULL);
static_assert(mix(0x9e3779b97f4a7c15ULL) == 0x6e789e6aa1b965f4ULL);

// c10's element type numbers (Byte, Long, Double), which the digest mixes in.
static_assert(static_cast<int>(torch::kUInt8) == 0 && static_cast<int>(torch::kInt64) == 4 &&
              static_cast<int>(torch::kFloat64) == 7);

// A field's hash as the header documents it, over its words: key length, key bytes, type,
// length, values; the digest is mix(sum of hashes).
uint64_t field_hash(const std::string& key, uint64_t type, const std::vector<uint64_t>& values) {
    uint64_t h = 0x62636c2d61726368ULL; // "bcl-arch"
    const auto absorb = [&h](uint64_t w) { h = mix(h ^ mix(w)); };
    absorb(key.size());
    for (const char c : key) absorb(static_cast<unsigned char>(c));
    absorb(type);
    absorb(values.size());
    for (const uint64_t v : values) absorb(v);
    return h;
}

torch::Tensor int64_tensor(const int64s& v) {
    return archive_parts::tensor(v);
}
torch::Tensor double_tensor(const std::vector<double>& v) {
    return torch::tensor(v, torch::kFloat64).reshape({-1}).clone();
}
torch::Tensor byte_tensor(const std::string& s) {
    torch::Tensor t = torch::empty({static_cast<std::int64_t>(s.size())}, torch::kUInt8);
    for (std::size_t i = 0; i < s.size(); ++i)
        t[static_cast<std::int64_t>(i)] = static_cast<std::uint8_t>(s[i]);
    return t;
}

// Fills `in` with what `out` holds, through bytes.
void reopen(torch::serialize::OutputArchive& out, torch::serialize::InputArchive& in) {
    std::istringstream stream(archive_bytes(out));
    in.load_from(stream);
}

// The message of what `f` throws as bcl::error, or "".
template <class F>
std::string refusal(F&& f) {
    try {
        f();
    } catch (const bcl::error& e) {
        return e.what();
    }
    return "";
}

} // namespace

TEST_CASE("archive: the digest is the documented mix: SplitMix64's finalizer of 0 for no "
          "field, else of the sum of each field's hash over its key, type, length and values",
          "[torch][archive]") {
    REQUIRE(archive_digest().value() == 0xe220a8397b1dcdafULL);

    const double nan = std::numeric_limits<double>::quiet_NaN();
    archive_digest d;
    d.add("bcl_a", int64_tensor({1, -2, std::numeric_limits<std::int64_t>::max()}));
    d.add("b", byte_tensor(std::string("ab\0c", 4)));
    d.add("bcl_real", double_tensor({-0.0, 1.5, nan}));
    d.add("empty", int64_tensor({}));
    const uint64_t sum =
        field_hash("bcl_a", 4, {1, uint64_t(0) - 2, (uint64_t(1) << 63) - 1}) +
        field_hash("b", 0, {'a', 'b', 0, 'c'}) +
        field_hash("bcl_real", 7,
                   {uint64_t(1) << 63, 0x3ff8000000000000ULL, std::bit_cast<uint64_t>(nan)}) +
        field_hash("empty", 4, {});
    REQUIRE(d.value() == mix(sum));
}

TEST_CASE("archive: the digest does not depend on the order of the fields, and changes with a "
          "value, a key, the type, a dropped, added or moved entry",
          "[torch][archive]") {
    const auto digest = [](const std::vector<std::pair<std::string, torch::Tensor>>& fields) {
        archive_digest d;
        for (const auto& [key, t] : fields) d.add(key, t);
        return d.value();
    };
    const torch::Tensor a = int64_tensor({3, 1, 4, 1, 5});
    const torch::Tensor b = byte_tensor("format/4");
    const torch::Tensor c = double_tensor({2.5});
    const uint64_t base = digest({{"a", a}, {"b", b}, {"c", c}});
    REQUIRE(digest({{"c", c}, {"a", a}, {"b", b}}) == base);
    REQUIRE(digest({{"b", b}, {"c", c}, {"a", a}}) == base);

    const std::vector<uint64_t> altered = {
        digest({{"a", int64_tensor({3, 1, 4, 1, 6})}, {"b", b}, {"c", c}}),    // a value
        digest({{"a", int64_tensor({3, 1, 4, 1})}, {"b", b}, {"c", c}}),       // dropped
        digest({{"a", int64_tensor({3, 1, 4, 1, 5, 0})}, {"b", b}, {"c", c}}), // added
        digest({{"a", int64_tensor({1, 3, 4, 1, 5})}, {"b", b}, {"c", c}}),    // moved
        digest({{"A", a}, {"b", b}, {"c", c}}),                                // a key
        digest({{"a", b}, {"b", a}, {"c", c}}),                                // swapped fields
        digest({{"a", a}, {"b", b}}),                                          // a field dropped
        // The same 64 bits as an int64 instead of a double.
        digest({{"a", a}, {"b", b}, {"c", int64_tensor({std::bit_cast<std::int64_t>(2.5)})}}),
    };
    for (std::size_t k = 0; k < altered.size(); ++k) {
        CAPTURE(k);
        REQUIRE(altered[k] != base);
    }

    // Over many seeds: fields of random keys and values, added in a shuffled order, give the
    // same digest; one entry changed by one gives another.
    for (std::uint64_t seed = 1; seed <= 50; ++seed) {
        CAPTURE(seed);
        std::mt19937_64 rng(seed);
        std::vector<std::pair<std::string, torch::Tensor>> fields;
        const std::size_t count = 1 + rng() % 6;
        for (std::size_t f = 0; f < count; ++f) {
            int64s values(rng() % 5);
            for (std::int64_t& v : values) v = static_cast<std::int64_t>(rng() % 7) - 3;
            fields.emplace_back(std::string(1, static_cast<char>('a' + f)), int64_tensor(values));
        }
        const uint64_t digest_before = digest(fields);
        std::shuffle(fields.begin(), fields.end(), rng);
        REQUIRE(digest(fields) == digest_before);
        torch::Tensor& t = fields[rng() % fields.size()].second;
        if (t.numel() == 0) continue;
        t = t.clone();
        t[static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(t.numel()))] += 1;
        REQUIRE(digest(fields) != digest_before);
    }
}

TEST_CASE("archive: what a writer writes a reader reads back exactly, each field a 1-d CPU "
          "buffer of its type, and the seal is the digest of the fields",
          "[torch][archive]") {
    const int64s ints = {0, -1, std::numeric_limits<std::int64_t>::min(), 42};
    const std::vector<std::size_t> indices = {7, 0, std::size_t{1} << 40};
    const std::string bytes("tag\0/4\xff", 7);
    torch::serialize::OutputArchive out;
    archive_writer w(out);
    w.int64s("ints", ints);
    w.int64s("none", {});
    w.indices("indices", indices);
    w.bytes("bytes", bytes);
    w.bytes("no_bytes", "");
    w.real("real", -0.0);
    w.int64s("one", int64s{-9});
    w.seal("seal");

    torch::serialize::InputArchive in;
    reopen(out, in);
    // Each field as a buffer, of its type and one dimension.
    for (const auto& [key, type] :
         std::vector<std::pair<std::string, torch::ScalarType>>{{"ints", torch::kInt64},
                                                                {"indices", torch::kInt64},
                                                                {"bytes", torch::kUInt8},
                                                                {"real", torch::kFloat64},
                                                                {"seal", torch::kInt64}}) {
        CAPTURE(key);
        torch::Tensor t;
        REQUIRE(in.try_read(key, t, /*is_buffer=*/true));
        REQUIRE(t.scalar_type() == type);
        REQUIRE(t.dim() == 1);
    }

    archive_reader r(in, "reader");
    REQUIRE(r.int64s("ints") == ints);
    REQUIRE(r.int64s("none").empty());
    REQUIRE(r.int64s("indices") == int64s{7, 0, std::int64_t{1} << 40});
    REQUIRE(r.bytes("bytes") == bytes);
    REQUIRE(r.bytes("no_bytes").empty());
    const double real = r.real("real");
    REQUIRE(std::bit_cast<uint64_t>(real) == std::bit_cast<uint64_t>(-0.0));
    REQUIRE(r.int64("one") == -9);
    REQUIRE(r.peek_type("bytes") == torch::kUInt8);
    REQUIRE(!r.peek_type("absent").has_value());
    REQUIRE_NOTHROW(r.check_seal("seal")); // peek_type() read nothing into the digest

    // The seal's value: the digest of the seven fields, by the reference.
    archive_digest expected;
    expected.add("ints", int64_tensor(ints));
    expected.add("none", int64_tensor({}));
    expected.add("indices", int64_tensor({7, 0, std::int64_t{1} << 40}));
    expected.add("bytes", byte_tensor(bytes));
    expected.add("no_bytes", byte_tensor(""));
    expected.add("real", double_tensor({-0.0}));
    expected.add("one", int64_tensor({-9}));
    archive_reader again(in, "again");
    REQUIRE(std::bit_cast<uint64_t>(again.int64("seal")) == expected.value());
}

TEST_CASE("archive: check_seal refuses when the fields read are not those written: one left "
          "unread, or one altered after the seal",
          "[torch][archive]") {
    torch::serialize::OutputArchive out;
    archive_writer w(out);
    w.int64s("a", int64s{1, 2, 3});
    w.bytes("b", "x");
    w.seal("bcl_digest");
    torch::serialize::InputArchive in;
    reopen(out, in);

    archive_reader partial(in, "partial");
    (void)partial.int64s("a");
    REQUIRE(refusal([&] { partial.check_seal("bcl_digest"); }) ==
            "partial: the archive's bcl_digest does not match the archive's fields: the archive "
            "was altered or damaged after it was saved");

    // The same archive with "a" altered and the old seal kept.
    archive_parts parts = archive_parts::of(archive_bytes(out), /*nested=*/false);
    parts.set("a", {1, 2, 4});
    torch::serialize::InputArchive altered;
    std::istringstream stream(parts.bytes(/*reseal=*/false));
    altered.load_from(stream);
    archive_reader r(altered, "r");
    (void)r.int64s("a");
    (void)r.bytes("b");
    REQUIRE_THAT(refusal([&] { r.check_seal("bcl_digest"); }),
                 Contains("bcl_digest does not match"));
}

TEST_CASE("archive: a reader refuses a field missing, not a tensor, of another type or shape, or "
          "of another count where one value is asked, naming the key",
          "[torch][archive]") {
    torch::serialize::OutputArchive out;
    out.write("doubles", double_tensor({1.0}), /*is_buffer=*/true);
    out.write("matrix", torch::zeros({2, 2}, torch::kInt64), /*is_buffer=*/true);
    out.write("number", c10::IValue(std::int64_t{5}));
    archive_writer w(out);
    w.int64s("two", int64s{1, 2});
    w.int64s("zero", {});
    w.real("real", 1.0);
    torch::serialize::InputArchive in;
    reopen(out, in);
    archive_reader r(in, "bcl::who");

    const std::string prefix = "bcl::who: the archive's ";
    REQUIRE(refusal([&] { (void)r.int64s("absent"); }) == prefix + "absent is missing");
    REQUIRE(refusal([&] { (void)r.int64s("number"); }) == prefix + "number is not a tensor");
    REQUIRE(refusal([&] { (void)r.int64s("doubles"); }) ==
            prefix + "doubles is not a 1-d CPU tensor of Long");
    REQUIRE(refusal([&] { (void)r.bytes("two"); }) ==
            prefix + "two is not a 1-d CPU tensor of Byte");
    REQUIRE(refusal([&] { (void)r.real("two"); }) ==
            prefix + "two is not a 1-d CPU tensor of Double");
    REQUIRE(refusal([&] { (void)r.int64s("matrix"); }) ==
            prefix + "matrix is not a 1-d CPU tensor of Long");
    REQUIRE(refusal([&] { (void)r.int64("two"); }) == prefix + "two has 2 values, not 1");
    REQUIRE(refusal([&] { (void)r.int64("zero"); }) == prefix + "zero has 0 values, not 1");
    REQUIRE(refusal([&] { r.fail("anything"); }) == prefix + "anything");
    REQUIRE(r.who() == "bcl::who");
    REQUIRE(r.real("real") == 1.0);
}

TEST_CASE("archive: checked_indices keeps indices in [0, dataset size) and refuses a negative one "
          "or one not below the size, naming the key and the entry",
          "[torch][archive]") {
    REQUIRE(checked_indices("w", "k", int64s{0, 9, 3}, 10) == std::vector<std::size_t>{0, 9, 3});
    REQUIRE(checked_indices("w", "k", {}, 0).empty());
    // With no size known, any non-negative int64 is an index.
    const std::int64_t top = std::numeric_limits<std::int64_t>::max();
    REQUIRE(checked_indices("w", "k", int64s{top}, std::nullopt) ==
            std::vector<std::size_t>{static_cast<std::size_t>(top)});

    REQUIRE(refusal([] {
                (void)checked_indices("w", "bcl_staged", int64s{0, 9, 10}, 10);
            }) == "w: the archive's bcl_staged holds 10 at entry 2, outside the dataset's [0, 10)");
    REQUIRE(refusal([] {
                (void)checked_indices("w", "bcl_pushed", int64s{4, -1}, 10);
            }) == "w: the archive's bcl_pushed holds -1 at entry 1, outside the dataset's [0, 10)");
    REQUIRE(refusal([] { (void)checked_indices("w", "k", int64s{-5}, std::nullopt); }) ==
            "w: the archive's k holds -5 at entry 0, outside the dataset's [0, 2^63)");
    REQUIRE(refusal([] { (void)checked_indices("w", "k", int64s{0}, 0); }) ==
            "w: the archive's k holds 0 at entry 0, outside the dataset's [0, 0)");
}
