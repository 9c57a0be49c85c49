#pragma once
// bcl::torch::distributed_balanced_sampler: a libtorch batch sampler for map-style datasets whose
// cost table every rank holds. Every rank derives the same global order of an epoch, plans each
// window of K steps of all ranks' records with bcl::global_planner (the same plan, bit for bit,
// on every rank) and hands out its own share, batch by batch. No communication. Needs libtorch's
// C++ API on the include path (link the Torch package's `torch` target); <bcl/bcl.hpp> does not
// include it.

#include <bcl/detail/config.hpp>

#include <bcl/cost_estimator.hpp>
#include <bcl/detail/number_text.hpp>
#include <bcl/epoch_plan.hpp>
#include <bcl/error.hpp>
#include <bcl/global_plan.hpp>
#include <bcl/options.hpp>
#include <bcl/torch/data_loader.hpp>
#include <bcl/torch/detail/archive.hpp>

#if __has_include(<torch/data/samplers/base.h>)

#include <torch/data/samplers/base.h>
#include <torch/serialize/archive.h>
#include <torch/types.h>

#include <algorithm>
#include <array>
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
/// Resume: save() writes a format tag, every setting, the dataset size, a digest of the cost
/// table, the epoch, the batches handed out and the epoch's plan digest, sealed by a digest of
/// the fields. load() checks each field by type and against this sampler (bcl::error naming the
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
        const std::size_t next = m_requested ? *m_requested : m_current + (m_started ? 1 : 0);
        detail::check_counter(next, who, "the next epoch");
        // The plan depends on the epoch alone: an epoch started again keeps it.
        m_planned = m_planned && next == m_current;
        m_current = next;
        m_requested.reset();
        m_position = 0;
        m_started = false;
    }

    /// Sets the epoch the next reset() starts (as libtorch's DistributedSampler::set_epoch does);
    /// the epoch under way is not changed. Throws bcl::error for an epoch of 2^63 or more (what
    /// save() could not write back), changing nothing. O(1).
    void set_epoch(std::size_t epoch) {
        detail::check_counter(epoch, who, "the epoch");
        m_requested = epoch;
    }

    /// This rank's next batch of the epoch: exactly batch_size() dataset indices, but the epoch's
    /// last batch, which has the rest; std::nullopt once the epoch's size() batches are handed
    /// out, until reset(). The epoch's first call plans the epoch, O(N log N); every other is
    /// O(B). Throws bcl::error if `batch_size` is not the sampler's (a loader must ask for the
    /// batches the plan made; bcl::torch::make_data_loader gives it the sampler's), changing
    /// nothing.
    [[nodiscard]] ::torch::optional<std::vector<std::size_t>>
    next(std::size_t batch_size) override {
        if (batch_size != m_batch)
            throw bcl::error(std::string(who) + "::next: asked for a batch of " +
                             std::to_string(batch_size) +
                             " indices, but the sampler's batch size is " +
                             std::to_string(m_batch) + "; give the data loader the sampler's");
        ensure_planned();
        m_started = true;
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

    /// Writes the sampler's state to `archive`: the format tag, every setting, the dataset size, a
    /// digest of the cost table, the epoch (and one set_epoch() chose since), the batches handed
    /// out this epoch and the epoch's plan digest (none if the epoch is not planned yet), sealed
    /// by a digest of these fields. O(1).
    void save(::torch::serialize::OutputArchive& archive) const override {
        detail::archive_writer out(archive);
        const auto one = [](std::uint64_t v) {
            return std::array<std::int64_t, 1>{std::bit_cast<std::int64_t>(v)};
        };
        out.bytes("bcl_format", format_tag);
        for (const setting& s : settings_of(*this)) out.int64s(s.key, one(s.value));
        out.real("bcl_cap", m_plan_options.cap);
        out.int64s("bcl_epoch", std::array<std::int64_t, 4>{std::int64_t(m_current), m_started,
                                                            m_requested.has_value(),
                                                            std::int64_t(m_requested.value_or(0))});
        out.int64s("bcl_position", one(m_position));
        if (m_planned)
            out.int64s("bcl_plan_digest", one(m_plan.summary.digest));
        else
            out.int64s("bcl_plan_digest", {});
        out.seal("bcl_digest");
    }

    /// Restores what save() wrote: the sampler then hands out exactly the rest of the saved
    /// epoch, and the epochs after it as the saved one would have. Before it keeps anything it
    /// checks every field by its type and against this sampler: the format tag; the dataset size,
    /// num_replicas, rank, batch size, lookahead, shuffle, seed, drop_last and every plan option
    /// (each a bcl::error naming the field and both values); the cost table's digest; the epoch;
    /// the position (at most size(), and 0 unless the epoch was planned); then it plans the saved
    /// epoch and compares the plan digest; and last the digest of all the fields. Any failure is a
    /// bcl::error naming the field, and leaves the sampler as it was. O(N log N) if the saved
    /// epoch was planned, O(1) otherwise.
    void load(::torch::serialize::InputArchive& archive) override {
        detail::archive_reader in(archive, std::string(who) + "::load");
        check_format(in);
        for (const setting& s : settings_of(*this)) {
            const auto saved = std::bit_cast<std::uint64_t>(in.int64(s.key));
            if (saved != s.value)
                in.fail(
                    s.key + " is " + std::to_string(saved) + ", but this sampler's " + s.name +
                    " is " + std::to_string(s.value) +
                    (s.key == "bcl_costs" ? " (the cost table differs from the saved run's)" : ""));
        }
        if (const double cap = in.real("bcl_cap");
            std::bit_cast<std::uint64_t>(cap) != std::bit_cast<std::uint64_t>(m_plan_options.cap))
            in.fail("bcl_cap is " + bcl::detail::number_text(cap) +
                    ", but this sampler's plan_options::cap is " +
                    bcl::detail::number_text(m_plan_options.cap));
        const std::vector<std::int64_t> e = in.int64s("bcl_epoch");
        const auto flag = [](std::int64_t v) { return v == 0 || v == 1; };
        if (e.size() != 4 || e[0] < 0 || !flag(e[1]) || !flag(e[2]) || e[3] < 0 ||
            (e[2] == 0 && e[3] != 0))
            in.fail("bcl_epoch is not an epoch, two flags of 0 or 1 (started, set_epoch() "
                    "called) and the epoch set_epoch() chose (0 without its flag)");
        const std::int64_t position = in.int64("bcl_position");
        if (position < 0 || static_cast<std::uint64_t>(position) > m_layout.batches)
            in.fail("bcl_position is " + std::to_string(position) + ", outside the epoch's 0 to " +
                    std::to_string(m_layout.batches) + " batches");
        if (position > 0 && e[1] == 0)
            in.fail("bcl_epoch says the epoch has not started, but bcl_position says " +
                    std::to_string(position) + " batches were handed out");
        const std::vector<std::int64_t> plan_digest = in.int64s("bcl_plan_digest");
        if (plan_digest.size() > 1)
            in.fail("bcl_plan_digest has " + std::to_string(plan_digest.size()) +
                    " values, not 0 or 1");
        if (plan_digest.empty() && e[1] != 0)
            in.fail("bcl_plan_digest is empty (the epoch not planned), but bcl_epoch says the "
                    "epoch has started (bcl_position: " +
                    std::to_string(position) + " batches handed out)");
        const auto epoch = static_cast<std::size_t>(e[0]);
        epoch_plan planned;
        if (!plan_digest.empty()) {
            plan_epoch(epoch, planned);
            if (std::bit_cast<std::uint64_t>(plan_digest[0]) != planned.summary.digest)
                in.fail("bcl_plan_digest does not match this sampler's plan of epoch " +
                        std::to_string(epoch) + " (bcl_epoch): the costs, the settings or the " +
                        "planner differ from the saved run's, and its batches would not continue "
                        "the saved epoch's");
        }
        in.check_seal("bcl_digest");
        // Committed: nothing below throws.
        m_current = epoch;
        m_requested =
            e[2] != 0 ? std::optional<std::size_t>(static_cast<std::size_t>(e[3])) : std::nullopt;
        m_position = static_cast<std::size_t>(position);
        m_started = e[1] != 0;
        m_planned = !plan_digest.empty();
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
    [[nodiscard]] std::size_t epoch() const noexcept { return m_requested.value_or(m_current); }
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
    static constexpr const char* format_tag = "bcl::torch::distributed_balanced_sampler/1";

    // One epoch's plan: this rank's records, batch after batch, and what the plans promise.
    using epoch_plan = bcl::epoch_share<std::size_t>;

    [[nodiscard]] bcl::epoch_shape shape() const noexcept {
        return {.ranks = m_replicas,
                .lookahead = m_lookahead,
                .batch = m_batch,
                .drop_last = m_drop_last};
    }

    // A setting saved as one 64-bit field, compared bit for bit on load.
    struct setting {
        std::string key;  // the archive's field
        std::string name; // the setting's name in messages
        std::uint64_t value;
    };

    static std::vector<setting> settings_of(const distributed_balanced_sampler& s) {
        return {{"bcl_dataset_size", "dataset size", s.m_table->size()},
                {"bcl_num_replicas", "num_replicas", s.m_replicas},
                {"bcl_rank", "rank", s.m_rank},
                {"bcl_batch_size", "batch size", s.m_batch},
                {"bcl_lookahead", "lookahead", s.m_lookahead},
                {"bcl_shuffle", "shuffle", s.m_shuffle ? 1U : 0U},
                {"bcl_seed", "seed", s.m_seed},
                {"bcl_drop_last", "drop_last", s.m_drop_last ? 1U : 0U},
                {"bcl_batching", "plan_options::batching",
                 static_cast<std::uint64_t>(s.m_plan_options.batching)},
                {"bcl_level_steps", "plan_options::level_steps",
                 s.m_plan_options.level_steps ? 1U : 0U},
                {"bcl_costs", "cost table's digest", s.m_costs_digest}};
    }

    // Refuses an archive of another kind by name before the reader checks the tag's type.
    static void check_format(detail::archive_reader& in) {
        if (in.peek_type("bcl_format") == ::torch::kInt64)
            in.fail("bcl_format is that of a bcl::torch::balanced_sampler, not of a "
                    "bcl::torch::distributed_balanced_sampler");
        if (const std::string tag = in.bytes("bcl_format"); tag != format_tag)
            in.fail("bcl_format is \"" + tag + "\", not \"" + format_tag + "\"");
    }

    void ensure_planned() {
        if (m_planned) return;
        plan_epoch(m_current, m_plan);
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

    std::size_t m_current = 0;              // the epoch under way
    std::optional<std::size_t> m_requested; // set_epoch() since the last reset()
    std::size_t m_position = 0;             // its batches handed out
    bool m_started = false;                 // next() was called in it
    bool m_planned = false;                 // m_plan is the epoch under way's
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
