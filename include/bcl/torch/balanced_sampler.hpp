#pragma once
// bcl::torch::balanced_sampler: a libtorch index sampler whose batches have balanced estimated
// cost. It draws dataset indices from another libtorch sampler, runs them through a
// bcl::balancer and hands out batches of exactly the batch size. Needs libtorch's C++ API on the
// include path (link the Torch package's `torch` target); <bcl/bcl.hpp> does not include it.

#include <bcl/detail/config.hpp>

#include <bcl/balancer.hpp>
#include <bcl/cost_check.hpp>
#include <bcl/cost_estimator.hpp>
#include <bcl/error.hpp>
#include <bcl/options.hpp>
#include <bcl/statistics.hpp>
#include <bcl/stream_mean_cost.hpp>
#include <bcl/torch/data_loader.hpp>
#include <bcl/torch/detail/archive.hpp>
#include <bcl/torch/detail/balanced_sampler_archive.hpp>
#include <bcl/torch/detail/batch_request.hpp>
#include <bcl/torch/detail/epoch_cursor.hpp>
#include <bcl/torch/detail/inner_sampler.hpp>
#include <bcl/torch/index_sampler.hpp>

#if __has_include(<torch/data/samplers/base.h>)

#include <torch/data/samplers/base.h>
#include <torch/data/samplers/distributed.h>
#include <torch/serialize/archive.h>
#include <torch/types.h>

#include <algorithm>
#include <concepts>
#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace bcl::torch {

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
/// The batch size is options::batch_size, given once: bcl::torch::make_data_loader makes a
/// torch::data loader that asks for batches of that size (a loader that asks for another size
/// gets a bcl::error at its first batch).
///
/// Mean cost: a sliding round aims its batches at options::mean_cost, the long-run mean cost of
/// an index (costliest-first emission also measures heavy batches against it). A balancer left
/// at the default 0 estimates that mean from what it has seen, which early in an epoch is far
/// apart from rank to rank. With options::mean_cost 0 (the default) the sampler therefore gives
/// each epoch's balancer the epoch's own mean: the epoch's first next() draws all of its indices
/// from the inner sampler, estimates each, and passes bcl::stream_mean_cost of those costs under
/// options::cap as the balancer's mean_cost (mean_cost() reads it). A fixed options::mean_cost
/// (> 0) is used as is, the indices drawn in bulk as needed. docs/torch.md has the measured gain.
///
/// Epochs: reset() starts the next epoch, the way a torch::data data loader calls it at every
/// begin(). It advances epoch() by one, or keeps it if this epoch has handed out no batch yet
/// or set_epoch() was called since the last reset() (so the loader's first begin() does not
/// skip epoch 0). An epoch_sampler inner sampler is given the epoch before it is reset. One
/// balancer runs from epoch to epoch (bcl::balancer::next_epoch) when the epoch before was
/// drained (every batch handed out) or never started: what it learned, the quantile cap's
/// sketch, the heavy slots and a calibration's fit, carries over, so the epoch balances as the
/// uninterrupted stream would. An epoch left partway starts a new balancer.
///
/// Resume: a sampler constructed alike and load()ed from what save() wrote hands out exactly the
/// batches the saved one would have, from any point and through later epochs; load() checks every
/// field and refuses with a bcl::error naming the field, changing nothing. Loader workers ask
/// ahead of the trainer: save a sampler the trainer drives (or `workers(0)`) to resume at a step.
///
/// Dataset size: known if given to the constructor, or read from a distributed inner sampler
/// (libtorch's RandomSampler and SequentialSampler keep theirs private: give it), or passed to
/// reset(). When known, every index the inner sampler hands out is checked against it before it
/// reaches the estimator, and so is every index load() reads.
///
/// Cost: indices are drawn in bulk (1024 or the balancer's buffer, if more), each pushed, popped
/// and copied into its batch once; with the epoch's mean the estimator runs twice per index.
/// Memory: the balancer's buffer plus 8 bytes per index drawn this epoch (all of them with the
/// epoch's mean, and 8-16 more per index while the first next() computes it). Not thread-safe,
/// like libtorch's own samplers.
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
    /// inner sampler's epoch (0 for one without epochs); the dataset size is the inner sampler's
    /// if it is a distributed one, else unknown. Draws nothing yet: the first next() does.
    /// Throws bcl::error if `opt` is invalid (bcl::validate) or asks for what the estimator cannot
    /// do (a truncating cap, a memory budget), and for an inner sampler at an epoch of 2^63 or
    /// more (what save() could not write back, as set_epoch() refuses it).
    balanced_sampler(Inner inner, Estimator cost, bcl::options opt)
        : balanced_sampler(std::move(inner), std::move(cost), opt, std::nullopt, 0) {}

    /// As above, over a dataset of `dataset_size` indices: every index the inner sampler hands
    /// out must be below it (bcl::error naming the index and the size otherwise), and load()
    /// refuses an archive saved over another dataset size. Also throws bcl::error if a
    /// distributed inner sampler draws from another size.
    balanced_sampler(Inner inner, Estimator cost, bcl::options opt, std::size_t dataset_size)
        : balanced_sampler(std::move(inner), std::move(cost), opt, dataset_size, 0) {}

    /// Starts the next epoch: epoch() + 1, or epoch() itself if this epoch has handed out no
    /// batch yet or set_epoch() was called since the last reset(). Gives an epoch_sampler inner
    /// sampler the epoch, resets it (with `new_size`, the dataset size, if given: it becomes
    /// dataset_size()) and drops whatever of the previous epoch was not handed out.
    ///
    /// The balancer carries on into the new epoch (bcl::balancer::next_epoch, keeping what it
    /// learned) if the previous epoch was drained or never started: drained means next() found
    /// the epoch's end (a data loader's loop does) or, with the epoch drawn whole (mean_cost 0),
    /// every index drawn was pushed and every batch handed out. Otherwise (an epoch left partway)
    /// a new balancer starts. With options::mean_cost 0, mean_cost() is 0 again until the
    /// epoch's first next() draws the epoch. O(buffer) plus the inner reset().
    void reset(::torch::optional<std::size_t> new_size = ::torch::nullopt) override {
        const std::size_t epoch = m_cursor.reset(who);
        if constexpr (epoch_sampler<Inner>) m_inner.set_epoch(epoch);
        m_inner.reset(new_size);
        if (new_size) m_dataset_size = *new_size;
        // With the epoch's mean to come, this balancer aims at mean_cost 0 only until the first
        // next() draws the epoch and gives it the epoch's mean.
        carry_or_renew();
        m_staged.clear();
        m_staged_next = 0;
        m_draw = fresh_draw();
    }

    /// Sets the epoch the next reset() starts (as libtorch's DistributedSampler::set_epoch does);
    /// the epoch under way is not changed. Throws bcl::error for an epoch of 2^63 or more (what
    /// save() could not write back), changing nothing. O(1).
    void set_epoch(std::size_t epoch) { m_cursor.set_epoch(epoch, who); }

    /// The next batch of dataset indices: exactly options::batch_size of them, but the epoch's
    /// last batch, which has the rest (dropped with options::drop_last); std::nullopt once the
    /// epoch is over, until reset(). Amortized O(batch_size) plus the balancer's rounds; with
    /// options::mean_cost 0 the epoch's first next() also draws the whole epoch from the inner
    /// sampler and estimates every index, O(n), to start the balancer at the epoch's mean.
    /// Throws bcl::error if `batch_size` is not the sampler's options::batch_size (a loader
    /// must ask for exactly the batches the sampler balances), if the inner sampler hands out an
    /// index outside a known dataset size, or if an index's estimated cost is NaN, negative or
    /// above bcl::max_estimate (the message names the dataset index; asking again throws again:
    /// the index is kept, nothing is lost). What the estimator or the inner sampler throws
    /// propagates unchanged. Whatever throws, every index drawn from the inner sampler is kept,
    /// so asking again carries on where the failed call stopped.
    [[nodiscard]] ::torch::optional<std::vector<std::size_t>>
    next(std::size_t batch_size) override {
        detail::check_batch_request(batch_size, m_options.batch_size, who, "options::batch_size");
        if (m_draw.phase == draw_phase::pending) start_epoch();
        balancer_type& b = *m_balancer;
        for (;;) {
            if (const std::optional<typename balancer_type::batch_type> batch = b.pop()) {
                m_cursor.mark_started();
                return std::vector<std::size_t>(batch->begin(), batch->end());
            }
            if (b.finished()) return ::torch::nullopt;
            // An epoch drawn whole is all staged: once that is pushed, the epoch is over.
            if (m_staged_next == m_staged.size() &&
                (m_draw.phase == draw_phase::whole || !draw())) {
                b.finish();
                continue;
            }
            // A balancer that neither hands out a batch nor takes an index would loop forever.
            if (push_staged(b) == 0)
                throw bcl::error("bcl::torch::balanced_sampler::next: the balancer holds " +
                                 std::to_string(b.buffered()) +
                                 " indices and neither hands out a batch nor takes another");
        }
    }

    /// Writes the sampler's state to `archive` (format "bcl::torch::balanced_sampler/4"): the
    /// inner sampler's (a nested archive "inner"), the format tag, the epoch (the one under way,
    /// whether a batch of it was handed out, the one set_epoch() chose), the balancer's bytes and
    /// the indices it holds, the epoch's indices pushed so far and those drawn and not yet
    /// pushed, its draw phase and mean cost, the dataset size, the inner sampler's kind, and a
    /// digest of these (docs/torch.md). O(indices drawn this epoch). What the inner sampler's
    /// save() throws propagates.
    void save(::torch::serialize::OutputArchive& archive) const override {
        detail::write_balanced_archive(archive, m_inner, identity(), m_cursor, m_draw,
                                       m_balancer->save(), m_staged, m_staged_next);
    }

    /// Restores what save() wrote; the sampler then hands out exactly the batches the saved one
    /// would have. It must have been constructed alike: the same options, an equal estimator and
    /// an inner sampler of the same kind and size. Before it keeps anything it checks every field
    /// against the others, the balancer's state, the inner sampler (for libtorch's own: that it
    /// handed out exactly the epoch's indices) and this sampler, and the digest (docs/torch.md
    /// lists the checks); it throws bcl::error naming the field otherwise, for an archive of a
    /// distributed_balanced_sampler, and for the formats of earlier bcl versions (1, 2 and 3). On
    /// any exception (also what the archive's reads or the inner sampler's load() throw) this
    /// sampler is unchanged: an inner sampler that can be copied and assigned is loaded into a
    /// copy, kept once every check passed; another is loaded last, and then only it may have
    /// changed. O(indices drawn this epoch), O(dataset) for a DistributedRandomSampler.
    void load(::torch::serialize::InputArchive& archive) override {
        detail::archive_reader in(archive, std::string(who) + "::load");
        detail::restored_epoch<balancer_type> r =
            detail::read_balanced_archive<balancer_type>(in, identity(), m_cost);
        detail::load_inner(in, archive, m_inner, r, m_dataset_size); // the seal too
        // Committed: nothing below throws.
        m_balancer.emplace(std::move(*r.balancer));
        m_staged = std::move(r.drawn);
        m_staged_next = r.pushed;
        m_cursor = r.cursor;
        m_draw = r.draw;
    }

    /// The mean cost of an index that the epoch's balancer aims at: a fixed options::mean_cost,
    /// or with options::mean_cost 0 the epoch's mean (bcl::stream_mean_cost of its indices' costs
    /// under options::cap) once its first next() has drawn the epoch, and 0 before. O(1).
    [[nodiscard]] double mean_cost() const noexcept { return m_draw.level; }

    /// The epoch under way (or, after set_epoch(e), e: the one the next reset() starts). O(1).
    [[nodiscard]] std::size_t epoch() const noexcept { return m_cursor.epoch(); }
    /// The dataset size every index is checked against, if known (see the class comment). O(1).
    [[nodiscard]] std::optional<std::size_t> dataset_size() const noexcept {
        return m_dataset_size;
    }
    /// B: the indices of every batch but an epoch's last (options::batch_size). O(1).
    [[nodiscard]] std::size_t batch_size() const noexcept { return m_options.batch_size; }
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
    static constexpr const char* who = "bcl::torch::balanced_sampler";
    using draw_phase = detail::draw_phase;

    balanced_sampler(Inner inner, Estimator cost, bcl::options opt,
                     std::optional<std::size_t> dataset_size, int /*delegated*/)
        : m_inner(std::move(inner)), m_cost(std::move(cost)), m_options(opt),
          m_balancer(std::in_place, m_cost, m_options),
          m_pull(std::max(bcl::buffer_capacity(m_options), min_pull)),
          m_dataset_size(dataset_size ? dataset_size : detail::dataset_size_of(m_inner)),
          m_draw(fresh_draw()) {
        if constexpr (epoch_sampler<Inner>)
            m_cursor = detail::epoch_cursor(static_cast<std::size_t>(m_inner.epoch()), who,
                                            "the inner sampler's epoch");
        if (const auto own = detail::dataset_size_of(m_inner); own && *own != m_dataset_size)
            throw bcl::error("bcl::torch::balanced_sampler: the dataset size given is " +
                             std::to_string(*m_dataset_size) + ", but the inner sampler's is " +
                             std::to_string(*own));
    }

    // An epoch before its first next(): nothing drawn.
    [[nodiscard]] detail::epoch_draw fresh_draw() const noexcept {
        const bool fixed = m_options.mean_cost > 0.0;
        return {fixed ? draw_phase::bulk : draw_phase::pending, m_options.mean_cost};
    }

    // Draws the rest of the epoch, estimates every index, and starts the epoch's balancer at
    // their mean. Whatever throws (the inner sampler, the estimator, a bad cost or index) leaves
    // every index drawn so far staged and the epoch pending, so the next call carries on there.
    void start_epoch() {
        while (draw()) {
        }
        for (const std::size_t index : m_staged) check_index(index);
        std::vector<double> costs;
        costs.reserve(m_staged.size());
        for (const std::size_t index : m_staged) costs.push_back(checked_cost(index));
        const double level = bcl::stream_mean_cost(costs, m_options.cap);
        // The balancer has taken nothing this epoch (nothing is pushed before the epoch is
        // drawn), so next_epoch() accepts it; it throws only for a level out of range, which a
        // mean of checked costs is not, and then changes nothing.
        m_balancer->next_epoch(level);
        m_draw = {draw_phase::whole, level};
    }

    // The balancer of the epoch reset() starts: the last one, carried on by next_epoch() (what
    // it learned kept), if its epoch was drained or never started; else a new one. An epoch
    // drawn whole whose indices were all pushed is over: finish() says so to its balancer (with
    // drop_last, it drops the n mod B indices it holds), which is then drained if it holds none.
    void carry_or_renew() {
        balancer_type& b = *m_balancer;
        if (!b.finished() && m_draw.phase == draw_phase::whole && m_staged_next == m_staged.size())
            b.finish();
        if (b.stats().records_in == 0 || (b.finished() && b.buffered() == 0))
            b.next_epoch(m_options.mean_cost);
        else
            m_balancer.emplace(m_cost, m_options);
    }

    // Throws bcl::error unless `index` is within the dataset (when its size is known).
    void check_index(std::size_t index) const {
        if (!m_dataset_size || index < *m_dataset_size) return;
        throw bcl::error(
            "bcl::torch::balanced_sampler: the inner sampler handed out dataset index " +
            std::to_string(index) + ", but the dataset size is " + std::to_string(*m_dataset_size) +
            "; it is kept (asking again throws again)");
    }

    // The estimated cost of a dataset index, checked as the balancer would check it.
    double checked_cost(std::size_t index) {
        const auto cost = static_cast<double>(std::invoke(m_cost, index));
        bcl::check_cost(cost, [index] {
            return "bcl::torch::balanced_sampler: dataset index " + std::to_string(index) +
                   ": cost estimate ";
        });
        return cost;
    }

    // Draws the next bulk of indices into m_staged; false once the inner sampler has no more.
    bool draw() {
        ::torch::optional<std::vector<std::size_t>> more = m_inner.next(m_pull);
        if (!more || more->empty()) return false;
        m_staged.insert(m_staged.end(), more->begin(), more->end());
        return true;
    }

    // Pushes drawn indices until the buffer is full (so the next pop() runs a round) or none are
    // left, and returns how many. A rejected index stays drawn and unpushed, the balancer as it
    // was.
    std::size_t push_staged(balancer_type& b) {
        const std::size_t capacity = bcl::buffer_capacity(m_options);
        const std::size_t first = m_staged_next;
        for (std::size_t room = capacity - std::min(capacity, b.buffered());
             room != 0 && m_staged_next < m_staged.size(); --room) {
            const std::size_t index = m_staged[m_staged_next];
            check_index(index);
            try {
                b.push(std::size_t{index});
            } catch (const bcl::error& e) {
                throw bcl::error("bcl::torch::balanced_sampler: dataset index " +
                                 std::to_string(index) + ": " + e.what());
            }
            ++m_staged_next;
        }
        return m_staged_next - first;
    }

    // What an archive must match to load into this sampler.
    [[nodiscard]] detail::sampler_identity identity() const {
        return {detail::inner_kind<Inner>(), m_dataset_size, m_options};
    }

    Inner m_inner;
    Estimator m_cost;
    bcl::options m_options;
    std::optional<balancer_type> m_balancer; // always engaged; optional to rebuild it per epoch
    std::size_t m_pull;
    std::optional<std::size_t> m_dataset_size;
    std::vector<std::size_t> m_staged; // drawn from the inner sampler this epoch
    std::size_t m_staged_next = 0;     // its first index not yet pushed (those before are)
    detail::epoch_cursor m_cursor;     // the epoch; started: a batch of it was handed out
    detail::epoch_draw m_draw;         // how the epoch under way is drawn, and its level
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
