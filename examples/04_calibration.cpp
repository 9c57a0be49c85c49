// This example demonstrates online cost calibration: a loader that only knows token counts
// (a tokens-only prior) balances real ShareGPT conversations for a trainer whose step time also
// has an attention term it was never told about. The trainer reports each batch's compute time;
// the balancer fits the true model from those times and balances by it.
// Requires: a lengths file (argv[1]), e.g.
// bench/workloads/sharegpt_8k_filtered_llama2_total_tokens.txt. A file it cannot use ends it with
// one line on stderr (file:line: value) and exit code 2.
#include "example_samples.hpp"

#include <bcl/bcl.hpp>
#include <bcl/calibrated_cost.hpp>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <span>
#include <stdexcept>
#include <vector>

struct sample {
    std::size_t tokens = 0;
};

// The trainer's real compute time for a batch, in seconds: 1 ms per sequence, 2 us per token and
// an attention term of 1e-9 s per token squared (what the loader does not know).
double train_step(std::span<const sample> batch) {
    double seconds = 0.0;
    for (const sample& s : batch) {
        const auto length = static_cast<double>(s.tokens);
        seconds += 1e-3 + 2e-6 * length + 1e-9 * length * length;
    }
    return seconds;
}

int main(int argc, char** argv) try {
    if (argc != 2) {
        std::fprintf(stderr, "usage: %s LENGTHS_FILE\n", argv[0]);
        return 2;
    }
    std::vector<sample> samples; // in file order (example_samples.hpp)
    for (const std::size_t length : bcl_examples::read_token_counts(argv[1]))
        samples.push_back({length});
    // clang-format off
    auto cost = bcl::calibrated_affine_quadratic(0.0, 1.0, 0.0, &sample::tokens); // prior: tokens only
    bcl::options opt{.batch_size = 16, .lookahead = 8};
    opt.calibration.forgetting = 0.999;                         // a model that does not drift
    auto batches = bcl::balance(samples, cost, opt);
    std::uint64_t index = 0;                                    // batches emitted so far
    for (std::span<sample> batch : batches) {
        const double seconds = train_step(batch);               // time the rank's own compute
        batches.balancer().observe(index++, seconds);           // ... and tell the balancer
    }
    // clang-format on
    const bcl::calibration_summary<3> fit = batches.balancer().calibration();
    std::printf("%llu batches, %llu times observed; fitted a=%.3g s, b=%.3g s/token, c=%.3g "
                "s/token^2 (true: 0.001, 2e-06, 1e-09)\n",
                static_cast<unsigned long long>(index),
                static_cast<unsigned long long>(fit.times_observed), fit.fitted[0], fit.fitted[1],
                fit.fitted[2]);
} catch (const std::runtime_error& e) { // bad input: the file above, or a bcl::error
    std::fprintf(stderr, "error: %s\n", e.what());
    return 2;
}
