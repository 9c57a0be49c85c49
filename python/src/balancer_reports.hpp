#pragma once
// What a balancer reports to Python, for every class that holds one (a sampler's epoch, a
// stream): its statistics (statistics_dict, defined in core.cpp) and a calibrating balancer's fit,
// as dicts, and the bindings that read them through the class's balancer().

#include <bcl/bcl.hpp>

#include <pybind11/pybind11.h>

#include <cstdint>

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

/// Binds, on `cls` (a py::class_ of `Type`, whose balancer() is its bcl::balancer): handed_out
/// (batches popped), buffered (records held), stats(); and for a calibrating balancer
/// observe(batch_index, seconds) (bcl::balancer::observe) and calibration().
template <class Type, class Class>
void define_reports(Class& cls) {
    cls.def_property_readonly("handed_out",
                              [](const Type& t) { return t.balancer().stats().batches; })
        .def_property_readonly("buffered", [](const Type& t) { return t.balancer().buffered(); })
        .def("stats", [](const Type& t) { return statistics_dict(t.balancer().stats()); });
    if constexpr (requires(const Type& t) { t.balancer().calibration(); }) {
        cls.def(
               "observe",
               [](Type& t, std::uint64_t batch_index, double seconds) {
                   t.balancer().observe(batch_index, seconds);
               },
               py::arg("batch_index"), py::arg("seconds"))
            .def("calibration",
                 [](const Type& t) { return calibration_dict(t.balancer().calibration()); });
    }
}

} // namespace bcl_python
