// bcl::detail::stages::step_restager, as a specification: every micro-step of a plan restaged by
// stage keeps its records and every rank's count in it; the figures are the plan's (the
// objective recomputed from the slots, the objective of the plan as given, the total, the
// dearest micro-step, the micro-steps changed), the objective never above the one given and
// never below the bound; one stage changes nothing.

#include <bcl/detail/stages/step_restager.hpp>
#include <bcl/detail/stages/step_stages.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <random>
#include <span>
#include <utility>
#include <vector>

namespace {

using bcl::detail::stages::restage_figures;
using bcl::detail::stages::stage_table;
using bcl::detail::stages::step_restager;

struct slot {
    std::uint32_t step;
    std::uint32_t rank;
    friend bool operator==(const slot&, const slot&) = default;
};

// Per micro-step, the sum over stages of the largest rank load.
std::vector<std::uint64_t> step_objectives(const stage_table& t, const std::vector<slot>& slots,
                                           std::size_t ranks, std::size_t steps) {
    std::vector<std::uint64_t> load(steps * ranks * t.stages, 0);
    for (std::size_t i = 0; i < slots.size(); ++i)
        for (std::size_t s = 0; s < t.stages; ++s)
            load[(slots[i].step * ranks + slots[i].rank) * t.stages + s] += t.of(i)[s];
    std::vector<std::uint64_t> out(steps, 0);
    for (std::size_t step = 0; step < steps; ++step)
        for (std::size_t s = 0; s < t.stages; ++s) {
            std::uint64_t top = 0;
            for (std::size_t r = 0; r < ranks; ++r)
                top = std::max(top, load[(step * ranks + r) * t.stages + s]);
            out[step] += top;
        }
    return out;
}

} // namespace

TEST_CASE("step restager: counts kept, the figures the plan's, never worse, one stage unchanged",
          "[stages][step_restager]") {
    std::mt19937_64 gen(17);
    step_restager restager;
    for (int trial = 0; trial < 300; ++trial) {
        const std::size_t ranks = 1 + gen() % 6;
        const std::size_t steps = 1 + gen() % 4;
        const std::size_t batch = 1 + gen() % 5;
        const std::size_t d = 1 + gen() % 3;
        const std::size_t n = ranks * steps * batch;
        std::vector<double> costs(n * d);
        for (auto& c : costs) c = static_cast<double>(gen() % (trial % 2 == 0 ? 10 : 100000));
        stage_table t;
        t.assign(costs, d);
        // A plan: each step's B records a rank, dealt in order.
        std::vector<slot> slots(n);
        for (std::size_t i = 0; i < n; ++i)
            slots[i] = {static_cast<std::uint32_t>(i / (ranks * batch)),
                        static_cast<std::uint32_t>(i % ranks)};
        const std::vector<slot> given = slots;
        CAPTURE(trial, ranks, steps, batch, d);
        const restage_figures f = restager.restage(t, std::span<slot>(slots), ranks, steps);
        std::map<std::pair<std::uint32_t, std::uint32_t>, std::size_t> cells;
        std::size_t changed_steps = 0;
        std::vector<bool> changed(steps, false);
        for (std::size_t i = 0; i < n; ++i) {
            REQUIRE(slots[i].step == given[i].step);
            ++cells[{slots[i].step, slots[i].rank}];
            if (slots[i].rank != given[i].rank) changed[slots[i].step] = true;
        }
        for (const auto& [cell, count] : cells) REQUIRE(count == batch);
        for (const bool c : changed) changed_steps += c ? 1 : 0;
        const std::vector<std::uint64_t> after = step_objectives(t, slots, ranks, steps);
        const std::vector<std::uint64_t> before = step_objectives(t, given, ranks, steps);
        std::uint64_t sum_after = 0;
        std::uint64_t sum_before = 0;
        std::uint64_t total = 0;
        for (std::size_t k = 0; k < steps; ++k) {
            sum_after += after[k];
            sum_before += before[k];
            REQUIRE(after[k] <= before[k]);
        }
        for (const std::uint64_t c : t.cost) total += c;
        REQUIRE(f.objective == sum_after);
        REQUIRE(f.summed_objective == sum_before);
        REQUIRE(f.total == total);
        REQUIRE(f.heaviest == *std::max_element(after.begin(), after.end()));
        REQUIRE(f.lower_bound <= f.objective);
        REQUIRE(f.steps_restaged == changed_steps);
        if (d == 1) REQUIRE(slots == given);
    }
}
