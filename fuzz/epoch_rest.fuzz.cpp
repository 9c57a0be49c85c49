// bcl-fuzz-epoch_rest: bcl::epoch_rest, what a checkpoint leaves of an epoch's order, from parts
// a damaged or forged state may hold, and then taken from as a resumed job takes it. The input
// picks the epoch's size, a start, a span and the span's bitmap (any bytes, of any length), then
// a chain of after() calls with prefixes and scattered record numbers. Checked:
//   - from_parts() accepts exactly the parts that describe a rest: start and span within the
//     epoch, ceil(span / 8) bytes, no bit past the span, the start position not taken; anything
//     else is a bcl::error, and nothing else escapes;
//   - an accepted rest's records are the positions it keeps, in rising order, each below the
//     epoch's size (against a brute-force set built from the parts);
//   - each after() keeps exactly the records not taken, in order (against the brute-force set),
//     its span ends no later than the old one's end or the last record taken, and its parts
//     rebuild it.

#include "fuzz_support.hpp"

#include <bcl/epoch_rest.hpp>
#include <bcl/error.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <set>
#include <span>
#include <string>
#include <vector>

namespace {

using namespace bcl_fuzz;

std::vector<std::uint64_t> records_of(const bcl::epoch_rest& r) {
    std::vector<std::uint64_t> out(r.size());
    for (std::uint64_t q = 0; q < r.size(); ++q) out[q] = r.position(q);
    return out;
}

// What the parts describe, by the documentation: positions [start, n) but the span's set bits;
// or nothing when they describe no rest.
bool describes_a_rest(std::uint64_t n, std::uint64_t start, std::uint64_t span,
                      const std::vector<std::uint8_t>& taken) {
    if (start > n || span > n - start) return false;
    if (taken.size() != (span + 7) / 8) return false;
    if (span % 8 != 0 && (taken.back() >> (span % 8)) != 0) return false;
    return span == 0 || (taken[0] & 1U) == 0;
}

std::vector<std::uint64_t> kept_by(std::uint64_t n, std::uint64_t start, std::uint64_t span,
                                   const std::vector<std::uint8_t>& taken) {
    std::vector<std::uint64_t> out;
    for (std::uint64_t p = start; p < n; ++p) {
        const std::uint64_t i = p - start;
        if (i < span && (taken[i / 8] >> (i % 8) & 1U) != 0) continue;
        out.push_back(p);
    }
    return out;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    byte_source in(std::span<const std::uint8_t>(data, size));
    const std::uint64_t n = in.u16() % 2048;
    const std::uint64_t start = in.u16() % 2100;
    const std::uint64_t span = in.u16() % 2100;
    // The bitmap's length: usually right, sometimes off by a byte either way.
    const std::uint8_t shape = in.byte();
    std::size_t bytes = (span + 7) / 8;
    if (shape % 8 == 1) bytes += 1;
    if (shape % 8 == 2 && bytes > 0) bytes -= 1;
    std::vector<std::uint8_t> taken(bytes);
    for (std::uint8_t& b : taken) b = in.byte();
    if (shape % 8 == 3 && !taken.empty()) taken[0] &= 0xFEU; // a start left, as after() writes
    if (shape % 8 == 4 && span % 8 != 0 && !taken.empty())
        taken.back() &= static_cast<std::uint8_t>((1U << (span % 8)) - 1); // no bit past the span
    note([&] {
        return "n " + std::to_string(n) + ", start " + std::to_string(start) + ", span " +
               std::to_string(span) + ", " + std::to_string(taken.size()) + " bytes";
    });

    bcl::epoch_rest rest;
    bool accepted = true;
    try {
        rest = bcl::epoch_rest::from_parts(n, start, span, taken, "fuzz");
    } catch (const bcl::error&) {
        accepted = false;
    }
    const bool should = describes_a_rest(n, start, span, taken);
    check(accepted == should, [&] {
        return std::string("from_parts ") + (accepted ? "accepted" : "refused") + " parts that " +
               (should ? "describe" : "do not describe") + " a rest";
    });
    if (!accepted) return 0;

    std::vector<std::uint64_t> expected = kept_by(n, start, span, taken);
    require(records_of(rest) == expected, "an accepted rest keeps the positions its parts keep");
    std::set<std::uint64_t> left(expected.begin(), expected.end());

    for (int link = 0; link < 6 && !in.empty(); ++link) {
        const std::vector<std::uint64_t> before = records_of(rest);
        const std::uint64_t prefix = before.empty() ? 0 : in.u16() % (before.size() + 2);
        std::vector<std::uint64_t> also;
        const std::size_t scattered = in.byte() % 48;
        for (std::size_t k = 0; k < scattered && !before.empty(); ++k) {
            const std::uint64_t q = prefix + in.byte();
            if (q < before.size()) also.push_back(q);
        }
        const bcl::epoch_rest next = rest.after(prefix, also);
        for (std::uint64_t q = 0; q < std::min<std::uint64_t>(prefix, before.size()); ++q)
            left.erase(before[q]);
        std::uint64_t end = rest.start() + rest.span();
        for (const std::uint64_t q : also) {
            left.erase(before[q]);
            end = std::max(end, before[q] + 1);
        }
        expected.assign(left.begin(), left.end());
        require(records_of(next) == expected, "after() keeps exactly the records not taken");
        if (next.size() > 0)
            require(next.start() + next.span() <= std::max(end, next.start()),
                    "after()'s span ends by the old end or the last record taken");
        const std::vector<std::uint8_t> parts(next.taken().begin(), next.taken().end());
        const bcl::epoch_rest again =
            bcl::epoch_rest::from_parts(n, next.start(), next.span(), parts, "fuzz");
        require(records_of(again) == expected, "after()'s parts rebuild it");
        rest = again;
    }
    return 0;
}
