// What lines up the batches of ranks that never talk: with equal options and equal record counts,
// every rank starts its rounds at the same batch index whatever its costs (under both policies,
// caps, memory budgets, both emission orders and both batch costs), and costliest first every
// round's full batches leave by descending estimated cost.

#include "support/contract_checks.hpp"
#include "support/distributions.hpp"

#include <bcl/balancer.hpp>
#include <bcl/options.hpp>
#include <bcl/record_model.hpp>

#include <catch2/catch.hpp>

#include <cstddef>
#include <cstdint>
#include <vector>

using namespace bcl_test;

namespace {

struct id_memory {
    double operator()(const rec& r) const noexcept {
        return 1.0 + static_cast<double>(r.id * 37 % 50);
    }
};
using cost_and_memory = decltype(bcl::with_memory(cost_of{}, id_memory{}));

/// For one rank's stream: after each batch popped, the number of rounds run so far; and each
/// batch's estimated cost, with the round it came from.
struct trace {
    std::vector<std::uint64_t> rounds_at_batch;
    std::vector<double> batch_cost;
    std::vector<std::size_t> batch_size;
};

trace run_rank(const cost_list& costs, const bcl::options& opt) {
    bcl::balancer<rec, cost_and_memory> b{bcl::with_memory(cost_of{}, id_memory{}), opt};
    trace t;
    const auto take = [&](std::span<rec> batch) {
        t.rounds_at_batch.push_back(b.stats().windows);
        t.batch_cost.push_back(b.last_batch_cost());
        t.batch_size.push_back(batch.size());
    };
    for (std::size_t i = 0; i < costs.size(); ++i) {
        b.push(rec{i, costs[i]});
        while (auto batch = b.pop()) take(*batch);
    }
    b.finish();
    while (auto batch = b.pop()) take(*batch);
    return t;
}

std::vector<bcl::options> option_sets() {
    std::vector<bcl::options> all;
    for (const auto policy : {bcl::lookahead_policy::tumbling, bcl::lookahead_policy::sliding})
        for (const auto emission :
             {bcl::emission_order::costliest_first, bcl::emission_order::shuffled})
            for (const auto batching : {bcl::batch_cost::packed, bcl::batch_cost::padded})
                for (int extra = 0; extra < 3; ++extra) {
                    bcl::options o{.batch_size = 4, .lookahead = 5, .seed = 9};
                    o.policy = policy;
                    o.emission = emission;
                    o.batching = batching;
                    if (extra == 1)
                        o.cap = {.kind = bcl::cap_kind::quantile, .quantile = 0.9, .warmup = 20};
                    // A budget that binds for packed batches (sums of 4 memories of about 25, up to
                    // 200) and fits every padded one (4 times the largest, 200).
                    if (extra == 2)
                        o.memory_budget = batching == bcl::batch_cost::packed ? 150.0 : 200.0;
                    all.push_back(o);
                }
    return all;
}

} // namespace

TEST_CASE("Ranks with equal options and record counts start every round at the same batch "
          "index, whatever their costs",
          "[alignment]") {
    for (const bcl::options& opt : option_sets()) {
        for (const std::size_t n :
             {std::size_t{0}, std::size_t{7}, std::size_t{193}, std::size_t{1000}}) {
            std::vector<trace> ranks;
            std::uint64_t seed = 0;
            for (const distribution& dist : all_distributions()) // a rank per distribution
                ranks.push_back(run_rank(dist.generate(n, case_seed(++seed)), opt));
            INFO("N " << n << " policy " << static_cast<int>(opt.policy) << " emission "
                      << static_cast<int>(opt.emission) << " batching "
                      << static_cast<int>(opt.batching) << " cap " << static_cast<int>(opt.cap.kind)
                      << " budget " << opt.memory_budget);
            for (const trace& t : ranks)
                REQUIRE(t.rounds_at_batch == ranks.front().rounds_at_batch);
        }
    }
}

TEST_CASE("Costliest first, each round's full batches leave by descending estimated cost",
          "[alignment]") {
    for (const bcl::options& base : option_sets()) {
        if (base.emission != bcl::emission_order::costliest_first) continue;
        std::uint64_t seed = 100;
        for (const distribution& dist : all_distributions()) {
            const trace t = run_rank(dist.generate(777, case_seed(++seed)), base);
            INFO(dist.name);
            for (std::size_t j = 1; j < t.batch_cost.size(); ++j) {
                const bool same_round = t.rounds_at_batch[j] == t.rounds_at_batch[j - 1];
                if (same_round && t.batch_size[j] == base.batch_size)
                    REQUIRE(t.batch_cost[j] <= t.batch_cost[j - 1]);
            }
        }
    }
}
