// bcl::detail::byte_writer and byte_reader, as a specification: words are 8 bytes little-endian,
// doubles by their bits, flags 0 or 1; finish() appends the FNV-1a checksum of what came before
// (its published test values); the reader refuses short bytes, a wrong checksum, a read past the
// end, a flag above 1, a count above its limit or above the bytes left, and trailing bytes, each
// naming what it read.

#include <bcl/detail/state/bytes.hpp>
#include <bcl/error.hpp>

#include <catch2/catch.hpp>

#include <bit>
#include <cstdint>
#include <limits>
#include <string>

using bcl::detail::byte_reader;
using bcl::detail::byte_writer;
using Catch::Matchers::Contains;

TEST_CASE("bytes: FNV-1a 64, as published", "[state][bytes]") {
    CHECK(bcl::detail::fnv1a("") == 0xcbf29ce484222325ULL);
    CHECK(bcl::detail::fnv1a("a") == 0xaf63dc4c8601ec8cULL);
    CHECK(bcl::detail::fnv1a("foobar") == 0x85944171f73967e8ULL);
}

TEST_CASE("bytes: what is written reads back, little-endian, checksum last", "[state][bytes]") {
    byte_writer w;
    w.u64(0x0102030405060708ULL);
    w.f64(-0.0);
    w.f64(std::numeric_limits<double>::denorm_min());
    w.flag(true);
    w.flag(false);
    w.u64(3); // a count of three words
    for (std::uint64_t i = 0; i < 3; ++i) w.u64(i);
    CHECK(w.size() == 8 * 9);
    const std::string bytes = w.finish();
    REQUIRE(bytes.size() == 8 * 10);
    CHECK(bytes.substr(0, 8) == std::string("\x08\x07\x06\x05\x04\x03\x02\x01", 8));
    byte_reader r(bytes);
    CHECK(r.u64("word") == 0x0102030405060708ULL);
    CHECK(std::bit_cast<std::uint64_t>(r.f64("zero")) == std::bit_cast<std::uint64_t>(-0.0));
    CHECK(r.f64("tiny") == std::numeric_limits<double>::denorm_min());
    CHECK(r.flag("yes"));
    CHECK_FALSE(r.flag("no"));
    CHECK(r.count("items", 3, 8) == 3);
    for (std::uint64_t i = 0; i < 3; ++i) CHECK(r.u64("item") == i);
    CHECK_NOTHROW(r.expect_end());
}

TEST_CASE("bytes: short, corrupted, overread, bad flags, counts and trailing bytes are refused "
          "naming the field",
          "[state][bytes]") {
    CHECK_THROWS_WITH(byte_reader(std::string(7, '\0')),
                      Contains("saved state is truncated (7 bytes)"));
    byte_writer w;
    w.u64(2);
    w.u64(5);
    std::string bytes = w.finish();
    // Any one bit flipped anywhere breaks the checksum.
    for (std::size_t i = 0; i < bytes.size(); ++i)
        for (int bit = 0; bit < 8; ++bit) {
            std::string bad = bytes;
            bad[i] = static_cast<char>(bad[i] ^ (1 << bit));
            REQUIRE_THROWS_WITH(byte_reader(bad), Contains("checksum mismatch"));
        }
    {
        byte_reader r(bytes);
        CHECK_THROWS_WITH(r.flag("a flag"), Contains("saved state has an invalid a flag"));
    }
    {
        byte_reader r(bytes);
        CHECK_THROWS_WITH(r.count("the records", 1, 0),
                          Contains("the records = 2, more than the possible 1"));
    }
    {
        byte_reader r(bytes);
        // 2 items of 8 bytes announced, 8 bytes left.
        CHECK_THROWS_WITH(r.count("the records", 10, 8),
                          Contains("ends before the records (2 items announced)"));
    }
    {
        byte_reader r(bytes);
        CHECK(r.u64("first") == 2);
        CHECK_THROWS_WITH(r.expect_end(), Contains("8 unexpected trailing bytes"));
        CHECK(r.u64("second") == 5);
        CHECK_THROWS_WITH(r.u64("a third"), Contains("saved state ends before a third"));
    }
    CHECK_THROWS_AS(byte_reader(std::string(3, 'x')), bcl::error);
}
