#pragma once
// The lookahead policies a balancer can run, one component each, and the first steps of a round:
// the policy chooses the round's records and the buffer gathers them.

#include <bcl/detail/config.hpp>

#include <bcl/detail/rounds/round_settings.hpp>
#include <bcl/detail/rounds/sliding_rounds.hpp>
#include <bcl/detail/rounds/tumbling_rounds.hpp>
#include <bcl/detail/variant_of.hpp>
#include <bcl/error.hpp>
#include <bcl/options.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <variant>

namespace bcl::detail {

/// The rounds of each lookahead policy, in the order of bcl::lookahead_policy's values: a policy
/// is its value there and its component here (a type constructible from round_settings with
/// capacity(), max_delay(), a static validate(settings, max_buffer, max_delay), reserve(),
/// may_hold() and choose(), like tumbling_rounds). Adding one is its file, its #include here and
/// its name in this list.
using round_policy = std::variant<tumbling_rounds, sliding_rounds>;

/// The error for an options::policy that names no policy.
[[nodiscard]] inline error unknown_policy(const options& opt) {
    return error("bcl::options::policy has no such lookahead policy (" +
                 std::to_string(static_cast<int>(opt.policy)) + ")");
}

/// Throws bcl::error unless options::policy names one of round_policy's policies.
inline void require_known_policy(const options& opt) {
    if (static_cast<std::size_t>(opt.policy) >= std::variant_size_v<round_policy>)
        throw unknown_policy(opt);
}

[[nodiscard]] inline round_settings round_settings_of(const options& opt) noexcept {
    return {opt.batch_size, opt.lookahead, opt.buffer_windows, opt.max_age};
}

/// Throws bcl::error for a policy that names none, or naming the first of the policy's settings
/// out of range (a buffer above `max_buffer` records, a delay bound above `max_delay` batches),
/// by the policy's type: nothing is built from the unchecked settings.
inline void validate_policy_settings(const options& opt, std::size_t max_buffer,
                                     std::size_t max_delay) {
    const bool known = visit_alternative_type<round_policy>(
        static_cast<std::size_t>(opt.policy), [&](auto policy) {
            decltype(policy)::type::validate(round_settings_of(opt), max_buffer, max_delay);
        });
    if (!known) throw unknown_policy(opt);
}

/// The policy `opt` names, built from its (valid, bcl::validate) settings. Throws bcl::error for
/// a value that names no policy.
[[nodiscard]] inline round_policy make_round_policy(const options& opt) {
    std::optional<round_policy> made =
        variant_of<round_policy>(static_cast<std::size_t>(opt.policy), round_settings_of(opt));
    if (!made) throw unknown_policy(opt);
    return std::move(*made);
}

/// The records one round takes and how they fall into batches.
struct round_records {
    std::size_t take = 0;           ///< records in the round
    bool whole_buffer = false;      ///< it takes every buffered record (read in place)
    std::span<const double> costs;  ///< their costs, in buffer order
    std::span<const double> memory; ///< their memory estimates (empty when not tracked)
    std::size_t packs = 0;          ///< batches it forms: ceil(take / B)
    bool has_short = false;         ///< the last of them is short (the end of input)
    bool full = false;              ///< K batches of exactly B: a round like any other
};

/// Steps 1 and 2 of a round, over the policy options::policy names: the policy chooses which
/// of the buffered records the round takes (every one, for a tumbling round or the end of a
/// sliding drain), and the buffer gathers them.
class round_chooser {
public:
    /// `opt` valid (bcl::validate). Reserves what the policy needs for a full buffer.
    explicit round_chooser(const options& opt)
        : m_policy(make_round_policy(opt)), m_batch_size(opt.batch_size),
          m_lookahead(opt.lookahead) {
        visit_held(m_policy, [&](auto& rounds) { rounds.reserve(capacity()); });
    }

    /// Records the buffer holds before a round must run.
    [[nodiscard]] std::size_t capacity() const noexcept {
        return visit_held(m_policy, [](const auto& rounds) { return rounds.capacity(); });
    }
    /// The most batches a record waits beyond its own (bcl::max_delay_bound).
    [[nodiscard]] std::size_t max_delay() const noexcept {
        return visit_held(m_policy, [](const auto& rounds) { return rounds.max_delay(); });
    }

    /// The next round's records: min(held, K*B) of `buffer`'s, `round` rounds having run,
    /// `finished` if the input has ended, `mean_cost` the long-run mean cost of a record.
    template <class Buffer>
    [[nodiscard]] round_records choose(Buffer& buffer, std::uint64_t round, bool finished,
                                       double mean_cost) {
        round_records r;
        r.take = std::min(buffer.size(), m_batch_size * m_lookahead);
        r.whole_buffer = r.take == buffer.size();
        if (!r.whole_buffer) {
            const round_inputs in{buffer.costs(), buffer.arrivals(), round,
                                  finished,       mean_cost,         r.take};
            visit_held(m_policy, [&](auto& rounds) { rounds.choose(in, buffer.chosen()); });
            buffer.gather(r.take);
        }
        r.costs = r.whole_buffer ? buffer.costs() : buffer.round_costs();
        r.memory = r.whole_buffer ? buffer.memory() : buffer.round_memory();
        r.packs = (r.take + m_batch_size - 1) / m_batch_size;
        r.has_short = r.take % m_batch_size != 0;
        r.full = !r.has_short && r.packs == m_lookahead;
        return r;
    }

private:
    round_policy m_policy;
    std::size_t m_batch_size;
    std::size_t m_lookahead;
};

} // namespace bcl::detail
