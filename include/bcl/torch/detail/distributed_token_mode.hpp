#pragma once
// The token mode of a bcl::torch::distributed_balanced_sampler (micro-batches of at most
// max_tokens tokens): its tables of lengths and costs, this rank's share of the epoch under way
// with the planner's scratch, and how that share is saved and read back. The sampler keeps the
// epoch cursor and the position; this part knows how an epoch is planned, as Python's sampler
// plans it. Needs libtorch's C++ API on the include path (for the archive); without it this
// header is empty.

#include <bcl/detail/config.hpp>

#include <bcl/epoch_plan.hpp>
#include <bcl/token_epoch_plan.hpp>
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

/// A distributed sampler's token mode. Each epoch's global order (draw_epoch_order: the settings'
/// order of N indices for the epoch), unpadded, is planned by bcl::token_epoch_planner::share for
/// this rank with the arguments python/src/token_epoch.hpp passes: the budget (R, T, m), M
/// micro-batches a step, K steps a window, token_options_of the settings, and repeat_to_fill with
/// token_padding::repeat. Its digest is then Python's on the same order (with
/// epoch_order_kind::keyed, on the same seed and epoch).
///
/// Copies share the tables. The planner's scratch is kept, so that planning an epoch allocates
/// little once one was planned. Not thread-safe.
class distributed_token_mode {
public:
    /// One epoch's share: this rank's micro-batches, and what the plans promise.
    using plan_type = bcl::token_epoch_share<std::size_t>;

    /// The token mode of a sampler with settings `opt` (max_tokens above 0) over `lengths`, the
    /// tokens of each dataset index 0..N-1, and `costs`, empty (the default cost L + L^2/24576,
    /// L rounded up to pad_to_multiple_of) or one per length. Throws what check_token_mode
    /// throws, prefixed with `who`. O(N).
    distributed_token_mode(std::vector<double> costs, std::vector<std::uint64_t> lengths,
                           const distributed_sampler_options& opt, const char* who)
        : m_costs(std::make_shared<const std::vector<double>>(std::move(costs))),
          m_lengths(std::make_shared<const std::vector<std::uint64_t>>(std::move(lengths))),
          m_options(opt) {
        check_token_mode(m_options, *m_costs, *m_lengths, who);
        m_costs_digest = bcl::cost_table_digest(*m_costs);
        m_lengths_digest = length_table_digest(*m_lengths);
    }

    /// The settings, as given. O(1).
    [[nodiscard]] const distributed_sampler_options& options() const noexcept { return m_options; }
    /// N: the lengths' count. O(1).
    [[nodiscard]] std::size_t dataset_size() const noexcept { return m_lengths->size(); }

    /// Plans `epoch`: planned() is then its share. Throws what bcl::token_epoch_planner::share
    /// throws (prefixed with `who`; with token_padding::error, for an epoch no plan fills);
    /// planned() is then not to be read. O(N log N).
    void plan(std::size_t epoch, const char* who) { plan_into(epoch, m_plan, who); }

    /// The share of the epoch plan() planned last (or load() read). O(1).
    [[nodiscard]] const plan_type& planned() const noexcept { return m_plan; }
    /// Its micro-batches, the same count on every rank. O(1).
    [[nodiscard]] std::size_t batches() const noexcept { return m_plan.micro_batches(); }
    /// Its micro-batch i (i < batches()): the dataset indices of at most T tokens (but one
    /// record above T, alone, with oversized_alone), empty only with token_padding::empty. O(1).
    [[nodiscard]] std::span<const std::size_t> batch(std::size_t i) const noexcept {
        return m_plan.micro_batch(i);
    }
    /// Its digest (bcl::token_epoch_share::digest). O(1).
    [[nodiscard]] std::uint64_t digest() const noexcept { return m_plan.digest; }

    /// What an archive must match: the settings, N, the costs' and the lengths' digests. O(1).
    [[nodiscard]] distributed_identity identity() const noexcept {
        return {.settings = m_options,
                .dataset_size = dataset_size(),
                .costs_digest = m_costs_digest,
                .lengths_digest = m_lengths_digest};
    }

    /// Writes the token mode's archive (write_distributed_token_archive) of a sampler standing
    /// `at`. O(1).
    void save(::torch::serialize::OutputArchive& archive, const distributed_position& at) const {
        write_distributed_token_archive(archive, identity(), at);
    }

    /// Reads back what save() wrote and checks it (read_distributed_token_archive: every field,
    /// and a saved plan digest and position against this mode's share of the saved epoch). On
    /// success returns where the sampler stood and, if the archive has a plan digest, planned()
    /// is that epoch's share; on failure throws bcl::error naming the field and changes nothing.
    /// O(N log N) if the saved epoch was planned, O(1) otherwise.
    [[nodiscard]] distributed_position load(archive_reader& in, const char* who) {
        plan_type candidate;
        const distributed_position saved =
            read_distributed_token_archive(in, identity(), [&](std::size_t epoch) {
                plan_into(epoch, candidate, who);
                return token_epoch_check{candidate.digest, candidate.micro_batches()};
            });
        if (saved.plan_digest) std::swap(m_plan, candidate);
        return saved;
    }

private:
    void plan_into(std::size_t epoch, plan_type& out, const char* who) {
        draw_epoch_order(m_options, dataset_size(), epoch, m_order);
        m_planner.share(std::span<const std::uint64_t>(*m_lengths),
                        std::span<const double>(*m_costs), std::span<const std::size_t>(m_order),
                        token_budget_of(m_options), m_options.micro_batches, m_options.lookahead,
                        m_options.rank, token_options_of(m_options), out, who,
                        m_options.padding == token_padding::repeat);
    }

    std::shared_ptr<const std::vector<double>> m_costs; // or none: the default cost
    std::shared_ptr<const std::vector<std::uint64_t>> m_lengths;
    distributed_sampler_options m_options;
    std::uint64_t m_costs_digest = 0;
    std::uint64_t m_lengths_digest = 0;
    plan_type m_plan;
    // Scratch, kept between epochs.
    bcl::token_epoch_planner m_planner;
    std::vector<std::size_t> m_order;
};

} // namespace bcl::torch::detail

#endif
