// bcl::detail::field_writer and field_reader, as a specification: both walk the same field list,
// so whatever the writer writes the reader reads back into the same values. Each kind of field
// has a fixed layout of little-endian 8-byte words: an unsigned number or an enumeration as its
// value, a flag as 0 or 1, a double by its bits, running statistics as count, mean, m2, min, max,
// a quantile sketch as its zero count, the number of non-empty buckets and (index, count) for
// each, ascending; a count or a sequence's length as a word, a sequence of fixed length as its
// items alone; then the FNV-1a checksum. The reader refuses what no writer could have written (a
// value too large for its type, a flag above 1, an enumeration above 255, a count above its limit
// or above the bytes left, a bucket index past the last bucket, a sketch counting more than 2^62
// costs, a read past the end), and every refusal names the field.

#include <bcl/detail/caps/quantile_sketch.hpp>
#include <bcl/detail/state/bytes.hpp>
#include <bcl/detail/state/field_codec.hpp>
#include <bcl/detail/stats_access.hpp>
#include <bcl/error.hpp>
#include <bcl/statistics.hpp>

#include <catch2/catch.hpp>

#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

using bcl::detail::field_reader;
using bcl::detail::field_writer;
using bcl::detail::quantile_sketch;
using bcl::detail::stats_access;
using Catch::Matchers::Contains;

namespace {

enum class colour : std::uint8_t { red = 0, green = 1, blue = 7 };

/// A part with one field of every kind the codec knows, walked as a component's list is.
struct every_kind {
    bool flag = false;
    double number = 0.0;
    colour hue = colour::red;
    std::uint32_t small = 0;
    std::uint64_t big = 0;
    bcl::running_stats stats;
    quantile_sketch sketch;
    std::size_t windows = 0;             // a count, at most 10
    std::vector<std::uint64_t> sequence; // a length (at most 100, 8 bytes an item), then items
    std::vector<double> fixed;           // items whose number `windows` fixes

    template <class Io, class Part>
    static void fields(Io& io, Part& s) {
        io.field("the flag", s.flag);
        io.field("the number", s.number);
        io.field("the hue", s.hue);
        io.field("the small word", s.small);
        io.field("the big word", s.big);
        io.field("the stats", s.stats);
        io.field("the sketch", s.sketch);
        io.count("the window count", s.windows, 10, 0);
        io.length("the sequence length", s.sequence, 100, 8);
        io.items("the sequence", s.sequence);
        io.items("the fixed numbers", s.fixed, s.windows);
    }
};

/// The eight bytes of `v`, least significant first, written out by hand.
std::string word(std::uint64_t v) {
    std::string out;
    for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xffU));
    return out;
}

std::string word(double v) {
    return word(std::bit_cast<std::uint64_t>(v));
}

/// `body` followed by its checksum (FNV-1a, as bytes.test.cpp specifies it).
std::string sealed(const std::string& body) {
    return body + word(bcl::detail::fnv1a(body));
}

std::string write(const every_kind& s) {
    field_writer w;
    every_kind::fields(w, s);
    return w.finish();
}

every_kind read(const std::string& bytes) {
    every_kind s;
    field_reader r(bytes);
    every_kind::fields(r, s);
    r.expect_end();
    return s;
}

/// A part whose sketch holds a zero, 1.0 twice and 1000.0 once, and whose stats saw 2, 4 and 9.
every_kind sample_part() {
    every_kind s;
    s.flag = true;
    s.number = -0.0;
    s.hue = colour::blue;
    s.small = 0xfedcba98U;
    s.big = 0x0102030405060708ULL;
    for (const double x : {2.0, 4.0, 9.0}) s.stats.add(x);
    for (const double x : {0.0, 1.0, 1.0, 1000.0}) s.sketch.add(x);
    s.windows = 2;
    s.sequence = {5, 6, 7};
    s.fixed = {0.5, std::numeric_limits<double>::denorm_min()};
    return s;
}

/// The bytes of sample_part(), word by word, before the checksum. The sketch's two non-empty
/// buckets are found by scanning its own counts (the codec's promise is about their order and
/// layout).
std::string sample_body() {
    const every_kind s = sample_part();
    std::vector<std::size_t> used;
    for (std::size_t i = 0; i < quantile_sketch::bucket_count; ++i)
        if (s.sketch.buckets()[i] != 0) used.push_back(i);
    REQUIRE(used.size() == 2); // 1.0 and 1000.0 are far apart
    const double mean = 5.0;   // (2 + 4 + 9) / 3
    const double m2 = 9.0 + 1.0 + 16.0;
    return word(std::uint64_t{1}) + word(-0.0) + word(std::uint64_t{7}) +
           word(std::uint64_t{0xfedcba98U}) + word(std::uint64_t{0x0102030405060708ULL}) +
           word(std::uint64_t{3}) + word(mean) + word(m2) + word(2.0) + word(9.0) +
           word(std::uint64_t{1}) + word(std::uint64_t{2}) + word(std::uint64_t{used[0]}) +
           word(std::uint64_t{2}) + word(std::uint64_t{used[1]}) + word(std::uint64_t{1}) +
           word(std::uint64_t{2}) + word(std::uint64_t{3}) + word(std::uint64_t{5}) +
           word(std::uint64_t{6}) + word(std::uint64_t{7}) + word(0.5) +
           word(std::numeric_limits<double>::denorm_min());
}

/// sample_body() with the word at `index` replaced, sealed again: only the reader's own checks
/// can refuse it.
std::string with_word(std::size_t index, std::uint64_t v) {
    std::string body = sample_body();
    body.replace(8 * index, 8, word(v));
    return sealed(body);
}

} // namespace

TEST_CASE("field_codec: every kind of field is written as its hand-worked little-endian words, "
          "checksum last",
          "[state][field-codec]") {
    const std::string bytes = write(sample_part());
    CHECK(bytes.size() == 8 * 24);
    CHECK(bytes == sealed(sample_body()));
    field_writer w;
    CHECK(w.size() == 0);
    w.field("a word", std::uint64_t{1});
    w.field("a flag", false);
    CHECK(w.size() == 16);
}

TEST_CASE("field_codec: what the writer writes the reader reads back, field for field",
          "[state][field-codec]") {
    const every_kind in = sample_part();
    const every_kind out = read(write(in));
    CHECK(out.flag);
    CHECK(std::bit_cast<std::uint64_t>(out.number) == std::bit_cast<std::uint64_t>(-0.0));
    CHECK(out.hue == colour::blue);
    CHECK(out.small == 0xfedcba98U);
    CHECK(out.big == 0x0102030405060708ULL);
    const stats_access::raw a = stats_access::read(in.stats);
    const stats_access::raw b = stats_access::read(out.stats);
    CHECK(b.count == a.count);
    CHECK(b.mean == a.mean);
    CHECK(b.m2 == a.m2);
    CHECK(b.min == a.min);
    CHECK(b.max == a.max);
    CHECK(out.sketch.zeros() == 1);
    CHECK(out.sketch.count() == 4);
    CHECK(out.sketch.buckets() == in.sketch.buckets());
    CHECK(out.sketch.quantile(0.5) == in.sketch.quantile(0.5));
    CHECK(out.windows == 2);
    CHECK(out.sequence == std::vector<std::uint64_t>{5, 6, 7});
    CHECK(out.fixed == in.fixed);

    // Extremes travel unchanged: the largest words, infinities and a NaN's payload, empty parts.
    every_kind edge;
    edge.number = std::bit_cast<double>(0x7ff8000000000123ULL);
    edge.small = std::numeric_limits<std::uint32_t>::max();
    edge.big = std::numeric_limits<std::uint64_t>::max();
    edge.stats = stats_access::make({1, HUGE_VAL, 0.0, -HUGE_VAL, HUGE_VAL});
    const every_kind back = read(write(edge));
    CHECK(std::bit_cast<std::uint64_t>(back.number) == 0x7ff8000000000123ULL);
    CHECK(back.small == edge.small);
    CHECK(back.big == edge.big);
    CHECK(stats_access::read(back.stats).min == -HUGE_VAL);
    CHECK(back.sketch.count() == 0);
    CHECK(back.sequence.empty());
    CHECK(back.fixed.empty());
    // An empty sketch is its zero count and a bucket count of 0: two words.
    field_writer w;
    w.field("a sketch", quantile_sketch{});
    CHECK(w.finish() == sealed(word(std::uint64_t{0}) + word(std::uint64_t{0})));
}

TEST_CASE("field_codec: the largest accepted value of each field is read, one more is refused "
          "naming the field",
          "[state][field-codec][errors]") {
    using bcl::detail::max_saved_records;
    // Word indices in sample_body(): 0 flag, 2 hue, 3 small word, 10 sketch zeros, 11 sketch
    // bucket count, 12 first bucket index, 13 its count, 16 window count, 17 sequence length.
    struct edge {
        std::size_t index;
        std::uint64_t accepted; // (max_saved_records: no sum reaches past 2^62)
        std::uint64_t refused;
        const char* message;
    };
    const edge edges[] = {
        {0, 1, 2, "saved state has an invalid the flag"},
        {2, 255, 256, "saved state has an unknown the hue 256"},
        {3, 0xffffffffU, 0x100000000ULL, "saved state has an invalid the small word 4294967296"},
        {10, max_saved_records - 3, max_saved_records - 2,
         "the sketch counting more costs than records"},
        {13, max_saved_records - 2, max_saved_records - 1,
         "the sketch counting more costs than records"},
        {12, quantile_sketch::bucket_count - 1, quantile_sketch::bucket_count,
         "the sketch's bucket index = 2048, more than the possible 2047"},
        {16, 2, 11, "the window count = 11, more than the possible 10"},
    };
    for (const edge& e : edges) {
        INFO("word " << e.index);
        if (e.index != 16) CHECK_NOTHROW(read(with_word(e.index, e.accepted)));
        CHECK_THROWS_WITH(read(with_word(e.index, e.refused)), Contains(e.message));
    }
    // More buckets than the sketch has, or than the 11 words left hold (16 bytes a pair).
    CHECK_THROWS_WITH(read(with_word(11, 2049)), Contains("the sketch's bucket count"));
    CHECK_THROWS_WITH(read(with_word(11, 6)),
                      Contains("ends before the sketch's bucket count (6 items announced)"));
    // A sequence length past the bytes left is refused before anything is allocated for it.
    CHECK_THROWS_WITH(read(with_word(17, 50)),
                      Contains("ends before the sequence length (50 items announced)"));
    CHECK_THROWS_WITH(read(with_word(17, 101)), Contains("the sequence length"));
}

TEST_CASE("field_codec: bytes cut before any field, checksum valid, are refused naming that field",
          "[state][field-codec][errors]") {
    const std::string body = sample_body();
    // What a cut before each word lacks: the field it begins, or, inside a sketch's buckets or a
    // sequence's items, the count that announced more than is left.
    const char* const starts[] = {"the flag",
                                  "the number",
                                  "the hue",
                                  "the small word",
                                  "the big word",
                                  "the stats",
                                  "the stats",
                                  "the stats",
                                  "the stats",
                                  "the stats",
                                  "the sketch's zero count",
                                  "the sketch's bucket count",
                                  "the sketch's bucket count",
                                  "the sketch's bucket count",
                                  "the sketch's bucket count",
                                  "the sketch's bucket count",
                                  "the window count",
                                  "the sequence length",
                                  "the sequence length",
                                  "the sequence length",
                                  "the sequence length",
                                  "the fixed numbers",
                                  "the fixed numbers"};
    REQUIRE(std::size(starts) * 8 == body.size());
    for (std::size_t i = 0; i < std::size(starts); ++i) {
        INFO("cut before word " << i);
        CHECK_THROWS_WITH(read(sealed(body.substr(0, 8 * i))),
                          Contains("ends before") && Contains(starts[i]));
    }
    // One word too many is trailing bytes; a broken checksum is refused before any field.
    CHECK_THROWS_WITH(read(sealed(body + word(std::uint64_t{0}))),
                      Contains("8 unexpected trailing bytes"));
    std::string bad = sealed(body);
    bad[40] = static_cast<char>(bad[40] ^ 1);
    CHECK_THROWS_WITH(read(bad), Contains("checksum mismatch"));
}

TEST_CASE("field_codec: the writer refuses a sequence whose length the fields before it fix "
          "otherwise, naming it",
          "[state][field-codec][errors]") {
    every_kind s = sample_part();
    s.fixed.push_back(1.0); // three items, but windows says two
    CHECK_THROWS_WITH(write(s),
                      Contains("cannot save a state whose the fixed numbers holds 3 items, not 2"));
    s.fixed.clear();
    CHECK_THROWS_WITH(write(s), Contains("the fixed numbers holds 0 items, not 2"));
}
