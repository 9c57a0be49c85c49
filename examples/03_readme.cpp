// This example demonstrates the README's program: balance real ShareGPT conversations into
// batches of 16 (the default, sliding policy) and print what it achieved.
// Requires: a lengths file (argv[1]), e.g.
// bench/workloads/sharegpt_8k_filtered_llama2_total_tokens.txt. A file it cannot use ends it with
// one line on stderr (file:line: value) and exit code 2.
#include "example_samples.hpp"

#include <bcl/bcl.hpp>

#include <cstddef>
#include <cstdio>
#include <random>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

struct sample {
    std::vector<int> tokens;
};

// An epoch of records from a lengths file (example_samples.hpp), each holding its tokens, shuffled
// as a loader's sampler hands them out: a seeded Fisher-Yates over std::mt19937_64, whose output
// the standard fixes, so the order is the same everywhere.
std::vector<sample> load_samples(const std::string& path) {
    std::vector<sample> samples;
    for (const std::size_t length : bcl_examples::read_token_counts(path))
        samples.push_back({std::vector<int>(length)});
    std::mt19937_64 random(2024);
    for (std::size_t i = samples.size() - 1; i > 0; --i) // never empty: read_token_counts throws
        std::swap(samples[i], samples[random() % (i + 1)]);
    return samples;
}
void train_step(std::span<sample> batch) {
    (void)batch;
}

int main(int argc, char** argv) try {
    if (argc != 2) {
        std::fprintf(stderr, "usage: %s LENGTHS_FILE\n", argv[0]);
        return 2;
    }
    // clang-format off
    std::vector<sample> samples = load_samples(argv[1]);     // an epoch of records, shuffled
    auto cost = bcl::affine_quadratic(0.0, 1.0, 1.0 / 24576, // a + b*L + c*L^2 ...
        [](const sample& s) { return s.tokens.size(); });  // ... of the token count L
    bcl::options opt{.batch_size = 16, .lookahead = 8};     // sliding policy: the default
    opt.mean_cost = bcl::stream_mean_cost(samples, cost, opt.cap); // the epoch's mean cost
    auto batches = bcl::balance(std::move(samples), cost, opt); // records are moved, never copied
    for (std::span<sample> batch : batches)                   // 16 records each (the last: the rest)
        train_step(batch);
    const bcl::statistics& s = batches.balancer().stats();
    std::printf("%llu batches, batch-cost cv %.3f, max delay %llu batches\n",
                (unsigned long long)s.batches, s.batch_cost.cv(),
                (unsigned long long)s.max_delay_batches);
    // clang-format on
} catch (const std::runtime_error& e) { // bad input: the file above, or a bcl::error
    std::fprintf(stderr, "error: %s\n", e.what());
    return 2;
}
