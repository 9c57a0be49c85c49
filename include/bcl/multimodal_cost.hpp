#pragma once
// The two stage costs of a vision-language record: the vision encoder's over each image's patches,
// then the language model's over the text tokens and the merged image tokens. They are what a plan
// of stage costs takes (bcl::held_stage_planner, docs/stages.md), and, being linear in their
// coefficients, what bcl::stage_calibration fits to measured per-stage times.

#include <bcl/detail/config.hpp>

#include <bcl/cost_check.hpp>
#include <bcl/detail/number_text.hpp>
#include <bcl/error.hpp>

#include <array>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <ranges>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace bcl {

namespace detail {

/// What stage `stage` of a multimodal_cost is called in messages.
[[nodiscard]] inline const char* multimodal_stage_name(std::size_t stage) noexcept {
    return stage == 0 ? "vision encoder" : "language model";
}

/// The field of multimodal_cost_options that holds coefficient j of `stage` (the features' order).
[[nodiscard]] inline const char* multimodal_coefficient_name(std::size_t stage,
                                                             std::size_t j) noexcept {
    static constexpr std::array<std::array<const char*, 3>, 2> names{
        {{"vision_per_image", "vision_per_patch", "vision_per_patch_squared"},
         {"language_per_record", "language_per_token", "language_per_token_squared"}}};
    return names[stage][j];
}

} // namespace detail

/// A record as bcl::multimodal_cost sees it: its text tokens, and the patches the vision encoder
/// runs over for each of its images (a video: one entry per group of frames the encoder sees at
/// once). A view: the patch counts stay the caller's and must outlive the call.
struct multimodal_record {
    std::uint64_t text_tokens = 0;
    std::span<const std::uint32_t> image_patches{};
};

/// A projection P gives multimodal_cost a view of records of type R if calling a const P on an R
/// gives something convertible to multimodal_record (a member function, a lambda, or
/// std::identity on multimodal_record itself).
template <class P, class R>
concept multimodal_projection = std::invocable<const P&, R> &&
    std::convertible_to<std::invoke_result_t<const P&, R>, multimodal_record>;

/// The coefficients of a multimodal_cost by name, and how many patches make one language-model
/// token. An aggregate, so designated initializers work:
/// `bcl::multimodal_cost{{.vision_per_patch = 0.05, .merge = 1}}`.
///
/// Defaults: the mix docs/stages.md measures. The language model is the FLOPs proxy for a 7B
/// transformer of bcl::affine_quadratic (T + T^2/24576: its attention matches the rest of it at
/// 24576 tokens); the encoder costs 0.09 * (P + P^2/8192), about what a 0.6B vision transformer
/// costs a patch against the 7B model's token, with attention over a whole image matching the rest
/// at 8192 patches. Calibration (bcl::stage_calibration) replaces them with what the trainer's
/// own times say.
struct multimodal_cost_options {
    double vision_per_image = 0.0;                     ///< c_v: a fixed cost per image
    double vision_per_patch = 0.09;                    ///< a_v: times P
    double vision_per_patch_squared = 0.09 / 8192;     ///< b_v: times P^2 (attention)
    double language_per_record = 0.0;                  ///< a_l: a fixed cost per record
    double language_per_token = 1.0;                   ///< b_l: times T
    double language_per_token_squared = 1.0 / 24576.0; ///< c_l: times T^2 (attention)
    /// Patches per language-model token, >= 1. Default 4: a 2x2 patch merger (Qwen2-VL's). An
    /// image of P patches gives ceil(P / merge) tokens: a merger pads a partial group to a whole
    /// token.
    std::uint32_t merge = 4;
};

/// A record's cost in the two stages of a vision-language model, {vision encoder, language
/// model}:
///   - vision: the sum over its images of a_v*P + b_v*P^2 + c_v, P the image's patches (0 for a
///     record of text alone);
///   - language model: a_l + b_l*T + c_l*T^2, T = text tokens + the sum over images of
///     ceil(P / merge).
/// Each stage is the dot product of its coefficients with its features (features(), in this
/// order): vision {images, sum P, sum P^2} with {c_v, a_v, b_v}, language model {1, T, T^2}
/// with {a_l, b_l, c_l}. The features of a batch are the sums of its records' (batch_features()),
/// so a batch's stage cost is the same dot product: what bcl::stage_calibration fits.
///
/// Every coefficient is finite, >= 0 and at most 1e300 (as a calibrated_cost's), and merge >= 1;
/// the constructors throw bcl::error naming the first that is not. A cost above
/// bcl::max_estimate (an overflow to infinity among them) is a bcl::error naming the stage and the
/// record.
class multimodal_cost {
public:
    static constexpr std::size_t stages = 2;
    static constexpr std::size_t vision = 0;   ///< the vision encoder's stage (column 0)
    static constexpr std::size_t language = 1; ///< the language model's stage (column 1)
    static constexpr std::size_t features_per_stage = 3;
    /// One stage's features, or its coefficients, in the order above.
    using stage_vector = std::array<double, features_per_stage>;
    /// Per stage ([vision], [language]): a record's or a batch's features, or the coefficients.
    using stage_table = std::array<stage_vector, stages>;
    /// A record's cost per stage.
    using stage_costs = std::array<double, stages>;

    /// The coefficients and merge of `o`. Throws bcl::error for a coefficient negative, above
    /// 1e300 or not finite (naming its field), or merge 0.
    explicit multimodal_cost(const multimodal_cost_options& o = {})
        : multimodal_cost(
              stage_table{
                  {{o.vision_per_image, o.vision_per_patch, o.vision_per_patch_squared},
                   {o.language_per_record, o.language_per_token, o.language_per_token_squared}}},
              o.merge) {}

    /// Coefficients in the features' order (as coefficients() returns them). Throws as above.
    multimodal_cost(const stage_table& coefficients, std::uint32_t merge)
        : m_coefficients(checked(coefficients)), m_merge(checked_merge(merge)) {}

    [[nodiscard]] const stage_table& coefficients() const noexcept { return m_coefficients; }
    [[nodiscard]] std::uint32_t merge() const noexcept { return m_merge; }

    /// T: the record's text tokens and its images' merged tokens, ceil(P / merge) each. O(images).
    [[nodiscard]] double language_tokens(const multimodal_record& r) const noexcept {
        std::uint64_t merged = 0; // at most 2^32 an image: exact for any count of images in memory
        for (const std::uint32_t p : r.image_patches)
            merged += p / m_merge + (p % m_merge != 0 ? 1U : 0U);
        return static_cast<double>(r.text_tokens) + static_cast<double>(merged);
    }

    /// The record's features per stage: vision {images, sum P, sum P^2}, language model
    /// {1, T, T^2}. O(images).
    [[nodiscard]] stage_table features(const multimodal_record& r) const noexcept {
        stage_table x{};
        for (const std::uint32_t p : r.image_patches) {
            const auto patches = static_cast<double>(p);
            x[vision][0] += 1.0;
            x[vision][1] += patches;
            x[vision][2] += patches * patches;
        }
        const double tokens = language_tokens(r);
        x[language] = {1.0, tokens, tokens * tokens};
        return x;
    }

    /// The record's cost per stage, {vision encoder, language model}. Throws bcl::error if a
    /// stage's cost is above bcl::max_estimate (or overflows). O(images).
    [[nodiscard]] stage_costs operator()(const multimodal_record& r) const {
        return checked_costs(r, [&] {
            return "a record of " + std::to_string(r.text_tokens) + " text tokens and " +
                   std::to_string(r.image_patches.size()) + " images";
        });
    }

    /// The summed features of the records (their projections) per stage: the features of the
    /// batch they make, to report with its measured times (bcl::stage_calibration::observe).
    /// O(images in all).
    template <std::ranges::input_range Records, class Projection = std::identity>
    requires multimodal_projection<Projection, std::ranges::range_reference_t<Records>>
    [[nodiscard]] stage_table batch_features(Records&& records, Projection projection = {}) const {
        stage_table sum{};
        for (auto&& record : records) {
            const stage_table x = features(std::invoke(projection, record));
            for (std::size_t s = 0; s < stages; ++s)
                for (std::size_t j = 0; j < features_per_stage; ++j) sum[s][j] += x[s][j];
        }
        return sum;
    }

    /// The table of stage costs a plan takes (bcl::held_stage_planner::plan with 2 stages): record
    /// i's {vision, language model} at out[2i], out[2i + 1], for the records in range order.
    /// Throws bcl::error if `out` does not hold exactly 2 costs a record (writing nothing), or for
    /// a cost as operator() does, naming the record by position (the rows before it are then
    /// written). O(records + images).
    template <std::ranges::input_range Records, class Projection = std::identity>
    requires std::ranges::sized_range<Records> &&
        multimodal_projection<Projection, std::ranges::range_reference_t<Records>>
    void fill_cost_table(Records&& records, std::span<double> out,
                         Projection projection = {}) const {
        const auto n = static_cast<std::size_t>(std::ranges::size(records));
        if (out.size() != n * stages)
            throw error("bcl::multimodal_cost::fill_cost_table: " + std::to_string(n) +
                        " records need " + std::to_string(n * stages) +
                        " costs, and the table has " + std::to_string(out.size()));
        std::size_t i = 0;
        for (auto&& record : records) {
            const multimodal_record r = std::invoke(projection, record);
            const stage_costs c = checked_costs(r, [&] {
                return "record " + std::to_string(i) + " (" + std::to_string(r.text_tokens) +
                       " text tokens, " + std::to_string(r.image_patches.size()) + " images)";
            });
            out[i * stages] = c[vision];
            out[i * stages + 1] = c[language];
            ++i;
        }
    }

    /// fill_cost_table into a new vector of 2 costs a record.
    template <std::ranges::input_range Records, class Projection = std::identity>
    requires std::ranges::sized_range<Records> &&
        multimodal_projection<Projection, std::ranges::range_reference_t<Records>>
    [[nodiscard]] std::vector<double> cost_table(Records&& records,
                                                 Projection projection = {}) const {
        std::vector<double> costs(static_cast<std::size_t>(std::ranges::size(records)) * stages);
        fill_cost_table(std::forward<Records>(records), costs, std::move(projection));
        return costs;
    }

    /// The dot product of coefficients `c` with features `x`, stage by stage.
    [[nodiscard]] static stage_costs price(const stage_table& c, const stage_table& x) noexcept {
        stage_costs cost{};
        for (std::size_t s = 0; s < stages; ++s)
            for (std::size_t j = 0; j < features_per_stage; ++j) cost[s] += c[s][j] * x[s][j];
        return cost;
    }

private:
    // The largest coefficient accepted, as calibrated_cost's prior: beyond it a product with a
    // feature of 1 is already near the double range's end.
    static constexpr double max_coefficient = 1e300;

    template <class Subject>
    [[nodiscard]] stage_costs checked_costs(const multimodal_record& r, Subject&& subject) const {
        const stage_costs c = price(m_coefficients, features(r));
        for (std::size_t s = 0; s < stages; ++s)
            if (!valid_cost(c[s])) [[unlikely]]
                throw_invalid_cost("bcl::multimodal_cost: the " +
                                       std::string(detail::multimodal_stage_name(s)) +
                                       "'s cost of " + subject() + " is ",
                                   c[s]);
        return c;
    }

    static stage_table checked(const stage_table& c) {
        for (std::size_t s = 0; s < stages; ++s)
            for (std::size_t j = 0; j < features_per_stage; ++j)
                if (!(c[s][j] >= 0.0 && c[s][j] <= max_coefficient))
                    throw error("bcl::multimodal_cost: " +
                                std::string(detail::multimodal_coefficient_name(s, j)) + " is " +
                                detail::number_text(c[s][j]) +
                                "; a coefficient must be from 0 to 1e300");
        return c;
    }

    static std::uint32_t checked_merge(std::uint32_t merge) {
        if (merge == 0)
            throw error("bcl::multimodal_cost: merge is 0; at least 1 patch makes a language-model "
                        "token");
        return merge;
    }

    stage_table m_coefficients;
    std::uint32_t m_merge;
};

} // namespace bcl
