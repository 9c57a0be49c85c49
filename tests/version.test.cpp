// The version macros agree with each other. Only the umbrella header is included: it must expose
// them.

#include <bcl/bcl.hpp>

#include <catch2/catch.hpp>

#include <string>

// Usable in the preprocessor, as version macros must be.
#if !defined(BCL_VERSION_MAJOR) || !defined(BCL_VERSION_MINOR) || !defined(BCL_VERSION_PATCH) ||   \
    !defined(BCL_VERSION_STRING)
#error "bcl/bcl.hpp must define BCL_VERSION_MAJOR, _MINOR, _PATCH and _STRING"
#endif
#if BCL_VERSION_MAJOR < 0 || BCL_VERSION_MINOR < 0 || BCL_VERSION_PATCH < 0
#error "bcl version numbers must be non-negative integers"
#endif

TEST_CASE("BCL_VERSION_STRING is MAJOR.MINOR.PATCH of the numeric version macros", "[version]") {
    const std::string expected = std::to_string(BCL_VERSION_MAJOR) + "." +
                                 std::to_string(BCL_VERSION_MINOR) + "." +
                                 std::to_string(BCL_VERSION_PATCH);
    CHECK(std::string(BCL_VERSION_STRING) == expected);
}

TEST_CASE("BCL_VERSION_STRING is a string literal of three dot-separated numbers", "[version]") {
    // Concatenation only compiles with a string literal.
    const std::string quoted = "v" BCL_VERSION_STRING;
    const std::string text = quoted.substr(1);
    int dots = 0;
    bool digits_only = !text.empty();
    for (std::size_t i = 0; i < text.size(); ++i) {
        if (text[i] == '.') {
            ++dots;
            // No empty component: neither leading, trailing nor doubled dots.
            if (i == 0 || i + 1 == text.size() || text[i + 1] == '.') digits_only = false;
        } else if (text[i] < '0' || text[i] > '9') {
            digits_only = false;
        }
    }
    CHECK(dots == 2);
    CHECK(digits_only);
}
