#pragma once
// The token mode of a bcl::torch::distributed_balanced_sampler (micro-batches of at most
// max_tokens tokens): its tables of lengths and costs, this rank's share of the epoch under way
// with the planner's scratch (with epoch_order_kind::keyed, a pass planned window by window, and
// from another num_replicas), and how that share is saved and read back. The sampler keeps the
// epoch cursor and the position; this part knows how an epoch is planned, as Python's sampler
// plans it. Needs libtorch's C++ API on the include path (for the archive); without it this
// header is empty.

#include <bcl/detail/config.hpp>

#include <bcl/epoch_plan.hpp>
#include <bcl/epoch_rest.hpp>
#include <bcl/keyed_token_epoch.hpp>
#include <bcl/token_epoch_plan.hpp>
#include <bcl/torch/detail/archive.hpp>
#include <bcl/torch/detail/distributed_keyed_token_pass.hpp>
#include <bcl/torch/detail/distributed_options_check.hpp>
#include <bcl/torch/detail/distributed_sampler_archive.hpp>
#include <bcl/torch/detail/distributed_token_archive.hpp>
#include <bcl/torch/distributed_sampler_options.hpp>

#if __has_include(<torch/serialize/archive.h>)

#include <torch/serialize/archive.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
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
/// With epoch_order_kind::keyed the epoch is a distributed_keyed_token_pass instead: the same
/// micro-batches, but each window planned when a micro-batch of it is first asked, over
/// bcl::keyed_order read position by position (O(window) memory, no vector of N); its count is
/// known once the pass has walked to its end (batches() walks there, keeping nothing); its
/// digest is the pass's inputs' (keyed_token_inputs_digest with the epoch, R and the rest),
/// known without planning; an archive holds the rest at the start of the window it was saved
/// in and the position within it, so that a resumed pass walks nothing twice; and it may be
/// loaded by a sampler of another num_replicas (or rank) from a step boundary, which goes on
/// with the rest of the epoch planned at its own size.
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
        m_inputs_digest = keyed_token_inputs_digest(m_options, m_lengths_digest, m_costs_digest);
        m_pass = distributed_keyed_token_pass(m_lengths, m_costs);
    }

    /// Whether epochs are planned window by window (epoch_order_kind::keyed). O(1).
    [[nodiscard]] bool keyed() const noexcept { return m_options.order == epoch_order_kind::keyed; }

    /// The settings, as given. O(1).
    [[nodiscard]] const distributed_sampler_options& options() const noexcept { return m_options; }
    /// N: the lengths' count. O(1).
    [[nodiscard]] std::size_t dataset_size() const noexcept { return m_lengths->size(); }

    /// Plans `epoch`: planned() (keyed: the pass) is then its share. Throws what
    /// bcl::token_epoch_planner::share throws (prefixed with `who`; with token_padding::error,
    /// for an epoch no plan fills); planned() is then not to be read. O(N log N); keyed O(1),
    /// each window planned when a micro-batch of it is first asked.
    void plan(std::size_t epoch, const char* who) {
        if (keyed())
            start_pass(m_pass, epoch, m_options.num_replicas, m_options.rank,
                       bcl::epoch_rest(dataset_size()), who);
        else
            plan_into(epoch, m_plan, who);
    }

    /// The share of the epoch plan() planned last (or load() read); not keyed. O(1).
    [[nodiscard]] const plan_type& planned() const noexcept { return m_plan; }
    /// What the plans promise: the share's; keyed, the windows planned so far. O(1).
    [[nodiscard]] const bcl::token_epoch_summary& summary() const noexcept {
        return keyed() ? m_pass.planned() : m_plan;
    }
    /// Its micro-batches, the same count on every rank. O(1); keyed, the pass walked to its end
    /// the first time (each window planned, nothing kept; throwing what batch() throws).
    [[nodiscard]] std::size_t batches(const char* who) const {
        return keyed() ? m_pass.micro_batches(who) : m_plan.micro_batches();
    }
    /// Whether the epoch ends after `position` micro-batches. O(1); keyed, the pass walked to
    /// `position` (throwing what batch() throws).
    [[nodiscard]] bool ends_at(std::size_t position, const char* who) const {
        if (keyed()) return !m_pass.micro_batch(position, who).has_value();
        return position >= m_plan.micro_batches();
    }
    /// Its micro-batch i (before ends_at()): the dataset indices of at most T tokens (but one
    /// record above T, alone, with oversized_alone), empty only with token_padding::empty. O(1);
    /// keyed, the micro-batch's window planned first if it is not the last one planned. The span
    /// is valid until the next call.
    [[nodiscard]] std::span<const std::size_t> batch(std::size_t i, const char* who) const {
        if (!keyed()) return m_plan.micro_batch(i);
        const auto b = m_pass.micro_batch(i, who);
        if (!b)
            throw bcl::error(std::string(who) + ": micro-batch " + std::to_string(i) +
                             " is past the epoch's end");
        return *b;
    }
    /// Its digest (bcl::token_epoch_share::digest; keyed, the pass's). O(1).
    [[nodiscard]] std::uint64_t digest() const noexcept {
        return keyed() ? m_pass.digest() : m_plan.digest;
    }

    /// What an archive must match: the settings, N, the costs' and the lengths' digests. O(1).
    [[nodiscard]] distributed_identity identity() const noexcept {
        return {.settings = m_options,
                .dataset_size = dataset_size(),
                .costs_digest = m_costs_digest,
                .lengths_digest = m_lengths_digest};
    }

    /// Writes the token mode's archive (write_distributed_token_archive) of a sampler standing
    /// `at`. O(1); keyed, with a plan digest, the pass's rest at the start of the window of
    /// `at.position` and the position within it (bcl::keyed_token_pass::point; the pass walked
    /// to it, throwing what batch() throws), the digest that of a pass over that rest, and the
    /// rest's fields unless it is the whole epoch.
    void save(::torch::serialize::OutputArchive& archive, const distributed_position& at) const {
        if (!keyed() || !at.plan_digest) {
            write_distributed_token_archive(archive, identity(), at);
            return;
        }
        const bcl::token_pass_point point =
            m_pass.point(at.position, "bcl::torch::distributed_balanced_sampler::save");
        const distributed_position rebased{at.cursor, point.position,
                                           m_pass.digest_over(point.rest)};
        write_distributed_token_archive(archive, identity(), rebased,
                                        point.rest.whole() ? nullptr : &point.rest);
    }

    /// Reads back what save() wrote and checks it (read_distributed_token_archive: every field,
    /// and a saved plan digest and position against this mode's share of the saved epoch). On
    /// success returns where the sampler stood and, if the archive has a plan digest, planned()
    /// is that epoch's share; on failure throws bcl::error naming the field and changes nothing.
    /// O(N log N) if the saved epoch was planned, O(1) otherwise.
    ///
    /// Keyed, the archive may be of another num_replicas or rank: the saved pass (over the rest
    /// the archive holds, or the whole epoch) is set up at the saved num_replicas and its digest
    /// compared; at this sampler's num_replicas the pass goes on where it stood, else the rest
    /// once every saving rank took the position's micro-batches
    /// (bcl::keyed_token_pass::rest_after: a position within a step is refused, naming the step
    /// boundary) becomes a pass of its own at this size, from position 0. O(window + the rest's
    /// span) for this.
    [[nodiscard]] distributed_position load(archive_reader& in, const char* who) {
        if (!keyed()) {
            plan_type candidate;
            const distributed_position saved =
                read_distributed_token_archive(in, identity(), [&](std::size_t epoch) {
                    plan_into(epoch, candidate, who);
                    return token_epoch_check{candidate.digest, candidate.micro_batches()};
                });
            if (saved.plan_digest) std::swap(m_plan, candidate);
            return saved;
        }
        distributed_keyed_token_pass candidate(m_lengths, m_costs);
        std::size_t saved_ranks = 0;
        distributed_position saved = read_distributed_token_pass(
            in, identity(), true,
            [&](std::size_t epoch, std::size_t ranks, std::size_t rank,
                const std::optional<bcl::epoch_rest>& rest, std::size_t position) {
                saved_ranks = ranks;
                // At another size, the saving ranks' pass: any rank's, the rest is theirs alike.
                start_pass(candidate, epoch, ranks,
                           ranks == m_options.num_replicas ? m_options.rank : rank,
                           rest ? *rest : bcl::epoch_rest(dataset_size()), who);
                const bool holds =
                    position == 0 || candidate.micro_batch(position - 1, who).has_value();
                return token_pass_check{candidate.digest(), holds, std::nullopt};
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
    void start_pass(distributed_keyed_token_pass& pass, std::size_t epoch, std::size_t ranks,
                    std::size_t rank, bcl::epoch_rest rest, const char* who) const {
        bcl::token_epoch_shape shape;
        shape.budget = token_budget_of(m_options);
        shape.budget.ranks = ranks;
        shape.micro_batches = m_options.micro_batches;
        shape.lookahead = m_options.lookahead;
        shape.options = token_options_of(m_options);
        shape.repeat_to_fill = m_options.padding == token_padding::repeat;
        pass.start(m_options.seed, epoch, m_options.shuffle, shape, rank, m_inputs_digest,
                   std::move(rest), who);
    }

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
    std::uint64_t m_inputs_digest = 0; // keyed: keyed_token_inputs_digest
    plan_type m_plan;
    // Keyed: the pass under way, planned window by window as its micro-batches are asked, which
    // the const queries (batches(), ends_at(), save()) walk forward: the walk changes nothing
    // anyone can see.
    mutable distributed_keyed_token_pass m_pass;
    // Scratch, kept between epochs.
    bcl::token_epoch_planner m_planner;
    std::vector<std::size_t> m_order;
};

} // namespace bcl::torch::detail

#endif
