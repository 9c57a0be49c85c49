#pragma once
// The fixed mode of a bcl::torch::distributed_balanced_sampler (batches of B indices): its cost
// table, this rank's plan of the epoch under way with the planner's scratch, and how that plan is
// saved and read back. The sampler keeps the epoch cursor and the position; this part knows how
// an epoch is planned. Needs libtorch's C++ API on the include path (for the archive); without it
// this header is empty.

#include <bcl/detail/config.hpp>

#include <bcl/epoch_plan.hpp>
#include <bcl/torch/detail/archive.hpp>
#include <bcl/torch/detail/distributed_options_check.hpp>
#include <bcl/torch/detail/distributed_sampler_archive.hpp>
#include <bcl/torch/distributed_sampler_options.hpp>

#if __has_include(<torch/serialize/archive.h>)

#include <torch/serialize/archive.h>

#include <cstddef>
#include <cstdint>
#include <memory>
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
        m_layout = bcl::epoch_layout::of(m_costs->size(), epoch_shape_of(m_options));
        m_costs_digest = bcl::cost_table_digest(*m_costs);
    }

    /// The settings, as given. O(1).
    [[nodiscard]] const distributed_sampler_options& options() const noexcept { return m_options; }
    /// N: the cost table's size. O(1).
    [[nodiscard]] std::size_t dataset_size() const noexcept { return m_costs->size(); }
    /// How every epoch falls to ranks and batches: m records per rank, ceil(m / B) batches (or
    /// floor with drop_last), known without planning. O(1).
    [[nodiscard]] const bcl::epoch_layout& layout() const noexcept { return m_layout; }

    /// Plans `epoch`: planned() is then its plan. Throws what bcl::epoch_planner::share throws
    /// (prefixed with `who`); planned() is then not to be read. O(N log N).
    void plan(std::size_t epoch, const char* who) { plan_into(epoch, m_plan, who); }

    /// The plan of the epoch plan() planned last (or load() read). O(1).
    [[nodiscard]] const plan_type& planned() const noexcept { return m_plan; }
    /// Its batches, layout().batches. O(1).
    [[nodiscard]] std::size_t batches() const noexcept { return m_plan.batches(); }
    /// Its batch i (i < batches()): B dataset indices, the last batch the rest. O(1).
    [[nodiscard]] std::span<const std::size_t> batch(std::size_t i) const noexcept {
        return m_plan.batch(i);
    }
    /// Its digest: the chain of its windows' bcl::plan_digest. O(1).
    [[nodiscard]] std::uint64_t digest() const noexcept { return m_plan.summary.digest; }

    /// What an archive must match: the settings, N, the cost table's digest, the batches of an
    /// epoch. O(1).
    [[nodiscard]] distributed_identity identity() const noexcept {
        return {.settings = m_options,
                .dataset_size = dataset_size(),
                .costs_digest = m_costs_digest,
                .batches = m_layout.batches};
    }

    /// Writes the fixed mode's archive (write_distributed_archive) of a sampler standing `at`.
    /// O(1).
    void save(::torch::serialize::OutputArchive& archive, const distributed_position& at) const {
        write_distributed_archive(archive, identity(), at);
    }

    /// Reads back what save() wrote and checks it (read_distributed_archive: every field, and a
    /// saved plan digest against this mode's plan of the saved epoch). On success returns where
    /// the sampler stood and, if the archive has a plan digest, planned() is that epoch's plan;
    /// on failure throws bcl::error naming the field and changes nothing. O(N log N) if the
    /// saved epoch was planned, O(1) otherwise.
    [[nodiscard]] distributed_position load(archive_reader& in, const char* who) {
        plan_type candidate;
        const distributed_position saved =
            read_distributed_archive(in, identity(), [&](std::size_t epoch) {
                plan_into(epoch, candidate, who);
                return candidate.summary.digest;
            });
        if (saved.plan_digest) std::swap(m_plan, candidate);
        return saved;
    }

private:
    void plan_into(std::size_t epoch, plan_type& out, const char* who) {
        draw_epoch_order(m_options, dataset_size(), epoch, m_order);
        m_planner.share(std::span<const double>(*m_costs), std::span<const std::size_t>(m_order),
                        epoch_shape_of(m_options), m_options.rank, m_options.plan, out, who);
    }

    std::shared_ptr<const std::vector<double>> m_costs;
    distributed_sampler_options m_options;
    bcl::epoch_layout m_layout; // the order padded or cut, m, the batches per epoch
    std::uint64_t m_costs_digest = 0;
    plan_type m_plan;
    // Scratch, kept so that planning an epoch allocates nothing once one was planned.
    bcl::epoch_planner m_planner;
    std::vector<std::size_t> m_order;
};

} // namespace bcl::torch::detail

#endif
