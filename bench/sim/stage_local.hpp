#pragma once
// Stage mode's rank-local shape (--stages --shape local): every rank balances its own share of
// the stream alone, with no communication, as a trainer running bcl::balancer or
// bcl::stage_balancer on each rank does. The policies are the library's balancers themselves,
// one instance per rank; a new policy is one more entry in local_stage_policy_table().

#include "random.hpp"
#include "stage_workload.hpp"

#include <bcl/balancer.hpp>
#include <bcl/options.hpp>
#include <bcl/stage_balancer.hpp>

#include <fmt/format.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace bcl_sim {

/// A record in a rank-local policy's hands: its position in the shared stream, and the record.
struct local_stage_record {
    std::uint64_t position = 0;
    stage_record record;
};

/// The records each rank reads: its share of one shared stream, dealt strided as bcl-sim deals a
/// workload file's shuffled epoch to its rank-local policies (workload.hpp, record_source): rank
/// r's index-th record is the stream's position index * R + r. Each rank reads `per_rank` records
/// (--steps * B), so a run trains the stream's positions 0 to R * per_rank - 1, those the other
/// shapes train.
struct local_stage_stream {
    const stage_source* source = nullptr;
    std::size_t ranks = 0;
    std::uint64_t per_rank = 0;

    [[nodiscard]] std::uint64_t position(std::size_t rank, std::uint64_t index) const noexcept {
        return index * ranks + rank;
    }
    [[nodiscard]] local_stage_record at(std::size_t rank, std::uint64_t index) const {
        const std::uint64_t p = position(rank, index);
        return {p, source->at(p)};
    }
};

/// What a rank-local policy is made from: the ranks' streams, B, K and the run's seed.
struct local_stage_setup {
    local_stage_stream stream;
    std::size_t batch = 0;     ///< B
    std::size_t lookahead = 0; ///< K
    std::uint64_t seed = 0;
};

/// One rank-local policy of stage mode, one instance (a balancer, or a cursor) per rank.
class local_stage_runner {
public:
    virtual ~local_stage_runner() = default;
    /// Rank `rank`'s next batch of B records, appended to `out`: what the rank trains in its next
    /// step. Called at most --steps times per rank.
    virtual void pop(std::size_t rank, std::vector<local_stage_record>& out) = 0;
};

/// `none`: the rank's stream as it came, B at a time.
class none_local_runner final : public local_stage_runner {
public:
    explicit none_local_runner(const local_stage_setup& setup)
        : m_setup(setup), m_next(setup.stream.ranks, 0) {}

    void pop(std::size_t rank, std::vector<local_stage_record>& out) override {
        for (std::size_t j = 0; j < m_setup.batch; ++j)
            out.push_back(m_setup.stream.at(rank, m_next[rank]++));
    }

private:
    local_stage_setup m_setup;
    std::vector<std::uint64_t> m_next;
};

/// The options of rank `rank`'s balancer: B and K of the run, a seed per rank as bcl-sim seeds
/// its rank-local balancers (bcl_options() in bcl_runner.hpp), `policy`, every other setting at
/// bcl's default (no cap, no memory budget, packed, costliest-first emission, the sliding buffer
/// of 2 windows, max_age 2, the running mean).
[[nodiscard]] inline bcl::options local_stage_options(const local_stage_setup& setup,
                                                      std::size_t rank,
                                                      bcl::lookahead_policy policy) {
    bcl::options opt{.batch_size = setup.batch,
                     .lookahead = setup.lookahead,
                     .drop_last = false,
                     .seed = stream_key(setup.seed, domain::bcl, rank)};
    opt.policy = policy;
    return opt;
}

/// The summed cost of a record (vision encoder + language model): what a one-cost balancer
/// balances when it adds the stages up.
struct summed_stage_cost {
    [[nodiscard]] double operator()(const local_stage_record& r) const noexcept {
        return r.record.summed();
    }
};
/// The language model's cost alone: what a trainer balancing tokens balances.
struct language_stage_cost {
    [[nodiscard]] double operator()(const local_stage_record& r) const noexcept {
        return r.record.cost[1];
    }
};
/// Both stage costs, {vision encoder, language model}: bcl::stage_balancer's estimator.
struct both_stage_costs {
    [[nodiscard]] std::array<double, stage_count>
    operator()(const local_stage_record& r) const noexcept {
        return r.record.cost;
    }
};

/// A library balancer per rank (bcl::balancer or bcl::stage_balancer), run as a training loop
/// runs it: each step, the rank pops its next batch, pushing records of its own stream until one
/// is ready; once all of the rank's --steps * B records are pushed, finish(), and pop() drains
/// the rest. Every batch holds exactly B records (the stream is a whole number of batches), and
/// each of the rank's records is handed out once.
template <class Balancer, class Estimator>
class balancer_local_runner final : public local_stage_runner {
public:
    balancer_local_runner(std::string_view name, const local_stage_setup& setup,
                          bcl::lookahead_policy policy)
        : m_name(name), m_setup(setup), m_next(setup.stream.ranks, 0) {
        m_balancers.reserve(setup.stream.ranks);
        for (std::size_t r = 0; r < setup.stream.ranks; ++r)
            m_balancers.push_back(
                std::make_unique<Balancer>(Estimator{}, local_stage_options(setup, r, policy)));
    }

    void pop(std::size_t rank, std::vector<local_stage_record>& out) override {
        Balancer& bal = *m_balancers[rank];
        std::optional<typename Balancer::batch_type> batch;
        while (!(batch = bal.pop())) {
            if (m_next[rank] == m_setup.stream.per_rank) {
                if (bal.finished())
                    throw std::logic_error(fmt::format("policy {}: rank {}'s balancer is drained "
                                                       "before its last step",
                                                       m_name, rank));
                bal.finish();
                continue;
            }
            bal.push(m_setup.stream.at(rank, m_next[rank]++));
        }
        if (batch->size() != m_setup.batch)
            throw std::logic_error(fmt::format("policy {}: rank {}'s balancer handed out {} "
                                               "records, not B = {}",
                                               m_name, rank, batch->size(), m_setup.batch));
        out.insert(out.end(), batch->begin(), batch->end());
    }

private:
    std::string m_name;
    local_stage_setup m_setup;
    std::vector<std::unique_ptr<Balancer>> m_balancers;
    std::vector<std::uint64_t> m_next; // per rank: its next record to push
};

/// A rank-local policy of stage mode: its name, what it stands for and how its runner is made.
struct local_stage_policy_entry {
    std::string name;
    std::string models; ///< one line: what it stands for
    std::function<std::unique_ptr<local_stage_runner>(const local_stage_setup&)> make;
};

template <class Estimator>
[[nodiscard]] std::unique_ptr<local_stage_runner>
make_one_cost_local(std::string_view name, const local_stage_setup& setup,
                    bcl::lookahead_policy policy) {
    return std::make_unique<
        balancer_local_runner<bcl::balancer<local_stage_record, Estimator>, Estimator>>(name, setup,
                                                                                        policy);
}

[[nodiscard]] inline const std::vector<local_stage_policy_entry>& local_stage_policy_table() {
    using bcl::lookahead_policy;
    static const std::vector<local_stage_policy_entry> table{
        {"none", "each rank's stream as it came, B records at a time",
         [](const local_stage_setup& s) -> std::unique_ptr<local_stage_runner> {
             return std::make_unique<none_local_runner>(s);
         }},
        {"lm",
         "bcl::balancer (sliding, the default) on the language model's cost alone: what a trainer "
         "balancing tokens gets",
         [](const local_stage_setup& s) {
             return make_one_cost_local<language_stage_cost>("lm", s, lookahead_policy::sliding);
         }},
        {"summed-tumbling", "bcl::balancer, tumbling, on each record's summed cost",
         [](const local_stage_setup& s) {
             return make_one_cost_local<summed_stage_cost>("summed-tumbling", s,
                                                           lookahead_policy::tumbling);
         }},
        {"summed-sliding", "bcl::balancer, sliding (the default), on each record's summed cost",
         [](const local_stage_setup& s) {
             return make_one_cost_local<summed_stage_cost>("summed-sliding", s,
                                                           lookahead_policy::sliding);
         }},
        {"stages-tumbling", "bcl::stage_balancer, tumbling, on the two stage costs",
         [](const local_stage_setup& s) -> std::unique_ptr<local_stage_runner> {
             using balancer = bcl::stage_balancer<local_stage_record, both_stage_costs>;
             return std::make_unique<balancer_local_runner<balancer, both_stage_costs>>(
                 "stages-tumbling", s, lookahead_policy::tumbling);
         }},
        {"stages", "bcl::stage_balancer, sliding (the default), on the two stage costs",
         [](const local_stage_setup& s) -> std::unique_ptr<local_stage_runner> {
             using balancer = bcl::stage_balancer<local_stage_record, both_stage_costs>;
             return std::make_unique<balancer_local_runner<balancer, both_stage_costs>>(
                 "stages", s, lookahead_policy::sliding);
         }},
    };
    return table;
}

[[nodiscard]] inline const local_stage_policy_entry*
find_local_stage_policy(std::string_view name) {
    for (const local_stage_policy_entry& e : local_stage_policy_table())
        if (e.name == name) return &e;
    return nullptr;
}

/// The names of the rank-local shape's policies, comma-separated.
[[nodiscard]] inline std::string local_stage_policy_names() {
    std::string names;
    for (const local_stage_policy_entry& e : local_stage_policy_table())
        names += (names.empty() ? "" : ",") + e.name;
    return names;
}

} // namespace bcl_sim
