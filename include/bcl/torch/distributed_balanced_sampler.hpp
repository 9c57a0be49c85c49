#pragma once
// bcl::torch::distributed_balanced_sampler: a libtorch batch sampler for map-style datasets whose
// cost table every rank holds. Every rank derives the same global order of an epoch, plans each
// window of K steps of all ranks' records with bcl::global_planner (the same plan, bit for bit,
// on every rank) and hands out its own share, batch by batch; in token mode (max_tokens set) it
// plans the order into micro-batches of at most T tokens with bcl::token_epoch_planner instead,
// and hands out one micro-batch a request. No communication. Needs libtorch's C++ API on the
// include path (link the Torch package's `torch` target); <bcl/bcl.hpp> does not include it.

#include <bcl/detail/config.hpp>

#include <bcl/cost_estimator.hpp>
#include <bcl/detail/number_text.hpp>
#include <bcl/detail/tokens/token_records.hpp>
#include <bcl/epoch_plan.hpp>
#include <bcl/error.hpp>
#include <bcl/global_plan.hpp>
#include <bcl/options.hpp>
#include <bcl/token_epoch_plan.hpp>
#include <bcl/token_plan.hpp>
#include <bcl/torch/data_loader.hpp>
#include <bcl/torch/detail/archive.hpp>
#include <bcl/torch/detail/batch_request.hpp>
#include <bcl/torch/detail/distributed_sampler_archive.hpp>
#include <bcl/torch/detail/epoch_cursor.hpp>

#if __has_include(<torch/data/samplers/base.h>)

#include <torch/data/samplers/base.h>
#include <torch/serialize/archive.h>
#include <torch/types.h>

#include <bit>
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

/// One rank's micro-batches of an epoch in token mode, and what its plans promise
/// (bcl::token_epoch_share).
using token_epoch_share = bcl::token_epoch_share<std::size_t>;

/// How an epoch ends in token mode when its records cannot give every rank as many non-empty
/// micro-batches (e.g. an odd count of records of T tokens each on two ranks): Python's
/// `padding=`.
enum class token_padding : std::uint8_t {
    /// The order's first records planned again at its end, the fewest that plan, as
    /// DistributedSampler pads its order (bcl::token_epoch_planner::share's `repeat_to_fill`).
    /// The default, as Python's: every micro-batch holds a record.
    repeat,
    /// The ranks short of records get empty micro-batches, as few as the plan needs, every rank
    /// still the same count (bcl::token_plan_options::allow_empty_micro_batches): the trainer
    /// runs each as a step of zero weight that still joins the collectives.
    empty,
    /// Neither: planning such an epoch is a bcl::error (at its first next()).
    error,
};

/// The settings of a bcl::torch::distributed_balanced_sampler. An aggregate:
/// `{.num_replicas = 8, .rank = r, .batch_size = 16}` for batches of B indices, or
/// `{.num_replicas = 8, .rank = r, .max_tokens = 16384, .micro_batches = 4}` for token-budget
/// micro-batches (token mode). The fixed-mode settings must be left at their defaults in token
/// mode, and the token-mode ones in fixed mode: the constructor refuses either, by name.
struct distributed_sampler_options {
    /// R, the data-parallel ranks. No default that could be right: 0 is refused.
    std::size_t num_replicas = 0;
    /// This rank, below num_replicas.
    std::size_t rank = 0;
    /// B, indices per batch (fixed mode, which needs it); 0 in token mode, where a micro-batch
    /// holds as many records as fit max_tokens.
    std::size_t batch_size = 0;
    /// K, steps planned together (one window of R*K*B records, or of R*K*M micro-batches).
    /// Default 8, as the positional constructor's and Python's sampler's.
    std::size_t lookahead = 8;
    /// Each epoch's order shuffled from (seed, epoch), else 0..N-1. Default true.
    bool shuffle = true;
    /// The order's seed, below 2^63. Default 0.
    std::uint64_t seed = 0;
    /// Fixed mode: the order cut to a multiple of R and each rank's share to whole batches, as
    /// DistributedSampler's and BatchSampler's drop_last together. Default false; must stay false
    /// in token mode (every record is planned).
    bool drop_last = false;
    /// Fixed mode: packed or padded batches, a cap, levelled steps (bcl::plan_options). Must stay
    /// at its defaults in token mode (each record is planned at its own cost, packed).
    bcl::plan_options plan{};

    /// T: token mode when above 0, the most tokens one micro-batch holds (at most 2^31, what
    /// keeps every plan exact in 64-bit integers). 0 (the default) is fixed mode, batches of
    /// batch_size.
    std::uint64_t max_tokens = 0;
    /// M, token mode: the micro-batches each rank runs in a step, a multiple of multiple_of; a
    /// trainer steps its optimizer after each M of them. Token mode needs it; 0 in fixed mode.
    std::size_t micro_batches = 0;
    /// m, token mode: every step's micro-batch count is a multiple of it, the epoch's last
    /// (shorter) step too (pipeline schedules that take micro-batches m at a time). Default 1.
    std::size_t multiple_of = 1;
    /// Token mode: a record above max_tokens gets a micro-batch of its own (false, the default,
    /// refuses such a record at construction, naming its dataset index).
    bool oversized_alone = false;
    /// Token mode: each record counts as its length rounded up to a multiple of this, for the
    /// budget and for the default cost (context-parallel trainers pad each sequence to a multiple
    /// of 2 * CP). 1 (the default) counts lengths as they are; at most max_tokens.
    std::uint64_t pad_to_multiple_of = 1;
    /// Token mode: how an epoch whose records cannot fill every rank's micro-batches ends.
    /// Default token_padding::repeat, as Python's sampler.
    token_padding padding = token_padding::repeat;
};

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
/// Token mode (distributed_sampler_options::max_tokens above 0; a table of lengths, one per
/// dataset index, beside the costs, which may then be left empty for the default cost
/// L + L^2/24576): the same global order, unpadded, is planned by
/// bcl::token_epoch_planner::share into windows of K steps of M micro-batches on every rank, as
/// Python's sampler plans it (so its digest is Python's on the same order). Each next() hands out
/// one micro-batch. The contract: every rank hands out as many micro-batches, steps of M but the
/// epoch's last, which has a multiple of m; none holds more than T tokens (each length rounded
/// up to pad_to_multiple_of), but one holding a single record above T with oversized_alone;
/// over all ranks every index of the order comes out exactly once, plus, with
/// token_padding::repeat, the order's first ones the epoch's end repeats; empty micro-batches
/// only with token_padding::empty (libtorch's data loader asserts that a batch is not empty:
/// drive such a sampler with next() yourself).
///
/// The digest: digest() is the chain of the epoch's window plans' bcl::plan_digest (in token
/// mode, bcl::token_epoch_share::digest). Ranks that plan alike have equal digests; a rank with
/// another cost table, seed, epoch or setting has another. Compare it across ranks once per epoch
/// (one all-reduce of its min and max): a mismatch means records trained twice or never, so
/// treat it as an error.
///
/// Epochs: reset() (which a torch::data loader calls at every begin()) starts the next epoch:
/// epoch() + 1, or the same epoch if no next() was called in it yet (so a loader's first
/// begin() does not skip epoch 0), or the one set_epoch() chose since. The epoch is planned at its
/// first next() (or digest(), summary(), token_plan(), and in token mode size()): O(N log N),
/// each rank planning every rank's records.
///
/// Resume: save() writes a format tag, the epoch, every setting, the dataset size, a digest of the
/// cost table (and of the lengths), the batches handed out and the epoch's plan digest, sealed by
/// a digest of the fields; token mode has a format of its own. load() checks each field by type
/// and against this sampler (bcl::error naming the field otherwise), plans the saved epoch again
/// and compares its digest, and changes nothing unless every check passed; the sampler then hands
/// out exactly the rest of the saved epoch.
///
/// Memory: the cost table (8 bytes per index, shared by copies of the sampler; in token mode the
/// lengths too), the epoch's order (8 bytes per index), this rank's share (8 bytes per record)
/// and the planner's scratch for one window. After the first epoch nothing is allocated in fixed
/// mode but the batches handed out. Not thread-safe, like libtorch's own samplers.
class distributed_balanced_sampler final
    : public ::torch::data::samplers::Sampler<std::vector<std::size_t>> {
public:
    /// The sampler `opt` describes (its rank of num_replicas), over the dataset indices
    /// 0..N-1: in fixed mode (max_tokens 0) `costs` holds the estimated cost of each (N of them)
    /// and `lengths` must be empty; in token mode `lengths` holds each one's tokens (N of them)
    /// and `costs` is empty (the default cost L + L^2/24576, L rounded up to
    /// pad_to_multiple_of) or N costs. Every rank plans every rank's records: give the whole
    /// tables. Checks everything here, so that every rank refuses a bad table or setting before
    /// the first step: throws bcl::error naming the dataset index and value of the first cost
    /// that is NaN, negative, infinite or above bcl::max_estimate; for num_replicas or lookahead
    /// of 0, a rank not below num_replicas, a seed of 2^63 or more; in fixed mode for a batch
    /// size of 0, R*K*B above bcl::max_plan_records, invalid plan options and any token-mode
    /// setting away from its default (naming it); in token mode for max_tokens above 2^31,
    /// micro_batches of 0 or not a multiple of multiple_of (or multiple_of 0), R*K*M above
    /// bcl::max_plan_records, pad_to_multiple_of of 0 or above max_tokens, a padding that is no
    /// token_padding, costs neither empty nor one per length, fewer than R*m dataset indices, a
    /// length above max_tokens (rounded up to pad_to_multiple_of) without oversized_alone or above
    /// 2^31 with it (naming its dataset index and length), and any fixed-mode setting away from
    /// its default (batch_size, drop_last, plan; naming it). O(N).
    distributed_balanced_sampler(std::vector<double> costs, std::vector<std::uint64_t> lengths,
                                 const distributed_sampler_options& opt)
        : m_table(std::make_shared<const std::vector<double>>(std::move(costs))),
          m_lengths(std::make_shared<const std::vector<std::uint64_t>>(std::move(lengths))),
          m_options(opt) {
        detail::check_counter(opt.seed, who, "the seed");
        if (token_mode()) {
            check_token_settings();
            m_dataset_size = m_lengths->size();
            m_lengths_digest = detail::length_table_digest(*m_lengths);
        } else {
            check_fixed_settings();
            m_dataset_size = m_table->size();
            m_layout = bcl::epoch_layout::of(m_dataset_size, shape());
        }
        m_costs_digest = bcl::cost_table_digest(*m_table);
    }

    /// As above, copying the tables from `costs` and `lengths`.
    distributed_balanced_sampler(std::span<const double> costs,
                                 std::span<const std::uint64_t> lengths,
                                 const distributed_sampler_options& opt)
        : distributed_balanced_sampler(std::vector<double>(costs.begin(), costs.end()),
                                       std::vector<std::uint64_t>(lengths.begin(), lengths.end()),
                                       opt) {}

    /// Fixed mode, the settings one by one: rank `rank` of `num_replicas`, over the dataset
    /// indices 0..costs.size()-1 whose estimated costs are `costs`. Batches of `batch_size` (B)
    /// indices, windows of `lookahead` (K) steps, planned with `plan` (packed or padded batches,
    /// a cap, levelled steps: bcl::plan_options). Throws what the constructor above throws in
    /// fixed mode. O(N).
    distributed_balanced_sampler(std::vector<double> costs, std::size_t batch_size,
                                 std::size_t num_replicas, std::size_t rank, bool shuffle = true,
                                 std::uint64_t seed = 0, bool drop_last = false,
                                 std::size_t lookahead = 8, bcl::plan_options plan = {})
        : distributed_balanced_sampler(std::move(costs), std::vector<std::uint64_t>(),
                                       distributed_sampler_options{.num_replicas = num_replicas,
                                                                   .rank = rank,
                                                                   .batch_size = batch_size,
                                                                   .lookahead = lookahead,
                                                                   .shuffle = shuffle,
                                                                   .seed = seed,
                                                                   .drop_last = drop_last,
                                                                   .plan = plan}) {}

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
    /// must be the dataset's size (the cost table's, in token mode the lengths'; bcl::error
    /// otherwise, and nothing changes): the table is the dataset. O(1); the epoch is planned at
    /// its first next().
    void reset(::torch::optional<std::size_t> new_size = ::torch::nullopt) override {
        if (new_size && *new_size != m_dataset_size)
            throw bcl::error(std::string(who) + "::reset: the dataset size given is " +
                             std::to_string(*new_size) + ", but the " +
                             (token_mode() ? "lengths cover " : "cost table covers ") +
                             std::to_string(m_dataset_size) + " dataset indices");
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
    /// last batch, which has the rest; in token mode its next micro-batch (the indices of at most
    /// max_tokens tokens, in the order's order; empty only with token_padding::empty).
    /// std::nullopt once the epoch's size() batches are handed out, until reset(). The epoch's
    /// first call plans the epoch, O(N log N); every other is O(B) (the micro-batch's size).
    /// Throws bcl::error if `batch_size` is not the sampler's batch_size() (a loader must ask for
    /// the batches the plan made, in token mode 1: one micro-batch a request;
    /// bcl::torch::make_data_loader gives it the sampler's), and in token mode with
    /// token_padding::error for an epoch no plan fills; either changes nothing.
    [[nodiscard]] ::torch::optional<std::vector<std::size_t>>
    next(std::size_t batch_size) override {
        detail::check_batch_request(
            batch_size, this->batch_size(), who,
            token_mode() ? "batch size in token mode (one micro-batch a request)" : "batch size");
        ensure_planned();
        m_cursor.mark_started();
        if (m_position == planned_batches()) return ::torch::nullopt;
        const std::span<const std::size_t> batch =
            token_mode() ? m_token_plan.micro_batch(m_position) : m_plan.batch(m_position);
        ++m_position;
        return std::vector<std::size_t>(batch.begin(), batch.end());
    }

    /// The chain of the plan digests of the epoch under way's windows (bcl::plan_digest; in
    /// token mode bcl::token_epoch_share::digest, Python's stats['digest'] on the same order):
    /// equal on every rank that planned the same epoch alike. Plans the epoch if it is not yet,
    /// O(N log N); O(1) after.
    [[nodiscard]] std::uint64_t digest() {
        ensure_planned();
        return token_mode() ? m_token_plan.digest : m_plan.summary.digest;
    }

    /// What the plans of the epoch under way promise (plans it if it is not yet). Fixed mode:
    /// in token mode a bcl::error (token_plan() describes a token epoch).
    [[nodiscard]] const epoch_plan_summary& summary() {
        if (token_mode())
            throw bcl::error(std::string(who) +
                             "::summary: the summary of batches of batch_size; in token mode "
                             "token_plan() describes the epoch");
        ensure_planned();
        return m_plan.summary;
    }

    /// Token mode: this rank's share of the epoch under way (plans it if it is not yet): its
    /// micro-batches, where each step starts (`steps`), the digest, the micro-steps' bound, the
    /// records repeated at the end (`repeated`), the empty micro-batches of every rank
    /// (`padding`), the records above T (`oversized`) and the planned efficiency. In fixed mode
    /// a bcl::error (summary() describes it).
    [[nodiscard]] const token_epoch_share& token_plan() {
        if (!token_mode())
            throw bcl::error(std::string(who) +
                             "::token_plan: the plan of token-budget micro-batches; with "
                             "max_tokens 0 summary() describes the epoch");
        ensure_planned();
        return m_token_plan;
    }

    /// Writes the sampler's state to `archive` (format
    /// "bcl::torch::distributed_balanced_sampler/2", in token mode
    /// "bcl::torch::distributed_balanced_sampler/tokens/1"): the format tag, the epoch (the one
    /// under way, whether next() was called in it, the one set_epoch() chose), every setting, the
    /// dataset size, a digest of the cost table (in token mode of the lengths too), the batches
    /// (micro-batches) handed out this epoch and the epoch's plan digest (none if the epoch is
    /// not planned yet), sealed by a digest of these fields. O(1).
    void save(::torch::serialize::OutputArchive& archive) const override {
        const detail::distributed_position at{
            m_cursor, m_position,
            m_planned ? std::optional<std::uint64_t>(planned_digest()) : std::nullopt};
        if (token_mode())
            detail::write_distributed_token_archive(archive, token_identity(), at);
        else
            detail::write_distributed_archive(archive, identity(), at);
    }

    /// Restores what save() wrote: the sampler then hands out exactly the rest of the saved
    /// epoch, and the epochs after it as the saved one would have. Before it keeps anything it
    /// checks every field by its type and against this sampler: the format tag (an archive of a
    /// balanced_sampler, of the other mode, or of an earlier bcl, is refused by name); the epoch;
    /// the dataset size, num_replicas, rank, batch size, lookahead, shuffle, seed, drop_last and
    /// every plan option (in token mode: max_tokens, micro_batches, multiple_of, oversized_alone,
    /// pad_to_multiple_of and padding instead of the fixed mode's; each a bcl::error naming the
    /// field and both values); the cost table's digest (and the lengths'); the position (at most
    /// the epoch's batches, and 0 unless the epoch was planned); then it plans the saved epoch
    /// and compares the plan digest; and last the digest of all the fields. Any failure is a
    /// bcl::error naming the field, and leaves the sampler as it was. O(N log N) if the saved
    /// epoch was planned, O(1) otherwise.
    void load(::torch::serialize::InputArchive& archive) override {
        detail::archive_reader in(archive, std::string(who) + "::load");
        if (token_mode()) {
            token_epoch_share planned;
            const detail::distributed_position saved = detail::read_distributed_token_archive(
                in, token_identity(), [&](std::size_t epoch) {
                    plan_token_epoch(epoch, planned);
                    return detail::token_epoch_check{planned.digest, planned.micro_batches()};
                });
            // Committed: nothing below throws.
            commit(saved);
            if (m_planned) std::swap(m_token_plan, planned);
            return;
        }
        epoch_plan planned;
        const detail::distributed_position saved =
            detail::read_distributed_archive(in, identity(), [&](std::size_t epoch) {
                plan_epoch(epoch, planned);
                return planned.summary.digest;
            });
        // Committed: nothing below throws.
        commit(saved);
        if (m_planned) std::swap(m_plan, planned);
    }

    /// Batches every rank hands out per epoch: ceil(m / B), or m / B with drop_last, for the m
    /// records each rank takes (the Python sampler's len()), O(1). In token mode the epoch under
    /// way's micro-batches, the same on every rank, which its plan decides: plans it if it is not
    /// yet (O(N log N); throws what next() throws for a plan), O(1) after.
    [[nodiscard]] std::size_t size() const {
        if (!token_mode()) return m_layout.batches;
        ensure_planned();
        return m_token_plan.micro_batches();
    }
    /// Records each rank takes per epoch (m), fixed mode; 0 in token mode, where a rank's count
    /// depends on the plan (token_plan().records.size()). O(1).
    [[nodiscard]] std::size_t records_per_rank() const noexcept { return m_layout.per_rank; }
    /// Batches (micro-batches) handed out in the epoch under way. O(1).
    [[nodiscard]] std::size_t position() const noexcept { return m_position; }
    /// The epoch under way, or after set_epoch(e), e: the one the next reset() starts. O(1).
    [[nodiscard]] std::size_t epoch() const noexcept { return m_cursor.epoch(); }
    /// B: the indices of every batch but an epoch's last; in token mode 1, the request a data
    /// loader makes for each micro-batch. O(1).
    [[nodiscard]] std::size_t batch_size() const noexcept {
        return token_mode() ? 1 : m_options.batch_size;
    }
    /// K: steps planned together. O(1).
    [[nodiscard]] std::size_t lookahead() const noexcept { return m_options.lookahead; }
    /// R and this rank. O(1).
    [[nodiscard]] std::size_t num_replicas() const noexcept { return m_options.num_replicas; }
    [[nodiscard]] std::size_t rank() const noexcept { return m_options.rank; }
    /// N: the dataset's indices, the cost table's size (in token mode the lengths'). O(1).
    [[nodiscard]] std::size_t dataset_size() const noexcept { return m_dataset_size; }
    [[nodiscard]] bool shuffle() const noexcept { return m_options.shuffle; }
    [[nodiscard]] std::uint64_t seed() const noexcept { return m_options.seed; }
    [[nodiscard]] bool drop_last() const noexcept { return m_options.drop_last; }
    [[nodiscard]] const bcl::plan_options& plan_settings() const noexcept { return m_options.plan; }
    /// Every setting, as constructed. O(1).
    [[nodiscard]] const distributed_sampler_options& settings() const noexcept { return m_options; }
    /// Whether the sampler hands out token-budget micro-batches (max_tokens above 0). O(1).
    [[nodiscard]] bool token_mode() const noexcept { return m_options.max_tokens > 0; }

    /// The global order of `epoch` (before padding or cutting): a permutation of 0..N-1 from
    /// (seed, epoch) with `shuffle`, else 0..N-1. The same on every platform. O(N).
    [[nodiscard]] std::vector<std::size_t> order_of(std::size_t epoch) const {
        std::vector<std::size_t> order;
        bcl::epoch_order(m_dataset_size, m_options.shuffle, m_options.seed, epoch, order);
        return order;
    }

private:
    static constexpr const char* who = "bcl::torch::distributed_balanced_sampler";

    // One epoch's plan: this rank's records, batch after batch, and what the plans promise.
    using epoch_plan = bcl::epoch_share<std::size_t>;

    [[nodiscard]] bcl::epoch_shape shape() const noexcept {
        return {.ranks = m_options.num_replicas,
                .lookahead = m_options.lookahead,
                .batch = m_options.batch_size,
                .drop_last = m_options.drop_last};
    }

    [[nodiscard]] bcl::token_budget budget() const noexcept {
        return {.ranks = m_options.num_replicas,
                .max_tokens = m_options.max_tokens,
                .multiple_of = m_options.multiple_of};
    }

    // The token plan's options, as Python's sampler sets them (python/src/token_epoch.hpp).
    [[nodiscard]] bcl::token_plan_options token_options() const noexcept {
        bcl::token_plan_options opt;
        opt.oversized_alone = m_options.oversized_alone;
        opt.allow_empty_micro_batches = m_options.padding == token_padding::empty;
        opt.pad_to_multiple_of = m_options.pad_to_multiple_of;
        return opt;
    }

    [[noreturn]] static void refuse(const std::string& what) {
        throw bcl::error(std::string(who) + ": " + what);
    }

    // Fixed mode's checks; first, that no token-mode setting was given.
    void check_fixed_settings() const {
        const distributed_sampler_options& o = m_options;
        const auto token_only = [](const std::string& what) {
            refuse(what + ", but it is for token-budget micro-batches: set max_tokens too (or "
                          "leave it at its default for batches of batch_size)");
        };
        if (o.micro_batches != 0) token_only("micro_batches is " + std::to_string(o.micro_batches));
        if (o.multiple_of != 1) token_only("multiple_of is " + std::to_string(o.multiple_of));
        if (o.oversized_alone) token_only("oversized_alone is true");
        if (o.pad_to_multiple_of != 1)
            token_only("pad_to_multiple_of is " + std::to_string(o.pad_to_multiple_of));
        if (o.padding != token_padding::repeat) token_only("padding is not token_padding::repeat");
        if (!m_lengths->empty())
            token_only("lengths has " + std::to_string(m_lengths->size()) + " entries");
        bcl::check_epoch_shape(shape(), who);
        if (o.rank >= o.num_replicas)
            refuse("rank " + std::to_string(o.rank) + " of num_replicas " +
                   std::to_string(o.num_replicas) + ": the rank must be below num_replicas");
        bcl::check_plan_options(o.plan, who);
        bcl::check_cost_table(*m_table, who);
    }

    // Token mode's checks, the settings before the tables (each table O(N)).
    void check_token_settings() const {
        const distributed_sampler_options& o = m_options;
        const auto fixed_only = [](const std::string& what) {
            refuse(what + ", but it is for batches of batch_size; with max_tokens a micro-batch "
                          "holds as many records as fit and every record is planned, packed, at "
                          "its own cost (leave it at its default)");
        };
        if (o.batch_size != 0) fixed_only("batch_size is " + std::to_string(o.batch_size));
        if (o.drop_last) fixed_only("drop_last is true");
        if (o.plan.batching != bcl::batch_cost::packed)
            fixed_only("plan_options::batching is not packed");
        if (std::bit_cast<std::uint64_t>(o.plan.cap) != 0)
            fixed_only("plan_options::cap is " + bcl::detail::number_text(o.plan.cap));
        if (!o.plan.level_steps) fixed_only("plan_options::level_steps is false");
        if (o.num_replicas == 0) refuse("num_replicas must be at least 1 (got 0)");
        if (o.rank >= o.num_replicas)
            refuse("rank " + std::to_string(o.rank) + " of num_replicas " +
                   std::to_string(o.num_replicas) + ": the rank must be below num_replicas");
        if (o.lookahead == 0) refuse("lookahead must be at least 1 (got 0)");
        const std::uint64_t most = bcl::detail::tokens::max_record_tokens;
        if (o.max_tokens > most)
            refuse("max_tokens is " + std::to_string(o.max_tokens) +
                   ", above 2^31, the most a micro-batch may hold");
        if (o.multiple_of == 0) refuse("multiple_of must be at least 1 (got 0)");
        if (o.micro_batches == 0)
            refuse("micro_batches must be at least 1 (got 0): the micro-batches each rank runs in "
                   "a step (the optimizer steps once per micro_batches)");
        if (o.micro_batches % o.multiple_of != 0)
            refuse("micro_batches is " + std::to_string(o.micro_batches) +
                   ", not a multiple of multiple_of (" + std::to_string(o.multiple_of) + ")");
        const std::size_t cells = bcl::max_plan_records;
        if (o.num_replicas > cells || o.lookahead > cells / o.num_replicas ||
            o.micro_batches > cells / (o.num_replicas * o.lookahead))
            refuse("num_replicas * lookahead * micro_batches = " + std::to_string(o.num_replicas) +
                   " * " + std::to_string(o.lookahead) + " * " + std::to_string(o.micro_batches) +
                   " micro-batches in one plan window, above " + "the " + std::to_string(cells) +
                   " a window may hold");
        if (o.pad_to_multiple_of == 0 || o.pad_to_multiple_of > o.max_tokens)
            refuse("pad_to_multiple_of is " + std::to_string(o.pad_to_multiple_of) +
                   "; it must be at least 1 and at most max_tokens (" +
                   std::to_string(o.max_tokens) + ")");
        if (o.padding != token_padding::repeat && o.padding != token_padding::empty &&
            o.padding != token_padding::error)
            refuse("padding is " + std::to_string(static_cast<unsigned>(o.padding)) +
                   ", not a token_padding (repeat, empty or error)");
        const std::size_t n = m_lengths->size();
        if (!m_table->empty() && m_table->size() != n)
            refuse("costs has " + std::to_string(m_table->size()) + " entries, but lengths has " +
                   std::to_string(n) + "; give one cost per length, or none for the default " +
                   "L + L^2/24576");
        if (n / o.multiple_of < o.num_replicas)
            refuse(std::to_string(n) + " dataset indices (lengths) cannot give one to each of " +
                   "the num_replicas * multiple_of = " + std::to_string(o.num_replicas) + " * " +
                   std::to_string(o.multiple_of) + " micro-batches of a step");
        bcl::check_cost_table(*m_table, who);
        for (std::size_t i = 0; i < n; ++i) {
            const std::uint64_t length = (*m_lengths)[i];
            const std::uint64_t counted =
                bcl::detail::tokens::padded_length(length, o.pad_to_multiple_of);
            if (counted <= o.max_tokens || (o.oversized_alone && counted <= most)) continue;
            const std::string shown =
                std::to_string(length) +
                (counted != length ? " (" + std::to_string(counted) + " padded to a multiple of " +
                                         std::to_string(o.pad_to_multiple_of) + ")"
                                   : std::string());
            if (o.oversized_alone)
                refuse("the length of dataset index " + std::to_string(i) + " is " + shown +
                       ", above 2^31, the most a record may hold");
            refuse("the length of dataset index " + std::to_string(i) + " is " + shown +
                   ", above max_tokens (" + std::to_string(o.max_tokens) +
                   "); truncate it, or set oversized_alone to give such a record a micro-batch "
                   "of its own");
        }
    }

    // What an archive must match to load into this sampler.
    [[nodiscard]] detail::distributed_identity identity() const noexcept {
        return {.dataset_size = m_dataset_size,
                .num_replicas = m_options.num_replicas,
                .rank = m_options.rank,
                .batch_size = m_options.batch_size,
                .lookahead = m_options.lookahead,
                .shuffle = m_options.shuffle,
                .seed = m_options.seed,
                .drop_last = m_options.drop_last,
                .plan = m_options.plan,
                .costs_digest = m_costs_digest,
                .batches = m_layout.batches};
    }

    [[nodiscard]] detail::distributed_token_identity token_identity() const noexcept {
        return {.dataset_size = m_dataset_size,
                .num_replicas = m_options.num_replicas,
                .rank = m_options.rank,
                .lookahead = m_options.lookahead,
                .shuffle = m_options.shuffle,
                .seed = m_options.seed,
                .max_tokens = m_options.max_tokens,
                .micro_batches = m_options.micro_batches,
                .multiple_of = m_options.multiple_of,
                .oversized_alone = m_options.oversized_alone,
                .pad_to_multiple_of = m_options.pad_to_multiple_of,
                .padding = static_cast<std::uint64_t>(m_options.padding),
                .lengths_digest = m_lengths_digest,
                .costs_digest = m_costs_digest};
    }

    // The batches of the planned epoch under way (micro-batches in token mode).
    [[nodiscard]] std::size_t planned_batches() const noexcept {
        return token_mode() ? m_token_plan.micro_batches() : m_plan.batches();
    }
    [[nodiscard]] std::uint64_t planned_digest() const noexcept {
        return token_mode() ? m_token_plan.digest : m_plan.summary.digest;
    }

    void commit(const detail::distributed_position& saved) noexcept {
        m_cursor = saved.cursor;
        m_position = saved.position;
        m_planned = saved.plan_digest.has_value();
    }

    // The plan is the epoch's alone, so computing it when first asked changes nothing anyone
    // can see: size() may do it on a const sampler.
    void ensure_planned() const {
        if (m_planned) return;
        if (token_mode())
            plan_token_epoch(m_cursor.current(), m_token_plan);
        else
            plan_epoch(m_cursor.current(), m_plan);
        m_planned = true;
    }

    // Plans `epoch` into `out` with the sampler's scratch; `out` is kept only on success.
    void plan_epoch(std::size_t epoch, epoch_plan& out) const {
        bcl::epoch_order(m_dataset_size, m_options.shuffle, m_options.seed, epoch, m_order);
        m_planner.share(std::span<const double>(*m_table), std::span<const std::size_t>(m_order),
                        shape(), m_options.rank, m_options.plan, out, who);
    }

    // Token mode: the epoch's order, unpadded, planned as Python's sampler plans it.
    void plan_token_epoch(std::size_t epoch, token_epoch_share& out) const {
        bcl::epoch_order(m_dataset_size, m_options.shuffle, m_options.seed, epoch, m_order);
        m_token_planner.share(
            std::span<const std::uint64_t>(*m_lengths), std::span<const double>(*m_table),
            std::span<const std::size_t>(m_order), budget(), m_options.micro_batches,
            m_options.lookahead, m_options.rank, token_options(), out, who,
            m_options.padding == token_padding::repeat);
    }

    std::shared_ptr<const std::vector<double>> m_table;          // costs (token mode: or none)
    std::shared_ptr<const std::vector<std::uint64_t>> m_lengths; // token mode: the lengths
    distributed_sampler_options m_options;
    std::size_t m_dataset_size = 0;
    std::uint64_t m_costs_digest = 0;
    std::uint64_t m_lengths_digest = 0;
    bcl::epoch_layout m_layout; // fixed mode: the order padded or cut, m, the batches per epoch

    detail::epoch_cursor m_cursor; // the epoch; started: next() was called in it
    std::size_t m_position = 0;    // its batches handed out

    // The epoch under way's plan, computed when first asked (see ensure_planned()).
    mutable bool m_planned = false; // m_plan (m_token_plan) is the epoch under way's
    mutable epoch_plan m_plan;
    mutable token_epoch_share m_token_plan;

    // Scratch, kept so that planning an epoch allocates nothing once one was planned.
    mutable bcl::epoch_planner m_planner;
    mutable bcl::token_epoch_planner m_token_planner;
    mutable std::vector<std::size_t> m_order;
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
