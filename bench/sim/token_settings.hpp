#pragma once
// Micro-batch mode's settings (--max-tokens and its flags): what every rank's micro-batches must
// keep, and the flags that mean nothing without --max-tokens.

#include <cstddef>
#include <cstdint>
#include <optional>

namespace bcl_sim {

/// The largest --max-tokens: a plan's records hold at most 2^31 tokens.
inline constexpr std::uint64_t max_token_budget = std::uint64_t{1} << 31;

/// Micro-batch mode (--max-tokens): every rank cuts its share of a step into micro-batches of at
/// most T tokens, as many on every rank. Off (fixed batches of B records) without max_tokens.
struct token_settings {
    std::optional<std::uint64_t> max_tokens; ///< --max-tokens T
    /// --step-records N: held batches, every step each rank draws N records (the step's global
    /// batch is all R*N of them).
    std::optional<std::size_t> step_records;
    /// --micro-batches M: a stream of steps, every step M micro-batches on every rank.
    std::optional<std::size_t> micro_batches;
    std::size_t multiple_of = 1;  ///< --multiple-of m: every step's count a multiple of m
    bool oversized_alone = false; ///< --oversized alone: a record above T alone in a micro-batch
    double max_fill = 1.0; ///< --max-fill: a stream window's share of R*K*M*T that global fills
    /// global_fixed's B, records per micro-batch: --batch when given in this mode, else 0 until
    /// the run resolves it (fixed_batch_for).
    std::size_t fixed_batch = 0;

    [[nodiscard]] bool enabled() const noexcept { return max_tokens.has_value(); }
    [[nodiscard]] bool held() const noexcept { return step_records.has_value(); }
};

/// The first flag of micro-batch mode that `t` holds besides --max-tokens, or null: a run of
/// fixed-size batches refuses each rather than ignore it.
[[nodiscard]] inline const char* micro_batch_flag_given(const token_settings& t) noexcept {
    return t.step_records       ? "--step-records"
           : t.micro_batches    ? "--micro-batches"
           : t.multiple_of != 1 ? "--multiple-of"
           : t.oversized_alone  ? "--oversized"
           : t.max_fill != 1.0  ? "--max-fill"
                                : nullptr;
}

} // namespace bcl_sim
