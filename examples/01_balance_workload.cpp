// This example demonstrates bcl::balance on a real workload: it reads record lengths (one per
// line), balances them into batches of 16 with a lookahead of 8 batches under the cost
// L + L^2/24576 (a 7B-transformer FLOPs proxy) under both lookahead policies, and prints how much
// the per-batch cost variability falls against plain consecutive batches of the same records.
// Requires: a lengths file (argv[1]); the bundled ones are in bench/workloads/. Optional argv[2]
// is the batch size, argv[3] the lookahead.

#include <bcl/bcl.hpp>

#include <fmt/core.h>

#include <cstddef>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <string>
#include <vector>

namespace {

struct sample {
    std::size_t id;
    double tokens;
};

std::vector<sample> read_lengths(const std::string& path) {
    std::ifstream in(path);
    if (!in) throw std::runtime_error("cannot open " + path);
    std::vector<sample> samples;
    double length = 0;
    while (in >> length) samples.push_back({samples.size(), length});
    if (!in.eof()) throw std::runtime_error(path + ": line " + std::to_string(samples.size() + 1) +
                                            " is not a number");
    return samples;
}

} // namespace

int main(int argc, char** argv) try {
    if (argc < 2) {
        fmt::print(stderr, "usage: {} LENGTHS_FILE [BATCH_SIZE [LOOKAHEAD]]\n", argv[0]);
        return 2;
    }
    std::vector<sample> samples = read_lengths(argv[1]);
    const bcl::options opt{.batch_size = argc > 2 ? std::stoul(argv[2]) : 16,
                           .lookahead = argc > 3 ? std::stoul(argv[3]) : 8};
    const auto cost = bcl::affine_quadratic(0.0, 1.0, 1.0 / 24576, &sample::tokens);

    // Before: consecutive batches in file order, what a plain loader would emit.
    bcl::running_stats before;
    for (std::size_t first = 0; first + opt.batch_size <= samples.size(); first += opt.batch_size) {
        double batch_cost = 0;
        for (std::size_t i = first; i < first + opt.batch_size; ++i) batch_cost += cost(samples[i]);
        before.add(batch_cost);
    }

    fmt::print("{} records, batch size {}, lookahead {} batches\n", samples.size(),
               opt.batch_size, opt.lookahead);
    fmt::print("{:<24}{:>14}{:>10}{:>10}{:>14}{:>11}\n", "", "mean cost", "cv", "cv red.",
               "max/mean", "max delay");
    fmt::print("{:<24}{:>14.1f}{:>10.4f}{:>10}{:>14.3f}{:>11}\n", "consecutive batches",
               before.mean(), before.cv(), "", before.max() / before.mean(), 0);

    // After: the same records through bcl, under each policy (sliding is the default).
    for (const auto policy : {bcl::lookahead_policy::tumbling, bcl::lookahead_policy::sliding}) {
        bcl::options with_policy = opt;
        with_policy.policy = policy;
        auto batches = bcl::balance(samples, cost, with_policy);
        for (auto&& batch : batches) (void)batch;
        const bcl::statistics& after = batches.balancer().stats();
        fmt::print("{:<24}{:>14.1f}{:>10.4f}{:>9.1f}%{:>14.3f}{:>11}\n",
                   policy == bcl::lookahead_policy::sliding ? "bcl sliding (default)" : "bcl tumbling",
                   after.batch_cost.mean(), after.batch_cost.cv(),
                   100.0 * (1.0 - after.batch_cost.cv() / before.cv()),
                   after.batch_cost.max() / after.batch_cost.mean(), after.max_delay_batches);
    }
    return 0;
} catch (const std::exception& e) {
    fmt::print(stderr, "error: {}\n", e.what());
    return 1;
}
