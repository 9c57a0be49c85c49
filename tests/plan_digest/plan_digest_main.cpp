// plan_digest: plans a fixed set of windows with bcl::global_planner and prints one digest over
// every plan and summary. Built with different compilers, standard libraries and floating-point
// flags (scripts/test_plan_digest.sh), it must print the same line every time: the global plan is
// bit-identical everywhere, which is what lets every rank compute it alone.
//
// The windows themselves are made with integer operations and std::bit_cast only (SplitMix64,
// bit patterns of doubles), so generating them cannot differ between builds either. They cover
// several shapes (short windows included), packed and padded batching, levelling on and off, a
// cap, and costs with ties, zeros, subnormals, 1e-300, 1e120 (bcl::max_estimate) and heavy tails;
// then held batches (bcl::held_batch_planner), whose plan may be verl's split, and token-budget
// plans (bcl::token_planner: held batches and stream windows, groups, records alone above T),
// and, on a line of their own, plans of stage costs (bcl::held_stage_planner and
// bcl::stage_window_planner, D = 2 to 4).
//
//   plan_digest            prints "windows <count> records <count> digest <hex>", then
//                          "stage plans <count> records <count> digest <hex>"

#include <bcl/cost_estimator.hpp>
#include <bcl/global_plan.hpp>
#include <bcl/held_batch.hpp>
#include <bcl/keyed_order.hpp>
#include <bcl/stage_plan.hpp>
#include <bcl/token_plan.hpp>

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <vector>

namespace {

/// SplitMix64: fully specified, integers only.
class splitmix {
public:
    explicit splitmix(std::uint64_t seed) : m_state(seed) {}
    std::uint64_t next() {
        std::uint64_t z = (m_state += 0x9e3779b97f4a7c15ULL);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
        return z ^ (z >> 31);
    }
    std::uint64_t below(std::uint64_t bound) { return next() % bound; } // a bias is harmless here

private:
    std::uint64_t m_state;
};

/// A double with a biased exponent field in [lowest, lowest + span) and random fraction bits.
/// Each draw is its own statement: the order in which function arguments are evaluated is
/// unspecified, and two draws in one call would differ between compilers.
double make_double(splitmix& rng, std::uint64_t lowest, std::uint64_t span) {
    const std::uint64_t exponent_field = lowest + rng.below(span);
    const std::uint64_t fraction = rng.next() & ((std::uint64_t{1} << 52) - 1);
    return std::bit_cast<double>((exponent_field << 52) | fraction);
}

const std::uint64_t largest_bits = std::bit_cast<std::uint64_t>(bcl::max_estimate);
const double tiny = std::bit_cast<double>(std::uint64_t{0x01a56e1fc2f8f359}); // 1e-300

/// One cost of the given kind.
double draw(splitmix& rng, unsigned kind, const std::vector<double>& tie_values) {
    switch (kind) {
    case 0: // "lengths": 2^0 .. 2^20 with random fractions, a light tail
        return make_double(rng, 1023, 21);
    case 1: // heavy tail: exponents over 60 binades
        return make_double(rng, 1023, 60);
    case 2: // ties: a few values only
        return tie_values[rng.below(tie_values.size())];
    case 3: // zeros with a few ones and subnormals
        return rng.below(4) == 0 ? 1.0 : rng.below(3) == 0 ? make_double(rng, 0, 1) : 0.0;
    case 4: // 1e-300 beside 1e120 and everything between
        return rng.below(3) == 0   ? tiny
               : rng.below(2) == 0 ? bcl::max_estimate
                                   : std::bit_cast<double>(rng.below(largest_bits) + 1);
    default: // around 1e120: the largest exponents allowed
        return std::bit_cast<double>(largest_bits - rng.below(std::uint64_t{1} << 56));
    }
}

struct digest_state {
    std::uint64_t value = 0;
    std::uint64_t windows = 0;
    std::uint64_t records = 0;
};

// The plan (its own digest), then every integer of the summary, into the running digest.
void absorb(digest_state& d, const std::vector<bcl::plan_slot>& out, const bcl::plan_summary& s) {
    d.value = bcl::plan_digest(out, d.value);
    const bcl::plan_slot figures[] = {
        {static_cast<std::uint32_t>(s.objective), static_cast<std::uint32_t>(s.objective >> 32)},
        {static_cast<std::uint32_t>(s.total), static_cast<std::uint32_t>(s.total >> 32)},
        {static_cast<std::uint32_t>(s.lower_bound),
         static_cast<std::uint32_t>(s.lower_bound >> 32)},
        {static_cast<std::uint32_t>(s.heaviest), static_cast<std::uint32_t>(s.heaviest >> 32)},
        {static_cast<std::uint32_t>(s.scale), static_cast<std::uint32_t>(s.steps)},
    };
    d.value = bcl::plan_digest(figures, d.value);
    ++d.windows;
    d.records += out.size();
}

// n costs of one kind (draw), with three tie values of their own.
std::vector<double> draw_costs(splitmix& rng, std::size_t n) {
    const auto kind = static_cast<unsigned>(rng.below(6));
    std::vector<double> ties;
    for (int i = 0; i < 3; ++i) ties.push_back(make_double(rng, 1020, 8));
    std::vector<double> costs(n);
    for (double& c : costs) c = draw(rng, kind, ties);
    return costs;
}

void plan_one(digest_state& d, bcl::global_planner& planner, splitmix& rng, std::size_t ranks,
              std::size_t steps, std::size_t batch, bool full) {
    const std::size_t per_rank = full ? steps * batch : 1 + rng.below(steps * batch);
    const std::size_t n = ranks * per_rank;
    const std::vector<double> costs = draw_costs(rng, n);
    bcl::plan_options opt;
    opt.batching = rng.below(4) == 0 ? bcl::batch_cost::padded : bcl::batch_cost::packed;
    opt.level_steps = rng.below(4) != 0;
    if (rng.below(5) == 0 && n > 0) opt.cap = costs[rng.below(n)]; // a cap some costs exceed
    std::vector<bcl::plan_slot> out(n);
    absorb(d, out, planner.plan(costs, {ranks, steps, batch}, opt, out));
}

// A held batch of R * m records (m from 1 to 5 micro-batches' worth, often with a short last
// micro-batch), whose plan may be verl's split where that is lighter.
void plan_held(digest_state& d, bcl::held_batch_planner& planner, splitmix& rng, std::size_t ranks,
               std::size_t batch) {
    const std::size_t n = ranks * (1 + rng.below(5 * batch));
    const std::vector<double> costs = draw_costs(rng, n);
    bcl::plan_options opt;
    opt.level_steps = rng.below(4) != 0;
    std::vector<bcl::plan_slot> out(n);
    absorb(d, out, planner.plan(costs, ranks, batch, opt, out));
}

// A token plan: a held batch (K of them pooled, groups kept to a rank or a micro-batch, records
// above T alone, default or given costs, empty micro-batches allowed or not, lengths padded to a
// multiple or not) or a stream's windows, its slots and every integer of its
// summary into the running digest.
void plan_tokens(digest_state& d, bcl::token_planner& planner, splitmix& rng) {
    const bcl::token_budget budget{.ranks = 1 + rng.below(6),
                                   .max_tokens = 16 + rng.below(5000),
                                   .multiple_of = 1 + rng.below(2)};
    const std::size_t steps = 1 + rng.below(3);
    const std::size_t n = budget.ranks * steps * budget.multiple_of * (2 + rng.below(8));
    std::vector<std::uint64_t> tokens(n);
    for (std::uint64_t& t : tokens) t = rng.below(budget.max_tokens + (rng.below(50) == 0 ? 9 : 1));
    std::vector<double> costs;
    if (rng.below(2) == 0) costs = draw_costs(rng, n);
    bcl::token_plan_options opt;
    opt.oversized_alone = true;
    opt.allow_empty_micro_batches = rng.below(4) == 0;
    opt.pad_to_multiple_of = rng.below(3) == 0 ? 1 + rng.below(8) : 1;
    std::vector<std::uint64_t> groups;
    if (rng.below(4) == 0) {
        groups.resize(n);
        for (std::uint64_t& g : groups) g = rng.below(n / 2 + 1);
        opt.group_together = rng.below(2) == 0;
    }
    std::vector<bcl::micro_slot> out(n);
    bcl::token_plan_summary s;
    try {
        if (rng.below(2) == 0) {
            s = planner.plan_held(tokens, costs, groups, budget, steps, opt, out);
        } else {
            s = planner.plan_stream(tokens, costs, budget, budget.multiple_of, steps, true, opt,
                                    out);
        }
    } catch (const bcl::error&) {
        d.value = bcl::detail::splitmix64(d.value ^ 0xe7707).next(); // refused alike everywhere
        return;
    }
    d.value =
        bcl::token_plan_digest(std::span<const bcl::micro_slot>(out).first(s.records), d.value);
    const bcl::plan_slot figures[] = {
        {static_cast<std::uint32_t>(s.objective), static_cast<std::uint32_t>(s.objective >> 32)},
        {static_cast<std::uint32_t>(s.total), static_cast<std::uint32_t>(s.total >> 32)},
        {static_cast<std::uint32_t>(s.records), static_cast<std::uint32_t>(s.micro_steps)},
        {static_cast<std::uint32_t>(s.micro_steps_bound), static_cast<std::uint32_t>(s.oversized)},
        {static_cast<std::uint32_t>(s.padding), static_cast<std::uint32_t>(s.steps)},
    };
    d.value = bcl::plan_digest(figures, d.value);
    ++d.windows;
    d.records += s.records;
}

// A plan of stage costs: a held batch (bcl::held_stage_planner) or a window of the global plan
// (bcl::stage_window_planner) of D = 2 to 4 stages, each stage's costs drawn as one-number costs
// are (some stages all zero, some heavy-tailed), its slots and its integers into the digest.
void plan_stages(digest_state& d, bcl::held_stage_planner& held, bcl::stage_window_planner& window,
                 splitmix& rng, std::size_t ranks, std::size_t steps, std::size_t batch) {
    const std::size_t stages = 2 + rng.below(3);
    const bool whole = rng.below(2) == 0;
    const std::size_t n = whole ? ranks * (1 + rng.below(steps * batch)) : ranks * steps * batch;
    std::vector<double> costs(n * stages);
    for (std::size_t s = 0; s < stages; ++s) {
        const std::vector<double> column = draw_costs(rng, n);
        for (std::size_t i = 0; i < n; ++i) costs[i * stages + s] = column[i];
    }
    std::vector<bcl::plan_slot> out(n);
    bcl::stage_plan_summary s;
    if (whole) {
        s = held.plan(costs, stages, ranks, batch, {}, out);
    } else {
        s = window.plan(costs, stages, {ranks, steps, batch}, {}, out);
    }
    d.value = bcl::plan_digest(out, d.value);
    const bcl::plan_slot figures[] = {
        {static_cast<std::uint32_t>(s.micro_steps), static_cast<std::uint32_t>(s.steps_restaged)},
        {static_cast<std::uint32_t>(s.steps_from_stage + 1), static_cast<std::uint32_t>(stages)},
    };
    d.value = bcl::plan_digest(figures, d.value);
    ++d.windows;
    d.records += n;
}

} // namespace

int main() {
    splitmix rng(20240601);
    bcl::global_planner planner;
    digest_state d;
    constexpr std::size_t small_ranks[] = {1, 2, 3, 5, 8};
    constexpr std::size_t small_steps[] = {1, 2, 3, 8};
    constexpr std::size_t small_batches[] = {1, 2, 4, 7, 16};
    for (int i = 0; i < 10000; ++i) {
        const std::size_t ranks = small_ranks[rng.below(5)];
        const std::size_t steps = small_steps[rng.below(4)];
        const std::size_t batch = small_batches[rng.below(5)];
        plan_one(d, planner, rng, ranks, steps, batch, i % 2 == 0);
    }
    // A few large windows: the radix passes, the winner tree's depth, many levelled packs.
    constexpr std::size_t large_ranks[] = {64, 256, 1024};
    for (int i = 0; i < 12; ++i) plan_one(d, planner, rng, large_ranks[i % 3], 8, 16, i % 4 != 3);
    // Held batches: the global plan of one window, or verl's split where that is lighter.
    bcl::held_batch_planner held;
    for (int i = 0; i < 2000; ++i) {
        // One draw per statement: the order of a call's arguments is the compiler's choice.
        const std::size_t ranks = small_ranks[rng.below(5)];
        const std::size_t batch = small_batches[rng.below(5)];
        plan_held(d, held, rng, ranks, batch);
    }
    // Token-budget plans: held batches and stream windows.
    bcl::token_planner tokens;
    for (int i = 0; i < 2000; ++i) plan_tokens(d, tokens, rng);
    // Keyed orders: sizes around powers of two (the network's widths), every position of the
    // small ones and a window of the large ones, each index two 32-bit halves of a slot.
    for (int i = 0; i < 400; ++i) {
        // One draw per statement, as above.
        const std::uint64_t power = std::uint64_t{1} << rng.below(40);
        const std::uint64_t n = power + rng.below(3) - 1;
        const std::uint64_t seed = rng.next();
        const std::uint64_t epoch = rng.below(100);
        const bcl::keyed_order order(n, seed, epoch);
        const std::uint64_t count = n < 5000 ? n : 5000;
        const std::uint64_t first = rng.below(n - count + 1);
        std::vector<bcl::plan_slot> indices(count);
        for (std::uint64_t k = 0; k < count; ++k) {
            const std::uint64_t x = order.at(first + k);
            indices[k] = {static_cast<std::uint32_t>(x), static_cast<std::uint32_t>(x >> 32)};
        }
        d.value = bcl::plan_digest(indices, d.value);
    }
    std::printf(
        "windows %llu records %llu digest %016llx\n", static_cast<unsigned long long>(d.windows),
        static_cast<unsigned long long>(d.records), static_cast<unsigned long long>(d.value));
    // Stage costs, on a digest of their own: the line above is that of one cost a record.
    digest_state staged;
    bcl::held_stage_planner held_stages;
    bcl::stage_window_planner window_stages;
    for (int i = 0; i < 1500; ++i) {
        // One draw per statement, as above.
        const std::size_t ranks = small_ranks[rng.below(5)];
        const std::size_t steps = small_steps[rng.below(4)];
        const std::size_t batch = small_batches[rng.below(5)];
        plan_stages(staged, held_stages, window_stages, rng, ranks, steps, batch);
    }
    std::printf("stage plans %llu records %llu digest %016llx\n",
                static_cast<unsigned long long>(staged.windows),
                static_cast<unsigned long long>(staged.records),
                static_cast<unsigned long long>(staged.value));
    return 0;
}
