// This example demonstrates calibrating the stage costs of a vision-language model online: held
// batches of records (ShareGPT text lengths, with synthetic images) are planned by their two stage
// costs (bcl::held_stage_planner), a trainer whose true per-stage times the loader does not know
// runs each rank's micro-batch, and bcl::stage_calibration fits both stages from the measured
// encoder and language-model times, starting from docs/stages.md's mix as the prior.
// Requires: a lengths file (argv[1]), e.g.
// bench/workloads/sharegpt_8k_filtered_llama2_total_tokens.txt. A file it cannot use ends it with
// one line on stderr (file:line: value) and exit code 2.
#include "example_samples.hpp"

#include <bcl/global_plan.hpp>
#include <bcl/multimodal_cost.hpp>
#include <bcl/stage_calibration.hpp>
#include <bcl/stage_plan.hpp>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <span>
#include <stdexcept>
#include <vector>

struct record {
    std::uint64_t text_tokens = 0;
    std::vector<std::uint32_t> patches; // one count per image
    [[nodiscard]] bcl::multimodal_record view() const { return {text_tokens, patches}; }
};

// The trainer's measured compute per stage for a micro-batch, in seconds: the encoder 2 ms an
// image, 2 us a patch and 0.2 ns a patch squared; the language model 1 ms a record, 2 us a token
// and 0.1 ns a token squared (T = text + ceil(patches / 4)). What the loader does not know.
bcl::stage_calibration::stage_times
train_micro_batch(std::span<const bcl::multimodal_record> micro_batch) {
    bcl::stage_calibration::stage_times seconds{};
    for (const bcl::multimodal_record& r : micro_batch) {
        auto tokens = static_cast<double>(r.text_tokens);
        for (const std::uint32_t p : r.image_patches) {
            const auto patches = static_cast<double>(p);
            seconds[0] += 2e-3 + 2e-6 * patches + 2e-10 * patches * patches;
            tokens += static_cast<double>((p + 3) / 4);
        }
        seconds[1] += 1e-3 + 2e-6 * tokens + 1e-10 * tokens * tokens;
    }
    return seconds;
}

// Each rank's micro-batch of a step planned into `slots` (one micro-step: B records a rank).
std::vector<std::vector<bcl::multimodal_record>>
micro_batches(std::span<const record> step, std::span<const bcl::plan_slot> slots,
              std::size_t ranks) {
    std::vector<std::vector<bcl::multimodal_record>> out(ranks);
    for (std::size_t i = 0; i < step.size(); ++i) out[slots[i].rank].push_back(step[i].view());
    return out;
}

// The per-stage efficiency, under the true times, of the steps planned by `estimator`'s stage
// costs: the work over R times the sum over steps and stages of the slowest rank.
double true_efficiency(std::span<const std::span<const record>> steps,
                       const bcl::multimodal_cost& estimator, std::size_t ranks,
                       std::size_t batch) {
    bcl::held_stage_planner planner;
    std::vector<bcl::plan_slot> slots(ranks * batch);
    double work = 0.0;
    double objective = 0.0;
    for (const std::span<const record> step : steps) {
        planner.plan(estimator.cost_table(step, &record::view), 2, ranks, batch, {}, slots);
        std::array<double, 2> slowest{};
        for (const auto& mine : micro_batches(step, slots, ranks)) {
            const auto seconds = train_micro_batch(mine);
            for (std::size_t s = 0; s < 2; ++s) {
                slowest[s] = std::max(slowest[s], seconds[s]);
                work += seconds[s];
            }
        }
        objective += slowest[0] + slowest[1];
    }
    return work / (static_cast<double>(ranks) * objective);
}

int main(int argc, char** argv) try {
    if (argc != 2) {
        std::fprintf(stderr, "usage: %s LENGTHS_FILE\n", argv[0]);
        return 2;
    }
    std::vector<record> records;
    for (const std::size_t length : bcl_examples::read_token_counts(argv[1]))
        records.push_back({length, bcl_examples::images_of(records.size())});
    const std::size_t ranks = 8;
    const std::size_t batch = 4;                // records a rank runs in a step
    std::vector<std::span<const record>> steps; // held batches of R * B records, the tail dropped
    for (std::size_t first = 0; first + ranks * batch <= records.size(); first += ranks * batch)
        steps.emplace_back(records.data() + first, ranks * batch);
    // clang-format off
    bcl::calibration_options opt{.forgetting = 0.999};              // a model that does not drift
    bcl::stage_calibration calibration{bcl::multimodal_cost{}, opt}; // prior: docs/stages.md's mix
    bcl::held_stage_planner planner;
    std::vector<bcl::plan_slot> slots(ranks * batch);
    for (std::span<const record> step : steps) {                     // R * B records a step
        const std::vector<double> costs = calibration.estimator().cost_table(step, &record::view);
        planner.plan(costs, 2, ranks, batch, {}, slots);             // a micro-batch a rank
        for (const auto& mine : micro_batches(step, slots, ranks))   // every rank's, rank order
            calibration.observe(calibration.estimator().batch_features(mine),
                                train_micro_batch(mine));            // {encoder s, LM s}
    }
    const auto fit = calibration.summary(); // [0] encoder, [1] language model: fitted, applied
    // clang-format on
    const auto& v = fit[bcl::multimodal_cost::vision].fitted;
    const auto& l = fit[bcl::multimodal_cost::language].fitted;
    std::printf(
        "%zu steps, %llu micro-batches observed; encoder fitted %.3g s/image, %.3g s/patch, "
        "%.3g s/patch^2 (true: 0.002, 2e-06, 2e-10); language model fitted %.3g s/record, "
        "%.3g s/token, %.3g s/token^2 (true: 0.001, 2e-06, 1e-10)\n",
        steps.size(),
        static_cast<unsigned long long>(fit[bcl::multimodal_cost::vision].times_observed), v[0],
        v[1], v[2], l[0], l[1], l[2]);
    const bcl::multimodal_cost true_model{{{{2e-3, 2e-6, 2e-10}, {1e-3, 2e-6, 1e-10}}}, 4};
    std::printf("per-stage efficiency under the true times, R=%zu B=%zu: plans by the prior %.4f, "
                "by the fit %.4f, by the true model %.4f\n",
                ranks, batch, true_efficiency(steps, bcl::multimodal_cost{}, ranks, batch),
                true_efficiency(steps, calibration.estimator(), ranks, batch),
                true_efficiency(steps, true_model, ranks, batch));
} catch (const std::runtime_error& e) { // bad input: the file above, or a bcl::error
    std::fprintf(stderr, "error: %s\n", e.what());
    return 2;
}
