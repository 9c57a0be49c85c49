// This example demonstrates a project of one's own that uses bcl's libtorch samplers: its
// CMakeLists.txt is the one docs/torch.md shows. It runs both samplers for two simulated ranks
// over a small cost table and checks that every index comes out once.
// Requires: libtorch (find_package(Torch)) and bcl (installed, or -DBCL_SOURCE_DIR=<bcl's tree>).

#include <bcl/bcl.hpp>
#include <bcl/torch/balanced_sampler.hpp>
#include <bcl/torch/distributed_balanced_sampler.hpp>

#include <torch/torch.h>

#include <algorithm>
#include <cstddef>
#include <cstdio>
#include <vector>

int main() {
    constexpr std::size_t n = 1000;
    constexpr std::size_t ranks = 2;
    std::vector<double> costs(n);
    for (std::size_t i = 0; i < n; ++i) costs[i] = 10.0 + double(i * 7919 % 500);

    // The global plan: every rank holds the table and plans every rank's batches alike.
    std::vector<std::size_t> global;
    for (std::size_t rank = 0; rank < ranks; ++rank) {
        bcl::torch::distributed_balanced_sampler sampler(costs, 16, ranks, rank);
        while (auto batch = sampler.next(sampler.batch_size()))
            global.insert(global.end(), batch->begin(), batch->end());
    }
    // Rank-local: each rank balances the share its DistributedRandomSampler draws.
    std::vector<std::size_t> local;
    for (std::size_t rank = 0; rank < ranks; ++rank) {
        bcl::torch::balanced_sampler sampler(
            torch::data::samplers::DistributedRandomSampler(n, ranks, rank),
            [&costs](std::size_t i) { return costs[i]; }, bcl::options{.batch_size = 16});
        while (auto batch = sampler.next(sampler.batch_size()))
            local.insert(local.end(), batch->begin(), batch->end());
    }
    std::sort(global.begin(), global.end());
    std::sort(local.begin(), local.end());
    bool once = global.size() == n && local == global;
    for (std::size_t i = 0; once && i < n; ++i) once = global[i] == i;
    std::printf("bcl %s with libtorch: %zu indices, every one once in both samplers: %s\n",
                BCL_VERSION_STRING, n, once ? "yes" : "no");
    return once ? 0 : 1;
}
