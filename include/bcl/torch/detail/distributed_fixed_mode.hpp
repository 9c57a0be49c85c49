#pragma once
// The fixed mode of a bcl::torch::distributed_balanced_sampler (batches of B indices): its cost
// table, this rank's plan of the epoch under way with the planner's scratch, and how that plan is
// saved and read back (with epoch_order_kind::keyed, window by window, and from another
// num_replicas). The sampler keeps the epoch cursor and the position; this part knows how an
// epoch is planned. Needs libtorch's C++ API on the include path (for the archive); without it
// this header is empty.

#include <bcl/detail/config.hpp>

#include <bcl/detail/random.hpp>
#include <bcl/epoch_plan.hpp>
#include <bcl/epoch_rest.hpp>
#include <bcl/stage_plan.hpp>
#include <bcl/torch/detail/archive.hpp>
#include <bcl/torch/detail/distributed_keyed_pass.hpp>
#include <bcl/torch/detail/distributed_options_check.hpp>
#include <bcl/torch/detail/distributed_sampler_archive.hpp>
#include <bcl/torch/distributed_sampler_options.hpp>

#if __has_include(<torch/serialize/archive.h>)

#include <torch/serialize/archive.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <utility>
#include <vector>

namespace bcl::torch::detail {

/// A distributed sampler's fixed mode. Each epoch's global order (draw_epoch_order: the
/// settings' order of N indices for the epoch) is laid out as torch's DistributedSampler and
/// BatchSampler lay it out (bcl::epoch_layout), cut into windows of R*K*B records and planned by
/// bcl::epoch_planner::share for this rank, with the settings' plan options: the same plan, bit
/// for bit, on every rank.
///
/// With epoch_order_kind::keyed the epoch is a distributed_keyed_pass instead: the same windows,
/// the same plans, batch for batch, but each window planned when a batch of it is first asked,
/// over bcl::keyed_order read position by position (O(window) memory, no vector of N); its
/// digest is the pass's inputs' (keyed_pass_digest), known without planning; and its archive
/// may be loaded by a sampler of another num_replicas (or rank), which goes on with the rest of
/// the epoch (bcl::epoch_rest) planned at its own size.
///
/// Copies share the cost table. The planner's scratch is kept, so that planning an epoch
/// allocates nothing once one was planned. Not thread-safe.
class distributed_fixed_mode {
public:
    /// One epoch's plan: this rank's records, batch after batch, and what the plans promise.
    using plan_type = bcl::epoch_share<std::size_t>;

    /// The fixed mode of a sampler with settings `opt` (max_tokens 0) over `costs`, the
    /// estimated cost of each dataset index 0..N-1; `lengths` must be empty. Throws what
    /// check_fixed_mode throws, prefixed with `who`. O(N).
    distributed_fixed_mode(std::vector<double> costs, std::span<const std::uint64_t> lengths,
                           const distributed_sampler_options& opt, const char* who)
        : m_costs(std::make_shared<const std::vector<double>>(std::move(costs))), m_options(opt) {
        check_fixed_mode(m_options, *m_costs, lengths, who);
        m_layout = bcl::epoch_layout::of(dataset_size(), epoch_shape_of(m_options));
        m_costs_digest = bcl::cost_table_digest(*m_costs);
        // A table of D > 1 stages digests its values and then its D, so that it never shares a
        // digest (and an archive) with the same values as one cost a record.
        if (m_options.stages > 1)
            m_costs_digest = bcl::detail::mix64(m_costs_digest ^ m_options.stages);
        m_inputs_digest = keyed_inputs_digest(m_options, m_costs_digest);
        m_pass = distributed_keyed_pass(m_costs, m_options.stages);
    }

    /// The settings, as given. O(1).
    [[nodiscard]] const distributed_sampler_options& options() const noexcept { return m_options; }
    /// N: the cost table's records (its size, or its rows of stage costs). O(1).
    [[nodiscard]] std::size_t dataset_size() const noexcept {
        return m_costs->size() / m_options.stages;
    }
    /// How every epoch falls to ranks and batches: m records per rank, ceil(m / B) batches (or
    /// floor with drop_last), known without planning. O(1).
    [[nodiscard]] const bcl::epoch_layout& layout() const noexcept { return m_layout; }
    /// Whether epochs are planned window by window (epoch_order_kind::keyed). O(1).
    [[nodiscard]] bool keyed() const noexcept { return m_options.order == epoch_order_kind::keyed; }

    /// Plans `epoch`: planned() (keyed: the pass) is then its plan. Throws what
    /// bcl::epoch_planner::share throws (prefixed with `who`); the plan is then not to be read.
    /// O(N log N); keyed O(1), each window planned when a batch of it is first asked.
    void plan(std::size_t epoch, const char* who) {
        if (keyed())
            start_pass(m_pass, epoch, m_options.num_replicas, m_options.rank,
                       bcl::epoch_rest(dataset_size()), who);
        else
            plan_into(epoch, m_plan, who);
    }

    /// The plan of the epoch plan() planned last (or load() read); not keyed. O(1).
    [[nodiscard]] const plan_type& planned() const noexcept { return m_plan; }
    /// Keyed: the pass plan() started last (or load() read). O(1).
    [[nodiscard]] const distributed_keyed_pass& pass() const noexcept { return m_pass; }
    /// Its batches: layout().batches, or, keyed, the pass's (fewer for a rest). O(1).
    [[nodiscard]] std::size_t batches() const noexcept {
        return keyed() ? m_pass.batches() : m_plan.batches();
    }
    /// Whether the epoch ends after `position` batches (at batches()). O(1).
    [[nodiscard]] bool ends_at(std::size_t position, const char* /*who*/) const noexcept {
        return position >= batches();
    }
    /// Its records per rank: layout().per_rank, or, keyed, the pass's. O(1).
    [[nodiscard]] std::size_t records_per_rank() const noexcept {
        return keyed() ? m_pass.windows().layout.per_rank : m_layout.per_rank;
    }
    /// Its batch i (i < batches()): B dataset indices, the last batch the rest. O(1); keyed, the
    /// batch's window planned first if it is not the last one planned (throwing what
    /// bcl::epoch_window_planner::plan throws), O(R*K*B log(R*K*B)) then. The span is valid until
    /// the next call.
    [[nodiscard]] std::span<const std::size_t> batch(std::size_t i, const char* who) {
        if (keyed()) return m_pass.batch(i, who);
        return m_plan.batch(i);
    }
    /// Its digest: the chain of its windows' bcl::plan_digest; keyed, the pass's inputs'
    /// (keyed_pass_digest). O(1).
    [[nodiscard]] std::uint64_t digest() const noexcept {
        return keyed() ? m_pass.digest() : m_plan.summary.digest;
    }
    /// What its plans promise, the digest the chain of the windows' plan digests. O(1); keyed,
    /// every window of the pass planned once the first time (O(N log(R*K*B)), one window's
    /// memory; throwing what batch() throws).
    [[nodiscard]] const bcl::epoch_plan_summary& summary(const char* who) {
        return keyed() ? m_pass.summary(who) : m_plan.summary;
    }

    /// What an archive must match: the settings, N, the cost table's digest, the batches of an
    /// epoch. O(1).
    [[nodiscard]] distributed_identity identity() const noexcept {
        return {.settings = m_options,
                .dataset_size = dataset_size(),
                .costs_digest = m_costs_digest,
                .batches = m_layout.batches};
    }

    /// Writes the fixed mode's archive (write_distributed_archive) of a sampler standing `at`,
    /// keyed with the pass's rest when `at` has a plan digest and the pass is over a rest. O(1)
    /// plus the rest's bitmap.
    void save(::torch::serialize::OutputArchive& archive, const distributed_position& at) const {
        const bool over_rest = keyed() && at.plan_digest && !m_pass.rest().whole();
        write_distributed_archive(archive, identity(), at, over_rest ? &m_pass.rest() : nullptr);
    }

    /// Reads back what save() wrote and checks it (read_distributed_pass: every field, and a
    /// saved plan digest against this mode's plan of the saved epoch). On success returns where
    /// the sampler stood and, if the archive has a plan digest, planned() (keyed: pass()) is that
    /// epoch's plan; on failure throws bcl::error naming the field and changes nothing. O(N log
    /// N) if the saved epoch was planned, O(1) otherwise.
    ///
    /// Keyed, the archive may be of another num_replicas or rank (any rank's archive at a step
    /// boundary serves every rank): the saved pass (the epoch, or the rest the archive holds) is
    /// set up at the saved num_replicas and its digest compared; at this sampler's num_replicas
    /// the pass then goes on where it stood, else the rest once every saving rank took the
    /// position's batches (distributed_keyed_pass::rest_after) becomes a pass of its own at this
    /// size, from position 0. O(window + the rest's span) for this.
    [[nodiscard]] distributed_position load(archive_reader& in, const char* who) {
        if (!keyed()) {
            plan_type candidate;
            const distributed_position saved =
                read_distributed_archive(in, identity(), [&](std::size_t epoch) {
                    plan_into(epoch, candidate, who);
                    return candidate.summary.digest;
                });
            if (saved.plan_digest) std::swap(m_plan, candidate);
            return saved;
        }
        distributed_keyed_pass candidate(m_costs, m_options.stages);
        std::size_t saved_ranks = 0;
        distributed_position saved = read_distributed_pass(
            in, identity(), true,
            [&](std::size_t epoch, std::size_t ranks, std::size_t rank,
                const std::optional<bcl::epoch_rest>& rest) {
                saved_ranks = ranks;
                // At another size, the saving ranks' pass: any rank's, the rest is theirs alike.
                start_pass(candidate, epoch, ranks,
                           ranks == m_options.num_replicas ? m_options.rank : rank,
                           rest ? *rest : bcl::epoch_rest(dataset_size()), who);
                return distributed_plan_check{candidate.digest(), candidate.batches()};
            });
        if (!saved.plan_digest) return saved;
        if (saved_ranks != m_options.num_replicas) {
            // What every saving rank had taken; the records left planned at this size.
            bcl::epoch_rest left = candidate.rest_after(saved.position, who);
            start_pass(candidate, saved.cursor.current(), m_options.num_replicas, m_options.rank,
                       std::move(left), who);
            saved.position = 0;
            saved.plan_digest = candidate.digest();
        }
        std::swap(m_pass, candidate);
        return saved;
    }

private:
    void plan_into(std::size_t epoch, plan_type& out, const char* who) {
        draw_epoch_order(m_options, dataset_size(), epoch, m_order);
        if (m_options.stages > 1)
            m_planner.share(bcl::stage_table_view{*m_costs, m_options.stages},
                            std::span<const std::size_t>(m_order), epoch_shape_of(m_options),
                            m_options.rank, m_options.plan, out, who);
        else
            m_planner.share(std::span<const double>(*m_costs),
                            std::span<const std::size_t>(m_order), epoch_shape_of(m_options),
                            m_options.rank, m_options.plan, out, who);
    }

    void start_pass(distributed_keyed_pass& pass, std::size_t epoch, std::size_t ranks,
                    std::size_t rank, bcl::epoch_rest rest, const char* who) const {
        bcl::epoch_shape shape = epoch_shape_of(m_options);
        shape.ranks = ranks;
        pass.start(m_options.seed, epoch, m_options.shuffle, shape, rank, m_options.plan,
                   m_inputs_digest, std::move(rest), who);
    }

    std::shared_ptr<const std::vector<double>> m_costs;
    distributed_sampler_options m_options;
    bcl::epoch_layout m_layout; // the order padded or cut, m, the batches per epoch
    std::uint64_t m_costs_digest = 0;
    std::uint64_t m_inputs_digest = 0; // keyed: keyed_inputs_digest
    plan_type m_plan;
    distributed_keyed_pass m_pass; // keyed: the pass under way, planned window by window
    // Scratch, kept so that planning an epoch allocates nothing once one was planned.
    bcl::epoch_planner m_planner;
    std::vector<std::size_t> m_order;
};

} // namespace bcl::torch::detail

#endif
