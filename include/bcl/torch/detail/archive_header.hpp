#pragma once
// The fields every archive of bcl's libtorch samplers has, whichever sampler wrote it: the format
// tag (bcl_format), the epoch cursor (bcl_epoch) and, last, the seal (bcl_digest, the digest of
// every bcl_ field). Reading the header refuses, by name, an archive of the other sampler, one of
// the distributed sampler's other mode (batches of batch_size, token-budget micro-batches) and one
// of an earlier format. Each sampler's own fields follow the header (detail/
// balanced_sampler_archive.hpp, detail/distributed_sampler_archive.hpp). Needs libtorch's C++ API
// on the include path; without it this header is empty.

#include <bcl/detail/config.hpp>

#include <bcl/torch/detail/archive.hpp>
#include <bcl/torch/detail/epoch_cursor.hpp>

#if __has_include(<torch/serialize/archive.h>)

#include <torch/types.h>

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace bcl::torch::detail {

/// The format one of bcl's samplers writes its archives in.
struct archive_format {
    std::string_view sampler; // the sampler, by the name messages give it
    std::string_view tag;     // what bcl_format holds (bytes): the sampler's name, "/", a number
                              // (after a mode's name and "/", for a mode of its own)
    // For a sampler with more than one mode, each with its own format: what a sampler of this
    // one hands out, as messages say it; empty for a sampler of one mode.
    std::string_view mode;
};

/// bcl::torch::balanced_sampler's archives.
inline constexpr archive_format balanced_sampler_format{"bcl::torch::balanced_sampler",
                                                        "bcl::torch::balanced_sampler/4", ""};
/// bcl::torch::distributed_balanced_sampler's archives, of batches of batch_size.
inline constexpr archive_format distributed_sampler_format{
    "bcl::torch::distributed_balanced_sampler", "bcl::torch::distributed_balanced_sampler/2",
    "batches of batch_size (max_tokens 0)"};
/// bcl::torch::distributed_balanced_sampler's archives in token mode (token-budget
/// micro-batches): a format of its own, so that either mode refuses the other's archive by name.
inline constexpr archive_format distributed_token_format{
    "bcl::torch::distributed_balanced_sampler", "bcl::torch::distributed_balanced_sampler/tokens/1",
    "token-budget micro-batches (max_tokens set)"};

/// The formats this bcl writes.
inline constexpr std::array<archive_format, 3> current_formats{
    {balanced_sampler_format, distributed_sampler_format, distributed_token_format}};

/// A format earlier bcl versions wrote, which this one refuses.
struct earlier_format {
    std::string_view sampler; // whose it is
    std::string_view text;    // its bcl_format as messages quote it: a number, or a tag in quotes
    std::string_view why;     // why it is not read
};

/// Every earlier format: balanced_sampler's bcl_format was a number (1, 2, 3) before it was a
/// tag; distributed_balanced_sampler's first tag ended in "/1".
inline constexpr std::array<earlier_format, 4> earlier_formats{{
    {balanced_sampler_format.sampler, "1",
     "whose archives cannot be verified (they hold neither the epoch's pushed indices nor a "
     "digest)"},
    {balanced_sampler_format.sampler, "2",
     "whose archives cannot be verified (they hold neither the epoch's pushed indices nor a "
     "digest)"},
    {balanced_sampler_format.sampler, "3", "in a format this one does not read"},
    {distributed_sampler_format.sampler, "\"bcl::torch::distributed_balanced_sampler/1\"",
     "in a format this one does not read"},
}};

/// bcl_format as messages quote it: its one number (balanced_sampler's formats 1 to 3), or its
/// bytes in quotes. Throws bcl::error for a field of another type or an int64 field that is not
/// one number.
[[nodiscard]] inline std::string read_format_text(archive_reader& in) {
    if (in.peek_type("bcl_format") == ::torch::kInt64) {
        const std::vector<std::int64_t> number = in.int64s("bcl_format");
        if (number.size() != 1)
            in.fail("bcl_format holds " + std::to_string(number.size()) + " numbers, not a format");
        return std::to_string(number[0]);
    }
    return '"' + in.bytes("bcl_format") + '"';
}

/// The sampler whose archives have bcl_format `text` (as read_format_text gives it), if it is
/// one of bcl's: an earlier format's, or a tag that starts with a sampler's name and "/".
[[nodiscard]] inline std::optional<std::string_view> format_owner(const std::string& text) {
    for (const earlier_format& f : earlier_formats)
        if (f.text == text) return f.sampler;
    for (const archive_format& f : current_formats)
        if (text.starts_with('"' + std::string(f.sampler) + '/')) return f.sampler;
    return std::nullopt;
}

/// Reads bcl_format and throws bcl::error naming it unless it is `format`'s tag: an archive of
/// the other sampler is named as such ("bcl_format is that of a <sampler>, not of a <this
/// one>"), one of the same sampler's other mode names both modes ("bcl_format is "<tag>", the
/// archive of a sampler of <its mode>, but this one hands out <this mode>: ..."), one of an
/// earlier format says so and what to do instead (start the epoch it was saved in over), and
/// anything else is quoted.
inline void check_format(archive_reader& in, const archive_format& format) {
    const std::string text = read_format_text(in);
    const std::string expected = '"' + std::string(format.tag) + '"';
    if (text == expected) return;
    if (const std::optional<std::string_view> owner = format_owner(text);
        owner && *owner != format.sampler)
        in.fail("bcl_format is that of a " + std::string(*owner) + ", not of a " +
                std::string(format.sampler));
    for (const archive_format& f : current_formats)
        if ('"' + std::string(f.tag) + '"' == text)
            in.fail("bcl_format is " + text + ", the archive of a sampler of " +
                    std::string(f.mode) + ", but this one hands out " + std::string(format.mode) +
                    ": construct the sampler as the saved one was");
    for (const earlier_format& f : earlier_formats)
        if (f.text == text)
            in.fail("bcl_format is " + text + ": it was written by an earlier bcl, " +
                    std::string(f.why) +
                    ", so it is not loaded; start the epoch it was saved in over instead "
                    "(set_epoch(), then reset())");
    in.fail("bcl_format is " + text + ", not " + expected + " (not saved by this sampler)");
}

/// Writes the header: bcl_format (`format`'s tag, bytes), then bcl_epoch (the cursor's four
/// values, epoch_cursor::to_values).
inline void write_header(archive_writer& out, const archive_format& format,
                         const epoch_cursor& cursor) {
    out.bytes("bcl_format", format.tag);
    out.int64s("bcl_epoch", cursor.to_values());
}

/// Reads the header write_header wrote and returns the cursor. Throws bcl::error naming the
/// field: bcl_format as check_format says, bcl_epoch unless it is a cursor's four values.
[[nodiscard]] inline epoch_cursor read_header(archive_reader& in, const archive_format& format) {
    check_format(in, format);
    const std::optional<epoch_cursor> cursor = epoch_cursor::from_values(in.int64s("bcl_epoch"));
    if (!cursor)
        in.fail("bcl_epoch is not an epoch, two flags of 0 or 1 (started, set_epoch() called) "
                "and the epoch set_epoch() chose (0 without its flag)");
    return *cursor;
}

/// The seal, the archive's last field: the digest of every field written before it.
inline constexpr const char* seal_field = "bcl_digest";

/// Writes the seal: call it after every other field.
inline void write_seal(archive_writer& out) {
    out.seal(seal_field);
}

/// Throws bcl::error naming bcl_digest unless the seal is the digest of every field `in` has
/// read: call it once every other field is read.
inline void check_seal(archive_reader& in) {
    in.check_seal(seal_field);
}

} // namespace bcl::torch::detail

#endif
