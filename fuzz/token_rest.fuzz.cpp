// bcl-fuzz-token_rest: bcl::keyed_token_pass, a token-budget epoch over the keyed order planned
// window by window, and what it leaves at a checkpoint. The input picks a small epoch (its
// lengths, some above T), the shape (R, T, M, K, m), how an epoch that cannot fill ends, the
// seed and epoch, then positions. Checked:
//   - every rank's pass hands out bcl::token_epoch_planner::share's plan of the same order
//     materialized, micro-batch for micro-batch (but a rest padded by repetition, which repeats
//     the epoch's first records), as many on every rank;
//   - rest_after(p) succeeds exactly at the step boundaries of that plan (anything else is a
//     bcl::error), and the records it leaves are exactly those no rank took in its first p
//     micro-batches;
//   - passes over that rest at another number of ranks hand each record left out once (with
//     padding by repetition, every record at least once and none more than twice), as many
//     micro-batches on every new rank;
//   - point(p) is a rest and a position from which a pass at the same size hands out what the
//     first pass hands out from p.
// A bcl::error from the planner (an epoch the chosen padding cannot end) ends the input.

#include "fuzz_support.hpp"

#include <bcl/epoch_rest.hpp>
#include <bcl/error.hpp>
#include <bcl/keyed_order.hpp>
#include <bcl/keyed_token_epoch.hpp>
#include <bcl/token_epoch_plan.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace {

using namespace bcl_fuzz;
using micro_list = std::vector<std::vector<std::uint64_t>>;

struct epoch_input {
    std::vector<std::uint64_t> tokens;
    std::uint64_t seed = 0;
    std::uint64_t epoch = 0;
    bcl::token_epoch_shape shape;
};

[[nodiscard]] auto tokens_reader(const epoch_input& e) {
    return [&e](std::uint64_t i) { return e.tokens[i]; };
}
[[nodiscard]] auto no_costs() {
    return [](std::uint64_t) { return 0.0; };
}

std::vector<std::uint64_t> rest_order(const epoch_input& e, const bcl::epoch_rest& rest) {
    const bcl::keyed_order order(rest.epoch_size(), e.seed, e.epoch);
    std::vector<std::uint64_t> out(rest.size());
    for (std::uint64_t q = 0; q < rest.size(); ++q) out[q] = order.at(rest.position(q));
    return out;
}

// Every micro-batch of a pass over `rest` at `ranks` for `rank`.
micro_list walk(const epoch_input& e, const bcl::epoch_rest& rest, std::size_t ranks,
                std::size_t rank, std::size_t from = 0) {
    bcl::token_epoch_shape shape = e.shape;
    shape.budget.ranks = ranks;
    bcl::keyed_token_pass<> pass;
    pass.start(e.seed, e.epoch, true, shape, rank, false, 0, rest, "fuzz");
    micro_list out;
    for (std::size_t i = from;; ++i) {
        const auto b = pass.micro_batch(i, tokens_reader(e), no_costs(), "fuzz");
        if (!b) break;
        out.emplace_back(b->begin(), b->end());
    }
    require(pass.micro_batches(tokens_reader(e), no_costs(), "fuzz") == from + out.size(),
            "micro_batches() counts what the pass hands out");
    return out;
}

// The reference: token_epoch_planner::share of the rest's order, materialized.
bcl::token_epoch_share<std::uint64_t> reference(const epoch_input& e, const bcl::epoch_rest& rest,
                                                std::size_t ranks, std::size_t rank) {
    const std::vector<std::uint64_t> order = rest_order(e, rest);
    bcl::token_epoch_planner planner;
    bcl::token_epoch_share<std::uint64_t> share;
    planner.share<std::uint64_t>(e.tokens, {}, order,
                                 {.ranks = ranks,
                                  .max_tokens = e.shape.budget.max_tokens,
                                  .multiple_of = e.shape.budget.multiple_of},
                                 e.shape.micro_batches, e.shape.lookahead, rank, e.shape.options,
                                 share, "fuzz", e.shape.repeat_to_fill);
    return share;
}

micro_list batches_of(const bcl::token_epoch_share<std::uint64_t>& s) {
    micro_list out;
    for (std::size_t i = 0; i < s.micro_batches(); ++i) {
        const auto b = s.micro_batch(i);
        out.emplace_back(b.begin(), b.end());
    }
    return out;
}

// Every rank's micro-batches over `rest` at `ranks`, each checked against the reference.
std::vector<micro_list> every_rank(const epoch_input& e, const bcl::epoch_rest& rest,
                                   std::size_t ranks) {
    std::vector<micro_list> out(ranks);
    for (std::size_t r = 0; r < ranks; ++r) {
        out[r] = walk(e, rest, ranks, r);
        // (Padding by repetition repeats the epoch's first records, which a share of the rest's
        // order alone cannot: there only the contract below is checked.)
        if (rest.whole() || !e.shape.repeat_to_fill)
            require(out[r] == batches_of(reference(e, rest, ranks, r)),
                    "a pass hands out token_epoch_planner::share's plan of its order");
        require(out[r].size() == out[0].size(), "every rank has as many micro-batches");
    }
    return out;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    byte_source in(std::span<const std::uint8_t>(data, size));
    epoch_input e;
    const std::size_t n = 1 + in.u16() % 300;
    const std::size_t ranks = 1 + in.byte() % 5;
    const std::uint64_t t = 1 + in.u16() % 1000;
    const std::size_t multiple_of = 1 + in.byte() % 2;
    e.shape.budget = {.ranks = ranks, .max_tokens = t, .multiple_of = multiple_of};
    e.shape.micro_batches = multiple_of * (1 + in.byte() % 2);
    e.shape.lookahead = 1 + in.byte() % 3;
    const std::uint8_t ending = in.byte();
    e.shape.options.allow_empty_micro_batches = ending % 3 == 0;
    e.shape.repeat_to_fill = ending % 3 == 1;
    e.shape.options.oversized_alone = (ending & 4U) != 0;
    e.seed = in.byte();
    e.epoch = in.byte();
    e.tokens.resize(n);
    for (std::uint64_t& l : e.tokens) {
        const std::uint8_t kind = in.byte();
        l = kind < 200                        ? kind % (t / 4 + 1)
            : kind < 250                      ? t / 2 + kind % (t / 2 + 1)
            : e.shape.options.oversized_alone ? t + kind
                                              : t;
    }
    note([&] {
        return "n " + std::to_string(n) + ", R " + std::to_string(ranks) + ", T " +
               std::to_string(t) + ", M " + std::to_string(e.shape.micro_batches) + ", K " +
               std::to_string(e.shape.lookahead) + ", m " + std::to_string(multiple_of) +
               ", ending " + std::to_string(ending % 3);
    });
    const bcl::epoch_rest whole(n);
    std::vector<micro_list> before;
    std::vector<std::size_t> steps;
    try {
        before = every_rank(e, whole, ranks);
        steps = reference(e, whole, ranks, 0).steps;
    } catch (const bcl::error&) {
        return 0; // an epoch this padding cannot end, refused alike by both
    }
    const std::size_t count = before[0].size();

    // A position: at a step boundary or not, as the input says.
    const std::size_t p = in.u16() % (count + 1);
    const bool boundary = std::binary_search(steps.begin(), steps.end(), p);
    bcl::keyed_token_pass<> pass;
    pass.start(e.seed, e.epoch, true, e.shape, in.byte() % ranks, false, 0, whole, "fuzz");
    std::optional<bcl::epoch_rest> left;
    try {
        left = pass.rest_after(p, tokens_reader(e), no_costs(), "fuzz");
    } catch (const bcl::error&) {
    }
    check(left.has_value() == boundary, [&] {
        return "rest_after(" + std::to_string(p) + ") " + (left ? "succeeded" : "failed") + " at " +
               (boundary ? "a step boundary" : "a position within a step");
    });

    // point(p): a pass at the same size resumes exactly.
    const std::size_t rank = p % ranks;
    const bcl::token_pass_point at = pass.point(p, tokens_reader(e), no_costs(), "fuzz");
    if (at.rest.size() > 0) {
        const micro_list tail = walk(e, at.rest, ranks, rank, at.position);
        require(tail == micro_list(before[rank].begin() + static_cast<std::ptrdiff_t>(p),
                                   before[rank].end()),
                "a pass over point(p)'s rest hands out the first pass's micro-batches from p");
    } else {
        require(p == count, "point(p) leaves nothing only at the pass's end");
    }
    if (!left) return 0;

    std::vector<int> seen(n, 0);
    for (const micro_list& mine : before)
        for (std::size_t i = 0; i < p; ++i)
            for (const std::uint64_t index : mine[i]) ++seen[index];
    std::uint64_t untaken = 0;
    for (std::size_t i = 0; i < n; ++i) untaken += seen[i] == 0 ? 1 : 0;
    require(left->size() == untaken, "rest_after leaves exactly the records no rank took");

    const std::size_t new_ranks = 1 + in.byte() % 6;
    if (left->size() > 0) {
        std::vector<micro_list> after;
        try {
            after = every_rank(e, *left, new_ranks);
        } catch (const bcl::error&) {
            return 0; // the rest cannot fill the new size's micro-batches under this padding
        }
        for (const micro_list& mine : after)
            for (const auto& b : mine)
                for (const std::uint64_t index : b) ++seen[index];
    }
    for (std::size_t i = 0; i < n; ++i) {
        check(seen[i] >= 1 && (seen[i] == 1 || (e.shape.repeat_to_fill && seen[i] == 2)), [&] {
            return "dataset index " + std::to_string(i) + " came out " + std::to_string(seen[i]) +
                   " times over the epoch and its rest at " + std::to_string(new_ranks) + " ranks";
        });
    }
    return 0;
}
