#pragma once
// Dataset indices from Python, taken strictly: each must be an integer (a Python int or a numpy
// integer, never a bool, a float, a string or a wider array) in [0, 2^63). A value that is not
// is a bcl::error naming where it came from, its position and its repr; an exception the source
// itself raises while it is iterated (an inner sampler's own error) propagates unchanged.

#include <bcl/error.hpp>

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

namespace bcl_python {

namespace py = pybind11;

namespace detail {

[[noreturn]] inline void refuse_index(std::string_view source, std::size_t position,
                                      py::handle value, std::string_view why) {
    throw bcl::error(std::string(source) + " gave " + std::string(py::repr(value)) +
                     " at position " + std::to_string(position) + ": " + std::string(why));
}

// numpy.bool_, which numpy still lets pass as an index (with a DeprecationWarning).
inline py::handle numpy_bool_type() {
    static const py::object type = py::module_::import("numpy").attr("bool_");
    return type;
}

inline std::int64_t strict_index(py::handle item, std::size_t position, std::string_view source) {
    PyObject* o = item.ptr();
    if (PyBool_Check(o) || PyObject_IsInstance(o, numpy_bool_type().ptr()) == 1)
        refuse_index(source, position, item, "a bool is not a dataset index");
    if (!PyIndex_Check(o))
        refuse_index(source, position, item,
                     "dataset indices must be integers (a Python int or a numpy integer)");
    const py::object as_long = py::reinterpret_steal<py::object>(PyNumber_Index(o));
    if (!as_long) {
        PyErr_Clear();
        refuse_index(source, position, item, "it does not convert to an integer");
    }
    int overflow = 0;
    const long long value = PyLong_AsLongLongAndOverflow(as_long.ptr(), &overflow);
    if (overflow != 0 || value < 0)
        refuse_index(source, position, item, "dataset indices must be in [0, 2^63)");
    return static_cast<std::int64_t>(value);
}

template <class T>
void copy_checked(const py::array& a, std::vector<std::int64_t>& out, std::string_view source) {
    const auto typed = py::array_t<T, py::array::c_style | py::array::forcecast>::ensure(a);
    const T* v = typed.data();
    for (std::size_t i = 0; i < out.size(); ++i) {
        if (std::cmp_less(v[i], 0) ||
            std::cmp_greater(v[i], std::numeric_limits<std::int64_t>::max()))
            refuse_index(source, i, py::int_(v[i]), "dataset indices must be in [0, 2^63)");
        out[i] = static_cast<std::int64_t>(v[i]);
    }
}

inline std::vector<std::int64_t> from_array(const py::array& a, std::string_view source) {
    const char kind = a.dtype().kind();
    if (kind == 'O') return {}; // objects: each checked on its own by the caller
    if (kind != 'i' && kind != 'u')
        throw bcl::error(std::string(source) + " gave an array of dtype " +
                         std::string(py::str(a.dtype())) + "; dataset indices must be integers");
    if (a.ndim() != 1)
        throw bcl::error(std::string(source) + " gave an array of " + std::to_string(a.ndim()) +
                         " dimensions; dataset indices come as a one-dimensional sequence");
    std::vector<std::int64_t> out(static_cast<std::size_t>(a.size()));
    if (kind == 'u')
        copy_checked<std::uint64_t>(a, out, source);
    else
        copy_checked<std::int64_t>(a, out, source);
    return out;
}

} // namespace detail

/// The indices `source` holds or yields (an array, a sequence or any iterable), in order, each
/// checked as this header describes. `what` names the source in messages ("the inner sampler").
[[nodiscard]] inline py::array_t<std::int64_t> strict_indices(py::handle source,
                                                              std::string_view what) {
    std::vector<std::int64_t> out;
    const bool objects = py::isinstance<py::array>(source) &&
                         py::reinterpret_borrow<py::array>(source).dtype().kind() == 'O';
    if (py::isinstance<py::array>(source) && !objects) {
        out = detail::from_array(py::reinterpret_borrow<py::array>(source), what);
    } else {
        if (objects && py::reinterpret_borrow<py::array>(source).ndim() != 1)
            throw bcl::error(std::string(what) +
                             " gave a multi-dimensional array; dataset indices come as a "
                             "one-dimensional sequence");
        if (PySequence_Check(source.ptr()) == 1) {
            const Py_ssize_t n = PySequence_Size(source.ptr());
            if (n > 0)
                out.reserve(static_cast<std::size_t>(n));
            else
                PyErr_Clear();
        }
        const py::iterator it = py::iter(source); // the source's own errors propagate
        for (py::handle item : it) {
            out.push_back(detail::strict_index(item, out.size(), what));
            if ((out.size() & 0xFFFF) == 0 && PyErr_CheckSignals() != 0)
                throw py::error_already_set();
        }
    }
    py::array_t<std::int64_t> result(static_cast<py::ssize_t>(out.size()));
    std::copy(out.begin(), out.end(), result.mutable_data());
    return result;
}

} // namespace bcl_python
