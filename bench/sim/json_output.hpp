#pragma once
// The JSON that bcl-sim and bcl-mpi-bench both write about a run's workload and cost model, so
// the two tools describe the same inputs with the same fields.

#include "cost_and_cap.hpp"
#include "workload.hpp"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <variant>

namespace bcl_sim {

/// The workload: the --dist text as given, its kind, its resolved parameters, and for a file its
/// path and how many lengths it holds (`records`; 0 when not read, which no usable file has).
[[nodiscard]] inline nlohmann::ordered_json
dist_json(const std::string& spec, const dist_spec& dist, std::uint64_t records) {
    nlohmann::ordered_json out = {
        {"spec", spec}, {"kind", std::string(dist_name(dist))}, {"resolved", describe(dist)}};
    if (const auto* file = std::get_if<file_spec>(&dist)) out["path"] = file->path;
    if (records > 0) out["records"] = records;
    return out;
}

/// The cost model a + b*L + c*L^2: its description and coefficients.
[[nodiscard]] inline nlohmann::ordered_json cost_json(const cost_model& cost) {
    return {{"spec", describe(cost)}, {"a", cost.a}, {"b", cost.b}, {"c", cost.c}};
}

} // namespace bcl_sim
