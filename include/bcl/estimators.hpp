#pragma once
// Stock cost estimators: linear, affine-quadratic and table lookup over a projection.

#include <bcl/detail/config.hpp>

#include <bcl/error.hpp>

#include <cmath>
#include <concepts>
#include <cstddef>
#include <functional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace bcl {

/// `scale * L` where `L = std::invoke(projection, record)`, e.g. the token count of a sequence.
/// The projection may be a member pointer (`&sample::length`) or any callable; the default is the
/// record itself (for records that are plain numbers).
template <class Projection = std::identity>
struct linear_cost {
    double scale = 1.0;
    [[no_unique_address]] Projection projection{};

    template <class Record>
    requires std::invocable<const Projection&, const Record&>
    [[nodiscard]] double operator()(const Record& r) const {
        return scale * static_cast<double>(std::invoke(projection, r));
    }
};

/// `a + b*L + c*L^2`: a fixed per-record cost, a linear term (MLP, embeddings) and a quadratic
/// term (attention). With a = 0, b = 1, c = 1/24576 it is a FLOPs proxy for a 7B transformer.
template <class Projection = std::identity>
struct affine_quadratic_cost {
    double a = 0.0;
    double b = 1.0;
    double c = 0.0;
    [[no_unique_address]] Projection projection{};

    template <class Record>
    requires std::invocable<const Projection&, const Record&>
    [[nodiscard]] double operator()(const Record& r) const {
        const auto length = static_cast<double>(std::invoke(projection, r));
        return a + length * (b + c * length);
    }
};

/// Builds an affine_quadratic_cost; `bcl::affine_quadratic(0, 1, 1.0 / 24576, &sample::tokens)`.
template <class Projection = std::identity>
[[nodiscard]] affine_quadratic_cost<Projection> affine_quadratic(double a, double b, double c,
                                                                 Projection projection = {}) {
    return {a, b, c, std::move(projection)};
}

/// Builds a linear_cost; `bcl::linear(1.0, &sample::tokens)`.
template <class Projection = std::identity>
[[nodiscard]] linear_cost<Projection> linear(double scale, Projection projection = {}) {
    return {scale, std::move(projection)};
}

/// An integer usable as a table index: a signed or unsigned integer type, including signed char
/// and unsigned char (std::int8_t, std::uint8_t), but not bool or a character type (char,
/// wchar_t, char8_t, char16_t, char32_t): such a key is more likely a mistake than a bucket.
template <class T>
concept table_key = std::integral<T> && !std::same_as<T, bool> && !std::same_as<T, char> &&
                    !std::same_as<T, wchar_t> && !std::same_as<T, char8_t> &&
                    !std::same_as<T, char16_t> && !std::same_as<T, char32_t>;

/// Looks the cost up in a table indexed by an integral key of the record, e.g. a measured step
/// time per image-size bucket. A key outside the table is a bcl::error naming the key. A key of
/// another type (floating-point, bool, a character) does not compile.
template <class Projection = std::identity>
struct table_cost {
    std::vector<double> table;
    [[no_unique_address]] Projection projection{};

    template <class Record>
    requires std::invocable<const Projection&, const Record&> &&
        table_key<std::remove_cvref_t<std::invoke_result_t<const Projection&, const Record&>>>
    [[nodiscard]] double operator()(const Record& r) const {
        const auto key = std::invoke(projection, r);
        if (std::cmp_less(key, 0) || std::cmp_greater_equal(key, table.size()))
            throw error("bcl::table_cost: key " + std::to_string(key) +
                        " is outside the table of " + std::to_string(table.size()) + " entries");
        return table[static_cast<std::size_t>(key)];
    }
};

/// Builds a table_cost; `bcl::table(std::vector<double>{...}, &image::size_bucket)`.
template <class Projection = std::identity>
[[nodiscard]] table_cost<Projection> table(std::vector<double> costs, Projection projection = {}) {
    return {std::move(costs), std::move(projection)};
}

} // namespace bcl
