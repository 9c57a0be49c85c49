#pragma once
// bcl::torch::distributed_balanced_sampler: a libtorch batch sampler for map-style datasets whose
// cost table every rank holds. Every rank derives the same global order of an epoch, plans each
// window of K steps of all ranks' records with bcl::global_planner (the same plan, bit for bit,
// on every rank) and hands out its own share, batch by batch; in token mode (max_tokens set) it
// plans the order into micro-batches of at most T tokens with bcl::token_epoch_planner instead,
// and hands out one micro-batch a request. No communication. Needs libtorch's C++ API on the
// include path (link the Torch package's `torch` target); <bcl/bcl.hpp> does not include it.
// A coordinator: it keeps the epoch and the batches handed out; the mode it chooses checks the
// settings, plans the epochs and writes the archive (detail/distributed_{fixed,token}_mode.hpp).

#include <bcl/detail/config.hpp>

#include <bcl/epoch_plan.hpp>
#include <bcl/error.hpp>
#include <bcl/token_epoch_plan.hpp>
#include <bcl/torch/data_loader.hpp>
#include <bcl/torch/detail/archive.hpp>
#include <bcl/torch/detail/batch_request.hpp>
#include <bcl/torch/detail/distributed_fixed_mode.hpp>
#include <bcl/torch/detail/distributed_options_check.hpp>
#include <bcl/torch/detail/distributed_sampler_archive.hpp>
#include <bcl/torch/detail/distributed_token_mode.hpp>
#include <bcl/torch/detail/epoch_cursor.hpp>
#include <bcl/torch/distributed_sampler_options.hpp>

#if __has_include(<torch/data/samplers/base.h>)

#include <torch/data/samplers/base.h>
#include <torch/serialize/archive.h>
#include <torch/types.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

namespace bcl::torch {

/// What the plans of an epoch promise (bcl::epoch_plan_summary).
using epoch_plan_summary = bcl::epoch_plan_summary;

/// One rank's micro-batches of an epoch in token mode, and what its plans promise
/// (bcl::token_epoch_share).
using token_epoch_share = bcl::token_epoch_share<std::size_t>;
/// What a token epoch's plans promise, summed window by window (bcl::token_epoch_summary).
using token_epoch_summary = bcl::token_epoch_summary;

/// A libtorch sampler of batches of dataset indices, planned with every rank's: the libtorch
/// counterpart of Python's bcl.DistributedBalancedBatchSampler, for a map-style dataset whose
/// cost table (one cost per dataset index) every rank holds.
///
/// Each epoch every rank derives the same global order from (seed, epoch): a Fisher-Yates shuffle
/// of 0..N-1 driven by SplitMix64, written with integer operations only (no std::shuffle nor
/// std::uniform_int_distribution, whose results differ between standard libraries), or with
/// epoch_order_kind::keyed bcl::keyed_order's (Python's order="keyed"), or 0..N-1 itself without
/// `shuffle`. As torch's DistributedSampler does, the order is padded with its first indices
/// (repeated as needed) to a multiple of R = num_replicas, or, with `drop_last`, cut to one.
/// Every rank then takes m = (that length) / R records, and with `drop_last` m is cut to a
/// multiple of B. The kept order is cut into windows of R*K*B records (K = lookahead), each
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
/// Keyed (epoch_order_kind::keyed, fixed mode): each window is planned when a batch of it is
/// first asked, over bcl::keyed_order read position by position (the same batches as the whole
/// epoch's plan, O(window) memory, no order of N held), and an archive saved at R ranks resumes
/// at another num_replicas: the rest of the epoch, every index the saving ranks had not taken
/// exactly once, planned at this size (docs/torch.md, "Keyed: window by window, and resume at
/// another world size"). Keyed, token mode, the same (bcl::keyed_token_pass): the windows are
/// walked in order, so size() walks the epoch once (planning each window, keeping nothing); an
/// archive holds the rest at its window's start; at another num_replicas it resumes from a step
/// boundary only; token_plan() is refused (token_summary() describes the windows planned).
///
/// The digest: digest() is the chain of the epoch's window plans' bcl::plan_digest (in token
/// mode, bcl::token_epoch_share::digest; keyed, fixed mode, a digest of the inputs: the cost
/// table's digest, the settings, the epoch, R and the rest planned, known without planning).
/// Ranks that plan alike have equal digests; a rank with another cost table, seed, epoch or
/// setting has another. Compare it across ranks once per epoch
/// (one all-reduce of its min and max): a mismatch means records trained twice or never, so
/// treat it as an error.
///
/// Epochs: reset() (which a torch::data loader calls at every begin()) starts the next epoch:
/// epoch() + 1, or the same epoch if no next() was called in it yet (so a loader's first
/// begin() does not skip epoch 0), or the one set_epoch() chose since. The epoch is planned at its
/// first next() (or digest(), summary(), token_plan(), and in token mode size()): O(N log N),
/// each rank planning every rank's records (keyed: each window at its first batch).
///
/// Resume: save() writes a format tag, the epoch, every setting (the order's kind only when it is
/// keyed, so that the default's archives are those of a bcl before the choice), the dataset size,
/// a digest of the cost table (and of the lengths), the batches handed out and the epoch's plan
/// digest, sealed by a digest of the fields; token mode has a format of its own. load() checks
/// each field by type and against this sampler (bcl::error naming the field otherwise), plans the
/// saved epoch again and compares its digest, and changes nothing unless every check passed; the
/// sampler then hands out exactly the rest of the saved epoch. Keyed, fixed mode: an archive of
/// another num_replicas or rank is taken too, and a pass over what a checkpoint left of the epoch
/// saves that rest (bcl_rest_start, bcl_rest_span, bcl_rest_taken, only then); keyed, token
/// mode, the same from a step boundary, the position counted from the saved window's start.
///
/// Memory: the cost table (8 bytes per index, shared by copies of the sampler; in token mode the
/// lengths too), the epoch's order (8 bytes per index), this rank's share (8 bytes per record)
/// and the planner's scratch for one window; keyed, the tables, one window and (token mode) two
/// words for each window walked.
/// After the first epoch nothing is allocated in fixed mode but the batches handed out. Not
/// thread-safe, like libtorch's own samplers.
class distributed_balanced_sampler final
    : public ::torch::data::samplers::Sampler<std::vector<std::size_t>> {
    static constexpr const char* who = "bcl::torch::distributed_balanced_sampler";
    // The settings, the tables and the epoch's plan are the mode's the settings chose.
    using mode = std::variant<detail::distributed_fixed_mode, detail::distributed_token_mode>;

    // f(the mode this sampler is in); ahead of its uses, which deduce its type.
    template <class F>
    decltype(auto) in_mode(F&& f) const {
        return std::visit(std::forward<F>(f), m_mode);
    }

public:
    /// The sampler `opt` describes (its rank of num_replicas), over the dataset indices
    /// 0..N-1: in fixed mode (max_tokens 0) `costs` holds the estimated cost of each (N of them)
    /// and `lengths` must be empty; in token mode `lengths` holds each one's tokens (N of them)
    /// and `costs` is empty (the default cost L + L^2/24576, L rounded up to
    /// pad_to_multiple_of) or N costs. Every rank plans every rank's records: give the whole
    /// tables. Checks everything here, so that every rank refuses a bad table or setting before
    /// the first step: throws bcl::error naming the setting, or the dataset index and value, for a
    /// setting outside what distributed_sampler_options documents for it (a seed of 2^63 or
    /// more, num_replicas, lookahead, batch_size or micro_batches of 0, an order that is no
    /// epoch_order_kind, ...), a setting of the other mode away from its default, a rank not below
    /// num_replicas, R*K*B (in token mode R*K*M) above bcl::max_plan_records, invalid plan options,
    /// a cost that is not valid (bcl::valid_cost); in token mode costs neither empty nor one per
    /// length, fewer than R*m dataset indices, a length above max_tokens (rounded up to
    /// pad_to_multiple_of) without oversized_alone, or above 2^31 with it. O(N).
    distributed_balanced_sampler(std::vector<double> costs, std::vector<std::uint64_t> lengths,
                                 const distributed_sampler_options& opt)
        : m_mode(mode_of(std::move(costs), std::move(lengths), opt)) {}

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
        if (new_size && *new_size != dataset_size())
            throw bcl::error(std::string(who) + "::reset: the dataset size given is " +
                             std::to_string(*new_size) + ", but the " +
                             (token_mode() ? "lengths cover " : "cost table covers ") +
                             std::to_string(dataset_size()) + " dataset indices");
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
        // Keyed: plans the batch's window if it is new (token mode: walks to it).
        if (in_mode([this](const auto& m) { return m.ends_at(m_position, who); }))
            return ::torch::nullopt;
        const std::span<const std::size_t> batch =
            in_mode([this](auto& m) { return m.batch(m_position, who); });
        ++m_position;
        return std::vector<std::size_t>(batch.begin(), batch.end());
    }

    /// The chain of the plan digests of the epoch under way's windows (bcl::plan_digest; in
    /// token mode bcl::token_epoch_share::digest, Python's stats['digest'] on the same order;
    /// keyed, fixed mode, the inputs' digest, detail::keyed_pass_digest, O(1)): equal on every
    /// rank that planned the same epoch alike. Plans the epoch if it is not yet, O(N log N); O(1)
    /// after.
    [[nodiscard]] std::uint64_t digest() {
        ensure_planned();
        return in_mode([](const auto& m) { return m.digest(); });
    }

    /// What the plans of the epoch under way promise (plans it if it is not yet; keyed, plans
    /// every window of the pass once, O(N log(R*K*B)) with one window's memory, the first time).
    /// Fixed mode: in token mode a bcl::error (token_plan() describes a token epoch).
    [[nodiscard]] const epoch_plan_summary& summary() {
        auto* fixed = std::get_if<detail::distributed_fixed_mode>(&m_mode);
        if (fixed == nullptr)
            throw bcl::error(std::string(who) +
                             "::summary: the summary of batches of batch_size; in token mode "
                             "token_plan() describes the epoch");
        ensure_planned();
        return fixed->summary(who);
    }

    /// Token mode: this rank's share of the epoch under way (plans it if it is not yet): its
    /// micro-batches, where each step starts (`steps`), the digest, the micro-steps' bound, the
    /// records repeated at the end (`repeated`), the empty micro-batches of every rank
    /// (`padding`), the records above T (`oversized`) and the planned efficiency. In fixed mode
    /// a bcl::error (summary() describes it).
    /// With epoch_order_kind::keyed a bcl::error too: the epoch is planned window by window and
    /// never held whole (token_summary() describes the windows planned so far).
    [[nodiscard]] const token_epoch_share& token_plan() {
        const auto* tokens = std::get_if<detail::distributed_token_mode>(&m_mode);
        if (tokens == nullptr)
            throw bcl::error(std::string(who) +
                             "::token_plan: the plan of token-budget micro-batches; with "
                             "max_tokens 0 summary() describes the epoch");
        if (tokens->keyed())
            throw bcl::error(std::string(who) +
                             "::token_plan: with epoch_order_kind::keyed the epoch is planned "
                             "window by window and never held whole; token_summary() describes "
                             "the windows planned so far");
        ensure_planned();
        return tokens->planned();
    }

    /// Token mode: what the plans of the epoch under way promise (plans it if it is not yet):
    /// its digest chain, windows, micro-steps, their bound, the records repeated at the end,
    /// the empty micro-batches, the records above T, the costs' total and the objective; keyed,
    /// of the windows planned so far. In fixed mode a bcl::error (summary() describes it).
    [[nodiscard]] const token_epoch_summary& token_summary() {
        const auto* tokens = std::get_if<detail::distributed_token_mode>(&m_mode);
        if (tokens == nullptr)
            throw bcl::error(std::string(who) +
                             "::token_summary: the plans of token-budget micro-batches; with "
                             "max_tokens 0 summary() describes the epoch");
        ensure_planned();
        return tokens->summary();
    }

    /// Writes the sampler's state to `archive` (format
    /// "bcl::torch::distributed_balanced_sampler/2", in token mode
    /// "bcl::torch::distributed_balanced_sampler/tokens/1"): the format tag, the epoch (the one
    /// under way, whether next() was called in it, the one set_epoch() chose), every setting (the
    /// order's kind, bcl_order, only when it is epoch_order_kind::keyed), the dataset size, a
    /// digest of the cost table (in token mode of the lengths too), the batches (micro-batches)
    /// handed out this epoch and the epoch's plan digest (none if the epoch is not planned yet),
    /// sealed by a digest of these fields. O(1).
    void save(::torch::serialize::OutputArchive& archive) const override {
        const detail::distributed_position at{
            m_cursor, m_position,
            m_planned
                ? std::optional<std::uint64_t>(in_mode([](const auto& m) { return m.digest(); }))
                : std::nullopt};
        in_mode([&](const auto& m) { m.save(archive, at); });
    }

    /// Restores what save() wrote: the sampler then hands out exactly the rest of the saved
    /// epoch, and the epochs after it as the saved one would have. Before it keeps anything it
    /// checks every field by its type and against this sampler: the format tag (an archive of a
    /// balanced_sampler, of the other mode, or of an earlier bcl, is refused by name); the epoch;
    /// the dataset size, num_replicas, rank, batch size, lookahead, shuffle, seed, drop_last and
    /// every plan option (in token mode: max_tokens, micro_batches, multiple_of, oversized_alone,
    /// pad_to_multiple_of and padding instead of the fixed mode's; each a bcl::error naming the
    /// field and both values); the order's kind (bcl_order, saved only when keyed: an archive
    /// without it is of the default); the cost table's digest (and the lengths'); the position (at
    /// most the epoch's batches, and 0 unless the epoch was planned); then it plans the saved epoch
    /// and compares the plan digest; and last the digest of all the fields. Any failure is a
    /// bcl::error naming the field, and leaves the sampler as it was. O(N log N) if the saved
    /// epoch was planned, O(1) otherwise.
    ///
    /// Keyed, fixed mode: num_replicas and rank may differ from this sampler's (any that the
    /// batch size and lookahead can plan for, a rank below it), and the rest fields, if present,
    /// are checked one by one (bcl::epoch_rest::from_parts); the saved pass's digest is compared
    /// at the saved num_replicas. At this num_replicas the sampler goes on where the archive
    /// stood; at another, with the rest of the epoch once every saving rank took the saved
    /// position's batches, planned at this size from position 0 (size() counts its batches).
    /// O(window) then, not O(N log N).
    void load(::torch::serialize::InputArchive& archive) override {
        detail::archive_reader in(archive, std::string(who) + "::load");
        const detail::distributed_position saved =
            in_mode([&](auto& m) { return m.load(in, who); });
        // Committed: nothing below throws.
        m_cursor = saved.cursor;
        m_position = saved.position;
        m_planned = saved.plan_digest.has_value();
    }

    /// Batches every rank hands out per epoch: ceil(m / B), or m / B with drop_last, for the m
    /// records each rank takes (the Python sampler's len()), O(1); keyed, for an epoch resumed
    /// at another num_replicas, the batches of its rest. In token mode the epoch under
    /// way's micro-batches, the same on every rank, which its plan decides: plans it if it is not
    /// yet (O(N log N); throws what next() throws for a plan), O(1) after.
    [[nodiscard]] std::size_t size() const {
        if (const auto* fixed = std::get_if<detail::distributed_fixed_mode>(&m_mode))
            return m_planned ? fixed->batches() : fixed->layout().batches;
        ensure_planned();
        return planned_batches();
    }
    /// Records each rank takes per epoch (m), fixed mode; 0 in token mode, where a rank's count
    /// depends on the plan (token_plan().records.size()). O(1).
    [[nodiscard]] std::size_t records_per_rank() const noexcept {
        const auto* fixed = std::get_if<detail::distributed_fixed_mode>(&m_mode);
        if (fixed == nullptr) return 0;
        return m_planned ? fixed->records_per_rank() : fixed->layout().per_rank;
    }
    /// Batches (micro-batches) handed out in the epoch under way. O(1).
    [[nodiscard]] std::size_t position() const noexcept { return m_position; }
    /// The epoch under way, or after set_epoch(e), e: the one the next reset() starts. O(1).
    [[nodiscard]] std::size_t epoch() const noexcept { return m_cursor.epoch(); }
    /// B: the indices of every batch but an epoch's last; in token mode 1, the request a data
    /// loader makes for each micro-batch. O(1).
    [[nodiscard]] std::size_t batch_size() const noexcept {
        return token_mode() ? 1 : settings().batch_size;
    }
    /// K: steps planned together. O(1).
    [[nodiscard]] std::size_t lookahead() const noexcept { return settings().lookahead; }
    /// R and this rank. O(1).
    [[nodiscard]] std::size_t num_replicas() const noexcept { return settings().num_replicas; }
    [[nodiscard]] std::size_t rank() const noexcept { return settings().rank; }
    /// N: the dataset's indices, the cost table's size (in token mode the lengths'). O(1).
    [[nodiscard]] std::size_t dataset_size() const noexcept {
        return in_mode([](const auto& m) { return m.dataset_size(); });
    }
    [[nodiscard]] bool shuffle() const noexcept { return settings().shuffle; }
    [[nodiscard]] std::uint64_t seed() const noexcept { return settings().seed; }
    [[nodiscard]] bool drop_last() const noexcept { return settings().drop_last; }
    [[nodiscard]] const bcl::plan_options& plan_settings() const noexcept {
        return settings().plan;
    }
    /// Every setting, as constructed. O(1).
    [[nodiscard]] const distributed_sampler_options& settings() const noexcept {
        return in_mode(
            [](const auto& m) -> const distributed_sampler_options& { return m.options(); });
    }
    /// Whether the sampler hands out token-budget micro-batches (max_tokens above 0). O(1).
    [[nodiscard]] bool token_mode() const noexcept {
        return std::holds_alternative<detail::distributed_token_mode>(m_mode);
    }

    /// The global order of `epoch` (before padding or cutting): a permutation of 0..N-1 from
    /// (seed, epoch) with `shuffle`, drawn as settings().order says (with
    /// epoch_order_kind::keyed, bcl::keyed_order(N, seed, epoch) at positions 0..N-1), else
    /// 0..N-1. The same on every platform. O(N).
    [[nodiscard]] std::vector<std::size_t> order_of(std::size_t epoch) const {
        std::vector<std::size_t> order;
        detail::draw_epoch_order(settings(), dataset_size(), epoch, order);
        return order;
    }

private:
    // The mode `opt` asks for (max_tokens above 0: token mode), its settings and tables checked.
    [[nodiscard]] static mode mode_of(std::vector<double> costs, std::vector<std::uint64_t> lengths,
                                      const distributed_sampler_options& opt) {
        if (opt.max_tokens > 0)
            return mode(std::in_place_type<detail::distributed_token_mode>, std::move(costs),
                        std::move(lengths), opt, who);
        return mode(std::in_place_type<detail::distributed_fixed_mode>, std::move(costs), lengths,
                    opt, who);
    }

    // The batches of the planned epoch under way (micro-batches in token mode; keyed, the pass
    // walked to its end).
    [[nodiscard]] std::size_t planned_batches() const {
        const auto* tokens = std::get_if<detail::distributed_token_mode>(&m_mode);
        if (tokens != nullptr) return tokens->batches(who);
        return std::get<detail::distributed_fixed_mode>(m_mode).batches();
    }

    // The plan is the epoch's alone, so computing it when first asked changes nothing anyone
    // can see: size() may do it on a const sampler.
    void ensure_planned() const {
        if (m_planned) return;
        in_mode([this](auto& m) { m.plan(m_cursor.current(), who); });
        m_planned = true;
    }

    // The tables, the settings, the epoch's plan and the planner's scratch (mutable: the plan is
    // computed when first asked, see ensure_planned()).
    mutable mode m_mode;
    detail::epoch_cursor m_cursor;  // the epoch; started: next() was called in it
    std::size_t m_position = 0;     // its batches handed out
    mutable bool m_planned = false; // the mode's plan is the epoch under way's
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
