#pragma once
// The fields bcl's libtorch samplers keep in a torch::serialize archive: 1-d tensors of int64
// values, bytes or doubles under a key, read back with their type and shape checked (a bcl::error
// naming the key otherwise), and a 64-bit digest over them that load() compares before it keeps
// anything. Needs libtorch's C++ API on the include path; without it this header is empty.

#include <bcl/detail/config.hpp>

#include <bcl/detail/random.hpp>
#include <bcl/error.hpp>

#if __has_include(<torch/serialize/archive.h>)

#include <torch/serialize/archive.h>
#include <torch/types.h>

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace bcl::torch::detail {

/// A 64-bit digest of an archive's fields, to catch an accidental or naive edit: a value changed,
/// an entry dropped, added or moved, a field swapped for another's. Each field's key, element
/// type, length and values are mixed word by word (a SplitMix64 step); the fields' hashes
/// are summed, so the digest does not depend on the order fields are added in. Not cryptographic:
/// whoever knows this code can recompute it, so load() checks every field on its own as well.
class archive_digest {
public:
    /// Adds a field: a 1-d contiguous CPU tensor of int64, uint8 or float64 values (what
    /// archive_writer writes and archive_reader returns). O(length).
    void add(std::string_view key, const ::torch::Tensor& values) {
        std::uint64_t h = 0x62636c2d61726368ULL; // "bcl-arch"
        const auto absorb = [&h](std::uint64_t word) { h = mix(h ^ mix(word)); };
        absorb(key.size());
        for (const char c : key) absorb(static_cast<unsigned char>(c));
        absorb(static_cast<std::uint64_t>(values.scalar_type()));
        const auto n = static_cast<std::size_t>(values.numel());
        absorb(n);
        if (values.scalar_type() == ::torch::kInt64) {
            const auto* v = values.data_ptr<std::int64_t>();
            for (std::size_t i = 0; i < n; ++i) absorb(static_cast<std::uint64_t>(v[i]));
        } else if (values.scalar_type() == ::torch::kUInt8) {
            const auto* v = values.data_ptr<std::uint8_t>();
            for (std::size_t i = 0; i < n; ++i) absorb(v[i]);
        } else {
            const auto* v = values.data_ptr<double>();
            for (std::size_t i = 0; i < n; ++i) absorb(std::bit_cast<std::uint64_t>(v[i]));
        }
        m_sum += h;
    }

    /// The digest of the fields added so far. O(1).
    [[nodiscard]] std::uint64_t value() const noexcept { return mix(m_sum); }

private:
    // One step of SplitMix64 from state z: the golden gamma added, then its finalizer
    // (bcl::detail::mix64), so every input bit moves about half of the output bits.
    [[nodiscard]] static constexpr std::uint64_t mix(std::uint64_t z) noexcept {
        return bcl::detail::mix64(z + 0x9e3779b97f4a7c15ULL);
    }

    std::uint64_t m_sum = 0;
};

/// Writes fields into a libtorch archive, each a buffer holding a 1-d tensor, and keeps the
/// digest of everything written, for seal().
class archive_writer {
public:
    explicit archive_writer(::torch::serialize::OutputArchive& archive) noexcept
        : m_archive(archive) {}

    void int64s(const std::string& key, std::span<const std::int64_t> values) {
        ::torch::Tensor t = ::torch::empty({static_cast<std::int64_t>(values.size())},
                                           ::torch::TensorOptions().dtype(::torch::kInt64));
        if (!values.empty())
            std::memcpy(t.data_ptr<std::int64_t>(), values.data(), values.size_bytes());
        write(key, t);
    }
    /// Dataset indices, as int64 values.
    void indices(const std::string& key, std::span<const std::size_t> values) {
        ::torch::Tensor t = ::torch::empty({static_cast<std::int64_t>(values.size())},
                                           ::torch::TensorOptions().dtype(::torch::kInt64));
        auto* out = t.data_ptr<std::int64_t>();
        for (std::size_t i = 0; i < values.size(); ++i)
            out[i] = static_cast<std::int64_t>(values[i]);
        write(key, t);
    }
    void bytes(const std::string& key, std::string_view bytes) {
        ::torch::Tensor t = ::torch::empty({static_cast<std::int64_t>(bytes.size())},
                                           ::torch::TensorOptions().dtype(::torch::kUInt8));
        if (!bytes.empty()) std::memcpy(t.data_ptr<std::uint8_t>(), bytes.data(), bytes.size());
        write(key, t);
    }
    void real(const std::string& key, double value) {
        ::torch::Tensor t = ::torch::empty({1}, ::torch::TensorOptions().dtype(::torch::kFloat64));
        *t.data_ptr<double>() = value;
        write(key, t);
    }
    /// Writes the digest of every field written so far under `key` (one int64, its bits).
    void seal(const std::string& key) {
        const std::int64_t digest = std::bit_cast<std::int64_t>(m_digest.value());
        int64s(key, std::span<const std::int64_t>(&digest, 1));
    }

private:
    void write(const std::string& key, const ::torch::Tensor& t) {
        m_archive.write(key, t, /*is_buffer=*/true);
        m_digest.add(key, t);
    }

    ::torch::serialize::OutputArchive& m_archive;
    archive_digest m_digest;
};

/// Reads fields that archive_writer wrote, checking that each is there and is a 1-d CPU tensor
/// of the expected element type (bcl::error naming the key otherwise, every message prefixed
/// with `who`), and keeps the digest of everything read, for check_seal().
class archive_reader {
public:
    archive_reader(::torch::serialize::InputArchive& archive, std::string who)
        : m_archive(archive), m_who(std::move(who)) {}

    [[nodiscard]] std::vector<std::int64_t> int64s(const std::string& key) {
        const ::torch::Tensor t = read(key, ::torch::kInt64);
        const auto* in = t.data_ptr<std::int64_t>();
        return std::vector<std::int64_t>(in, in + t.numel());
    }
    /// A field of exactly one int64 value.
    [[nodiscard]] std::int64_t int64(const std::string& key) {
        const std::vector<std::int64_t> v = int64s(key);
        if (v.size() != 1) fail(key + " has " + std::to_string(v.size()) + " values, not 1");
        return v[0];
    }
    [[nodiscard]] std::string bytes(const std::string& key) {
        const ::torch::Tensor t = read(key, ::torch::kUInt8);
        std::string out(static_cast<std::size_t>(t.numel()), '\0');
        if (!out.empty()) std::memcpy(out.data(), t.data_ptr<std::uint8_t>(), out.size());
        return out;
    }
    /// A field of exactly one double.
    [[nodiscard]] double real(const std::string& key) {
        const ::torch::Tensor t = read(key, ::torch::kFloat64);
        if (t.numel() != 1) fail(key + " has " + std::to_string(t.numel()) + " values, not 1");
        return *t.data_ptr<double>();
    }

    /// The element type of the tensor stored under `key`, or std::nullopt if there is none; a
    /// look only: nothing is checked, nor added to the digest. To tell archives of another kind
    /// apart by a field's type before reading it.
    [[nodiscard]] std::optional<::torch::ScalarType> peek_type(const std::string& key) {
        c10::IValue value;
        if (!m_archive.try_read(key, value) || !value.isTensor()) return std::nullopt;
        return value.toTensor().scalar_type();
    }

    /// Throws bcl::error unless the digest stored under `key` is the digest of every field read
    /// so far (so read every field the writer wrote before calling this).
    void check_seal(const std::string& key) {
        const std::uint64_t expected = m_digest.value(); // before the digest's own field
        if (std::bit_cast<std::uint64_t>(int64(key)) != expected)
            fail(key + " does not match the archive's fields: the archive was altered or damaged "
                       "after it was saved");
    }

    /// Throws bcl::error with `what`, prefixed with `who` and "the archive's ".
    [[noreturn]] void fail(const std::string& what) const {
        throw bcl::error(m_who + ": the archive's " + what);
    }
    [[nodiscard]] const std::string& who() const noexcept { return m_who; }

private:
    // Read as an attribute, not with read(key, tensor, is_buffer): libtorch's try_read
    // dereferences an absent buffer when the key names a parameter instead.
    ::torch::Tensor read(const std::string& key, ::torch::ScalarType dtype) {
        c10::IValue value;
        if (!m_archive.try_read(key, value)) fail(key + " is missing");
        if (!value.isTensor()) fail(key + " is not a tensor");
        ::torch::Tensor t = value.toTensor();
        if (t.scalar_type() != dtype || t.dim() != 1 || !t.device().is_cpu())
            fail(key + " is not a 1-d CPU tensor of " + std::string(::c10::toString(dtype)));
        t = t.contiguous();
        m_digest.add(key, t);
        return t;
    }

    ::torch::serialize::InputArchive& m_archive;
    std::string m_who;
    archive_digest m_digest;
};

/// `values` (a field read from an archive) as dataset indices. Throws bcl::error (prefixed
/// with `who`) naming `key`, the entry and its value if one is negative or, when `dataset_size`
/// is known, not below it. O(n).
[[nodiscard]] inline std::vector<std::size_t>
checked_indices(const std::string& who, const std::string& key,
                std::span<const std::int64_t> values, std::optional<std::uint64_t> dataset_size) {
    std::vector<std::size_t> out(values.size());
    for (std::size_t i = 0; i < values.size(); ++i) {
        const std::int64_t v = values[i];
        if (v < 0 || (dataset_size && static_cast<std::uint64_t>(v) >= *dataset_size))
            throw bcl::error(who + ": the archive's " + key + " holds " + std::to_string(v) +
                             " at entry " + std::to_string(i) + ", outside the dataset's [0, " +
                             (dataset_size ? std::to_string(*dataset_size) : "2^63") + ")");
        out[i] = static_cast<std::size_t>(v);
    }
    return out;
}

} // namespace bcl::torch::detail

#endif
