#pragma once
// bcl::torch::distributed_balanced_sampler: a libtorch batch sampler for map-style datasets whose
// cost table every rank holds. Every rank derives the same global order of an epoch, plans each
// window of K steps of all ranks' records with bcl::global_planner (the same plan, bit for bit,
// on every rank) and hands out its own share, batch by batch. No communication. Needs libtorch's
// C++ API on the include path (link the Torch package's `torch` target); <bcl/bcl.hpp> does not
// include it.

#include <bcl/detail/config.hpp>

#include <bcl/cost_estimator.hpp>
#include <bcl/epoch_plan.hpp>
#include <bcl/error.hpp>
#include <bcl/global_plan.hpp>
#include <bcl/options.hpp>
#include <bcl/torch/data_loader.hpp>
#include <bcl/torch/detail/archive.hpp>
#include <bcl/torch/detail/batch_request.hpp>
#include <bcl/torch/detail/distributed_sampler_archive.hpp>
#include <bcl/torch/detail/epoch_cursor.hpp>

#if __has_include(<torch/data/samplers/base.h>)

#include <torch/data/samplers/base.h>
#include <torch/serialize/archive.h>
#include <torch/types.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace bcl::torch {

/// What the plans of an epoch promise (bcl::epoch_plan_summary).
using epoch_plan_summary = bcl::epoch_plan_summary;

/// A libtorch sampler of batches of dataset indices, planned with every rank's: the libtorch
/// counterpart of Python's bcl.DistributedBalancedBatchSampler, for a map-style dataset whose
/// cost table (one cost per dataset index) every rank holds.
///
/// Each epoch every rank derives the same global order from (seed, epoch): a Fisher-Yates shuffle
/// of 0..N-1 driven by SplitMix64, written with integer operations only (no std::shuffle nor
/// std::uniform_int_distribution, whose results differ between standard libraries), or 0..N-1
/// itself without `shuffle`. As torch's DistributedSampler does, the order is padded with its
/// first indices (repeated as needed) to a multiple of R = num_replicas, or, with `drop_last`,
/// cut to one. Every rank then takes m = (that length) / R records, and with `drop_last` m is cut
/// to a multiple of B. The kept order is cut into windows of R*K*B records (K = lookahead), each
/// planned by bcl::global_planner: the plan depends on nothing but the costs, the shape and the
/// plan options, bit for bit on every rank, compiler and floating-point flag. This rank keeps
/// its records of each of the window's steps, in the order's order.
///
/// The contract, for every epoch: every rank hands out size() batches, the same number on every
/// rank (ceil(m / B), floor with drop_last), each of exactly B indices but the epoch's last,
/// which has the rest on every rank (none with drop_last); over all R ranks every record of the
/// kept order comes out exactly once (an index the padding repeats, as often as it is repeated);
/// a record moves at most K-1 steps from where the order put it, and to any rank.
///
/// The digest: digest() is the chain of the epoch's window plans' bcl::plan_digest. Ranks that
/// plan alike have equal digests; a rank with another cost table, seed, epoch or setting has
/// another. Compare it across ranks once per epoch (one all-reduce of its min and max): a
/// mismatch means records trained twice or never, so treat it as an error.
///
/// Epochs: reset() (which a torch::data loader calls at every begin()) starts the next epoch:
/// epoch() + 1, or the same epoch if no next() was called in it yet (so a loader's first
/// begin() does not skip epoch 0), or the one set_epoch() chose since. The epoch is planned at its
/// first next() (or digest(), summary()): O(N log N), each rank planning every rank's records.
///
/// Resume: save() writes a format tag, the epoch, every setting, the dataset size, a digest of the
/// cost table, the batches handed out and the epoch's plan digest, sealed by a digest of the
/// fields. load() checks each field by type and against this sampler (bcl::error naming the
/// field otherwise), plans the saved epoch again and compares its digest, and changes nothing
/// unless every check passed; the sampler then hands out exactly the rest of the saved epoch.
///
/// Memory: the cost table (8 bytes per index, shared by copies of the sampler), the epoch's
/// order (8 bytes per index), this rank's share (8 bytes per record) and the planner's scratch
/// for one window. After the first epoch nothing is allocated but the batches handed out. Not
/// thread-safe, like libtorch's own samplers.
class distributed_balanced_sampler final
    : public ::torch::data::samplers::Sampler<std::vector<std::size_t>> {
public:
    /// The sampler of rank `rank` of `num_replicas`, over the dataset indices 0..costs.size()-1
    /// whose estimated costs are `costs` (the whole table: every rank plans every rank's
    /// records). Batches of `batch_size` (B) indices, windows of `lookahead` (K) steps, planned
    /// with `plan` (packed or padded batches, a cap, levelled steps: bcl::plan_options).
    /// Checks everything here, so that every rank refuses a bad table or setting before the
    /// first step: throws bcl::error naming the dataset index and value of the first cost that is
    /// NaN, negative, infinite or above bcl::max_estimate, for B, K or num_replicas of 0, a rank
    /// not below num_replicas, R*K*B above bcl::max_plan_records, a seed of 2^63 or more, and
    /// invalid plan options (the batching neither packed nor padded, a negative or NaN cap). O(N).
    distributed_balanced_sampler(std::vector<double> costs, std::size_t batch_size,
                                 std::size_t num_replicas, std::size_t rank, bool shuffle = true,
                                 std::uint64_t seed = 0, bool drop_last = false,
                                 std::size_t lookahead = 8, bcl::plan_options plan = {})
        : m_table(std::make_shared<const std::vector<double>>(std::move(costs))),
          m_batch(batch_size), m_replicas(num_replicas), m_rank(rank), m_lookahead(lookahead),
          m_shuffle(shuffle), m_seed(seed), m_drop_last(drop_last), m_plan_options(plan) {
        detail::check_counter(seed, who, "the seed");
        bcl::check_epoch_shape(shape(), who);
        if (m_rank >= m_replicas)
            throw bcl::error(std::string(who) + ": rank " + std::to_string(m_rank) +
                             " of num_replicas " + std::to_string(m_replicas) +
                             ": the rank must be below num_replicas");
        bcl::check_plan_options(m_plan_options, who);
        bcl::check_cost_table(*m_table, who);
        m_costs_digest = bcl::cost_table_digest(*m_table);
        m_layout = bcl::epoch_layout::of(m_table->size(), shape());
    }

    /// As above, copying the cost table from `costs`.
    distributed_balanced_sampler(std::span<const double> costs, std::size_t batch_size,
                                 std::size_t num_replicas, std::size_t rank, bool shuffle = true,
                                 std::uint64_t seed = 0, bool drop_last = false,
                                 std::size_t lookahead = 8, bcl::plan_options plan = {})
        : distributed_balanced_sampler(std::vector<double>(costs.begin(), costs.end()), batch_size,
                                       num_replicas, rank, shuffle, seed, drop_last, lookahead,
                                       plan) {}

    /// Starts the next epoch (see the class comment): epoch() + 1, or the epoch under way again
    /// if no next() was called in it yet, or the epoch set_epoch() chose. `new_size`, if given,
    /// must be the cost table's size (bcl::error otherwise, and nothing changes): the table is the
    /// dataset. O(1); the epoch is planned at its first next().
    void reset(::torch::optional<std::size_t> new_size = ::torch::nullopt) override {
        if (new_size && *new_size != m_table->size())
            throw bcl::error(std::string(who) + "::reset: the dataset size given is " +
                             std::to_string(*new_size) + ", but the cost table covers " +
                             std::to_string(m_table->size()) + " dataset indices");
        const std::size_t current = m_cursor.current();
        const std::size_t next = m_cursor.reset(who);
        // The plan depends on the epoch alone: an epoch started again keeps it.
        m_planned = m_planned && next == current;
        m_position = 0;
    }

    /// Sets the epoch the next reset() starts (as libtorch's DistributedSampler::set_epoch does);
    /// the epoch under way is not changed. Throws bcl::error for an epoch of 2^63 or more (what
    /// save() could not write back), changing nothing. O(1).
    void set_epoch(std::size_t epoch) { m_cursor.set_epoch(epoch, who); }

    /// This rank's next batch of the epoch: exactly batch_size() dataset indices, but the epoch's
    /// last batch, which has the rest; std::nullopt once the epoch's size() batches are handed
    /// out, until reset(). The epoch's first call plans the epoch, O(N log N); every other is
    /// O(B). Throws bcl::error if `batch_size` is not the sampler's (a loader must ask for the
    /// batches the plan made; bcl::torch::make_data_loader gives it the sampler's), changing
    /// nothing.
    [[nodiscard]] ::torch::optional<std::vector<std::size_t>>
    next(std::size_t batch_size) override {
        detail::check_batch_request(batch_size, m_batch, who, "batch size");
        ensure_planned();
        m_cursor.mark_started();
        if (m_position == m_layout.batches) return ::torch::nullopt;
        const std::span<const std::size_t> batch = m_plan.batch(m_position);
        ++m_position;
        return std::vector<std::size_t>(batch.begin(), batch.end());
    }

    /// The chain of the plan digests of the epoch under way's windows (bcl::plan_digest): equal
    /// on every rank that planned the same epoch alike. Plans the epoch if it is not yet,
    /// O(N log N); O(1) after.
    [[nodiscard]] std::uint64_t digest() {
        ensure_planned();
        return m_plan.summary.digest;
    }

    /// What the plans of the epoch under way promise (plans it if it is not yet).
    [[nodiscard]] const epoch_plan_summary& summary() {
        ensure_planned();
        return m_plan.summary;
    }

    /// Writes the sampler's state to `archive` (format
    /// "bcl::torch::distributed_balanced_sampler/2"): the format tag, the epoch (the one under
    /// way, whether next() was called in it, the one set_epoch() chose), every setting, the
    /// dataset size, a digest of the cost table, the batches handed out this epoch and the
    /// epoch's plan digest (none if the epoch is not planned yet), sealed by a digest of these
    /// fields. O(1).
    void save(::torch::serialize::OutputArchive& archive) const override {
        detail::write_distributed_archive(
            archive, identity(),
            {m_cursor, m_position,
             m_planned ? std::optional<std::uint64_t>(m_plan.summary.digest) : std::nullopt});
    }

    /// Restores what save() wrote: the sampler then hands out exactly the rest of the saved
    /// epoch, and the epochs after it as the saved one would have. Before it keeps anything it
    /// checks every field by its type and against this sampler: the format tag (an archive of a
    /// balanced_sampler, or of an earlier bcl, is refused by name); the epoch; the dataset size,
    /// num_replicas, rank, batch size, lookahead, shuffle, seed, drop_last and every plan option
    /// (each a bcl::error naming the field and both values); the cost table's digest; the
    /// position (at most size(), and 0 unless the epoch was planned); then it plans the saved
    /// epoch and compares the plan digest; and last the digest of all the fields. Any failure is
    /// a bcl::error naming the field, and leaves the sampler as it was. O(N log N) if the saved
    /// epoch was planned, O(1) otherwise.
    void load(::torch::serialize::InputArchive& archive) override {
        detail::archive_reader in(archive, std::string(who) + "::load");
        epoch_plan planned;
        const detail::distributed_position saved =
            detail::read_distributed_archive(in, identity(), [&](std::size_t epoch) {
                plan_epoch(epoch, planned);
                return planned.summary.digest;
            });
        // Committed: nothing below throws.
        m_cursor = saved.cursor;
        m_position = saved.position;
        m_planned = saved.plan_digest.has_value();
        if (m_planned) std::swap(m_plan, planned);
    }

    /// Batches every rank hands out per epoch: ceil(m / B), or m / B with drop_last, for the m
    /// records each rank takes (the Python sampler's len()). O(1).
    [[nodiscard]] std::size_t size() const noexcept { return m_layout.batches; }
    /// Records each rank takes per epoch (m). O(1).
    [[nodiscard]] std::size_t records_per_rank() const noexcept { return m_layout.per_rank; }
    /// Batches handed out in the epoch under way. O(1).
    [[nodiscard]] std::size_t position() const noexcept { return m_position; }
    /// The epoch under way, or after set_epoch(e), e: the one the next reset() starts. O(1).
    [[nodiscard]] std::size_t epoch() const noexcept { return m_cursor.epoch(); }
    /// B: the indices of every batch but an epoch's last. O(1).
    [[nodiscard]] std::size_t batch_size() const noexcept { return m_batch; }
    /// K: steps planned together. O(1).
    [[nodiscard]] std::size_t lookahead() const noexcept { return m_lookahead; }
    /// R and this rank. O(1).
    [[nodiscard]] std::size_t num_replicas() const noexcept { return m_replicas; }
    [[nodiscard]] std::size_t rank() const noexcept { return m_rank; }
    /// N: the dataset's indices, the cost table's size. O(1).
    [[nodiscard]] std::size_t dataset_size() const noexcept { return m_table->size(); }
    [[nodiscard]] bool shuffle() const noexcept { return m_shuffle; }
    [[nodiscard]] std::uint64_t seed() const noexcept { return m_seed; }
    [[nodiscard]] bool drop_last() const noexcept { return m_drop_last; }
    [[nodiscard]] const bcl::plan_options& plan_settings() const noexcept { return m_plan_options; }

    /// The global order of `epoch` (before padding or cutting): a permutation of 0..N-1 from
    /// (seed, epoch) with `shuffle`, else 0..N-1. The same on every platform. O(N).
    [[nodiscard]] std::vector<std::size_t> order_of(std::size_t epoch) const {
        std::vector<std::size_t> order;
        bcl::epoch_order(m_table->size(), m_shuffle, m_seed, epoch, order);
        return order;
    }

private:
    static constexpr const char* who = "bcl::torch::distributed_balanced_sampler";

    // One epoch's plan: this rank's records, batch after batch, and what the plans promise.
    using epoch_plan = bcl::epoch_share<std::size_t>;

    [[nodiscard]] bcl::epoch_shape shape() const noexcept {
        return {.ranks = m_replicas,
                .lookahead = m_lookahead,
                .batch = m_batch,
                .drop_last = m_drop_last};
    }

    // What an archive must match to load into this sampler.
    [[nodiscard]] detail::distributed_identity identity() const noexcept {
        return {.dataset_size = m_table->size(),
                .num_replicas = m_replicas,
                .rank = m_rank,
                .batch_size = m_batch,
                .lookahead = m_lookahead,
                .shuffle = m_shuffle,
                .seed = m_seed,
                .drop_last = m_drop_last,
                .plan = m_plan_options,
                .costs_digest = m_costs_digest,
                .batches = m_layout.batches};
    }

    void ensure_planned() {
        if (m_planned) return;
        plan_epoch(m_cursor.current(), m_plan);
        m_planned = true;
    }

    // Plans `epoch` into `out` with the sampler's scratch; `out` is kept only on success.
    void plan_epoch(std::size_t epoch, epoch_plan& out) {
        bcl::epoch_order(m_table->size(), m_shuffle, m_seed, epoch, m_order);
        m_planner.share(std::span<const double>(*m_table), std::span<const std::size_t>(m_order),
                        shape(), m_rank, m_plan_options, out, who);
    }

    std::shared_ptr<const std::vector<double>> m_table;
    std::size_t m_batch;
    std::size_t m_replicas;
    std::size_t m_rank;
    std::size_t m_lookahead;
    bool m_shuffle;
    std::uint64_t m_seed;
    bool m_drop_last;
    bcl::plan_options m_plan_options;
    std::uint64_t m_costs_digest = 0;
    bcl::epoch_layout m_layout; // the order padded or cut, m, the batches per epoch

    detail::epoch_cursor m_cursor; // the epoch; started: next() was called in it
    std::size_t m_position = 0;    // its batches handed out
    bool m_planned = false;        // m_plan is the epoch under way's
    epoch_plan m_plan;

    // Scratch, kept so that planning an epoch allocates nothing once one was planned.
    bcl::epoch_planner m_planner;
    std::vector<std::size_t> m_order;
};

} // namespace bcl::torch

#else // libtorch's C++ API is not on the include path

namespace bcl::torch {

namespace detail {
struct libtorch_is_missing {};

/// Stands in for the sampler when libtorch's C++ API is not on the include path, so that this
/// header compiles alone anywhere and a use of the sampler says what is missing.
template <class Missing>
class distributed_sampler_without_torch {
    static_assert(sizeof(Missing) == 0,
                  "bcl::torch::distributed_balanced_sampler needs libtorch's C++ API on the "
                  "include path: link the Torch package's `torch` target (find_package(Torch))");

public:
    template <class... Args>
    explicit distributed_sampler_without_torch(Args&&... /*args*/) {}
};
} // namespace detail

using distributed_balanced_sampler =
    detail::distributed_sampler_without_torch<detail::libtorch_is_missing>;

} // namespace bcl::torch

#endif
