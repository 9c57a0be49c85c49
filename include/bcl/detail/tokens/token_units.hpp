#pragma once
// Internal: the units a token plan deals: each record, or with group_together each group, its
// records' tokens and costs summed; and, for groups kept to a rank, each record's group.

#include <bcl/detail/config.hpp>

#include <bcl/detail/tokens/token_records.hpp>
#include <bcl/error.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <numeric>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace bcl::detail::tokens {

/// A plan's units, by unit, and the records' units.
class token_units {
public:
    std::vector<std::uint64_t> tokens;  ///< by unit
    std::vector<std::uint64_t> cost;    ///< by unit, fixed point
    std::vector<std::uint8_t> alone;    ///< by unit: above T, closing its micro-batch
    std::vector<std::uint32_t> unit_of; ///< by record: its unit
    /// Groups kept to a rank (groups without group_together): by record, its group (dense,
    /// in the order of the ids); empty otherwise.
    std::vector<std::uint32_t> group_of;
    std::vector<std::uint64_t> group_tokens; ///< by group
    std::vector<std::uint64_t> group_cost;   ///< by group

    /// Makes the units of `records`: one a record, or, with `groups` (one id per record) and
    /// `together`, one a group. Throws bcl::error (prefixed with `who`, naming the group) for a
    /// group above `max_tokens` with `together`, or holding a record above it beside others.
    /// O(n log n) with groups, O(n) without.
    void make(const token_records& records, std::span<const std::uint64_t> groups, bool together,
              std::uint64_t max_tokens, std::string_view who) {
        const std::size_t n = records.tokens.size();
        group_of.clear();
        if (groups.empty()) {
            each_record(records);
            return;
        }
        number_groups(records, groups);
        if (!together) {
            each_record(records);
            return;
        }
        const std::size_t count = group_tokens.size();
        alone.assign(count, 0);
        for (std::size_t k = 0; k < n; ++k) {
            const std::uint32_t i = m_sorted[k];
            const std::uint32_t group = group_of[i];
            // A record above T (counted as T tokens) fills its micro-batch alone, so its group
            // holds nothing else.
            const bool alone_with_others = records.alone[i] != 0 &&
                                           group_tokens[group] == max_tokens &&
                                           ((k > 0 && group_of[m_sorted[k - 1]] == group) ||
                                            (k + 1 < n && group_of[m_sorted[k + 1]] == group));
            if (alone_with_others)
                throw error(std::string(who) + ": group " + std::to_string(groups[i]) +
                            " holds record " + std::to_string(i) + ", above max_tokens (" +
                            std::to_string(max_tokens) +
                            ") and so alone in its micro-batch, beside other records, and "
                            "group_together keeps a group's records in one micro-batch");
            if (group_tokens[group] > max_tokens)
                throw error(std::string(who) + ": group " + std::to_string(groups[i]) + " has " +
                            std::to_string(group_tokens[group]) + " tokens, above max_tokens (" +
                            std::to_string(max_tokens) +
                            "), and group_together keeps its records in one micro-batch");
            alone[group] |= records.alone[i];
        }
        tokens = group_tokens;
        cost = group_cost;
        unit_of = group_of;
        group_of.clear();
    }

    /// Keeps the first `count` units, each a record (a stream window's prefix).
    void keep_prefix(std::size_t count) {
        tokens.resize(count);
        cost.resize(count);
        unit_of.resize(count);
        alone.resize(count);
    }

private:
    void each_record(const token_records& records) {
        tokens.assign(records.tokens.begin(), records.tokens.end());
        cost.assign(records.cost.begin(), records.cost.end());
        alone.assign(records.alone.begin(), records.alone.end());
        unit_of.resize(records.tokens.size());
        std::iota(unit_of.begin(), unit_of.end(), std::uint32_t{0});
    }

    // Dense group numbers, in the order of the ids, and each group's tokens and costs.
    void number_groups(const token_records& records, std::span<const std::uint64_t> groups) {
        const std::size_t n = records.tokens.size();
        m_sorted.resize(n);
        std::iota(m_sorted.begin(), m_sorted.end(), std::uint32_t{0});
        std::sort(m_sorted.begin(), m_sorted.end(), [&](std::uint32_t a, std::uint32_t b) {
            return groups[a] < groups[b] || (groups[a] == groups[b] && a < b);
        });
        group_of.resize(n);
        std::uint32_t g = 0;
        for (std::size_t k = 0; k < n; ++k) {
            if (k > 0 && groups[m_sorted[k]] != groups[m_sorted[k - 1]]) ++g;
            group_of[m_sorted[k]] = g;
        }
        const std::size_t count = n == 0 ? 0 : std::size_t{g} + 1;
        group_tokens.assign(count, 0);
        group_cost.assign(count, 0);
        for (std::size_t i = 0; i < n; ++i) {
            group_tokens[group_of[i]] += records.tokens[i];
            group_cost[group_of[i]] += records.cost[i];
        }
    }

    std::vector<std::uint32_t> m_sorted; // records by group id
};

} // namespace bcl::detail::tokens
