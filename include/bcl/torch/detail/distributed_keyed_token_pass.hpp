#pragma once
// One pass of a distributed sampler's token mode over a keyed epoch (epoch_order_kind::keyed):
// the core's bcl::keyed_token_pass (window by window, over the whole epoch or what a checkpoint
// left of it) over the sampler's tables of lengths and costs, and the digest of the settings its
// plans depend on. Python's sampler runs the same pass (python/src/token_windows.hpp). No
// libtorch needed.

#include <bcl/detail/config.hpp>

#include <bcl/detail/random.hpp>
#include <bcl/epoch_rest.hpp>
#include <bcl/error.hpp>
#include <bcl/keyed_epoch.hpp>
#include <bcl/keyed_token_epoch.hpp>
#include <bcl/token_epoch_plan.hpp>
#include <bcl/torch/distributed_sampler_options.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace bcl::torch::detail {

/// The digest of what a keyed token pass's plans depend on besides the epoch, the ranks and the
/// rest: the lengths' and the costs' digests (which count N) and every setting of `o` that
/// shapes a token plan (lookahead, shuffle, seed, order, max_tokens, micro_batches, multiple_of,
/// oversized_alone, pad_to_multiple_of, padding), but neither num_replicas nor rank. Equal
/// inputs, equal digests, on every platform. O(1), noexcept.
[[nodiscard]] inline std::uint64_t keyed_token_inputs_digest(const distributed_sampler_options& o,
                                                             std::uint64_t lengths_digest,
                                                             std::uint64_t costs_digest) noexcept {
    using bcl::detail::mix64;
    std::uint64_t h = mix64(lengths_digest ^ 0x6b657965642d746bULL); // "keyed-tk"
    h = mix64(h ^ costs_digest);
    const std::uint64_t settings[] = {o.lookahead,
                                      o.shuffle ? 1U : 0U,
                                      o.seed,
                                      static_cast<std::uint64_t>(o.order),
                                      o.max_tokens,
                                      o.micro_batches,
                                      o.multiple_of,
                                      o.oversized_alone ? 1U : 0U,
                                      o.pad_to_multiple_of,
                                      static_cast<std::uint64_t>(o.padding)};
    for (const std::uint64_t v : settings) h = mix64(h ^ v);
    return h;
}

/// A pass of one rank over a keyed token epoch (or its rest), planned window by window: the
/// core's bcl::keyed_token_pass over the sampler's tables, which copies share. Every method is
/// the core's (see keyed_token_epoch.hpp), the tables read at each window.
class distributed_keyed_token_pass {
    struct tokens_reader {
        const std::vector<std::uint64_t>* lengths;
        std::uint64_t operator()(std::uint64_t index) const { return (*lengths)[index]; }
    };
    struct cost_reader {
        const std::vector<double>* costs;
        double operator()(std::uint64_t index) const { return (*costs)[index]; }
    };

public:
    distributed_keyed_token_pass() = default;

    /// A pass over `lengths` and `costs` (empty: the default cost), every entry checked before.
    distributed_keyed_token_pass(std::shared_ptr<const std::vector<std::uint64_t>> lengths,
                                 std::shared_ptr<const std::vector<double>> costs)
        : m_lengths(std::move(lengths)), m_costs(std::move(costs)) {}

    /// bcl::keyed_token_pass::start, and bcl::error for a rest of another epoch size than the
    /// tables'; the pass is then as it was.
    void start(std::uint64_t seed, std::uint64_t epoch, bool shuffle,
               const bcl::token_epoch_shape& shape, std::size_t rank, std::uint64_t inputs,
               bcl::epoch_rest rest, const char* who) {
        const std::size_t n = m_lengths->size();
        if (rest.epoch_size() != n)
            throw bcl::error(std::string(who) + ": the epoch's rest is of an epoch of " +
                             std::to_string(rest.epoch_size()) + " records, not " +
                             std::to_string(n));
        m_pass.start(seed, epoch, shuffle, shape, rank, !m_costs->empty(), inputs, std::move(rest),
                     who);
        m_inputs = inputs;
    }

    [[nodiscard]] std::uint64_t digest() const noexcept { return m_pass.digest(); }
    [[nodiscard]] const bcl::epoch_rest& rest() const noexcept { return m_pass.rest(); }
    [[nodiscard]] std::uint64_t epoch() const noexcept { return m_pass.epoch(); }
    [[nodiscard]] const bcl::token_epoch_summary& planned() const noexcept {
        return m_pass.planned();
    }

    [[nodiscard]] std::optional<std::span<const std::size_t>> micro_batch(std::size_t i,
                                                                          const char* who) {
        return m_pass.micro_batch(i, tokens(), costs(), who);
    }
    [[nodiscard]] std::size_t micro_batches(const char* who) {
        return m_pass.micro_batches(tokens(), costs(), who);
    }
    [[nodiscard]] bcl::token_pass_point point(std::size_t position, const char* who) {
        return m_pass.point(position, tokens(), costs(), who);
    }
    [[nodiscard]] bcl::epoch_rest rest_after(std::size_t position, const char* who) {
        return m_pass.rest_after(position, tokens(), costs(), who);
    }
    /// The digest a pass of this one's epoch and ranks over `rest` has. O(the rest's bitmap).
    [[nodiscard]] std::uint64_t digest_over(const bcl::epoch_rest& rest) const noexcept {
        return bcl::keyed_epoch_digest(m_inputs, m_pass.epoch(), m_pass.shape().budget.ranks, rest);
    }

private:
    [[nodiscard]] tokens_reader tokens() const { return {m_lengths.get()}; }
    [[nodiscard]] cost_reader costs() const { return {m_costs.get()}; }

    std::shared_ptr<const std::vector<std::uint64_t>> m_lengths;
    std::shared_ptr<const std::vector<double>> m_costs; // empty: the default cost
    std::uint64_t m_inputs = 0;
    bcl::keyed_token_pass<std::size_t> m_pass;
};

} // namespace bcl::torch::detail
