#pragma once
// How a rank's batch is costed (--batching) and in which order the bcl policies emit their batches
// (--emission): the settings of a run that are not about records, caps or budgets.

#include "input.hpp"

#include <fmt/format.h>

#include <string_view>

namespace bcl_sim {

/// What a rank spends on a batch. The names follow the library option that is to take it
/// (bcl::options::batching, enum bcl::batch_cost); the simulator costs every policy by it already.
enum class batch_cost {
    /// The sum of the records' costs: sequences packed without padding (per-document attention).
    packed,
    /// B times the cost of the batch's costliest record: a trainer that pads every sequence of a
    /// batch to the batch's longest. Packing baselines (mffd) are not padded: their bins pack.
    padded,
};

/// In which order a bcl balancer emits the batches of a round. The names follow the library option
/// that is to take it (bcl::options::emission, enum bcl::emission_order).
enum class emission_order {
    costliest_first, ///< the costliest batch of a round first, so a slow step shows up at once
    shuffled,        ///< a seeded shuffle of the round's batches
};

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
