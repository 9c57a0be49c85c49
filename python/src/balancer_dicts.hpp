#pragma once
// What a balancer reports, as the Python dicts the samplers and streams hand out: its statistics
// (statistics_dict, defined in core.cpp) and a calibrating balancer's fit.

#include <bcl/bcl.hpp>

#include <pybind11/pybind11.h>

namespace bcl_python {

namespace py = pybind11;

py::dict statistics_dict(const bcl::statistics& s);

/// A calibration's summary (bcl::balancer::calibration()): the fitted and applied coefficients
/// and the counts of times observed and down-weighted.
template <class Summary>
[[nodiscard]] py::dict calibration_dict(const Summary& c) {
    py::dict d;
    d["fitted"] = py::make_tuple(c.fitted[0], c.fitted[1], c.fitted[2]);
    d["applied"] = py::make_tuple(c.applied[0], c.applied[1], c.applied[2]);
    d["times_observed"] = c.times_observed;
    d["times_downweighted"] = c.times_downweighted;
    d["has_fit"] = c.has_fit;
    return d;
}

} // namespace bcl_python
