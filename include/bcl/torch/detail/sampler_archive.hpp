#pragma once
// What a bcl libtorch sampler saves of its epoch besides the inner sampler (format 3), and how
// load() reads it back: every field checked against the others, the balancer's state and the
// sampler it is loaded into, before anything is kept. Needs libtorch's C++ API on the include
// path; without it this header is empty.

#include <bcl/detail/config.hpp>

#include <bcl/cost_estimator.hpp>
#include <bcl/detail/number_text.hpp>
#include <bcl/detail/state/index_epoch_check.hpp>
#include <bcl/error.hpp>
#include <bcl/options.hpp>
#include <bcl/torch/detail/archive.hpp>
#include <bcl/torch/detail/inner_sampler.hpp>

#if __has_include(<torch/serialize/archive.h>)

#include <torch/serialize/archive.h>

#include <array>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace bcl::torch::detail {

/// The layout sampler archives are written in; load() refuses any other. Format 2 added bcl_draw
/// and bcl_mean_cost; format 3 what load() checks an archive with: bcl_pushed, bcl_dataset_size,
/// bcl_inner_kind and bcl_digest.
inline constexpr std::int64_t sampler_format = 3;

/// How a sampler's epoch draws its indices (saved as bcl_draw, so the values are fixed).
enum class draw_phase : std::uint8_t {
    pending = 0, // mean_cost 0, nothing pushed yet: the next next() draws the epoch whole
    whole = 1,   // mean_cost 0: drawn whole, its balancer at the epoch's mean
    bulk = 2,    // a fixed mean_cost: drawn in bulk as the balancer needs indices
};

/// What an archive must match: the sampler it is loaded into, as it was constructed.
struct sampler_identity {
    std::string kind;                        // detail::inner_kind of its inner sampler
    std::optional<std::size_t> dataset_size; // if known
    bcl::options options;                    // as given (mean_cost 0: the epoch's mean)
};

/// A sampler's epoch, but its balancer and inner sampler.
struct epoch_fields {
    std::size_t epoch = 0;
    bool handed_out = false; // a batch of this epoch has been handed out
    bool epoch_set = false;  // set_epoch() since the last reset()
    draw_phase draw = draw_phase::pending;
    double level = 0.0; // the options::mean_cost its balancer aims at
};

/// An epoch read back from an archive and checked, not yet kept by the sampler.
template <class Balancer>
struct restored_epoch {
    epoch_fields fields;
    std::optional<Balancer> balancer;
    std::vector<std::size_t> drawn; // the epoch's indices drawn: those pushed, then the rest
    std::size_t pushed = 0;
    bool exhausted = false; // the inner sampler must have no index left this epoch
};

/// Writes a sampler's epoch: `drawn` holds the epoch's indices drawn, its first `pushed` pushed
/// into the balancer whose state is `state`; then bcl_digest over all of these. O(drawn).
template <class State>
void write_epoch(::torch::serialize::OutputArchive& archive, const sampler_identity& id,
                 const epoch_fields& f, const State& state, std::span<const std::size_t> drawn,
                 std::size_t pushed) {
    archive_writer out(archive);
    const auto one = [](std::int64_t v) { return std::array<std::int64_t, 1>{v}; };
    out.int64s("bcl_format", one(sampler_format));
    out.bytes("bcl_inner_kind", id.kind);
    out.int64s("bcl_dataset_size", one(id.dataset_size ? std::int64_t(*id.dataset_size) : -1));
    out.int64s("bcl_epoch",
               std::array<std::int64_t, 3>{std::int64_t(f.epoch), f.handed_out, f.epoch_set});
    out.int64s("bcl_draw", one(std::int64_t(f.draw)));
    out.real("bcl_mean_cost", f.level);
    out.indices("bcl_pushed", drawn.first(pushed));
    out.indices("bcl_staged", drawn.subspan(pushed));
    out.indices("bcl_pending", state.pending);
    out.bytes("bcl_balancer_state", state.to_bytes());
    out.seal("bcl_digest");
}

/// `f()`, whose bcl::error is rethrown naming the archive's `fields`.
template <class F>
auto reworded(archive_reader& in, const std::string& fields, F&& f) {
    try {
        return std::forward<F>(f)();
    } catch (const bcl::error& e) {
        in.fail(fields + ": " + e.what());
    }
}

/// Refuses an archive of another format, by name: formats 1 and 2 cannot be checked.
inline void check_format(archive_reader& in) {
    if (in.peek_type("bcl_format") == ::torch::kUInt8)
        in.fail("bcl_format is that of a bcl::torch::distributed_balanced_sampler, not of a "
                "bcl::torch::balanced_sampler");
    const std::vector<std::int64_t> f = in.int64s("bcl_format");
    const std::string text = f.size() == 1 ? std::to_string(f[0]) : "not one value";
    if (f.size() == 1 && (f[0] == 1 || f[0] == 2))
        in.fail("bcl_format is " + text +
                ": it was written by an earlier bcl, whose archives cannot be verified (they hold "
                "neither the epoch's pushed indices nor a digest), so it is not loaded; start the "
                "epoch it was saved in over instead (set_epoch(), then reset())");
    if (f.size() != 1 || f[0] != sampler_format)
        in.fail("bcl_format is " + text + ", not " + std::to_string(sampler_format) +
                " (not saved by this sampler)");
}

/// Reads the epoch's flags and draw phase, and checks them and its level against the options:
/// the fixed options::mean_cost (drawn in bulk), or with mean_cost 0 the epoch's mean once drawn
/// and 0 before.
inline epoch_fields read_epoch_fields(archive_reader& in, const bcl::options& opt) {
    const std::vector<std::int64_t> e = in.int64s("bcl_epoch");
    const auto flag = [](std::int64_t v) { return v == 0 || v == 1; };
    if (e.size() != 3 || e[0] < 0 || !flag(e[1]) || !flag(e[2]))
        in.fail("bcl_epoch is not an epoch and two flags of 0 or 1");
    const std::int64_t draw = in.int64("bcl_draw");
    if (draw < 0 || draw > 2) in.fail("bcl_draw is " + std::to_string(draw) + ", not 0, 1 or 2");
    epoch_fields f{static_cast<std::size_t>(e[0]), e[1] != 0, e[2] != 0,
                   static_cast<draw_phase>(draw), in.real("bcl_mean_cost")};
    const auto text = [](double x) { return bcl::detail::number_text(x); };
    if (!(f.level >= 0.0 && f.level <= bcl::max_estimate) ||
        (f.draw == draw_phase::bulk && f.level == 0.0))
        in.fail("bcl_mean_cost is " + text(f.level) + ", not a mean cost its bcl_draw allows");
    const double saved = f.draw == draw_phase::bulk ? f.level : 0.0;
    if (saved != opt.mean_cost)
        in.fail("bcl_draw and bcl_mean_cost are those of a sampler whose options::mean_cost is " +
                text(saved) + ", but this one's is " + text(opt.mean_cost));
    if (f.draw == draw_phase::pending && f.level != 0.0)
        in.fail("bcl_draw says the epoch is not drawn yet, but its bcl_mean_cost is " +
                text(f.level) + ", not 0");
    return f;
}

/// Reads back what write_epoch wrote (but the digest: in.check_seal, once all is checked) and
/// checks every field: the format; the inner sampler's kind and the dataset size against `id`;
/// the epoch's flags, draw phase and level against `id.options`; every index non-negative and
/// within a known dataset size; the balancer's state (consistent, saved with the same options,
/// the level included); that it continues bcl_pushed (check_index_epoch: its position, and each
/// pending index the epoch's index at the arrival position the balancer records for it); the
/// draw phase and the flags against the balancer. Throws bcl::error naming the field otherwise.
/// Makes the epoch's balancer, with `cost`. O(drawn).
template <class Balancer, class Estimator>
restored_epoch<Balancer> read_epoch(archive_reader& in, const sampler_identity& id,
                                    const Estimator& cost) {
    check_format(in);
    if (const std::string kind = in.bytes("bcl_inner_kind"); kind != id.kind)
        in.fail("bcl_inner_kind is \"" + kind + "\", but this sampler's inner sampler is " +
                id.kind);
    const std::optional<std::uint64_t> size = id.dataset_size;
    if (const std::int64_t saved = in.int64("bcl_dataset_size");
        saved < -1 || (saved >= 0 && size && static_cast<std::uint64_t>(saved) != *size))
        in.fail("bcl_dataset_size is " + std::to_string(saved) +
                ", but this sampler's dataset size is " + (size ? std::to_string(*size) : "?"));
    restored_epoch<Balancer> r;
    r.fields = read_epoch_fields(in, id.options);
    r.drawn = checked_indices(in.who(), "bcl_pushed", in.int64s("bcl_pushed"), size);
    r.pushed = r.drawn.size();
    const std::vector<std::size_t> rest =
        checked_indices(in.who(), "bcl_staged", in.int64s("bcl_staged"), size);
    r.drawn.insert(r.drawn.end(), rest.begin(), rest.end());
    std::vector<std::size_t> pending =
        checked_indices(in.who(), "bcl_pending", in.int64s("bcl_pending"), size);
    const std::string bytes = in.bytes("bcl_balancer_state");
    auto state = reworded(in, "bcl_balancer_state and bcl_pending",
                          [&] { return Balancer::state::from_bytes(bytes, std::move(pending)); });
    const bcl::detail::balancer_snapshot& s = state.snapshot;
    if (s.opt.mean_cost != r.fields.level)
        in.fail("bcl_mean_cost is " + bcl::detail::number_text(r.fields.level) +
                ", but its balancer (bcl_balancer_state) aims at " +
                bcl::detail::number_text(s.opt.mean_cost));
    bcl::detail::check_index_epoch<std::size_t>(
        in.who() + ": the archive's bcl_pushed and bcl_pending do not continue its epoch", s,
        state.pending, std::span<const std::size_t>(r.drawn).first(r.pushed), size);
    if (r.fields.draw == draw_phase::pending && (r.pushed != 0 || s.finished))
        in.fail("bcl_draw says the epoch is not drawn yet, but its balancer has taken " +
                std::to_string(r.pushed) + " indices" + (s.finished ? " and finished" : ""));
    if (s.finished && !rest.empty())
        in.fail("bcl_staged holds " + std::to_string(rest.size()) +
                " indices not yet pushed, but its balancer has finished the epoch");
    if (r.fields.handed_out != (s.stats.batches != 0))
        in.fail("bcl_epoch says " + std::string(r.fields.handed_out ? "a" : "no") +
                " batch was handed out, but its balancer has handed out " +
                std::to_string(s.stats.batches));
    r.exhausted = r.fields.draw == draw_phase::whole || s.finished;
    bcl::options opt = id.options;
    opt.mean_cost = r.fields.level;
    reworded(in, "bcl_balancer_state", [&] {
        r.balancer.emplace(cost, opt, std::move(state));
        return 0;
    });
    return r;
}

/// The checks that need the inner sampler loaded from `nested`, for libtorch's stock samplers:
/// a DistributedRandomSampler's epoch (which its load() restores, and which orders its indices) is
/// the archive's, unless set_epoch() was called since the epoch began; and the inner sampler
/// handed out exactly the epoch's drawn indices (check_handed_out).
template <class Inner, class Balancer>
void check_inner(archive_reader& in, Inner& inner, ::torch::serialize::InputArchive& nested,
                 const restored_epoch<Balancer>& r, std::optional<std::size_t> dataset_size) {
    if constexpr (std::same_as<Inner, samplers::DistributedRandomSampler>)
        if (!r.fields.epoch_set && inner.epoch() != r.fields.epoch)
            in.fail("bcl_epoch is " + std::to_string(r.fields.epoch) +
                    ", but its inner sampler's epoch is " + std::to_string(inner.epoch()));
    if constexpr (stock_sampler<Inner>) {
        const std::span<const std::size_t> drawn(r.drawn);
        check_handed_out(in.who(), inner, nested, drawn.first(r.pushed), drawn.subspan(r.pushed),
                         r.exhausted, dataset_size);
    }
}

/// The inner sampler's part of load(), and the digest's: loads `target` from the archive's
/// nested "inner", runs check_inner, and checks the digest of every field `in` has read. A
/// sampler that can be copied and assigned is loaded into a detached_copy, which replaces
/// `target` only once every check passed (by move assignment, which no libtorch sampler's
/// throws), so on an exception `target` is unchanged. Another is loaded in place, after the
/// digest is checked, so then only it may have changed. Throws bcl::error naming the field, also
/// for what libtorch throws (c10::Error) while the inner sampler loads or is checked.
template <class Inner, class Balancer>
void load_inner(archive_reader& in, ::torch::serialize::InputArchive& archive, Inner& target,
                const restored_epoch<Balancer>& r, std::optional<std::size_t> dataset_size) {
    ::torch::serialize::InputArchive nested;
    if (!archive.try_read("inner", nested)) in.fail("inner (the inner sampler) is missing");
    // libtorch's own errors (a tensor missing or of another shape) name no field: say which.
    const auto load_checked = [&](Inner& inner) {
        try {
            inner.load(nested);
            check_inner(in, inner, nested, r, dataset_size);
        } catch (const c10::Error& e) {
            in.fail("inner (the inner sampler's state) does not load: " +
                    std::string(e.what_without_backtrace()));
        }
    };
    if constexpr (std::copy_constructible<Inner> && std::is_move_assignable_v<Inner>) {
        Inner inner = detached_copy(target);
        load_checked(inner);
        in.check_seal("bcl_digest");
        target = std::move(inner);
    } else {
        in.check_seal("bcl_digest");
        load_checked(target);
    }
}

} // namespace bcl::torch::detail

#endif
