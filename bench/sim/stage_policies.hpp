#pragma once
// The policies of stage mode (--stages): each plans a unit of records (a held batch, or a
// stream's window of K steps) into micro-steps of B records a rank. All of them see the same
// records; a new policy is one more entry in stage_policy_table().

#include "omnibal.hpp"
#include "random.hpp"
#include "stage_workload.hpp"
#include "verl_kk.hpp"

#include <bcl/global_plan.hpp>
#include <bcl/held_batch.hpp>
#include <bcl/stage_plan.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace bcl_sim {

/// What a policy plans at once: the records of a held batch (R*B*M, in M micro-steps) or of a
/// stream's window (R*K*B, in K steps), in the order they arrived. Record i arrived in micro-step
/// i / (R*B) of the unit, where `none` trains it.
struct stage_unit {
    std::span<const stage_record> records;
    std::size_t ranks = 0;
    std::size_t steps = 0; ///< micro-steps of the unit: M (held) or K (a window)
    std::size_t batch = 0; ///< B
    bool held = false;
    std::uint64_t key = 0; ///< seeds a policy's random choices in this unit
};

/// One policy of stage mode, keeping its scratch between units.
class stage_runner {
public:
    virtual ~stage_runner() = default;
    /// Plans `unit` into out[i] = {micro-step of the unit, rank} of record i.
    virtual void plan(const stage_unit& unit, std::span<bcl::plan_slot> out) = 0;
    /// Micro-steps whose ranks the library's stage plan changed (`stages` only).
    [[nodiscard]] virtual std::optional<std::uint64_t> steps_restaged() const { return {}; }
};

/// `none`: the records as they came, rank r of micro-step t taking the unit's records
/// [t*R*B + r*B, t*R*B + (r+1)*B) (bench_stages.py's order).
class none_stage_runner final : public stage_runner {
public:
    void plan(const stage_unit& unit, std::span<bcl::plan_slot> out) override {
        const std::size_t per_step = unit.ranks * unit.batch;
        for (std::size_t i = 0; i < unit.records.size(); ++i)
            out[i] = {static_cast<std::uint32_t>(i / per_step),
                      static_cast<std::uint32_t>(i % per_step / unit.batch)};
    }
};

/// `lm`: verl's balance_batch on the language model's workload alone, which is what verl and
/// NeMo-RL balance: calculate_workload(T) = 24576 T + T^2 for T language-model tokens, split by
/// Karmarkar-Karp into R groups of equal size (karmarkar_karp_equal, verl's own rule), group i to
/// rank i. A held batch is split whole (R groups of M*B) and each rank's micro-batches are its
/// group's records in input order; a stream's step is split alone (its R*B records), records
/// never changing steps.
class lm_stage_runner final : public stage_runner {
public:
    void plan(const stage_unit& unit, std::span<bcl::plan_slot> out) override {
        const std::size_t per_step = unit.ranks * unit.batch;
        const std::size_t span_size = unit.held ? unit.records.size() : per_step;
        for (std::size_t first = 0; first < unit.records.size(); first += span_size) {
            m_workload.resize(span_size);
            for (std::size_t j = 0; j < span_size; ++j) {
                const double t = unit.records[first + j].tokens();
                m_workload[j] = 24576.0 * t + t * t;
            }
            const auto groups = karmarkar_karp_equal(m_workload, unit.ranks);
            const std::size_t step0 = first / per_step;
            for (std::size_t rank = 0; rank < unit.ranks; ++rank)
                for (std::size_t k = 0; k < groups[rank].size(); ++k)
                    out[first + groups[rank][k]] = {
                        static_cast<std::uint32_t>(step0 + k / unit.batch),
                        static_cast<std::uint32_t>(rank)};
        }
    }

private:
    std::vector<double> m_workload;
};

/// `summed`: bcl's plan of one number a record, each record's summed cost: a held batch by
/// bcl::held_batch_planner, a window by bcl::global_planner with {R, K, B}, default options.
class summed_stage_runner final : public stage_runner {
public:
    void plan(const stage_unit& unit, std::span<bcl::plan_slot> out) override {
        m_summed.resize(unit.records.size());
        for (std::size_t i = 0; i < unit.records.size(); ++i)
            m_summed[i] = unit.records[i].summed();
        if (unit.held)
            (void)m_held.plan(m_summed, unit.ranks, unit.batch, bcl::plan_options{}, out);
        else
            (void)m_window.plan(m_summed, {unit.ranks, unit.steps, unit.batch}, bcl::plan_options{},
                                out);
    }

private:
    std::vector<double> m_summed;
    bcl::held_batch_planner m_held;
    bcl::global_planner m_window;
};

/// `stages`: bcl's plan of the table of stage costs: a held batch by bcl::held_stage_planner, a
/// window by bcl::stage_window_planner with {R, K, B} (stage_plan.hpp), default options.
class stages_stage_runner final : public stage_runner {
public:
    void plan(const stage_unit& unit, std::span<bcl::plan_slot> out) override {
        m_table.resize(unit.records.size() * stage_count);
        for (std::size_t i = 0; i < unit.records.size(); ++i)
            for (std::size_t s = 0; s < stage_count; ++s)
                m_table[i * stage_count + s] = unit.records[i].cost[s];
        const bcl::stage_plan_summary summary =
            unit.held ? m_held.plan(m_table, stage_count, unit.ranks, unit.batch,
                                    bcl::plan_options{}, out)
                      : m_window.plan(m_table, stage_count, {unit.ranks, unit.steps, unit.batch},
                                      bcl::plan_options{}, out);
        m_restaged += summary.steps_restaged;
    }
    [[nodiscard]] std::optional<std::uint64_t> steps_restaged() const override {
        return m_restaged;
    }

private:
    std::vector<double> m_table;
    bcl::held_stage_planner m_held;
    bcl::stage_window_planner m_window;
    std::uint64_t m_restaged = 0;
};

/// `omnibal`: OmniBal's balanced dynamic mini-batch with groups of B (omnibal.hpp).
class omnibal_stage_runner final : public stage_runner {
public:
    void plan(const stage_unit& unit, std::span<bcl::plan_slot> out) override {
        m_vision.resize(unit.records.size());
        m_tokens.resize(unit.records.size());
        for (std::size_t i = 0; i < unit.records.size(); ++i) {
            m_vision[i] = unit.records[i].patches;
            m_tokens[i] = unit.records[i].tokens();
        }
        m_grouper.plan(m_vision, m_tokens, unit.ranks, unit.steps, unit.batch, unit.key, out);
    }

private:
    std::vector<double> m_vision, m_tokens;
    omnibal_grouper m_grouper;
};

/// A policy of stage mode: its name, what it stands for and how its runner is made.
struct stage_policy_entry {
    std::string name;
    std::string models; ///< one line: what it stands for
    std::function<std::unique_ptr<stage_runner>()> make;
};

template <class Runner>
[[nodiscard]] std::unique_ptr<stage_runner> make_stage_runner() {
    return std::make_unique<Runner>();
}

[[nodiscard]] inline const std::vector<stage_policy_entry>& stage_policy_table() {
    static const std::vector<stage_policy_entry> table{
        {"none", "the records as they came: rank r takes the next B of each micro-step",
         make_stage_runner<none_stage_runner>},
        {"lm",
         "verl's balance_batch on the language model's tokens alone (Karmarkar-Karp into equal "
         "groups of the workload 24576 T + T^2): what verl and NeMo-RL balance",
         make_stage_runner<lm_stage_runner>},
        {"summed",
         "bcl's plan of each record's summed cost (held_batch_planner; global_planner for a "
         "window)",
         make_stage_runner<summed_stage_runner>},
        {"stages",
         "bcl's plan of the stage costs (held_stage_planner; stage_window_planner for a window)",
         make_stage_runner<stages_stage_runner>},
        {"omnibal",
         "OmniBal's balanced dynamic mini-batch (ISF on patches and language tokens), groups of "
         "exactly B",
         make_stage_runner<omnibal_stage_runner>},
    };
    return table;
}

[[nodiscard]] inline const stage_policy_entry* find_stage_policy(std::string_view name) {
    for (const stage_policy_entry& e : stage_policy_table())
        if (e.name == name) return &e;
    return nullptr;
}

/// The names of stage mode's policies, comma-separated.
[[nodiscard]] inline std::string stage_policy_names() {
    std::string names;
    for (const stage_policy_entry& e : stage_policy_table())
        names += (names.empty() ? "" : ",") + e.name;
    return names;
}

} // namespace bcl_sim
