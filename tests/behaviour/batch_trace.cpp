// bcl-batch-trace: prints one line per configuration with a digest of every batch a balancer
// emits (record identities in order, batch costs, statistics, the records a saved state holds)
// over a grid of options, estimators and workloads. It uses the public API only, so the same source
// builds against any revision of include/; scripts/compare_batches.sh builds it against two
// revisions and requires identical output: the proof that a restructuring left behaviour unchanged.

#include <bcl/bcl.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <optional>
#include <random>
#include <string>
#include <vector>

namespace {

struct rec {
    std::uint32_t id = 0;
    double len = 0.0;
};

// FNV-1a over the bytes of what the balancer emitted.
struct digest {
    std::uint64_t h = 1469598103934665603ULL;
    void add(const void* p, std::size_t n) {
        const auto* b = static_cast<const unsigned char*>(p);
        for (std::size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 1099511628211ULL;
    }
    void add(std::uint64_t v) { add(&v, sizeof v); }
    void add(double v) { add(&v, sizeof v); }
    void add(const std::string& s) { add(s.data(), s.size()); }
};

std::vector<double> workload(int kind, std::size_t n, std::uint64_t seed) {
    std::mt19937_64 g(seed);
    std::lognormal_distribution<double> heavy(5.0, 1.2);
    std::uniform_real_distribution<double> flat(1.0, 500.0);
    std::vector<double> v(n);
    for (std::size_t i = 0; i < n; ++i) {
        switch (kind) {
        case 0:
            v[i] = std::floor(heavy(g)) + 1.0;
            break; // heavy tail
        case 1:
            v[i] = std::floor(flat(g));
            break; // light
        case 2:
            v[i] = 100.0;
            break; // all equal
        case 3:
            v[i] = i % 7 == 0 ? 0.0 : std::floor(flat(g));
            break; // zeros
        case 4:
            v[i] = i == n / 3 ? 1e7 : std::floor(flat(g));
            break; // one giant outlier
        default:
            v[i] = static_cast<double>(i % 997) + 1.0;
            break; // sorted runs
        }
    }
    return v;
}

// Feeds `lengths` through `b`, popping whenever it can; half way saves the state to bytes and
// continues in a balancer rebuilt from them (every `restart` records, if nonzero). Calibrating
// balancers are told a time for every batch, one batch late.
template <class Balancer, class Make>
void drive(Make make, const std::vector<double>& lengths, std::size_t restart, bool calibrate,
           bool two_epochs, digest& d) {
    std::optional<Balancer> held;
    held.emplace(make());
    std::uint64_t told = 0;
    std::vector<std::uint64_t> emitted_cost;
    auto take = [&](auto batch) {
        d.add(std::uint64_t{batch.size()});
        double t = 0.0;
        for (const rec& r : batch) {
            d.add(std::uint64_t{r.id});
            d.add(r.len);
            t += 1.0 + 0.5 * r.len + r.len * r.len / 4096.0;
        }
        d.add(held->last_batch_cost());
        if constexpr (requires(Balancer & x) { x.observe(0, 0.0); }) {
            if (calibrate) {
                if (held->stats().batches >= 2) held->observe(told++, t * 1.3);
            }
        }
    };
    const int epochs = two_epochs ? 2 : 1;
    for (int epoch = 0; epoch < epochs; ++epoch) {
        if (epoch == 1) {
            held->next_epoch();
            told = 0;
        }
        for (std::size_t i = 0; i < lengths.size(); ++i) {
            if (restart != 0 && i % restart == restart / 2 && i != 0) {
                if constexpr (std::is_copy_constructible_v<rec>) {
                    auto state = held->save();
                    // The records it holds, not its bytes' length: the behaviour, not the format.
                    const std::string bytes = state.to_bytes();
                    d.add(std::uint64_t{state.pending.size()});
                    auto again = Balancer::state::from_bytes(bytes, state.pending);
                    held.reset();
                    held.emplace(make(std::move(again)));
                }
            }
            while (!held->can_push())
                if (auto batch = held->pop()) take(*batch);
            held->push(rec{
                static_cast<std::uint32_t>(i + static_cast<std::size_t>(epoch) * lengths.size()),
                lengths[i]});
            if (i % 3 == 0)
                if (auto batch = held->pop()) take(*batch);
        }
        held->finish();
        while (auto batch = held->pop()) take(*batch);
        const bcl::statistics& s = held->stats();
        d.add(s.batches);
        d.add(s.records_in);
        d.add(s.records_out);
        d.add(s.records_dropped);
        d.add(s.records_capped);
        d.add(s.windows);
        d.add(s.batch_cost.mean());
        d.add(s.batch_cost.max());
        d.add(s.gap_to_lower_bound.mean());
        d.add(s.max_delay_batches);
        d.add(s.delay_batches.mean());
        d.add(s.peak_batch_memory);
        for (const std::uint64_t c : s.delay_histogram) d.add(c);
    }
}

} // namespace

int main() {
    std::size_t configs = 0;
    for (int kind = 0; kind < 6; ++kind)
        for (const std::size_t batch_size : {1U, 3U, 16U})
            for (const std::size_t lookahead : {1U, 4U, 8U})
                for (const auto policy :
                     {bcl::lookahead_policy::tumbling, bcl::lookahead_policy::sliding})
                    for (const auto emission :
                         {bcl::emission_order::costliest_first, bcl::emission_order::shuffled})
                        for (const auto batching :
                             {bcl::batch_cost::packed, bcl::batch_cost::padded})
                            for (int cap = 0; cap < 3; ++cap)
                                for (int variant = 0; variant < 4; ++variant) {
                                    bcl::options opt{.batch_size = batch_size,
                                                     .lookahead = lookahead,
                                                     .drop_last = variant == 1,
                                                     .seed = 7};
                                    opt.policy = policy;
                                    opt.emission = emission;
                                    opt.batching = batching;
                                    opt.largest_first = variant == 2;
                                    if (policy == bcl::lookahead_policy::sliding && variant == 3) {
                                        opt.buffer_windows = 3;
                                        opt.max_age = 4;
                                        opt.mean_cost = 2000.0;
                                    }
                                    if (cap == 1) {
                                        opt.cap.kind = bcl::cap_kind::fixed;
                                        opt.cap.value = 20000.0;
                                    } else if (cap == 2) {
                                        opt.cap.kind = bcl::cap_kind::quantile;
                                        opt.cap.quantile = 0.95;
                                        opt.cap.warmup = 50;
                                    }
                                    const std::size_t n = 700 + static_cast<std::size_t>(kind) * 37;
                                    const std::vector<double> lengths =
                                        workload(kind, n, 11 + static_cast<std::uint64_t>(kind));
                                    const std::size_t restart = variant == 0 ? 0 : 251;
                                    digest d;
                                    const auto cost =
                                        bcl::affine_quadratic(1.0, 0.5, 1.0 / 4096, &rec::len);
                                    std::string what;
                                    try {
                                        if (variant == 2 || variant == 3) {
                                            // memory estimator, budget on the memory of a batch
                                            bcl::options m = opt;
                                            // a budget that binds: a little above the mean
                                            // batch, never below the largest record
                                            double most = 0.0, total = 0.0;
                                            for (const double x : lengths) {
                                                most = std::max(most, x);
                                                total += x;
                                            }
                                            const double mean_batch =
                                                total / static_cast<double>(lengths.size()) *
                                                static_cast<double>(batch_size);
                                            m.memory_budget =
                                                variant == 2 ? 0.0
                                                : batching == bcl::batch_cost::padded
                                                    ? most * static_cast<double>(batch_size)
                                                    : std::max(most, 1.15 * mean_batch);
                                            auto est = bcl::with_memory(cost, &rec::len);
                                            using B = bcl::balancer<rec, decltype(est)>;
                                            drive<B>(
                                                [&](auto&&... s) {
                                                    return B(est, m, std::move(s)...);
                                                },
                                                lengths, restart, false, variant == 3, d);
                                        } else if (variant == 1 && cap != 2) {
                                            auto est = bcl::calibrated_affine_quadratic(
                                                1.0, 0.5, 1.0 / 4096, &rec::len);
                                            using B = bcl::balancer<rec, decltype(est)>;
                                            drive<B>(
                                                [&](auto&&... s) {
                                                    return B(est, opt, std::move(s)...);
                                                },
                                                lengths, restart, true, true, d);
                                        } else {
                                            using B = bcl::balancer<rec, decltype(cost)>;
                                            drive<B>(
                                                [&](auto&&... s) {
                                                    return B(cost, opt, std::move(s)...);
                                                },
                                                lengths, restart, false, variant == 0, d);
                                        }
                                        what = "ok";
                                    } catch (const bcl::error& e) {
                                        what = std::string("error: ") + e.what();
                                    }
                                    d.add(what);
                                    std::printf("%d %zu %zu %d %d %d %d %d %016llx %s\n", kind,
                                                batch_size, lookahead, static_cast<int>(policy),
                                                static_cast<int>(emission),
                                                static_cast<int>(batching), cap, variant,
                                                static_cast<unsigned long long>(d.h), what.c_str());
                                    ++configs;
                                }
    std::fprintf(stderr, "%zu configurations\n", configs);
    return 0;
}
