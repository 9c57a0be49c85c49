// bcl::detail::number_text, as a specification: numbers in messages are the shortest text that
// reads back as the same double, so a message names the value a user gave, bit for bit.

#include <bcl/detail/number_text.hpp>

#include <catch2/catch.hpp>

#include <bit>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <random>
#include <string>

TEST_CASE("number_text: the shortest text, and special values spelt plainly", "[number_text]") {
    using bcl::detail::number_text;
    CHECK(number_text(0.1) == "0.1");
    CHECK(number_text(2.5) == "2.5");
    CHECK(number_text(123456789.0) == "123456789");
    CHECK(number_text(1e120) == "1e+120");
    CHECK(number_text(-0.0) == "-0");
    CHECK(number_text(5e-324) == "5e-324");
    CHECK(number_text(std::numeric_limits<double>::infinity()) == "inf");
    CHECK(number_text(-std::numeric_limits<double>::infinity()) == "-inf");
    CHECK(number_text(std::numeric_limits<double>::quiet_NaN()) == "nan");
    CHECK(number_text(std::numeric_limits<double>::max()) == "1.7976931348623157e+308");
}

TEST_CASE("number_text: every finite double reads back bit for bit", "[number_text]") {
    std::mt19937_64 gen(11);
    for (int i = 0; i < 100000; ++i) {
        const auto x = std::bit_cast<double>(gen());
        if (!(x == x) || x == std::numeric_limits<double>::infinity() ||
            x == -std::numeric_limits<double>::infinity())
            continue;
        const std::string text = bcl::detail::number_text(x);
        char* end = nullptr; // strtod: libc++ 16 has no from_chars for doubles
        const double back = std::strtod(text.c_str(), &end);
        REQUIRE(end == text.c_str() + text.size());
        REQUIRE(std::bit_cast<std::uint64_t>(back) == std::bit_cast<std::uint64_t>(x));
    }
}
