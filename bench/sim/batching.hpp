#pragma once
// How a rank's batch is costed (--batching) and in which order the bcl policies emit their batches
// (--emission): the settings of a run that are not about records, caps or budgets.

#include "input.hpp"

#include <bcl/options.hpp>

#include <fmt/format.h>

#include <string_view>

namespace bcl_sim {

/// What a rank spends on a batch: the library's own setting (bcl::options::batching). packed: the
/// sum of the records' costs, sequences packed without padding (per-document attention). padded:
/// B times the cost of the batch's costliest record, a trainer that pads every sequence of a batch
/// to the batch's longest. The simulator costs every policy by it; packing baselines (mffd) are
/// not padded: their bins pack.
using batch_cost = bcl::batch_cost;

/// In which order a bcl balancer emits the batches of a round (bcl::options::emission).
using emission_order = bcl::emission_order;

[[nodiscard]] inline std::string_view describe(batch_cost b) noexcept {
    return b == batch_cost::padded ? "padded" : "packed";
}

[[nodiscard]] inline std::string_view describe(emission_order e) noexcept {
    return e == emission_order::shuffled ? "shuffled" : "costliest_first";
}

/// Parses a --batching value: `packed` or `padded`. Throws input_error otherwise.
[[nodiscard]] inline batch_cost parse_batching(std::string_view text) {
    if (text == "packed") return batch_cost::packed;
    if (text == "padded") return batch_cost::padded;
    throw input_error(
        fmt::format("--batching {}: unknown batching (expected packed or padded)", text));
}

/// Parses an --emission value: `costliest_first` or `shuffled`. Throws input_error otherwise.
[[nodiscard]] inline emission_order parse_emission(std::string_view text) {
    if (text == "costliest_first") return emission_order::costliest_first;
    if (text == "shuffled") return emission_order::shuffled;
    throw input_error(fmt::format(
        "--emission {}: unknown emission order (expected costliest_first or shuffled)", text));
}

} // namespace bcl_sim
