#pragma once
// bcl::torch::balanced_sampler: a libtorch index sampler whose batches have balanced estimated
// cost. It draws dataset indices from another libtorch sampler, runs them through a
// bcl::balancer and hands out batches of exactly the batch size. Needs libtorch's C++ API on the
// include path (link the Torch package's `torch` target); <bcl/bcl.hpp> does not include it.

#include <bcl/detail/config.hpp>

#include <bcl/balancer.hpp>
#include <bcl/cost_estimator.hpp>
#include <bcl/detail/number_text.hpp>
#include <bcl/error.hpp>
#include <bcl/options.hpp>
#include <bcl/statistics.hpp>
#include <bcl/stream_mean_cost.hpp>

#if __has_include(<torch/data/samplers/base.h>)

#include <torch/data/samplers/base.h>
#include <torch/data/samplers/distributed.h>
#include <torch/serialize/archive.h>
#include <torch/types.h>

#include <algorithm>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace bcl::torch {

/// The libtorch sampler type balanced_sampler is: it hands out batches of dataset indices.
using index_sampler_base = ::torch::data::samplers::Sampler<std::vector<std::size_t>>;

/// A type S satisfies `index_sampler` if:
///   1. it derives from torch::data::samplers::Sampler<std::vector<std::size_t>> (so it has
///      reset(), next(n), save() and load(), as every libtorch index sampler does: RandomSampler,
///      SequentialSampler, DistributedRandomSampler, DistributedSequentialSampler);
///   2. it is move-constructible (balanced_sampler keeps it by value).
/// It need not be copyable, and need not hand out exactly n indices per next(n).
template <class S>
concept index_sampler = std::derived_from<S, index_sampler_base> && std::move_constructible<S>;

/// An index_sampler with epochs, like libtorch's distributed samplers: `set_epoch(e)` chooses
/// what the next reset() draws, and `epoch()` reads it back. balanced_sampler forwards its own
/// epoch to such a sampler at every reset().
template <class S>
concept epoch_sampler = index_sampler<S> && requires(S& s, const S& cs, std::size_t e) {
    s.set_epoch(e);
    { cs.epoch() } -> std::convertible_to<std::size_t>;
};

/// A libtorch sampler that balances the estimated cost of its batches.
///
/// It draws dataset indices from an inner libtorch sampler (by default a
/// DistributedRandomSampler, which gives each rank its share of a shuffled epoch) and runs them
/// through a bcl::balancer<std::size_t, Estimator>, whose estimator gives the cost of a dataset
/// index (e.g. `bcl::affine_quadratic(0, 1, c, [&](std::size_t i) { return length[i]; })`).
/// next(B) then returns the balancer's batches: the README's contract holds for the indices of
/// each epoch. Every batch has exactly B = options::batch_size indices but the epoch's last,
/// which has the rest (or is dropped with options::drop_last); an epoch has ceil(n/B) batches
/// (floor with drop_last) for the n indices the inner sampler hands out, whatever the costs, so
/// ranks whose inner samplers hand out equally many indices (a distributed sampler's shares)
/// step equally often; every index the inner sampler hands out comes out exactly once.
///
/// Mean cost: a sliding round aims its batches at options::mean_cost, the long-run mean cost of
/// an index (costliest-first emission also measures heavy batches against it). A balancer left
/// at the default 0 estimates that mean from what it has seen, and a sampler starts a new
/// balancer every epoch, so every epoch would start that estimate afresh, with ranks' estimates
/// far apart early. With options::mean_cost 0 (the default) the sampler therefore gives each
/// epoch's balancer the epoch's own mean: the epoch's first next() draws all of its indices from
/// the inner sampler, estimates each, and passes bcl::stream_mean_cost of those costs under
/// options::cap as the balancer's mean_cost (mean_cost() reads it). A fixed options::mean_cost
/// (> 0) is used as is, and the indices are drawn in bulk as the balancer needs them.
/// docs/torch.md gives the measured gain.
///
/// Epochs: reset() starts the next epoch, the way a torch::data data loader calls it at every
/// begin(). It advances epoch() by one, or keeps it if this epoch has handed out no batch yet
/// or set_epoch() was called since the last reset() (so the loader's first begin() does not
/// skip epoch 0). An epoch_sampler inner sampler is given the epoch before it is reset.
///
/// Resume: save() writes the inner sampler's state, the balancer's state, the indices held and
/// the epoch's mean cost, so a sampler constructed alike and load()ed from that archive hands out
/// exactly the batches the saved one would have, from any point, mid-window too, and through later
/// epochs. Under a data loader with worker threads the loader asks for batches ahead of the
/// trainer: save a sampler the trainer drives itself (or a loader with `workers(0)`) to resume at a
/// step.
///
/// Cost: the inner sampler is asked for indices in bulk (at least the balancer's buffer, 1024 at
/// least), so its per-call overhead is shared by many indices; each index is then pushed and
/// popped once (bcl's cost per record) and copied once into the batch the loader receives. With
/// the epoch's mean (mean_cost 0) the estimator is evaluated twice per index, once for the mean
/// and once when the index is pushed, and the epoch's first next() does the first of these for
/// the whole epoch, O(n), before it hands out a batch.
/// Memory: the balancer's buffer plus the indices drawn and not yet pushed, 8 bytes each: with
/// the epoch's mean, all the epoch's indices (and, while the first next() computes the mean, 8
/// bytes more per index for their costs, 16 under a quantile cap); with a fixed mean_cost, one
/// bulk draw. Not thread-safe, like libtorch's own samplers.
template <class Estimator, class Inner = ::torch::data::samplers::DistributedRandomSampler>
requires cost_estimator<Estimator, std::size_t> && std::copy_constructible<Estimator> &&
    index_sampler<Inner>
class balanced_sampler final : public index_sampler_base {
public:
    /// The cost-of-index function the balancer estimates with.
    using estimator_type = Estimator;
    /// The libtorch sampler the indices are drawn from.
    using inner_sampler_type = Inner;
    /// The balancer that repartitions the drawn indices into batches.
    using balancer_type = bcl::balancer<std::size_t, Estimator>;

    /// Wraps `inner`, continuing from its current position (it is not reset here), with the cost
    /// of a dataset index given by `cost` and the balancer settings `opt`. epoch() starts at the
    /// inner sampler's epoch (0 for one without epochs). Draws nothing yet: the first next() does.
    /// Throws bcl::error if `opt` is invalid (bcl::validate) or asks for what the estimator cannot
    /// do (a truncating cap, a memory budget).
    balanced_sampler(Inner inner, Estimator cost, bcl::options opt)
        : m_inner(std::move(inner)), m_cost(std::move(cost)), m_options(opt),
          m_balancer(std::in_place, m_cost, m_options),
          m_pull(std::max(bcl::buffer_capacity(m_options), min_pull)), m_level(m_options.mean_cost),
          m_draw(m_options.mean_cost > 0.0 ? draw_phase::bulk : draw_phase::pending) {
        if constexpr (epoch_sampler<Inner>) m_epoch = static_cast<std::size_t>(m_inner.epoch());
    }

    /// Starts the next epoch: epoch() + 1, or epoch() itself if this epoch has handed out no
    /// batch yet or set_epoch() was called since the last reset(). Gives an epoch_sampler inner
    /// sampler the epoch, resets it (with `new_size`, the dataset size, if given) and drops
    /// whatever of the previous epoch was not handed out. With options::mean_cost 0, mean_cost()
    /// is 0 again until the epoch's first next() draws the epoch. O(buffer) plus the inner reset().
    void reset(::torch::optional<std::size_t> new_size = ::torch::nullopt) override {
        if (m_handed_out && !m_epoch_set) ++m_epoch;
        if constexpr (epoch_sampler<Inner>) m_inner.set_epoch(m_epoch);
        m_inner.reset(new_size);
        // With the epoch's mean to come, this balancer only stands in (for stats()) until the
        // first next() draws the epoch and starts the one that aims at it.
        m_balancer.emplace(m_cost, m_options);
        m_staged.clear();
        m_staged_next = 0;
        m_level = m_options.mean_cost;
        m_draw = m_options.mean_cost > 0.0 ? draw_phase::bulk : draw_phase::pending;
        m_handed_out = false;
        m_epoch_set = false;
    }

    /// Sets the epoch the next reset() starts (as libtorch's DistributedSampler::set_epoch does);
    /// the epoch under way is not changed. O(1).
    void set_epoch(std::size_t epoch) noexcept {
        m_epoch = epoch;
        m_epoch_set = true;
    }

    /// The next batch of dataset indices: exactly options::batch_size of them, but the epoch's
    /// last batch, which has the rest (dropped with options::drop_last); std::nullopt once the
    /// epoch is over, until reset(). Amortized O(batch_size) plus the balancer's rounds; with
    /// options::mean_cost 0 the epoch's first next() also draws the whole epoch from the inner
    /// sampler and estimates every index, O(n), to start the balancer at the epoch's mean.
    /// Throws bcl::error if `batch_size` is not the sampler's options::batch_size (a loader
    /// must ask for exactly the batches the sampler balances), or if an index's estimated cost is
    /// NaN, negative or above bcl::max_estimate (the message names the dataset index; asking
    /// again throws again: the index is kept, nothing is lost). What the estimator or the inner
    /// sampler throws propagates unchanged. Whatever throws, every index drawn from the inner
    /// sampler is kept, so asking again carries on where the failed call stopped.
    [[nodiscard]] ::torch::optional<std::vector<std::size_t>>
    next(std::size_t batch_size) override {
        if (batch_size != m_options.batch_size)
            throw bcl::error("bcl::torch::balanced_sampler::next: asked for a batch of " +
                             std::to_string(batch_size) +
                             " indices, but the sampler's options::batch_size is " +
                             std::to_string(m_options.batch_size) +
                             "; give the data loader the sampler's batch size");
        if (m_draw == draw_phase::pending) start_epoch();
        balancer_type& b = *m_balancer;
        for (;;) {
            if (const std::optional<typename balancer_type::batch_type> batch = b.pop()) {
                m_handed_out = true;
                return std::vector<std::size_t>(batch->begin(), batch->end());
            }
            if (b.finished()) return ::torch::nullopt;
            // An epoch drawn whole is all staged: once that is pushed, the epoch is over.
            if (m_staged_next == m_staged.size() && (m_draw == draw_phase::whole || !draw())) {
                b.finish();
                continue;
            }
            push_staged(b);
        }
    }

    /// Writes the sampler's state to `archive` (format 2): the inner sampler's (in a nested
    /// archive "inner"), the balancer's bytes and the indices it holds, the indices drawn and not
    /// yet pushed, the epoch, whether the epoch has been drawn and the mean cost its balancer
    /// aims at. O(indices held). What the inner sampler's save() throws propagates.
    void save(::torch::serialize::OutputArchive& archive) const override {
        ::torch::serialize::OutputArchive inner(archive.compilation_unit());
        m_inner.save(inner);
        archive.write("inner", inner);
        const typename balancer_type::state state = m_balancer->save();
        archive.write("bcl_format", int64_tensor({format_version}), /*is_buffer=*/true);
        archive.write("bcl_balancer_state", bytes_tensor(state.to_bytes()), /*is_buffer=*/true);
        archive.write("bcl_pending", int64_tensor(state.pending), /*is_buffer=*/true);
        const std::vector<std::size_t> staged(
            m_staged.begin() + static_cast<std::ptrdiff_t>(m_staged_next), m_staged.end());
        archive.write("bcl_staged", int64_tensor(staged), /*is_buffer=*/true);
        archive.write("bcl_epoch",
                      int64_tensor({m_epoch, m_handed_out ? 1U : 0U, m_epoch_set ? 1U : 0U}),
                      /*is_buffer=*/true);
        archive.write("bcl_draw", int64_tensor({static_cast<std::size_t>(m_draw)}),
                      /*is_buffer=*/true);
        archive.write("bcl_mean_cost", double_tensor(m_level), /*is_buffer=*/true);
    }

    /// Restores what save() wrote; the sampler then hands out exactly the batches the saved one
    /// would have. It must have been constructed alike: the same options (bcl::error naming the
    /// first that differs, options::mean_cost included), an equal estimator and an inner sampler
    /// of the same kind and size.
    /// Reads format 2 and format 1, written before the sampler used the epoch's mean: the epoch
    /// restored from format 1 runs to its end as it started, its balancer at options::mean_cost
    /// as given (0: its running mean), and the epochs after it use the epoch's mean.
    /// Throws bcl::error if the archive was not written by balanced_sampler::save (another
    /// bcl_format) or is inconsistent; what the archive's reads or the inner sampler's load()
    /// throw propagates. On an exception this sampler is unchanged, but the inner sampler may
    /// have read part of its state (it is loaded last). O(indices held).
    void load(::torch::serialize::InputArchive& archive) override {
        const std::vector<std::size_t> format = read_indices(archive, "bcl_format");
        if (format.size() != 1 || format[0] < 1 || format[0] > format_version)
            throw bcl::error("bcl::torch::balanced_sampler::load: the archive's bcl_format is " +
                             (format.size() == 1 ? std::to_string(format[0])
                                                 : std::to_string(format.size()) + " values") +
                             ", not 1 or " + std::to_string(format_version) +
                             " (not saved by this balanced_sampler)");
        const std::vector<std::size_t> epoch = read_indices(archive, "bcl_epoch");
        if (epoch.size() != 3)
            throw bcl::error("bcl::torch::balanced_sampler::load: bcl_epoch has " +
                             std::to_string(epoch.size()) + " entries, not 3");
        // Format 1 has neither: its epochs were drawn in bulk, at options::mean_cost as given.
        draw_phase draw = draw_phase::bulk;
        double level = m_options.mean_cost;
        if (format[0] >= 2) {
            draw = read_draw(archive);
            level = read_double(archive, "bcl_mean_cost");
            check_level(draw, level);
        }
        std::vector<std::size_t> staged = read_indices(archive, "bcl_staged");
        typename balancer_type::state state = balancer_type::state::from_bytes(
            read_bytes(archive, "bcl_balancer_state"), read_indices(archive, "bcl_pending"));
        std::optional<balancer_type> restored(std::in_place, m_cost, leveled(level),
                                              std::move(state));
        ::torch::serialize::InputArchive inner;
        archive.read("inner", inner);
        m_inner.load(inner);
        // Committed: nothing below throws.
        m_balancer.emplace(std::move(*restored));
        m_staged = std::move(staged);
        m_staged_next = 0;
        m_epoch = epoch[0];
        m_handed_out = epoch[1] != 0;
        m_epoch_set = epoch[2] != 0;
        m_level = level;
        m_draw = draw;
    }

    /// The mean cost of an index that the epoch's balancer aims at: its options::mean_cost. With
    /// a fixed options::mean_cost, that value. With options::mean_cost 0, the epoch's mean
    /// (bcl::stream_mean_cost of its indices' costs under options::cap) once the epoch's first
    /// next() has drawn the epoch, and 0 before; 0 also for the rest of an epoch restored from a
    /// format-1 archive, whose balancer aims at its running mean. O(1).
    [[nodiscard]] double mean_cost() const noexcept { return m_level; }

    /// The epoch under way (or, after set_epoch(e), e: the one the next reset() starts). O(1).
    [[nodiscard]] std::size_t epoch() const noexcept { return m_epoch; }
    /// The balancer settings as given; options::batch_size is the batch size next() hands out.
    /// options::mean_cost stays as given too (0: the epoch's mean; mean_cost() reads that). O(1).
    [[nodiscard]] const bcl::options& settings() const noexcept { return m_options; }
    /// The balancer's statistics for the epoch under way (batch costs, delays, windows). O(1).
    [[nodiscard]] const bcl::statistics& stats() const noexcept { return m_balancer->stats(); }
    /// The inner sampler. O(1).
    [[nodiscard]] const Inner& inner() const noexcept { return m_inner; }

private:
    // Indices drawn from the inner sampler at a time, at least: its per-call cost (a vector, a
    // tensor slice) is then shared by a thousand indices or more.
    static constexpr std::size_t min_pull = 1024;
    // The layout of what save() writes; load() reads it and format 1, and refuses any other.
    // Format 2 added bcl_draw and bcl_mean_cost.
    static constexpr std::size_t format_version = 2;

    // How the epoch under way draws its indices (saved as bcl_draw, so the values are fixed).
    enum class draw_phase : std::uint8_t {
        pending = 0, // mean_cost 0, nothing pushed yet: the next next() draws the epoch whole
        whole = 1,   // mean_cost 0: drawn whole, all staged, its balancer at the epoch's mean
        bulk = 2,    // a fixed mean_cost, or the rest of an epoch from a format-1 archive:
                     // drawn in bulk as the balancer needs indices
    };

    // The options of a balancer that aims at `level`.
    [[nodiscard]] bcl::options leveled(double level) const {
        bcl::options opt = m_options;
        opt.mean_cost = level;
        return opt;
    }

    // Draws the rest of the epoch, estimates every index, and starts the epoch's balancer at
    // their mean. Whatever throws (the inner sampler, the estimator, a bad cost) leaves every
    // index drawn so far staged and the epoch pending, so the next call carries on from there.
    void start_epoch() {
        for (;;) {
            ::torch::optional<std::vector<std::size_t>> more = m_inner.next(m_pull);
            if (!more || more->empty()) break;
            m_staged.insert(m_staged.end(), more->begin(), more->end());
        }
        std::vector<double> costs;
        costs.reserve(m_staged.size());
        for (const std::size_t index : m_staged) costs.push_back(checked_cost(index));
        const double level = bcl::stream_mean_cost(costs, m_options.cap);
        std::optional<balancer_type> fresh(std::in_place, m_cost, leveled(level));
        // Committed: nothing below throws.
        m_balancer.emplace(std::move(*fresh));
        m_level = level;
        m_draw = draw_phase::whole;
    }

    // The estimated cost of a dataset index, checked as the balancer would check it.
    double checked_cost(std::size_t index) {
        const auto cost = static_cast<double>(std::invoke(m_cost, index));
        if (cost >= 0.0 && cost <= bcl::max_estimate) return cost;
        throw bcl::error("bcl::torch::balanced_sampler: dataset index " + std::to_string(index) +
                         ": cost estimate " + bcl::detail::number_text(cost) +
                         "; it must be >= 0 and at most bcl::max_estimate (" +
                         bcl::detail::number_text(bcl::max_estimate) + ")");
    }

    // A format-2 archive's level must be one this sampler's options give: the fixed
    // options::mean_cost (drawn in bulk), or with mean_cost 0 the epoch's mean once drawn, 0
    // before, and 0 (the running mean) for an epoch drawn in bulk as a format-1 archive's was.
    void check_level(draw_phase draw, double level) const {
        const double saved_mean_cost = draw == draw_phase::bulk ? level : 0.0;
        if (!(saved_mean_cost == m_options.mean_cost))
            throw bcl::error(
                "bcl::torch::balanced_sampler::load: the archive was saved by a sampler whose "
                "options::mean_cost is " +
                bcl::detail::number_text(saved_mean_cost) + ", but this one's is " +
                bcl::detail::number_text(m_options.mean_cost));
        if (draw == draw_phase::pending && level != 0.0)
            throw bcl::error("bcl::torch::balanced_sampler::load: the archive's epoch is not "
                             "drawn yet, but its bcl_mean_cost is " +
                             bcl::detail::number_text(level) + ", not 0");
    }

    // Draws the next bulk of indices from the inner sampler; false once it has no more.
    bool draw() {
        ::torch::optional<std::vector<std::size_t>> more = m_inner.next(m_pull);
        if (!more || more->empty()) return false;
        m_staged = std::move(*more);
        m_staged_next = 0;
        return true;
    }

    // Pushes drawn indices until the buffer is full (so the next pop() runs a round) or none are
    // left. A rejected index stays drawn and unpushed, and the balancer is unchanged.
    void push_staged(balancer_type& b) {
        const std::size_t capacity = bcl::buffer_capacity(m_options);
        std::size_t room = capacity - std::min(capacity, b.buffered());
        for (; room != 0 && m_staged_next < m_staged.size(); --room) {
            const std::size_t index = m_staged[m_staged_next];
            try {
                b.push(std::size_t{index});
            } catch (const bcl::error& e) {
                throw bcl::error("bcl::torch::balanced_sampler: dataset index " +
                                 std::to_string(index) + ": " + e.what());
            }
            ++m_staged_next;
        }
    }

    static ::torch::Tensor int64_tensor(const std::vector<std::size_t>& values) {
        ::torch::Tensor t = ::torch::empty({static_cast<std::int64_t>(values.size())},
                                           ::torch::TensorOptions().dtype(::torch::kInt64));
        auto* out = t.data_ptr<std::int64_t>();
        for (std::size_t i = 0; i < values.size(); ++i)
            out[i] = static_cast<std::int64_t>(values[i]);
        return t;
    }

    static ::torch::Tensor double_tensor(double value) {
        ::torch::Tensor t = ::torch::empty({1}, ::torch::TensorOptions().dtype(::torch::kFloat64));
        *t.data_ptr<double>() = value;
        return t;
    }

    static ::torch::Tensor bytes_tensor(const std::string& bytes) {
        ::torch::Tensor t = ::torch::empty({static_cast<std::int64_t>(bytes.size())},
                                           ::torch::TensorOptions().dtype(::torch::kUInt8));
        if (!bytes.empty()) std::memcpy(t.data_ptr<std::uint8_t>(), bytes.data(), bytes.size());
        return t;
    }

    static ::torch::Tensor read_tensor(::torch::serialize::InputArchive& archive, const char* key,
                                       ::torch::ScalarType dtype) {
        ::torch::Tensor t;
        archive.read(key, t, /*is_buffer=*/true);
        if (t.scalar_type() != dtype || t.dim() != 1)
            throw bcl::error(std::string("bcl::torch::balanced_sampler::load: the archive's ") +
                             key + " is not a 1-d tensor of " + ::c10::toString(dtype));
        return t.contiguous();
    }

    static std::vector<std::size_t> read_indices(::torch::serialize::InputArchive& archive,
                                                 const char* key) {
        const ::torch::Tensor t = read_tensor(archive, key, ::torch::kInt64);
        const auto* in = t.data_ptr<std::int64_t>();
        std::vector<std::size_t> values(static_cast<std::size_t>(t.numel()));
        for (std::size_t i = 0; i < values.size(); ++i) {
            if (in[i] < 0)
                throw bcl::error(std::string("bcl::torch::balanced_sampler::load: the archive's ") +
                                 key + " holds a negative value (" + std::to_string(in[i]) + ")");
            values[i] = static_cast<std::size_t>(in[i]);
        }
        return values;
    }

    static double read_double(::torch::serialize::InputArchive& archive, const char* key) {
        const ::torch::Tensor t = read_tensor(archive, key, ::torch::kFloat64);
        if (t.numel() != 1)
            throw bcl::error(std::string("bcl::torch::balanced_sampler::load: the archive's ") +
                             key + " has " + std::to_string(t.numel()) + " entries, not 1");
        return *t.data_ptr<double>();
    }

    static draw_phase read_draw(::torch::serialize::InputArchive& archive) {
        const std::vector<std::size_t> draw = read_indices(archive, "bcl_draw");
        if (draw.size() != 1 || draw[0] > static_cast<std::size_t>(draw_phase::bulk))
            throw bcl::error("bcl::torch::balanced_sampler::load: the archive's bcl_draw is not "
                             "one value of 0, 1 or 2");
        return static_cast<draw_phase>(draw[0]);
    }

    static std::string read_bytes(::torch::serialize::InputArchive& archive, const char* key) {
        const ::torch::Tensor t = read_tensor(archive, key, ::torch::kUInt8);
        std::string bytes(static_cast<std::size_t>(t.numel()), '\0');
        if (!bytes.empty()) std::memcpy(bytes.data(), t.data_ptr<std::uint8_t>(), bytes.size());
        return bytes;
    }

    Inner m_inner;
    Estimator m_cost;
    bcl::options m_options;
    std::optional<balancer_type> m_balancer; // always engaged; optional to rebuild it per epoch
    std::size_t m_pull;
    std::vector<std::size_t> m_staged; // drawn from the inner sampler: the last bulk, or the epoch
    std::size_t m_staged_next = 0;     // its first index not yet pushed
    double m_level;                    // the epoch's balancer's options::mean_cost
    draw_phase m_draw;
    std::size_t m_epoch = 0;
    bool m_handed_out = false; // a batch of this epoch has been handed out
    bool m_epoch_set = false;  // set_epoch() since the last reset()
};

} // namespace bcl::torch

#else // libtorch's C++ API is not on the include path

#include <cstddef>

namespace bcl::torch {

/// Stands in for the sampler when libtorch's C++ API is not on the include path, so that this
/// header compiles alone anywhere and a use of the sampler says what is missing.
template <class Estimator, class Inner = void>
class balanced_sampler {
    static_assert(sizeof(Estimator) == 0,
                  "bcl::torch::balanced_sampler needs libtorch's C++ API on the include path: "
                  "link the Torch package's `torch` target (find_package(Torch))");

public:
    template <class... Args>
    explicit balanced_sampler(Args&&... /*args*/) {}
};

template <class Inner, class Estimator, class... Rest>
balanced_sampler(Inner, Estimator, Rest...) -> balanced_sampler<Estimator, Inner>;

} // namespace bcl::torch

#endif
