#pragma once
// The archive of a bcl::torch::distributed_balanced_sampler in token mode (format
// "bcl::torch::distributed_balanced_sampler/tokens/1"): the header, every setting of token mode
// (the order's kind only when it is not the default), the digests of the lengths and the costs,
// the micro-batches handed out and the epoch's plan digest, and the seal; a keyed pass over what
// a checkpoint left of its epoch adds that rest (bcl_rest_start, bcl_rest_span, bcl_rest_taken,
// as fixed mode's); and how load() reads it back, each field checked by its type and against the
// sampler it is loaded into before anything is kept (a keyed archive may come from another
// num_replicas or rank). Needs libtorch's C++ API on the include path; without it this header is
// empty.

#include <bcl/detail/config.hpp>

#include <bcl/detail/random.hpp>
#include <bcl/epoch_rest.hpp>
#include <bcl/error.hpp>
#include <bcl/token_budget.hpp>
#include <bcl/torch/detail/archive.hpp>
#include <bcl/torch/detail/archive_header.hpp>
#include <bcl/torch/detail/distributed_sampler_archive.hpp>
#include <bcl/torch/distributed_sampler_options.hpp>

#if __has_include(<torch/serialize/archive.h>)

#include <torch/serialize/archive.h>

#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace bcl::torch::detail {

/// What load() checks an archive's position against: the plan of the saved epoch.
struct token_epoch_check {
    std::uint64_t digest = 0;      // bcl::token_epoch_share::digest
    std::size_t micro_batches = 0; // this rank's in the epoch
};

/// What load() checks a token archive's position against: the saved pass (an epoch planned
/// whole, or a keyed pass, whose count is known only once walked to its end).
struct token_pass_check {
    std::uint64_t digest = 0;                 // the pass's digest, as digest() gives it
    bool holds_position = true;               // it has at least the position's micro-batches
    std::optional<std::size_t> micro_batches; // its count, where known (for the message)
};

/// A digest of a table of lengths, bit for bit: equal tables, equal digests, on every platform.
/// O(N), noexcept.
[[nodiscard]] inline std::uint64_t
length_table_digest(std::span<const std::uint64_t> lengths) noexcept {
    std::uint64_t h = bcl::detail::splitmix64(lengths.size() ^ 0x6c656e67746873ULL).next();
    for (const std::uint64_t l : lengths) h = bcl::detail::splitmix64(h ^ l).next();
    return h;
}

/// The settings of `id` saved one field each.
[[nodiscard]] inline std::array<distributed_setting, 14>
distributed_token_settings(const distributed_identity& id) noexcept {
    const distributed_sampler_options& s = id.settings;
    return {{{"bcl_dataset_size", "dataset size", id.dataset_size},
             {"bcl_num_replicas", "num_replicas", s.num_replicas},
             {"bcl_rank", "rank", s.rank},
             {"bcl_lookahead", "lookahead", s.lookahead},
             {"bcl_shuffle", "shuffle", s.shuffle ? 1U : 0U},
             {"bcl_seed", "seed", s.seed},
             {"bcl_max_tokens", "max_tokens", s.max_tokens},
             {"bcl_micro_batches", "micro_batches", s.micro_batches},
             {"bcl_multiple_of", "multiple_of", s.multiple_of},
             {"bcl_oversized_alone", "oversized_alone", s.oversized_alone ? 1U : 0U},
             {"bcl_pad_to_multiple_of", "pad_to_multiple_of", s.pad_to_multiple_of},
             {"bcl_padding", "padding", static_cast<std::uint64_t>(s.padding)},
             {"bcl_lengths", "lengths' digest", id.lengths_digest},
             {"bcl_costs", "cost table's digest", id.costs_digest}}};
}

/// Writes a token-mode archive: the header (distributed_token_format, `at.cursor`), every
/// setting of `id` (bcl_dataset_size ... bcl_padding, bcl_lengths, bcl_costs, bcl_order when
/// keyed), the rest's fields (rest_fields) when `rest` is given (a keyed pass over what a
/// checkpoint left of its epoch), the position (the micro-batches handed out), the plan digest
/// (no value if the epoch is not planned), and the seal. O(1) plus the rest's bitmap.
inline void write_distributed_token_archive(::torch::serialize::OutputArchive& archive,
                                            const distributed_identity& id,
                                            const distributed_position& at,
                                            const bcl::epoch_rest* rest = nullptr) {
    archive_writer out(archive);
    const auto one = [](std::uint64_t v) {
        return std::array<std::int64_t, 1>{std::bit_cast<std::int64_t>(v)};
    };
    write_header(out, distributed_token_format, at.cursor);
    for (const distributed_setting& s : distributed_token_settings(id))
        out.int64s(s.key, one(s.value));
    write_order(out, id.settings);
    if (rest != nullptr) write_rest(out, *rest);
    write_position(out, at);
}

/// Reads back what write_distributed_token_archive wrote and checks every field: the header
/// (read_header: the format, so that a fixed-mode archive is refused by name, the epoch
/// cursor); each setting and the order's kind (check_saved_order) against `id`, bit for bit (the
/// message names the field and both values), but, when `resizable` (a keyed sampler),
/// num_replicas and rank, which are only checked to be a shape the planner takes and a rank
/// below them; the position (0 or more, and 0 unless the epoch started); the plan digest (none
/// or one, there once the epoch started); when `resizable`, the rest (read_rest); if there is a
/// plan digest, `check(epoch, ranks, rank, rest, position)` (the saved pass as this sampler plans
/// it, a token_pass_check) must have that digest and hold the position; and last the seal.
/// Throws bcl::error naming the field otherwise. O(1) plus `check` and the rest's bitmap.
template <class Check>
[[nodiscard]] distributed_position read_distributed_token_pass(archive_reader& in,
                                                               const distributed_identity& id,
                                                               bool resizable, Check&& check) {
    distributed_position at;
    at.cursor = read_header(in, distributed_token_format);
    std::uint64_t ranks = id.settings.num_replicas;
    std::uint64_t rank = id.settings.rank;
    read_settings(in, distributed_token_settings(id), resizable, ranks, rank);
    if (resizable) {
        // Any number of ranks this sampler's budget, micro_batches and lookahead can plan for.
        const bcl::token_budget saved{.ranks = static_cast<std::size_t>(ranks),
                                      .max_tokens = id.settings.max_tokens,
                                      .multiple_of = id.settings.multiple_of};
        try {
            const std::string who = "bcl_num_replicas is " + std::to_string(ranks);
            bcl::check_token_budget(saved, id.settings.lookahead, who);
            bcl::check_token_window(saved, id.settings.micro_batches, id.settings.lookahead, who);
        } catch (const bcl::error& e) {
            in.fail(e.what());
        }
        if (rank >= ranks)
            in.fail("bcl_rank is " + std::to_string(rank) + ", not below bcl_num_replicas (" +
                    std::to_string(ranks) + ")");
    }
    check_saved_order(in, id.settings);
    read_position(in, at, "micro-batches", std::nullopt);
    std::optional<bcl::epoch_rest> rest;
    if (resizable) rest = read_rest(in, id.dataset_size, at);
    if (at.plan_digest) {
        const std::size_t epoch = at.cursor.current();
        const token_pass_check planned =
            check(epoch, static_cast<std::size_t>(ranks), static_cast<std::size_t>(rank),
                  static_cast<const std::optional<bcl::epoch_rest>&>(rest), at.position);
        if (*at.plan_digest != planned.digest)
            in.fail("bcl_plan_digest does not match this sampler's plan of epoch " +
                    std::to_string(epoch) + " (bcl_epoch): the lengths, the costs, the " +
                    "settings or the planner differ from the saved run's, and its micro-batches "
                    "would not continue the saved epoch's");
        if (!planned.holds_position)
            in.fail("bcl_position is " + std::to_string(at.position) + ", outside the epoch's " +
                    (planned.micro_batches ? "0 to " + std::to_string(*planned.micro_batches)
                                           : std::string("pass of")) +
                    " micro-batches");
    }
    check_seal(in);
    return at;
}

/// Reads back what write_distributed_token_archive wrote for a sampler whose archives must match
/// it in every setting (read_distributed_token_pass, not resizable): `plan(epoch)`, this
/// sampler's plan of the epoch under way (a token_epoch_check), is called only if the archive
/// has a plan digest, and must have at least the position's micro-batches. Throws bcl::error
/// naming the field otherwise. O(1) plus `plan`.
template <class Plan>
[[nodiscard]] distributed_position
read_distributed_token_archive(archive_reader& in, const distributed_identity& id, Plan&& plan) {
    return read_distributed_token_pass(
        in, id, false,
        [&](std::size_t epoch, std::size_t, std::size_t, const std::optional<bcl::epoch_rest>&,
            std::size_t position) {
            const token_epoch_check planned = plan(epoch);
            return token_pass_check{planned.digest, position <= planned.micro_batches,
                                    planned.micro_batches};
        });
}

} // namespace bcl::torch::detail

#endif
