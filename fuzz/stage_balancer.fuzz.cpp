// bcl-fuzz-stage_balancer: the rank-local balancer of stage costs driven by arbitrary calls. The
// input picks D (1 to 3), the options (B, K, the policy, drop_last, emission, largest_first, the
// sliding buffer and max_age, the seed) and stage means or none, then a sequence of operations:
// push a record (its D costs from pick_value, sometimes an estimator that throws), pop, finish,
// save and continue in a restored balancer (a copy, or the state moved out), restore a state with
// one field changed, and start the next epoch. Checked:
//   - a record with an invalid cost is a bcl::error naming it and the stage, an estimator's own
//     exception comes through unchanged, and either leaves the balancer exactly as it was (its
//     saved state, field by field, records bit for bit);
//   - every batch has B records but a short last one after finish(), each epoch's batches are
//     ceil(N/B) (floor with drop_last), every accepted record comes out exactly once (the newest
//     N mod B dropped with drop_last), each within its delay bound, and last_batch_costs() are
//     the batch's costs;
//   - a restored state continues the epoch: the contract above holds across every save and
//     restore; a changed state is refused (bcl::error) or restores a balancer that hands out
//     what it holds in batches of at most B and keeps nothing back.

#include "fuzz_support.hpp"

#include <bcl/error.hpp>
#include <bcl/options.hpp>
#include <bcl/stage_balancer.hpp>
#include <bcl/validate.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace {

using namespace bcl_fuzz;

template <std::size_t D>
struct stage_rec {
    std::uint64_t id = 0;
    std::array<double, D> cost{};
    bool estimator_throws = false;
};

template <std::size_t D>
struct stage_cost_fn {
    std::array<double, D> operator()(const stage_rec<D>& r) const {
        if (r.estimator_throws) throw estimator_failure{};
        return r.cost;
    }
};

template <std::size_t D>
using balancer_type = bcl::stage_balancer<stage_rec<D>, stage_cost_fn<D>>;

template <std::size_t D>
bool same_records(const std::vector<stage_rec<D>>& a, const std::vector<stage_rec<D>>& b) {
    return std::equal(a.begin(), a.end(), b.begin(), b.end(), [](const auto& x, const auto& y) {
        if (x.id != y.id || x.estimator_throws != y.estimator_throws) return false;
        for (std::size_t s = 0; s < D; ++s)
            if (!same_bits(x.cost[s], y.cost[s])) return false;
        return true;
    });
}

template <std::size_t D>
bool same_state(const typename balancer_type<D>::state& a,
                const typename balancer_type<D>::state& b) {
    return a.records_in == b.records_in && a.records_out == b.records_out &&
           a.records_dropped == b.records_dropped && a.batches == b.batches &&
           a.windows == b.windows && a.finished == b.finished && a.random_state == b.random_state &&
           a.stream_records == b.stream_records && a.arrivals == b.arrivals && a.sizes == b.sizes &&
           same_records<D>(a.buffered, b.buffered) && same_records<D>(a.waiting, b.waiting);
}

// What one epoch has seen: the accepted records' ids in push order and the batches handed out.
struct epoch_log {
    std::vector<std::uint64_t> pushed;
    std::vector<std::vector<std::uint64_t>> batches;
};

template <std::size_t D>
void check_epoch(const epoch_log& log, const bcl::options& opt, bool finished, bool drained) {
    const std::size_t b = opt.batch_size;
    const std::size_t n = log.pushed.size();
    std::vector<std::uint64_t> out;
    for (std::size_t j = 0; j < log.batches.size(); ++j) {
        const std::size_t size = log.batches[j].size();
        check(size == b || (j + 1 == log.batches.size() && finished && size < b && size > 0),
              [&] { return "batch " + std::to_string(j) + " has " + std::to_string(size); });
        out.insert(out.end(), log.batches[j].begin(), log.batches[j].end());
    }
    // Delay: a record leaves at most max_delay_bound batches after batch (its push index) / B.
    const std::size_t bound = bcl::max_delay_bound(opt);
    for (std::size_t j = 0; j < log.batches.size(); ++j)
        for (const std::uint64_t id : log.batches[j]) {
            const auto at = static_cast<std::size_t>(
                std::find(log.pushed.begin(), log.pushed.end(), id) - log.pushed.begin());
            check(at < n, [&] { return "record " + std::to_string(id) + " was never pushed"; });
            check(j <= at / b + bound, [&] {
                return "record " + std::to_string(id) + " left in batch " + std::to_string(j) +
                       ", beyond its bound " + std::to_string(bound);
            });
        }
    std::set<std::uint64_t> unique(out.begin(), out.end());
    check(unique.size() == out.size(), [] { return std::string("a record came out twice"); });
    if (!drained) return;
    const std::size_t kept = opt.drop_last ? n - n % b : n;
    check(out.size() == kept, [&] {
        return std::to_string(out.size()) + " records came out of " + std::to_string(kept);
    });
    check(log.batches.size() == (opt.drop_last ? n / b : (n + b - 1) / b),
          [&] { return std::to_string(log.batches.size()) + " batches"; });
    for (std::size_t i = 0; i < kept; ++i)
        check(unique.count(log.pushed[i]) == 1,
              [&] { return "record " + std::to_string(log.pushed[i]) + " never came out"; });
}

// Pops what is ready into `log`, checking last_batch_costs() against the batch.
template <std::size_t D>
void drain_ready(balancer_type<D>& balancer, epoch_log& log) {
    while (auto batch = balancer.pop()) {
        std::array<double, D> sum{};
        std::vector<std::uint64_t> ids;
        for (const auto& r : *batch) {
            ids.push_back(r.id);
            for (std::size_t s = 0; s < D; ++s) sum[s] += r.cost[s];
        }
        for (std::size_t s = 0; s < D; ++s) {
            const double got = balancer.last_batch_costs()[s];
            check(std::fabs(got - sum[s]) <= 1e-9 * std::max(1.0, std::fabs(sum[s])) ||
                      !std::isfinite(sum[s]),
                  [&] { return "last_batch_costs " + text(got) + " is not " + text(sum[s]); });
        }
        log.batches.push_back(std::move(ids));
    }
}

// One field of a state changed, chosen by `which`.
template <std::size_t D>
void change(typename balancer_type<D>::state& s, std::uint8_t which, byte_source& in) {
    switch (which % 9) {
    case 0:
        s.records_in += 1 + in.byte() % 3;
        break;
    case 1:
        s.records_out = in.u64();
        break;
    case 2:
        s.batches += 1;
        break;
    case 3:
        s.windows = in.u64() % 8;
        break;
    case 4:
        s.finished = !s.finished;
        break;
    case 5:
        if (!s.arrivals.empty()) s.arrivals[in.byte() % s.arrivals.size()] = in.u64() % 64;
        break;
    case 6:
        if (!s.sizes.empty()) s.sizes[in.byte() % s.sizes.size()] = in.byte() % 10;
        break;
    case 7:
        if (!s.buffered.empty()) s.buffered[in.byte() % s.buffered.size()].cost[0] = pick_value(in);
        break;
    default:
        s.stream_sums[0] = pick_value(in);
        break;
    }
}

template <std::size_t D>
void run(byte_source& in) {
    bcl::options opt;
    opt.batch_size = 1 + in.byte() % 6;
    opt.lookahead = 1 + in.byte() % 4;
    const std::uint8_t flags = in.byte();
    opt.policy = flags & 1 ? bcl::lookahead_policy::sliding : bcl::lookahead_policy::tumbling;
    opt.drop_last = (flags & 2) != 0;
    opt.emission = flags & 4 ? bcl::emission_order::shuffled : bcl::emission_order::costliest_first;
    opt.largest_first = (flags & 8) != 0;
    opt.buffer_windows = 1 + (flags >> 4) % 3;
    opt.max_age = opt.buffer_windows - 1 + (flags >> 6) % 3;
    opt.seed = in.byte();
    std::optional<std::array<double, D>> means;
    if (in.byte() % 2 == 1) {
        means.emplace();
        for (double& m : *means) m = pick_value(in);
    }
    note([&] {
        return "D " + std::to_string(D) + ", B " + std::to_string(opt.batch_size) + ", K " +
               std::to_string(opt.lookahead) + ", flags " + std::to_string(flags);
    });
    std::optional<balancer_type<D>> balancer;
    try {
        if (means)
            balancer.emplace(stage_cost_fn<D>{}, opt, *means);
        else
            balancer.emplace(stage_cost_fn<D>{}, opt);
    } catch (const bcl::error&) {
        return; // options (sliding's max_age) or a mean that is not a cost
    }
    epoch_log log;
    std::uint64_t next_id = 0;
    for (int op = 0; op < 400 && !in.empty(); ++op) {
        const std::uint8_t code = in.byte();
        switch (code % 8) {
        case 0:
        case 1:
        case 2: { // push
            stage_rec<D> r;
            r.id = next_id++;
            for (double& c : r.cost) c = pick_value(in);
            r.estimator_throws = code == 255;
            if (!balancer->can_push()) break;
            const auto before = balancer->save();
            try {
                balancer->push(stage_rec<D>(r));
                log.pushed.push_back(r.id);
            } catch (const bcl::error&) {
                const bool bad = std::any_of(r.cost.begin(), r.cost.end(),
                                             [](double c) { return !bcl::valid_cost(c); });
                check(bad, [] { return std::string("a record of valid costs was refused"); });
                check(same_state<D>(before, balancer->save()),
                      [] { return std::string("a refused push changed the balancer"); });
            } catch (const estimator_failure&) {
                check(r.estimator_throws, [] { return std::string("an unexpected throw"); });
                check(same_state<D>(before, balancer->save()),
                      [] { return std::string("a throwing estimator changed the balancer"); });
            }
            break;
        }
        case 3:
            drain_ready<D>(*balancer, log);
            break;
        case 4:
            balancer->finish();
            break;
        case 5: { // save, restore, and continue in the restored balancer
            auto saved = code & 8 ? balancer->save() : std::move(*balancer).take_state();
            balancer.emplace(stage_cost_fn<D>{}, opt, std::move(saved));
            break;
        }
        case 6: { // a changed state: refused, or a balancer that keeps the contract on its own
            auto changed = balancer->save();
            change<D>(changed, in.byte(), in);
            try {
                balancer_type<D> other(stage_cost_fn<D>{}, opt, std::move(changed));
                other.finish();
                while (auto batch = other.pop())
                    check(batch->size() <= opt.batch_size,
                          [] { return std::string("a restored batch above B"); });
                check(other.buffered() == 0, [] { return std::string("records left behind"); });
            } catch (const bcl::error&) {
            }
            break;
        }
        default: // the next epoch, once this one is drained
            if (balancer->finished()) {
                drain_ready<D>(*balancer, log);
                check_epoch<D>(log, opt, true, true);
                log = {};
                balancer->next_epoch();
            }
            break;
        }
    }
    check_epoch<D>(log, opt, balancer->finished(), false);
    balancer->finish();
    drain_ready<D>(*balancer, log);
    check_epoch<D>(log, opt, true, true);
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    byte_source in(std::span<const std::uint8_t>(data, size));
    switch (in.byte() % 3) {
    case 0:
        run<1>(in);
        break;
    case 1:
        run<2>(in);
        break;
    default:
        run<3>(in);
        break;
    }
    return 0;
}
