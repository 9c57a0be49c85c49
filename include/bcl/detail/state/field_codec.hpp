#pragma once
// The two directions of the saved state's byte format. field_writer and field_reader walk the
// same named field lists (each part's `fields`, in the order detail/state/snapshot.hpp walks the
// parts), so what is written and what is read cannot drift apart; each knows how a field of each
// type travels: counts as u64, flags, numbers by their bits, an enumeration by its value, running
// statistics as their five numbers, a quantile sketch as its non-empty buckets. The reader names
// the field in every error. A field list calls only field, count, length and items.

#include <bcl/detail/config.hpp>

#include <bcl/detail/caps/quantile_sketch.hpp>
#include <bcl/detail/saved_part.hpp>
#include <bcl/detail/state/bytes.hpp>
#include <bcl/detail/stats_access.hpp>
#include <bcl/error.hpp>
#include <bcl/statistics.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace bcl::detail {

/// The largest records_in a saved state may claim: a balancer pushing a record a nanosecond
/// would need 146 years to reach it, and below it no position or batch index the balancer
/// computes can overflow.
inline constexpr std::uint64_t max_saved_records = std::uint64_t{1} << 62;

/// Writes the fields a list names, in its order.
class field_writer {
public:
    template <class T>
    void field(const char* /*name*/, const T& value) {
        if constexpr (std::is_same_v<T, bool>)
            m_out.flag(value);
        else if constexpr (std::is_same_v<T, double>)
            m_out.f64(value);
        else if constexpr (std::is_enum_v<T>)
            m_out.u64(static_cast<std::uint64_t>(value));
        else
            m_out.u64(value);
    }

    void field(const char* /*name*/, const running_stats& stats) {
        const stats_access::raw r = stats_access::read(stats);
        m_out.u64(r.count);
        m_out.f64(r.mean);
        m_out.f64(r.m2);
        m_out.f64(r.min);
        m_out.f64(r.max);
    }

    /// A sketch by its zero count and its non-empty buckets (index, count): a few dozen of 2048.
    void field(const char* /*name*/, const quantile_sketch& sketch) {
        m_out.u64(sketch.zeros());
        std::uint64_t used = 0;
        for (const std::uint64_t b : sketch.buckets()) used += b != 0 ? 1 : 0;
        m_out.u64(used);
        for (std::size_t i = 0; i < quantile_sketch::bucket_count; ++i)
            if (sketch.buckets()[i] != 0) {
                m_out.u64(i);
                m_out.u64(sketch.buckets()[i]);
            }
    }

    /// A count the reader bounds by `limit` and by the bytes left (`item_bytes` each).
    void count(const char* /*name*/, std::size_t n, std::size_t /*limit*/,
               std::size_t /*item_bytes*/) {
        m_out.u64(n);
    }

    /// A sequence's length, announced (then its items follow, through items()).
    template <class T>
    void length(const char* name, const std::vector<T>& items, std::size_t limit,
                std::size_t item_bytes) {
        count(name, items.size(), limit, item_bytes);
    }

    /// The items of a sequence whose length was announced (length).
    template <class T>
    void items(const char* name, const std::vector<T>& items) {
        for (const T& x : items) field(name, x);
    }

    /// The `n` items of a sequence whose length the fields before it fix, so it is not written.
    template <class T>
    void items(const char* name, const std::vector<T>& items, std::size_t n) {
        if (items.size() != n)
            throw error(std::string("bcl: cannot save a state whose ") + name + " holds " +
                        std::to_string(items.size()) + " items, not " + std::to_string(n));
        this->items(name, items);
    }

    /// The bytes written so far.
    [[nodiscard]] std::size_t size() const noexcept { return m_out.size(); }

    /// Appends the checksum and returns the bytes.
    [[nodiscard]] std::string finish() { return m_out.finish(); }

private:
    byte_writer m_out;
};

/// Reads the fields a list names, in its order, and refuses what no writer could have written:
/// a truncated or corrupted byte string (the checksum), a flag or an enumeration out of range, a
/// count beyond its limit or beyond the bytes left (so no count makes it allocate wildly).
class field_reader {
public:
    /// Checks the trailing checksum first.
    explicit field_reader(std::string_view bytes) : m_in(bytes) {}

    template <class T>
    void field(const char* name, T& value) {
        if constexpr (std::is_same_v<T, bool>) {
            value = m_in.flag(name);
        } else if constexpr (std::is_same_v<T, double>) {
            value = m_in.f64(name);
        } else if constexpr (std::is_enum_v<T>) {
            // Any value up to 255 is read; validate() then names an unknown one.
            const std::uint64_t v = m_in.u64(name);
            if (v > 255)
                throw error(std::string("bcl: saved state has an unknown ") + name + " " +
                            std::to_string(v));
            value = static_cast<T>(v);
        } else {
            const std::uint64_t v = m_in.u64(name);
            if (v > std::numeric_limits<T>::max())
                throw error(std::string("bcl: saved state has an invalid ") + name + " " +
                            std::to_string(v));
            value = static_cast<T>(v);
        }
    }

    void field(const char* name, running_stats& stats) {
        stats_access::raw s;
        s.count = m_in.u64(name);
        s.mean = m_in.f64(name);
        s.m2 = m_in.f64(name);
        s.min = m_in.f64(name);
        s.max = m_in.f64(name);
        stats = stats_access::make(s);
    }

    void field(const char* name, quantile_sketch& sketch) {
        const std::string what(name);
        const std::string zeros_name = what + "'s zero count";
        const std::string used_name = what + "'s bucket count";
        const std::string index_name = what + "'s bucket index";
        const std::string bucket_name = what + "'s bucket";
        const std::uint64_t zeros = m_in.u64(zeros_name.c_str());
        const std::size_t used = m_in.count(used_name.c_str(), quantile_sketch::bucket_count, 16);
        std::array<std::uint64_t, quantile_sketch::bucket_count> buckets{};
        std::uint64_t counted = zeros;
        for (std::size_t k = 0; k < used; ++k) {
            const std::size_t index =
                m_in.count(index_name.c_str(), quantile_sketch::bucket_count - 1, 0);
            buckets[index] = m_in.u64(bucket_name.c_str());
            // Bounded one by one, so that their sum (the sketch's count) cannot wrap around.
            check_saved(zeros <= max_saved_records && buckets[index] <= max_saved_records - counted,
                        what + " counting more costs than records");
            counted += buckets[index];
        }
        sketch = quantile_sketch::from_counts(buckets, zeros);
    }

    void count(const char* name, std::size_t& n, std::size_t limit, std::size_t item_bytes) {
        n = m_in.count(name, limit, item_bytes);
    }

    template <class T>
    void length(const char* name, std::vector<T>& items, std::size_t limit,
                std::size_t item_bytes) {
        items.resize(m_in.count(name, limit, item_bytes));
    }

    template <class T>
    void items(const char* name, std::vector<T>& items) {
        for (T& x : items) field(name, x);
    }

    /// `n` comes from fields already read and bounded, so the resize is bounded too.
    template <class T>
    void items(const char* name, std::vector<T>& items, std::size_t n) {
        items.resize(n);
        this->items(name, items);
    }

    void expect_end() const { m_in.expect_end(); }

private:
    byte_reader m_in;
};

} // namespace bcl::detail
