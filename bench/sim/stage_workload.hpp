#pragma once
// Stage mode's records (--stages): a vision-language workload, synthetic by the terms that
// bench/python/bench_stages.py states, so that the simulator and the Python benchmark plan the
// same kind of records. Each record is a text of some tokens and none, one or several images of
// some patches; it costs the vision encoder and the language model apart.

#include "input.hpp"
#include "random.hpp"
#include "stage_settings.hpp"
#include "workload.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>
#include <utility>
#include <vector>

namespace bcl_sim {

/// The stages of a record's cost, in the order the model runs them.
inline constexpr std::size_t stage_count = 2;
inline constexpr std::array<std::string_view, stage_count> stage_names{"vision", "language"};

/// A lognormal patch count, clipped: P = round(clamp(median * exp(sigma * Z), lo, hi)).
struct patch_spec {
    double median;
    double sigma;
    double lo;
    double hi;
};
/// One image: median 1000 patches, sigma 0.8, in [64, 16384].
inline constexpr patch_spec one_image_patches{1000.0, 0.8, 64.0, 16384.0};
/// Several images or a video: median 4000 patches, sigma 0.9, in [256, 32768].
inline constexpr patch_spec several_images_patches{4000.0, 0.9, 256.0, 32768.0};

/// The vision encoder's cost of P patches: 0.09 * (P + P^2 / 8192) (attention over the image's
/// patches makes it superlinear).
[[nodiscard]] constexpr double vision_cost(double patches) noexcept {
    return 0.09 * (patches + patches * patches / 8192.0);
}
/// The language model's tokens: the text and a token for every 4 patches.
[[nodiscard]] constexpr double language_tokens(double text, double patches) noexcept {
    return text + patches / 4.0;
}
/// The language model's cost of T tokens: T + T^2 / 24576 (bcl-sim's default cost).
[[nodiscard]] constexpr double language_cost(double tokens) noexcept {
    return tokens + tokens * tokens / 24576.0;
}

/// One record of stage mode: what it holds and what each stage spends on it.
struct stage_record {
    double text = 0.0;    ///< text tokens
    double patches = 0.0; ///< image patches, all its images together (0: text only)
    std::array<double, stage_count> cost{}; ///< vision encoder's, language model's

    [[nodiscard]] double tokens() const noexcept { return language_tokens(text, patches); }
    [[nodiscard]] double summed() const noexcept { return cost[0] + cost[1]; }
};

/// The record of `text` tokens and `patches` patches, priced.
[[nodiscard]] inline stage_record make_stage_record(double text, double patches) noexcept {
    return {text, patches, {vision_cost(patches), language_cost(language_tokens(text, patches))}};
}

/// The records of a stage-mode run, in the order they arrive (position 0, 1, ...), random
/// access: position p's kind, patches and text are drawn from words of p alone, so a record is
/// the same whichever policy reads it and in whatever order. The text is a length drawn
/// uniformly from a workload file's lengths (with replacement, as bench_stages.py draws it), or
/// from a synthetic distribution.
class stage_source {
public:
    /// Text lengths from `lengths` (a workload file's, not empty).
    stage_source(std::shared_ptr<const std::vector<double>> lengths, modality_mix mix,
                 std::uint64_t seed)
        : m_lengths(std::move(lengths)), m_mix(mix), m_key(stream_key(seed, domain::stages, 0)) {}
    /// Text lengths drawn from `dist`, a synthetic distribution (not file:).
    stage_source(dist_spec dist, modality_mix mix, std::uint64_t seed)
        : m_dist(std::move(dist)), m_mix(mix), m_key(stream_key(seed, domain::stages, 0)),
          m_text_key(stream_key(seed, domain::stages, 1)) {}

    /// The record at `position`.
    [[nodiscard]] stage_record at(std::uint64_t position) const {
        const std::uint64_t w = position * 4;
        const double kind = unit_interval(stream_word(m_key, w));
        double patches = 0.0;
        if (kind >= m_mix.text) {
            const patch_spec& p =
                kind < m_mix.text + m_mix.image ? one_image_patches : several_images_patches;
            const double z = standard_normal(stream_word(m_key, w + 1), stream_word(m_key, w + 2));
            patches = std::round(std::clamp(p.median * std::exp(p.sigma * z), p.lo, p.hi));
        }
        return make_stage_record(text_at(position, stream_word(m_key, w + 3)), patches);
    }

private:
    [[nodiscard]] double text_at(std::uint64_t position, std::uint64_t word) const {
        if (!m_lengths) return draw_length(m_dist, m_text_key, position);
        splitmix rng(word);
        return (*m_lengths)[static_cast<std::size_t>(rng.below(m_lengths->size()))];
    }

    std::shared_ptr<const std::vector<double>> m_lengths;
    dist_spec m_dist;
    modality_mix m_mix;
    std::uint64_t m_key;
    std::uint64_t m_text_key = 0;
};

} // namespace bcl_sim
