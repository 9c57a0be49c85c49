#pragma once
// A tiny, portable binary format for saved balancer state: little-endian fixed-width integers,
// doubles by their IEEE-754 bits, and a checksum, so a corrupted or truncated byte string is
// detected and reported instead of read.

#include <bcl/detail/config.hpp>

#include <bcl/error.hpp>

#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

namespace bcl::detail {

/// FNV-1a, 64 bit: enough to catch accidental corruption (not an integrity guarantee against an
/// adversary, which a checkpoint file does not need).
[[nodiscard]] constexpr std::uint64_t fnv1a(std::string_view bytes) noexcept {
    std::uint64_t h = 0xcbf29ce484222325ULL;
    for (const char c : bytes) {
        h ^= static_cast<unsigned char>(c);
        h *= 0x100000001b3ULL;
    }
    return h;
}

class byte_writer {
public:
    void u64(std::uint64_t v) {
        std::array<char, 8> bytes{}; // appended at once: a state is mostly these
        for (std::size_t i = 0; i < 8; ++i) bytes[i] = static_cast<char>((v >> (8 * i)) & 0xffU);
        m_out.append(bytes.data(), bytes.size());
    }
    void f64(double v) { u64(std::bit_cast<std::uint64_t>(v)); }
    void flag(bool v) { u64(v ? 1 : 0); }
    [[nodiscard]] std::size_t size() const noexcept { return m_out.size(); }
    /// Appends the checksum of everything written so far and returns the bytes.
    [[nodiscard]] std::string finish() {
        u64(fnv1a(m_out));
        return std::move(m_out);
    }

private:
    std::string m_out;
};

class byte_reader {
public:
    /// Checks the trailing checksum; throws bcl::error if the bytes are too short or corrupted.
    explicit byte_reader(std::string_view bytes) {
        if (bytes.size() < 8)
            throw error("bcl: saved state is truncated (" + std::to_string(bytes.size()) +
                        " bytes)");
        m_in = bytes.substr(0, bytes.size() - 8);
        std::uint64_t stored = 0;
        for (int i = 0; i < 8; ++i)
            stored |= std::uint64_t{static_cast<unsigned char>(
                          bytes[bytes.size() - 8 + static_cast<std::size_t>(i)])}
                      << (8 * i);
        if (stored != fnv1a(m_in))
            throw error("bcl: saved state is corrupted or truncated (checksum mismatch)");
    }
    std::uint64_t u64(const char* what) {
        if (m_in.size() - m_pos < 8)
            throw error(std::string("bcl: saved state ends before ") + what);
        std::uint64_t v = 0;
        for (int i = 0; i < 8; ++i)
            v |=
                std::uint64_t{static_cast<unsigned char>(m_in[m_pos + static_cast<std::size_t>(i)])}
                << (8 * i);
        m_pos += 8;
        return v;
    }
    double f64(const char* what) { return std::bit_cast<double>(u64(what)); }
    bool flag(const char* what) {
        const std::uint64_t v = u64(what);
        if (v > 1) throw error(std::string("bcl: saved state has an invalid ") + what);
        return v == 1;
    }
    /// A count of items of `item_bytes` each that must not exceed `limit` nor the bytes left (so a
    /// corrupted count cannot make the reader allocate wildly).
    std::size_t count(const char* what, std::size_t limit, std::size_t item_bytes) {
        const std::uint64_t v = u64(what);
        if (item_bytes > 0 && v > (m_in.size() - m_pos) / item_bytes)
            throw error(std::string("bcl: saved state ends before ") + what + " (" +
                        std::to_string(v) + " items announced)");
        if (v > limit)
            throw error(std::string("bcl: saved state has ") + what + " = " + std::to_string(v) +
                        ", more than the possible " + std::to_string(limit));
        return static_cast<std::size_t>(v);
    }
    void expect_end() const {
        if (m_pos != m_in.size())
            throw error("bcl: saved state has " + std::to_string(m_in.size() - m_pos) +
                        " unexpected trailing bytes");
    }

private:
    std::string_view m_in;
    std::size_t m_pos = 0;
};

} // namespace bcl::detail
