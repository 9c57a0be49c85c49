#pragma once
// Stage mode's settings (--stages and its flags): how the ranks meet (--sync), the shape of what
// is planned (--shape, --micro-steps) and the mix of records (--modality-mix); their parsing, and
// the flags that mean nothing without --stages.

#include "input.hpp"

#include <fmt/format.h>

#include <array>
#include <cmath>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace bcl_sim {

/// How the ranks meet in a micro-step (--sync).
enum class stage_sync {
    /// At every layer of every stage (FSDP, ZeRO-3): a micro-step lasts the sum over stages of
    /// the slowest rank in that stage.
    stage,
    /// Once (DDP with one gradient bucket): a micro-step lasts the slowest rank's summed cost.
    step,
};

/// What is planned at once (--shape).
enum class stage_shape {
    /// A held batch of R*B*M records (every rank's share of one optimizer step), planned alone
    /// into M micro-steps of B records a rank.
    held,
    /// A stream of steps of B records a rank, planned a window of K steps (R*K*B records) at a
    /// time.
    stream,
    /// Rank-local streams: each rank balances its own share of the stream alone (no
    /// communication), a window of K of its batches (K*B records) at a time.
    local,
};

/// The shares of the three kinds of record (--modality-mix): text only, one image, several
/// images or a video. Each >= 0, summing to 1.
struct modality_mix {
    double text = 0.30;
    double image = 0.55;
    double multi = 0.15;
};

/// Stage mode (--stages): records of text and images, each with a cost in the vision encoder and
/// in the language model. The optionals are the flags as given, so that a flag that does not fit
/// the shape, or comes without --stages, can be refused rather than ignored.
struct stage_settings {
    bool enabled = false;                   ///< --stages
    std::optional<stage_sync> sync;         ///< --sync (default stage)
    std::optional<stage_shape> shape;       ///< --shape (default stream)
    std::optional<std::size_t> micro_steps; ///< --micro-steps M (held only; default 1)
    std::optional<modality_mix> mix;        ///< --modality-mix (default 0.30, 0.55, 0.15)
    bool lookahead_given = false;           ///< --lookahead was given (streams only)

    [[nodiscard]] stage_sync sync_or_default() const noexcept {
        return sync.value_or(stage_sync::stage);
    }
    [[nodiscard]] stage_shape shape_or_default() const noexcept {
        return shape.value_or(stage_shape::stream);
    }
    [[nodiscard]] bool held() const noexcept { return shape_or_default() == stage_shape::held; }
    [[nodiscard]] bool local() const noexcept { return shape_or_default() == stage_shape::local; }
    [[nodiscard]] std::size_t micro_steps_or_default() const noexcept {
        return micro_steps.value_or(1);
    }
    [[nodiscard]] modality_mix mix_or_default() const noexcept {
        return mix.value_or(modality_mix{});
    }
};

[[nodiscard]] inline std::string_view describe(stage_sync s) noexcept {
    return s == stage_sync::stage ? "stage" : "step";
}
[[nodiscard]] inline std::string_view describe(stage_shape s) noexcept {
    return s == stage_shape::held ? "held" : s == stage_shape::local ? "local" : "stream";
}
[[nodiscard]] inline std::string describe(const modality_mix& m) {
    return fmt::format("text={},image={},multi={}", m.text, m.image, m.multi);
}

/// Parses a --sync value: `stage` or `step`. Throws input_error otherwise.
[[nodiscard]] inline stage_sync parse_sync(std::string_view text) {
    if (text == "stage") return stage_sync::stage;
    if (text == "step") return stage_sync::step;
    throw input_error(fmt::format("--sync {}: expected stage (the ranks meet in every stage: a "
                                  "micro-step lasts the sum over stages of the slowest rank) or "
                                  "step (one meeting: the slowest rank's summed cost)",
                                  text));
}

/// Parses a --shape value: `held`, `stream` or `local`. Throws input_error otherwise.
[[nodiscard]] inline stage_shape parse_shape(std::string_view text) {
    if (text == "held") return stage_shape::held;
    if (text == "stream") return stage_shape::stream;
    if (text == "local") return stage_shape::local;
    throw input_error(
        fmt::format("--shape {}: expected held (held batches of R*B*M records), stream (windows of "
                    "R*K*B records) or local (each rank its own stream, windows of K*B records)",
                    text));
}

/// Parses a --modality-mix value `text=..,image=..,multi=..`: a missing share keeps its
/// default, and the three must be >= 0 and sum to 1 (within 1e-9). Throws input_error.
[[nodiscard]] inline modality_mix parse_mix(std::string_view text) {
    modality_mix m;
    const std::string what = fmt::format("--modality-mix {}", text);
    const std::array ps{detail::param{"text", &m.text}, detail::param{"image", &m.image},
                        detail::param{"multi", &m.multi}};
    detail::parse_params(what, text, ps);
    detail::require(m.text >= 0.0 && m.image >= 0.0 && m.multi >= 0.0, what,
                    "every share must be >= 0");
    detail::require(
        std::abs(m.text + m.image + m.multi - 1.0) <= 1e-9, what,
        fmt::format("the shares must sum to 1 (they sum to {})", m.text + m.image + m.multi));
    return m;
}

/// The first flag of stage mode that `s` holds, or null: a run of another mode refuses each
/// rather than ignore it.
[[nodiscard]] inline const char* stage_flag_given(const stage_settings& s) noexcept {
    return s.sync          ? "--sync"
           : s.shape       ? "--shape"
           : s.micro_steps ? "--micro-steps"
           : s.mix         ? "--modality-mix"
                           : nullptr;
}

} // namespace bcl_sim
