#pragma once
// One pass of a distributed sampler's fixed mode over a keyed epoch (epoch_order_kind::keyed):
// the core's bcl::keyed_epoch_pass (window by window, over the whole epoch or what a checkpoint
// left of it) over the sampler's cost table, and the digest of the settings its plans depend on.
// Python's sampler runs the same pass (python/src/global_windows.hpp). No libtorch needed.

#include <bcl/detail/config.hpp>

#include <bcl/detail/random.hpp>
#include <bcl/epoch_layout.hpp>
#include <bcl/epoch_plan.hpp>
#include <bcl/epoch_rest.hpp>
#include <bcl/error.hpp>
#include <bcl/global_plan.hpp>
#include <bcl/keyed_epoch.hpp>
#include <bcl/stage_plan.hpp>
#include <bcl/torch/distributed_sampler_options.hpp>

#include <bit>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace bcl::torch::detail {

/// The digest of what a keyed pass's plans depend on besides the epoch, the ranks and the rest:
/// the cost table (its bcl::cost_table_digest, `costs_digest`, which counts N) and every
/// setting of `o` that shapes a plan (batch_size, lookahead, shuffle, seed, order, drop_last,
/// the plan options), but neither num_replicas nor rank, which keyed_pass_digest mixes in (or
/// leaves out: every rank's digest is the same). Equal inputs, equal digests, on every
/// platform. O(1), noexcept.
[[nodiscard]] inline std::uint64_t keyed_inputs_digest(const distributed_sampler_options& o,
                                                       std::uint64_t costs_digest) noexcept {
    using bcl::detail::mix64;
    std::uint64_t h = mix64(costs_digest ^ 0x6b657965642d6678ULL); // "keyed-fx"
    const std::uint64_t settings[] = {o.batch_size,
                                      o.lookahead,
                                      o.shuffle ? 1U : 0U,
                                      o.seed,
                                      static_cast<std::uint64_t>(o.order),
                                      o.drop_last ? 1U : 0U,
                                      static_cast<std::uint64_t>(o.plan.batching),
                                      std::bit_cast<std::uint64_t>(o.plan.cap),
                                      o.plan.level_steps ? 1U : 0U};
    for (const std::uint64_t v : settings) h = mix64(h ^ v);
    return h;
}

/// The digest of a keyed pass: bcl::keyed_epoch_digest of the inputs' (keyed_inputs_digest),
/// the epoch, the ranks R and the rest the pass plans, as Python's sampler mixes them. O(the
/// rest's bitmap).
[[nodiscard]] inline std::uint64_t keyed_pass_digest(std::uint64_t inputs, std::uint64_t epoch,
                                                     std::size_t ranks,
                                                     const bcl::epoch_rest& rest) noexcept {
    return bcl::keyed_epoch_digest(inputs, epoch, ranks, rest);
}

/// A pass of one rank over a keyed epoch (or its rest), planned window by window: the core's
/// bcl::keyed_epoch_pass over the sampler's cost table, which copies share. Every method is the
/// core's (see keyed_epoch.hpp), the table's costs read at each window; summary() is planned
/// once a pass and kept.
class distributed_keyed_pass {
    // The cost of a dataset index, as the core's pass reads it at each window.
    struct cost_table_reader {
        const std::vector<double>* costs;
        double operator()(std::size_t index) const { return (*costs)[index]; }
    };
    // A dataset index's row of stage costs, as a bcl::stage_rows reads it.
    struct stage_row_reader {
        const std::vector<double>* costs;
        std::size_t stages;
        void operator()(std::size_t index, std::span<double> row) const {
            for (std::size_t s = 0; s < stages; ++s) row[s] = (*costs)[index * stages + s];
        }
    };
    // Calls f(reader) with the reader of the table's layout.
    template <class F>
    decltype(auto) read(F&& f) const {
        if (m_stages > 1)
            return f(bcl::stage_rows<stage_row_reader>{m_stages, {m_costs.get(), m_stages}});
        return f(cost_table_reader{m_costs.get()});
    }

public:
    distributed_keyed_pass() = default;

    /// A pass over `costs`, the cost table of every dataset index (`stages` costs each, row
    /// after row), each valid (checked before).
    explicit distributed_keyed_pass(std::shared_ptr<const std::vector<double>> costs,
                                    std::size_t stages = 1)
        : m_costs(std::move(costs)), m_stages(stages) {}

    /// bcl::keyed_epoch_pass::start, and bcl::error for a rest of another epoch size than the
    /// table's; the pass is then as it was.
    void start(std::uint64_t seed, std::uint64_t epoch, bool shuffle, const bcl::epoch_shape& shape,
               std::size_t rank, const bcl::plan_options& opt, std::uint64_t inputs,
               bcl::epoch_rest rest, const char* who) {
        const std::size_t n = m_costs->size() / m_stages;
        if (rest.epoch_size() != n)
            throw bcl::error(std::string(who) + ": the epoch's rest is of an epoch of " +
                             std::to_string(rest.epoch_size()) + " records, not " +
                             std::to_string(n));
        m_pass.start(seed, epoch, shuffle, shape, rank, opt, inputs, std::move(rest), who);
        m_summary.reset();
    }

    [[nodiscard]] const bcl::epoch_windows& windows() const noexcept { return m_pass.windows(); }
    [[nodiscard]] std::size_t batches() const noexcept { return m_pass.batches(); }
    [[nodiscard]] std::uint64_t digest() const noexcept { return m_pass.digest(); }
    [[nodiscard]] const bcl::epoch_rest& rest() const noexcept { return m_pass.rest(); }
    [[nodiscard]] std::uint64_t epoch() const noexcept { return m_pass.epoch(); }

    [[nodiscard]] std::span<const std::size_t> batch(std::size_t i, const char* who) {
        return read([&](const auto& reader) { return m_pass.batch(i, reader, who); });
    }
    [[nodiscard]] const bcl::epoch_plan_summary& summary(const char* who) {
        if (!m_summary)
            m_summary = read([&](const auto& reader) { return m_pass.summary(reader, who); });
        return *m_summary;
    }
    [[nodiscard]] bcl::epoch_rest rest_after(std::size_t position, const char* who) {
        return read([&](const auto& reader) { return m_pass.rest_after(position, reader, who); });
    }

private:
    std::shared_ptr<const std::vector<double>> m_costs;
    std::size_t m_stages = 1;
    bcl::keyed_epoch_pass<std::size_t> m_pass;
    std::optional<bcl::epoch_plan_summary> m_summary; // the whole pass's, once asked
};

} // namespace bcl::torch::detail
