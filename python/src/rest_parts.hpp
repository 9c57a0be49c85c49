#pragma once
// What a checkpoint left of an epoch (bcl::epoch_rest) as a Python state holds it: the tuple
// (start, span, taken), taken the span's bitmap as bytes; None for the whole epoch.

#include <bcl/epoch_rest.hpp>

#include <pybind11/pybind11.h>

#include <cstdint>
#include <span>
#include <string>

namespace bcl_python {

namespace py = pybind11;

/// The rest of an epoch of `n` records from its parts: `parts` None (the whole epoch) or
/// (start, span, taken), checked by bcl::epoch_rest::from_parts (bcl::error naming `who`).
[[nodiscard]] inline bcl::epoch_rest rest_of(std::uint64_t n, const py::object& parts,
                                             const char* who) {
    if (parts.is_none()) return bcl::epoch_rest(n);
    const auto tuple = parts.cast<py::tuple>();
    const auto bytes = tuple[2].cast<std::string>();
    return bcl::epoch_rest::from_parts(
        n, tuple[0].cast<std::uint64_t>(), tuple[1].cast<std::uint64_t>(),
        std::span<const std::uint8_t>(reinterpret_cast<const std::uint8_t*>(bytes.data()),
                                      bytes.size()),
        who);
}

/// The parts of `rest`: (start, span, taken), or None for the whole epoch.
[[nodiscard]] inline py::object parts_of(const bcl::epoch_rest& rest) {
    if (rest.whole()) return py::none();
    const std::span<const std::uint8_t> t = rest.taken();
    return py::make_tuple(rest.start(), rest.span(),
                          py::bytes(reinterpret_cast<const char*>(t.data()), t.size()));
}

} // namespace bcl_python
