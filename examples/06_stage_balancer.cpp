// This example demonstrates balancing a vision-language model's two stages rank by rank, with no
// communication: each of 8 ranks streams its share of the records (ShareGPT text lengths, with
// synthetic images) through its own bcl::stage_balancer, which hands out batches of exactly B
// whose encoder cost and language-model cost each sit near that stage's mean. A step of a model
// whose stages synchronise separately lasts the sum over stages of the slowest rank in that
// stage; the example prints the per-stage efficiency (the work over R times that sum) of the
// records in their own order, balanced by one summed cost (bcl::balancer), and balanced stage by
// stage.
// Requires: a lengths file (argv[1]), e.g.
// bench/workloads/sharegpt_8k_filtered_llama2_total_tokens.txt. A file it cannot use ends it with
// one line on stderr (file:line: value) and exit code 2.
#include "example_samples.hpp"

#include <bcl/balancer.hpp>
#include <bcl/multimodal_cost.hpp>
#include <bcl/stage_balancer.hpp>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <span>
#include <stdexcept>
#include <vector>

struct record {
    std::uint64_t text_tokens = 0;
    std::vector<std::uint32_t> patches; // one count per image
    [[nodiscard]] bcl::multimodal_record view() const { return {text_tokens, patches}; }
};

constexpr std::size_t rank_count = 8;
constexpr std::size_t batch_size = 16;

// A record's two stage costs: {vision encoder, language model}, docs/stages.md's model.
struct stage_costs {
    bcl::multimodal_cost model{};
    std::array<double, 2> operator()(const record& r) const { return model(r.view()); }
};

// The same summed: the one cost a one-cost balancer sees.
struct summed_cost {
    bcl::multimodal_cost model{};
    double operator()(const record& r) const {
        const auto c = model(r.view());
        return c[0] + c[1];
    }
};

// Every rank's batches, step by step: each rank streams records rank, rank + R, ... through a
// balancer `make()` gives it; steps[t][r] is rank r's t-th batch (the ranks' counts are equal).
template <class Make>
std::vector<std::vector<std::vector<record>>> steps_of(const std::vector<record>& records,
                                                       Make make) {
    std::vector<std::vector<std::vector<record>>> steps;
    for (std::size_t r = 0; r < rank_count; ++r) {
        auto balancer = make();
        std::size_t t = 0;
        const auto take = [&](std::span<record> b) {
            if (steps.size() == t) steps.emplace_back(rank_count);
            steps[t++][r].assign(b.begin(), b.end());
        };
        for (std::size_t i = r; i < records.size(); i += rank_count) {
            balancer.push(records[i]);
            while (auto b = balancer.pop()) take(*b);
        }
        balancer.finish();
        while (auto b = balancer.pop()) take(*b);
    }
    return steps;
}

// The records of every rank in their own order, B at a time.
struct in_order {
    std::vector<record> pending;
    std::vector<record> ready;
    bool finished = false;
    void push(const record& r) { pending.push_back(r); }
    void finish() { finished = true; }
    std::optional<std::span<record>> pop() {
        if (pending.empty() || (!finished && pending.size() < batch_size)) return std::nullopt;
        const std::size_t n = std::min(batch_size, pending.size());
        ready.assign(pending.begin(), pending.begin() + static_cast<std::ptrdiff_t>(n));
        pending.erase(pending.begin(), pending.begin() + static_cast<std::ptrdiff_t>(n));
        return std::span<record>(ready);
    }
};

// The work over R times the sum over steps and stages of the slowest rank.
double per_stage_efficiency(const std::vector<std::vector<std::vector<record>>>& steps) {
    const stage_costs cost;
    double work = 0.0;
    double waited = 0.0;
    for (const auto& step : steps) {
        std::array<double, 2> slowest{};
        for (const auto& mine : step) {
            std::array<double, 2> load{};
            for (const record& r : mine) {
                const auto c = cost(r);
                load[0] += c[0];
                load[1] += c[1];
            }
            for (std::size_t s = 0; s < 2; ++s) {
                slowest[s] = std::max(slowest[s], load[s]);
                work += load[s];
            }
        }
        waited += slowest[0] + slowest[1];
    }
    return work / (static_cast<double>(rank_count) * waited);
}

int main(int argc, char** argv) try {
    if (argc != 2) {
        std::fprintf(stderr, "usage: %s LENGTHS_FILE\n", argv[0]);
        return 2;
    }
    std::vector<record> records;
    for (const std::size_t length : bcl_examples::read_token_counts(argv[1]))
        records.push_back({length, bcl_examples::images_of(records.size())});
    // clang-format off
    const bcl::options opt{.batch_size = batch_size, .lookahead = 8}; // sliding, the default
    const auto by_stage = steps_of(records, [&] {
        return bcl::stage_balancer<record, stage_costs>{stage_costs{}, opt};
    });
    // clang-format on
    const auto summed = steps_of(records, [&] {
        return bcl::balancer<record, summed_cost>{summed_cost{}, opt};
    });
    const auto unbalanced = steps_of(records, [] { return in_order{}; });
    std::printf("%zu steps of R=%zu x B=%zu; per-stage efficiency: in order %.4f, by the summed "
                "cost %.4f, stage by stage %.4f\n",
                by_stage.size(), rank_count, batch_size, per_stage_efficiency(unbalanced),
                per_stage_efficiency(summed), per_stage_efficiency(by_stage));
} catch (const std::runtime_error& e) { // bad input: the file above, or a bcl::error
    std::fprintf(stderr, "error: %s\n", e.what());
    return 2;
}
