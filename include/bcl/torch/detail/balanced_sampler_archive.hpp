#pragma once
// The archive of a bcl::torch::balanced_sampler (format "bcl::torch::balanced_sampler/4"): the
// inner sampler's own archive, nested as "inner", the header every sampler archive starts with
// (detail/archive_header.hpp), the sampler's own fields, and the seal; and how load() reads it
// back: every field checked against the others, the balancer's state and the sampler it is
// loaded into, before anything is kept. Needs libtorch's C++ API on the include path; without it
// this header is empty.

#include <bcl/detail/config.hpp>

#include <bcl/cost_check.hpp>
#include <bcl/cost_estimator.hpp>
#include <bcl/detail/number_text.hpp>
#include <bcl/detail/state/index_epoch_check.hpp>
#include <bcl/error.hpp>
#include <bcl/options.hpp>
#include <bcl/torch/detail/archive.hpp>
#include <bcl/torch/detail/archive_header.hpp>
#include <bcl/torch/detail/epoch_cursor.hpp>
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

/// How the epoch under way is drawn, and the level its balancer aims at.
struct epoch_draw {
    draw_phase phase = draw_phase::pending;
    double level = 0.0; // the options::mean_cost its balancer aims at
};

/// An epoch read back from an archive and checked, not yet kept by the sampler.
template <class Balancer>
struct restored_epoch {
    epoch_cursor cursor; // started: a batch of the epoch under way was handed out
    epoch_draw draw;
    std::optional<Balancer> balancer;
    std::vector<std::size_t> drawn; // the epoch's indices drawn: those pushed, then the rest
    std::size_t pushed = 0;
    bool exhausted = false; // the inner sampler must have no index left this epoch
};

/// Writes a balanced_sampler's archive: `inner`'s own archive, nested as "inner"; the header
/// (balanced_sampler_format, `cursor`); the inner sampler's kind and the dataset size of `id`;
/// the draw phase and level; `drawn`, the epoch's indices drawn, whose first `pushed` were
/// pushed into the balancer whose state is `state`; that state and the indices it holds; and the
/// seal. O(drawn). What the inner sampler's save() throws propagates.
template <class Inner, class State>
void write_balanced_archive(::torch::serialize::OutputArchive& archive, const Inner& inner,
                            const sampler_identity& id, const epoch_cursor& cursor,
                            const epoch_draw& draw, const State& state,
                            std::span<const std::size_t> drawn, std::size_t pushed) {
    ::torch::serialize::OutputArchive nested(archive.compilation_unit());
    inner.save(nested);
    archive.write("inner", nested);
    archive_writer out(archive);
    const auto one = [](std::int64_t v) { return std::array<std::int64_t, 1>{v}; };
    write_header(out, balanced_sampler_format, cursor);
    out.bytes("bcl_inner_kind", id.kind);
    out.int64s("bcl_dataset_size", one(id.dataset_size ? std::int64_t(*id.dataset_size) : -1));
    out.int64s("bcl_draw", one(std::int64_t(draw.phase)));
    out.real("bcl_mean_cost", draw.level);
    out.indices("bcl_pushed", drawn.first(pushed));
    out.indices("bcl_staged", drawn.subspan(pushed));
    out.indices("bcl_pending", state.pending);
    out.bytes("bcl_balancer_state", state.to_bytes());
    write_seal(out);
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

/// Reads the draw phase and level, and checks them against the options: the fixed
/// options::mean_cost (drawn in bulk), or with mean_cost 0 the epoch's mean once drawn and 0
/// before.
inline epoch_draw read_draw(archive_reader& in, const bcl::options& opt) {
    const std::int64_t phase = in.int64("bcl_draw");
    if (phase < 0 || phase > 2) in.fail("bcl_draw is " + std::to_string(phase) + ", not 0, 1 or 2");
    const epoch_draw d{static_cast<draw_phase>(phase), in.real("bcl_mean_cost")};
    const auto text = [](double x) { return bcl::detail::number_text(x); };
    if (!bcl::valid_cost(d.level) || (d.phase == draw_phase::bulk && d.level == 0.0))
        in.fail("bcl_mean_cost is " + text(d.level) + ", not a mean cost its bcl_draw allows");
    const double saved = d.phase == draw_phase::bulk ? d.level : 0.0;
    if (saved != opt.mean_cost)
        in.fail("bcl_draw and bcl_mean_cost are those of a sampler whose options::mean_cost is " +
                text(saved) + ", but this one's is " + text(opt.mean_cost));
    if (d.phase == draw_phase::pending && d.level != 0.0)
        in.fail("bcl_draw says the epoch is not drawn yet, but its bcl_mean_cost is " +
                text(d.level) + ", not 0");
    return d;
}

/// Reads back what write_balanced_archive wrote but the inner sampler and the seal (load_inner
/// reads both, once all else is checked) and checks every field: the header (read_header: the
/// format, the epoch cursor); the inner sampler's kind and the dataset size against `id`; the
/// draw phase and level against `id.options`; every index non-negative and within a known
/// dataset size; the balancer's state (consistent, saved with the same options, the level
/// included); that it continues bcl_pushed (check_index_epoch: its position, and each pending
/// index the epoch's index at the arrival position the balancer records for it); the draw phase
/// and the cursor's started flag against the balancer. Throws bcl::error naming the field
/// otherwise. Makes the epoch's balancer, with `cost`. O(drawn).
template <class Balancer, class Estimator>
restored_epoch<Balancer> read_balanced_archive(archive_reader& in, const sampler_identity& id,
                                               const Estimator& cost) {
    restored_epoch<Balancer> r;
    r.cursor = read_header(in, balanced_sampler_format);
    if (const std::string kind = in.bytes("bcl_inner_kind"); kind != id.kind)
        in.fail("bcl_inner_kind is \"" + kind + "\", but this sampler's inner sampler is " +
                id.kind);
    const std::optional<std::uint64_t> size = id.dataset_size;
    if (const std::int64_t saved = in.int64("bcl_dataset_size");
        saved < -1 || (saved >= 0 && size && static_cast<std::uint64_t>(saved) != *size))
        in.fail("bcl_dataset_size is " + std::to_string(saved) +
                ", but this sampler's dataset size is " + (size ? std::to_string(*size) : "?"));
    r.draw = read_draw(in, id.options);
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
    if (s.opt.mean_cost != r.draw.level)
        in.fail("bcl_mean_cost is " + bcl::detail::number_text(r.draw.level) +
                ", but its balancer (bcl_balancer_state) aims at " +
                bcl::detail::number_text(s.opt.mean_cost));
    bcl::detail::check_index_epoch<std::size_t>(
        in.who() + ": the archive's bcl_pushed and bcl_pending do not continue its epoch", s,
        state.pending, std::span<const std::size_t>(r.drawn).first(r.pushed), size);
    if (r.draw.phase == draw_phase::pending && (r.pushed != 0 || s.finished))
        in.fail("bcl_draw says the epoch is not drawn yet, but its balancer has taken " +
                std::to_string(r.pushed) + " indices" + (s.finished ? " and finished" : ""));
    if (s.finished && !rest.empty())
        in.fail("bcl_staged holds " + std::to_string(rest.size()) +
                " indices not yet pushed, but its balancer has finished the epoch");
    if (r.cursor.started() != (s.stats.batches != 0))
        in.fail("bcl_epoch says " + std::string(r.cursor.started() ? "a" : "no") +
                " batch was handed out, but its balancer has handed out " +
                std::to_string(s.stats.batches));
    r.exhausted = r.draw.phase == draw_phase::whole || s.finished;
    bcl::options opt = id.options;
    opt.mean_cost = r.draw.level;
    reworded(in, "bcl_balancer_state", [&] {
        r.balancer.emplace(cost, opt, std::move(state));
        return 0;
    });
    return r;
}

/// The checks that need the inner sampler loaded from `nested`, for libtorch's stock samplers:
/// a DistributedRandomSampler's epoch (which its load() restores, and which orders its indices) is
/// the archive's epoch under way; and the inner sampler handed out exactly the epoch's drawn
/// indices (check_handed_out).
template <class Inner, class Balancer>
void check_inner(archive_reader& in, Inner& inner, ::torch::serialize::InputArchive& nested,
                 const restored_epoch<Balancer>& r, std::optional<std::size_t> dataset_size) {
    if constexpr (std::same_as<Inner, samplers::DistributedRandomSampler>)
        if (inner.epoch() != r.cursor.current())
            in.fail("bcl_epoch is " + std::to_string(r.cursor.current()) +
                    ", but its inner sampler's epoch is " + std::to_string(inner.epoch()));
    if constexpr (stock_sampler<Inner>) {
        const std::span<const std::size_t> drawn(r.drawn);
        check_handed_out(in.who(), inner, nested, drawn.first(r.pushed), drawn.subspan(r.pushed),
                         r.exhausted, dataset_size);
    }
}

/// The inner sampler's part of load(), and the seal's: loads `target` from the archive's nested
/// "inner", runs check_inner, and checks the seal (the digest of every field `in` has read). A
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
        check_seal(in);
        target = std::move(inner);
    } else {
        check_seal(in);
        load_checked(target);
    }
}

} // namespace bcl::torch::detail

#endif
