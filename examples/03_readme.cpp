// This example demonstrates the README's program: balance real ShareGPT conversations into
// batches of 16 (the default, sliding policy) and print what it achieved.
// Requires: a lengths file (argv[1]), e.g. bench/workloads/sharegpt_8k_filtered_llama2_total_tokens.txt.
#include <bcl/bcl.hpp>
#include <cstdio>
#include <fstream>
#include <vector>

struct sample { std::vector<int> tokens; };

std::vector<sample> load_samples(const char* path) {
    std::vector<sample> samples;
    std::ifstream in(path);
    for (std::size_t length = 0; in >> length;) samples.push_back({std::vector<int>(length)});
    return samples;
}
void train_step(std::span<sample> batch) { (void)batch; }

int main(int argc, char** argv) {
    if (argc < 2) return 2;
    std::vector<sample> samples = load_samples(argv[1]);     // any input range of records
    auto cost = bcl::affine_quadratic(0.0, 1.0, 1.0 / 24576, // a + b*L + c*L^2 ...
        [](const sample& s) { return s.tokens.size(); });  // ... of the token count L
    bcl::options opt{.batch_size = 16, .lookahead = 8};     // sliding policy: the default
    auto batches = bcl::balance(std::move(samples), cost, opt); // records are moved, never copied
    for (std::span<sample> batch : batches)                   // 16 records each (the last: the rest)
        train_step(batch);
    const bcl::statistics& s = batches.balancer().stats();
    std::printf("%llu batches, batch-cost cv %.3f, max delay %llu batches\n",
                (unsigned long long)s.batches, s.batch_cost.cv(),
                (unsigned long long)s.max_delay_batches);
}
