#pragma once
// The message of the bcl::error a call throws, for tests that check what an error names.

#include <bcl/error.hpp>

#include <exception>
#include <string>

namespace bcl_test {

/// The message of the bcl::error `f` throws; a marker string if it throws something else or
/// nothing, so a CHECK_THAT on the result fails readably.
template <class F>
std::string bcl_error_message(F&& f) {
    try {
        f();
    } catch (const bcl::error& e) {
        return e.what();
    } catch (const std::exception& e) {
        return std::string("<not a bcl::error: ") + e.what() + ">";
    }
    return "<no exception>";
}

} // namespace bcl_test
