#pragma once
// How a rank's batch is costed (--batching) and in which order the bcl policies emit their batches
// (--emission): the settings of a run that are not about records, caps or budgets.

#include "input.hpp"

#include <bcl/names.hpp>
#include <bcl/options.hpp>

#include <fmt/format.h>

#include <optional>
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
    return bcl::name_of(b);
}

[[nodiscard]] inline std::string_view describe(emission_order e) noexcept {
    return bcl::name_of(e);
}

/// The value of an options enum named `text` by the library's registry (bcl/names.hpp), for the
/// flag `flag`. Throws input_error listing the names otherwise.
template <class Enum>
[[nodiscard]] Enum parse_choice(std::string_view flag, std::string_view text) {
    if (const std::optional<Enum> value = bcl::find_named<Enum>(text)) return *value;
    throw input_error(fmt::format("{} {}: unknown {} (expected one of {})", flag, text,
                                  bcl::choice_names<Enum>::what, bcl::names_text<Enum>()));
}

/// Parses a --batching value: `packed` or `padded`. Throws input_error otherwise.
[[nodiscard]] inline batch_cost parse_batching(std::string_view text) {
    return parse_choice<batch_cost>("--batching", text);
}

/// Parses an --emission value: `costliest_first` or `shuffled`. Throws input_error otherwise.
[[nodiscard]] inline emission_order parse_emission(std::string_view text) {
    return parse_choice<emission_order>("--emission", text);
}

} // namespace bcl_sim
