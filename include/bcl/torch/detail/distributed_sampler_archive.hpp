#pragma once
// The archive of a bcl::torch::distributed_balanced_sampler (format
// "bcl::torch::distributed_balanced_sampler/2"; token mode's is distributed_token_archive.hpp,
// over the parts here): the header every sampler archive starts with
// (detail/archive_header.hpp), every setting (the order's kind only when it is not the default),
// a digest of the cost table, the batches handed out and the epoch's plan digest, and the seal;
// a keyed pass over what a checkpoint left of its epoch adds that rest (bcl_rest_start,
// bcl_rest_span, bcl_rest_taken); and how load() reads it back, each field checked by its type
// and against the sampler it is loaded into before anything is kept (a keyed archive may come
// from another num_replicas or rank). Needs libtorch's C++ API on the include path; without it
// this header is empty.

#include <bcl/detail/config.hpp>

#include <bcl/detail/number_text.hpp>
#include <bcl/detail/random.hpp>
#include <bcl/epoch_layout.hpp>
#include <bcl/epoch_rest.hpp>
#include <bcl/error.hpp>
#include <bcl/global_plan.hpp>
#include <bcl/torch/detail/archive.hpp>
#include <bcl/torch/detail/archive_header.hpp>
#include <bcl/torch/detail/epoch_cursor.hpp>
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
#include <string_view>
#include <vector>

namespace bcl::torch::detail {

/// What an archive must match: the distributed sampler it is loaded into, as it was constructed,
/// in either mode. Each mode's format saves the settings of its own mode (distributed_settings,
/// distributed_token_settings); the other mode's are at their defaults, which the sampler's
/// constructor made sure of, and the format tag tells the modes apart.
struct distributed_identity {
    distributed_sampler_options settings{}; // as given to the constructor
    std::size_t dataset_size = 0;           // the cost table's size (token mode: the lengths')
    std::uint64_t costs_digest = 0;         // bcl::cost_table_digest of the costs (token mode:
                                            // empty for the default cost)
    std::uint64_t lengths_digest = 0;       // token mode: length_table_digest of the lengths
    std::size_t batches = 0; // fixed mode: per epoch and rank (bcl::epoch_layout::batches)
};

/// Where a distributed sampler stands: its epoch, the batches of the epoch under way handed
/// out, and that epoch's plan digest once it is planned.
struct distributed_position {
    epoch_cursor cursor; // started: next() was called in the epoch under way
    std::size_t position = 0;
    std::optional<std::uint64_t> plan_digest;
};

/// What load() checks a fixed-mode archive's position against: the plan of the saved pass.
struct distributed_plan_check {
    std::uint64_t digest = 0; // the pass's digest, as digest() gives it
    std::size_t batches = 0;  // this rank's batches in the pass
};

/// A setting saved as one 64-bit field, compared bit for bit on load.
struct distributed_setting {
    const char* key;  // the archive's field
    const char* name; // the setting's name in messages
    std::uint64_t value;
};

/// The settings of `id` saved one field each (the cap, a double, is saved apart).
[[nodiscard]] inline std::array<distributed_setting, 11>
distributed_settings(const distributed_identity& id) noexcept {
    const distributed_sampler_options& s = id.settings;
    return {
        {{"bcl_dataset_size", "dataset size", id.dataset_size},
         {"bcl_num_replicas", "num_replicas", s.num_replicas},
         {"bcl_rank", "rank", s.rank},
         {"bcl_batch_size", "batch size", s.batch_size},
         {"bcl_lookahead", "lookahead", s.lookahead},
         {"bcl_shuffle", "shuffle", s.shuffle ? 1U : 0U},
         {"bcl_seed", "seed", s.seed},
         {"bcl_drop_last", "drop_last", s.drop_last ? 1U : 0U},
         {"bcl_batching", "plan_options::batching", static_cast<std::uint64_t>(s.plan.batching)},
         {"bcl_level_steps", "plan_options::level_steps", s.plan.level_steps ? 1U : 0U},
         {"bcl_costs", "cost table's digest", id.costs_digest}}};
}

/// Reads each setting of `settings` (one int64 field each) and throws bcl::error naming the
/// field and both values unless it is the setting's value, bit for bit.
template <std::size_t Count>
void check_settings(archive_reader& in, const std::array<distributed_setting, Count>& settings) {
    for (const distributed_setting& s : settings) {
        const std::string key = s.key;
        const auto saved = std::bit_cast<std::uint64_t>(in.int64(key));
        if (saved == s.value) continue;
        const auto shown = [&key](std::uint64_t v) {
            if (key != "bcl_padding") return std::to_string(v);
            constexpr std::array<const char*, 3> names{"repeat", "empty", "error"};
            return std::to_string(v) +
                   (v < names.size() ? std::string(" (") + names[v] + ")" : std::string());
        };
        in.fail(key + " is " + shown(saved) + ", but this sampler's " + s.name + " is " +
                shown(s.value) +
                (key == "bcl_costs"     ? " (the cost table differs from the saved run's)"
                 : key == "bcl_lengths" ? " (the lengths differ from the saved run's)"
                                        : ""));
    }
}

/// Reads each setting of `settings` as check_settings does, but, when `resizable` (a keyed
/// sampler, whose archives may come from another world size), bcl_num_replicas and bcl_rank,
/// which are read into `ranks` and `rank` instead, for the caller to check.
template <std::size_t Count>
void read_settings(archive_reader& in, const std::array<distributed_setting, Count>& settings,
                   bool resizable, std::uint64_t& ranks, std::uint64_t& rank) {
    for (const distributed_setting& s : settings) {
        const std::string key = s.key;
        if (resizable && key == "bcl_num_replicas")
            ranks = std::bit_cast<std::uint64_t>(in.int64(key));
        else if (resizable && key == "bcl_rank")
            rank = std::bit_cast<std::uint64_t>(in.int64(key));
        else
            check_settings(in, std::array<distributed_setting, 1>{s});
    }
}

/// The field of the epoch's order kind (distributed_sampler_options::order), in either mode's
/// archive. Written only when the kind is not the default (epoch_order_kind::fisher_yates): the
/// default's archives then stay, byte for byte, what a bcl before the choice wrote, and they
/// still load. A bcl before the choice refuses a keyed sampler's archive, never resuming it in
/// another order: by its plan digest (it plans the Fisher-Yates order), or else by its seal
/// (bcl_order is in the digest, and it does not read the field).
inline constexpr const char* order_field = "bcl_order";

/// The order kind's value and name, as messages show it: "1 (keyed)".
[[nodiscard]] inline std::string order_kind_text(std::uint64_t kind) {
    constexpr std::array<const char*, 2> names{"fisher_yates", "keyed"};
    return std::to_string(kind) +
           (kind < names.size() ? std::string(" (") + names[kind] + ")" : std::string());
}

/// Writes bcl_order (one int64, the kind's value) if `s`'s order is not the default, else
/// nothing.
inline void write_order(archive_writer& out, const distributed_sampler_options& s) {
    if (s.order == epoch_order_kind::fisher_yates) return;
    const std::array<std::int64_t, 1> kind{static_cast<std::int64_t>(s.order)};
    out.int64s(order_field, kind);
}

/// Reads bcl_order, if the archive has it (else the kind is the default, as in every archive of
/// the default and of a bcl before the choice), and throws bcl::error naming the field and both
/// kinds unless it is `s`'s order.
inline void check_saved_order(archive_reader& in, const distributed_sampler_options& s) {
    const bool present = in.peek_type(order_field).has_value();
    const std::uint64_t saved = present
                                    ? std::bit_cast<std::uint64_t>(in.int64(order_field))
                                    : static_cast<std::uint64_t>(epoch_order_kind::fisher_yates);
    const auto expected = static_cast<std::uint64_t>(s.order);
    if (saved == expected) return;
    in.fail(std::string(order_field) +
            (present
                 ? " is " + order_kind_text(saved)
                 : " is absent, so the archive's order is the default, " + order_kind_text(saved)) +
            ", but this sampler's order is " + order_kind_text(expected) +
            ": the saved run drew each epoch's order another way");
}

/// Reads bcl_plan_digest, once the position of `at` is read: none or one value, there once the
/// epoch started (`unit`: what the position counts, for the message). Throws bcl::error naming
/// the field otherwise.
[[nodiscard]] inline std::optional<std::uint64_t>
read_plan_digest(archive_reader& in, const distributed_position& at, const char* unit) {
    const std::vector<std::int64_t> plan_digest = in.int64s("bcl_plan_digest");
    if (plan_digest.size() > 1)
        in.fail("bcl_plan_digest has " + std::to_string(plan_digest.size()) +
                " values, not 0 or 1");
    if (plan_digest.empty() && at.cursor.started())
        in.fail("bcl_plan_digest is empty (the epoch not planned), but bcl_epoch says the "
                "epoch has started (bcl_position: " +
                std::to_string(at.position) + " " + unit + " handed out)");
    if (plan_digest.empty()) return std::nullopt;
    return std::bit_cast<std::uint64_t>(plan_digest[0]);
}

/// Reads bcl_position into `at` (its cursor read already): 0 or more, at most `most` where the
/// settings tell the epoch's length, and 0 unless the epoch started; then bcl_plan_digest
/// (read_plan_digest). `unit`: what the position counts, for the messages. Throws bcl::error
/// naming the field otherwise.
inline void read_position(archive_reader& in, distributed_position& at, const char* unit,
                          std::optional<std::size_t> most) {
    const std::int64_t position = in.int64("bcl_position");
    if (position < 0 || (most && static_cast<std::uint64_t>(position) > *most))
        in.fail("bcl_position is " + std::to_string(position) + ", outside the epoch's 0 to " +
                (most ? std::to_string(*most) + " " : std::string("its ")) + unit);
    at.position = static_cast<std::size_t>(position);
    if (position > 0 && !at.cursor.started())
        in.fail("bcl_epoch says the epoch has not started, but bcl_position says " +
                std::to_string(position) + " " + unit + " were handed out");
    at.plan_digest = read_plan_digest(in, at, unit);
}

/// Writes the end of a distributed sampler's archive, either mode: the position, the plan digest
/// (no value if the epoch is not planned) and the seal. O(1).
inline void write_position(archive_writer& out, const distributed_position& at) {
    const auto one = [](std::uint64_t v) {
        return std::array<std::int64_t, 1>{std::bit_cast<std::int64_t>(v)};
    };
    out.int64s("bcl_position", one(at.position));
    if (at.plan_digest)
        out.int64s("bcl_plan_digest", one(*at.plan_digest));
    else
        out.int64s("bcl_plan_digest", {});
    write_seal(out);
}

/// The fields of the rest a keyed fixed-mode pass is over (bcl::epoch_rest's parts): its start
/// and span in the epoch's order (one int64 each) and the span's bitmap of positions taken
/// (bytes). Written only for a pass over a rest, so that every other archive stays, byte for
/// byte, what it was before resumes at another world size.
inline constexpr std::array<const char*, 3> rest_fields{"bcl_rest_start", "bcl_rest_span",
                                                        "bcl_rest_taken"};

/// Writes the rest's fields (rest_fields) of `rest`. O(its bitmap).
inline void write_rest(archive_writer& out, const bcl::epoch_rest& rest) {
    const auto one = [](std::uint64_t v) {
        return std::array<std::int64_t, 1>{std::bit_cast<std::int64_t>(v)};
    };
    out.int64s(rest_fields[0], one(rest.start()));
    out.int64s(rest_fields[1], one(rest.span()));
    const std::span<const std::uint8_t> taken = rest.taken();
    out.bytes(rest_fields[2],
              std::string_view(reinterpret_cast<const char*>(taken.data()), taken.size()));
}

/// Reads the rest's fields if the archive has any of them (else std::nullopt: the pass was over
/// the whole epoch), once the position and plan digest of `at` are read: all three, only for a
/// planned epoch, each of its type, the start and span not negative, and parts that
/// bcl::epoch_rest::from_parts takes for an epoch of `n` positions (a start or span past N, a
/// bitmap of another length or with bits past the span, a start marked taken are refused).
/// Throws bcl::error naming the field otherwise. O(the bitmap).
[[nodiscard]] inline std::optional<bcl::epoch_rest> read_rest(archive_reader& in, std::uint64_t n,
                                                              const distributed_position& at) {
    bool any = false;
    for (const char* key : rest_fields) any = any || in.peek_type(key).has_value();
    if (!any) return std::nullopt;
    if (!at.plan_digest)
        in.fail("bcl_rest_start, bcl_rest_span and bcl_rest_taken are those of a pass over what "
                "a checkpoint left of a planned epoch, but bcl_plan_digest is empty (the epoch "
                "not planned)");
    std::array<std::uint64_t, 2> parts{};
    for (std::size_t i = 0; i < parts.size(); ++i) {
        const std::int64_t v = in.int64(rest_fields[i]);
        if (v < 0)
            in.fail(std::string(rest_fields[i]) + " is " + std::to_string(v) +
                    ", not a position in the epoch's order");
        parts[i] = static_cast<std::uint64_t>(v);
    }
    const std::string taken = in.bytes(rest_fields[2]);
    return bcl::epoch_rest::from_parts(
        n, parts[0], parts[1],
        std::span<const std::uint8_t>(reinterpret_cast<const std::uint8_t*>(taken.data()),
                                      taken.size()),
        in.who() + ": the archive's bcl_rest_start, bcl_rest_span and bcl_rest_taken");
}

/// Writes a distributed sampler's archive: the header (distributed_sampler_format, `at.cursor`),
/// every setting of `id` (bcl_dataset_size ... bcl_level_steps, bcl_costs, bcl_order when keyed,
/// bcl_cap), the rest's fields (rest_fields) when `rest` is given (a keyed pass over what a
/// checkpoint left of its epoch), the position, the plan digest (no value if the epoch is not
/// planned), and the seal. O(1) plus the rest's bitmap.
inline void write_distributed_archive(::torch::serialize::OutputArchive& archive,
                                      const distributed_identity& id,
                                      const distributed_position& at,
                                      const bcl::epoch_rest* rest = nullptr) {
    archive_writer out(archive);
    const auto one = [](std::uint64_t v) {
        return std::array<std::int64_t, 1>{std::bit_cast<std::int64_t>(v)};
    };
    write_header(out, distributed_sampler_format, at.cursor);
    for (const distributed_setting& s : distributed_settings(id)) out.int64s(s.key, one(s.value));
    write_order(out, id.settings);
    out.real("bcl_cap", id.settings.plan.cap);
    if (rest != nullptr) write_rest(out, *rest);
    write_position(out, at);
}

/// Reads back what write_distributed_archive wrote and checks every field: the header
/// (read_header: the format, the epoch cursor); each setting, the order's kind
/// (check_saved_order) and the cap against `id`, bit for bit (the message names the field and
/// both values), but, when `resizable` (a keyed fixed-mode sampler), num_replicas and rank,
/// which are only checked to be a shape the planner takes and a rank below them; the position (0
/// or more, and 0 unless the epoch started; at most id.batches unless `resizable`); the plan
/// digest (none or one, there once the epoch started); when `resizable`, the rest (read_rest);
/// if there is a plan digest, `check(epoch, ranks, rank, rest)` (the saved pass planned by this
/// sampler: the archive's epoch, num_replicas, rank and rest, a distributed_plan_check) must
/// have that digest and at least the position's batches; and last the seal. Throws bcl::error
/// naming the field otherwise. O(1) plus `check` and the rest's bitmap.
template <class Check>
[[nodiscard]] distributed_position read_distributed_pass(archive_reader& in,
                                                         const distributed_identity& id,
                                                         bool resizable, Check&& check) {
    distributed_position at;
    at.cursor = read_header(in, distributed_sampler_format);
    std::uint64_t ranks = id.settings.num_replicas;
    std::uint64_t rank = id.settings.rank;
    read_settings(in, distributed_settings(id), resizable, ranks, rank);
    if (resizable) {
        // Any number of ranks this sampler's batch size and lookahead can plan for, any rank.
        bcl::epoch_shape saved{.ranks = static_cast<std::size_t>(ranks),
                               .lookahead = id.settings.lookahead,
                               .batch = id.settings.batch_size};
        try {
            bcl::check_epoch_shape(saved, "bcl_num_replicas is " + std::to_string(ranks));
        } catch (const bcl::error& e) {
            in.fail(e.what());
        }
        if (rank >= ranks)
            in.fail("bcl_rank is " + std::to_string(rank) + ", not below bcl_num_replicas (" +
                    std::to_string(ranks) + ")");
    }
    check_saved_order(in, id.settings);
    if (const double cap = in.real("bcl_cap");
        std::bit_cast<std::uint64_t>(cap) != std::bit_cast<std::uint64_t>(id.settings.plan.cap))
        in.fail("bcl_cap is " + bcl::detail::number_text(cap) +
                ", but this sampler's plan_options::cap is " +
                bcl::detail::number_text(id.settings.plan.cap));
    read_position(in, at, "batches",
                  resizable ? std::nullopt : std::optional<std::size_t>(id.batches));
    std::optional<bcl::epoch_rest> rest;
    if (resizable) rest = read_rest(in, id.dataset_size, at);
    if (at.plan_digest) {
        const std::size_t epoch = at.cursor.current();
        const distributed_plan_check planned =
            check(epoch, static_cast<std::size_t>(ranks), static_cast<std::size_t>(rank),
                  static_cast<const std::optional<bcl::epoch_rest>&>(rest));
        if (*at.plan_digest != planned.digest)
            in.fail("bcl_plan_digest does not match this sampler's plan of epoch " +
                    std::to_string(epoch) + " (bcl_epoch): the costs, the settings or the " +
                    "planner differ from the saved run's, and its batches would not continue "
                    "the saved epoch's");
        if (at.position > planned.batches)
            in.fail("bcl_position is " + std::to_string(at.position) +
                    ", outside the epoch's 0 to " + std::to_string(planned.batches) + " batches");
    }
    check_seal(in);
    return at;
}

/// Reads back what write_distributed_archive wrote for a sampler whose archives must match it in
/// every setting (read_distributed_pass, not resizable): `plan(epoch)`, the digest of this
/// sampler's plan of the epoch under way, is called only if the archive has a plan digest.
/// Throws bcl::error naming the field otherwise. O(1) plus `plan`.
template <class Plan>
[[nodiscard]] distributed_position
read_distributed_archive(archive_reader& in, const distributed_identity& id, Plan&& plan) {
    return read_distributed_pass(
        in, id, false,
        [&](std::size_t epoch, std::size_t, std::size_t, const std::optional<bcl::epoch_rest>&) {
            return distributed_plan_check{plan(epoch), id.batches};
        });
}

} // namespace bcl::torch::detail

#endif
