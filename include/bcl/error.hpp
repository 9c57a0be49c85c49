#pragma once
// The one exception type the library throws for bad input and misuse.

#include <bcl/detail/config.hpp>

#include <stdexcept>
#include <string>

namespace bcl {

/// Every error bcl throws derives from this. The message names what was wrong: the option, or the
/// record position and the offending value. Errors from user code (an estimator or the upstream
/// range) are never wrapped: they propagate unchanged.
class error : public std::runtime_error {
public:
    explicit error(const std::string& what) : std::runtime_error(what) {}
};

} // namespace bcl
