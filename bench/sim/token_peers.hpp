#pragma once
// The peers' token-budget micro-batching, each as its own code runs it, on one step's records:
// verl's dynamic batch size (balance_batch, then rearrange_micro_batches with verl's strict
// budget), SkyRL's balanced bin packing, NeMo-RL's sequence packing, WLB-LLM's fixed-length
// baseline, and the plain sequential packer. Pure functions of lengths and costs; the runners
// (token_runner.hpp) feed them records and charge what they return.

#include "input.hpp"
#include "mffd.hpp"
#include "verl_kk.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <numeric>
#include <queue>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace bcl_sim {

/// Part of a record in a micro-batch: the record's index and the tokens of it the micro-batch
/// holds (all of them, but for fixed_length, which splits records).
struct piece {
    std::uint32_t item = 0;
    double tokens = 0.0;

    friend bool operator==(const piece&, const piece&) = default;
};

/// One rank's micro-batches in the order it runs them. An empty one is a padding micro-batch:
/// the rank runs it and trains nothing.
using micro_batches = std::vector<std::vector<piece>>;

/// A step's micro-batches on every rank (index r: rank r).
using rank_micro_batches = std::vector<micro_batches>;

/// A peer whose own code refuses the step (raises): the run reports the policy as skipped, with
/// the reason.
class peer_refuses : public std::runtime_error {
public:
    explicit peer_refuses(const std::string& what) : std::runtime_error(what) {}
};

/// Whole records as pieces: group[i] lists item indices.
[[nodiscard]] inline micro_batches
as_micro_batches(const std::vector<std::vector<std::uint32_t>>& groups,
                 std::span<const double> lengths) {
    micro_batches out(groups.size());
    for (std::size_t g = 0; g < groups.size(); ++g)
        for (const std::uint32_t i : groups[g]) out[g].push_back({i, lengths[i]});
    return out;
}

/// Pads every rank with empty micro-batches at its end, to the most any rank has, rounded up to
/// a multiple of `multiple`: how a trainer keeps counts equal when a rank has fewer (its other
/// ranks would otherwise hang in the next collective).
inline void pad_to_equal(rank_micro_batches& ranks, std::size_t multiple) {
    std::size_t most = 0;
    for (const micro_batches& r : ranks) most = std::max(most, r.size());
    if (multiple > 1) most = (most + multiple - 1) / multiple * multiple;
    for (micro_batches& r : ranks) r.resize(most);
}

/// Rank r's share when a step's records (in sampler order, a multiple of R of them) are dealt
/// strided, as DistributedSampler deals them: the records at r, r + R, r + 2R, ... .
[[nodiscard]] inline std::vector<std::uint32_t> strided_share(std::size_t count, std::size_t ranks,
                                                              std::size_t rank) {
    std::vector<std::uint32_t> share;
    for (std::size_t j = rank; j < count; j += ranks)
        share.push_back(static_cast<std::uint32_t>(j));
    return share;
}

// ---------------------------------------------------------------------------------------------
// none: the plain sequential packer.
// ---------------------------------------------------------------------------------------------

/// Packs `items` (indices into `lengths`) in their order: each joins the open micro-batch if the
/// micro-batch stays within `capacity` tokens, else it opens a new one (a record above the
/// capacity is alone in its own). The packer of a trainer that does not balance. O(n).
[[nodiscard]] inline micro_batches sequential_pack(std::span<const std::uint32_t> items,
                                                   std::span<const double> lengths,
                                                   double capacity) {
    micro_batches out;
    double open = 0.0;
    for (const std::uint32_t i : items) {
        if (out.empty() || open + lengths[i] > capacity) {
            out.emplace_back();
            open = 0.0;
        }
        out.back().push_back({i, lengths[i]});
        open += lengths[i];
    }
    return out;
}

/// `none`: each rank's records (dealt strided) packed in arrival order by sequential_pack; the
/// count per step is the most any rank needs (rounded up to `multiple`), the others running
/// empty micro-batches.
[[nodiscard]] inline rank_micro_batches none_plan(std::span<const double> lengths,
                                                  std::size_t ranks, double max_tokens,
                                                  std::size_t multiple) {
    rank_micro_batches out(ranks);
    for (std::size_t r = 0; r < ranks; ++r)
        out[r] = sequential_pack(strided_share(lengths.size(), ranks, r), lengths, max_tokens);
    pad_to_equal(out, multiple);
    return out;
}

// ---------------------------------------------------------------------------------------------
// fixed_length: WLB-LLM's baseline.
// ---------------------------------------------------------------------------------------------

/// WLB-LLM's fixed-length packing: `items` (indices into `lengths`) concatenated in their order
/// and cut into micro-batches of exactly `capacity` tokens (the last holds the rest). A record
/// that crosses a cut is split: each micro-batch holds a piece of it. O(n + pieces).
[[nodiscard]] inline micro_batches fixed_length_cut(std::span<const std::uint32_t> items,
                                                    std::span<const double> lengths,
                                                    double capacity) {
    micro_batches out;
    double room = 0.0;
    for (const std::uint32_t i : items) {
        double left = lengths[i];
        do {
            if (room <= 0.0) {
                out.emplace_back();
                room = capacity;
            }
            const double take = std::min(left, room);
            out.back().push_back({i, take});
            room -= take;
            left -= take;
        } while (left > 0.0);
    }
    return out;
}

/// `fixed_length`: each rank's records (dealt strided) cut by fixed_length_cut; the count per
/// step is the most any rank needs (rounded up to `multiple`), the others idle through the
/// missing ones (empty micro-batches).
[[nodiscard]] inline rank_micro_batches fixed_length_plan(std::span<const double> lengths,
                                                          std::size_t ranks, double max_tokens,
                                                          std::size_t multiple) {
    rank_micro_batches out(ranks);
    for (std::size_t r = 0; r < ranks; ++r)
        out[r] = fixed_length_cut(strided_share(lengths.size(), ranks, r), lengths, max_tokens);
    pad_to_equal(out, multiple);
    return out;
}

// ---------------------------------------------------------------------------------------------
// verl: balance_batch, then rearrange_micro_batches with a strict budget.
// ---------------------------------------------------------------------------------------------

/// verl's balance_batch (verl/trainer/ppo/ray_trainer.py, RayPPOTrainer._balance_batch): the
/// global batch split by karmarkar_karp_equal on the workloads into R groups of equal size, group
/// i to rank i; each group sorted by (workload, index), then laid out as its even positions
/// followed by its odd positions reversed (verl's "smaller micro-batches at both ends"). Returns
/// each rank's records (indices into `workloads`) in that order. Requires a multiple of R.
[[nodiscard]] inline std::vector<std::vector<std::uint32_t>>
verl_balance_batch(std::span<const double> workloads, std::size_t ranks) {
    std::vector<std::vector<std::uint32_t>> groups = karmarkar_karp_equal(workloads, ranks);
    for (std::vector<std::uint32_t>& g : groups) {
        std::sort(g.begin(), g.end(), [&](std::uint32_t a, std::uint32_t b) {
            return workloads[a] < workloads[b] || (workloads[a] == workloads[b] && a < b);
        });
        std::vector<std::uint32_t> laid;
        for (std::size_t i = 0; i < g.size(); i += 2) laid.push_back(g[i]);
        const std::size_t odd = g.size() / 2;
        for (std::size_t k = odd; k-- > 0;) laid.push_back(g[2 * k + 1]);
        g = std::move(laid);
    }
    return groups;
}

/// verl's ordering of a rank's micro-batches (rearrange_micro_batches with
/// use_dynamic_bsz_balance, its default): sorted by (workload, first local index), largest
/// first; then the even positions reversed followed by the odd ones, so the lightest run at both
/// ends.
[[nodiscard]] inline std::vector<std::vector<std::uint32_t>>
verl_order_micro_batches(std::vector<std::vector<std::uint32_t>> parts,
                         std::span<const double> workloads) {
    const auto load = [&](const std::vector<std::uint32_t>& p) {
        double sum = 0.0;
        for (const std::uint32_t i : p) sum += workloads[i];
        return sum;
    };
    std::stable_sort(parts.begin(), parts.end(), [&](const auto& a, const auto& b) {
        const double la = load(a);
        const double lb = load(b);
        return la > lb || (la == lb && a.front() > b.front());
    });
    std::vector<std::vector<std::uint32_t>> out;
    for (std::size_t i = (parts.size() + 1) / 2; i-- > 0;) out.push_back(std::move(parts[2 * i]));
    for (std::size_t i = 1; i < parts.size(); i += 2) out.push_back(std::move(parts[i]));
    return out;
}

/// verl's dynamic batch size on every rank of a step (verl/utils/seqlen_balancing.py,
/// rearrange_micro_batches, with the strict budget verl added in its PR #7553): each rank's count
/// starts at min(records, ceil(tokens / T)), all-reduced to the largest over the ranks and rounded
/// up to a multiple of `multiple` (num_batches_divided_by); every rank splits its records by
/// Karmarkar-Karp (equal_size false) on their workloads into that many micro-batches; while any
/// micro-batch of any rank holds more than T tokens, the count grows by one (to the next multiple)
/// and every rank splits again. The count is the same on every rank each round, as the
/// all-reduced count keeps it: the simulator takes the loop to be collective (an all-reduce of
/// "some rank is over" each round), the only way it keeps FSDP's counts equal. Each rank's
/// micro-batches are ordered by verl_order_micro_batches. `shares[r]` lists rank r's records
/// (indices into `lengths` and `workloads`) in its local order. Throws peer_refuses where verl
/// raises: a record above T, or more micro-batches than a rank has records.
[[nodiscard]] inline rank_micro_batches
verl_rearrange(const std::vector<std::vector<std::uint32_t>>& shares,
               std::span<const double> lengths, std::span<const double> workloads,
               double max_tokens, std::size_t multiple) {
    const std::size_t ranks = shares.size();
    std::size_t count = 0;
    std::size_t fewest = std::numeric_limits<std::size_t>::max();
    std::vector<std::vector<double>> local_work(ranks);
    for (std::size_t r = 0; r < ranks; ++r) {
        double tokens = 0.0;
        for (const std::uint32_t i : shares[r]) {
            if (lengths[i] > max_tokens)
                throw peer_refuses(fmt::format("verl raises: a sequence of {} tokens is above "
                                               "max_token_len {}",
                                               lengths[i], max_tokens));
            tokens += lengths[i];
            local_work[r].push_back(workloads[i]);
        }
        const auto need = static_cast<std::size_t>(std::ceil(tokens / max_tokens));
        count = std::max(count, std::min(shares[r].size(), need));
        fewest = std::min(fewest, shares[r].size());
    }
    const auto round_up = [multiple](std::size_t c) {
        return multiple > 1 ? (c + multiple - 1) / multiple * multiple : c;
    };
    count = round_up(std::max<std::size_t>(count, 1));
    std::vector<std::vector<std::vector<std::uint32_t>>> parts(ranks);
    for (;; count = round_up(count + 1)) {
        if (count > fewest)
            throw peer_refuses(fmt::format("verl raises: {} micro-batches for a rank of {} records",
                                           count, fewest));
        bool over = false;
        for (std::size_t r = 0; r < ranks; ++r) {
            parts[r] = karmarkar_karp(local_work[r], count, false);
            for (const auto& p : parts[r]) {
                double tokens = 0.0;
                for (const std::uint32_t i : p) tokens += lengths[shares[r][i]];
                over = over || tokens > max_tokens;
            }
        }
        if (!over) break;
    }
    rank_micro_batches out(ranks);
    for (std::size_t r = 0; r < ranks; ++r) {
        for (const auto& p : verl_order_micro_batches(std::move(parts[r]), local_work[r])) {
            std::vector<piece> mb;
            for (const std::uint32_t i : p) mb.push_back({shares[r][i], lengths[shares[r][i]]});
            out[r].push_back(std::move(mb));
        }
    }
    return out;
}

/// verl's calculate_workload: 24576 L + L^2 (24576 times the default cost), what verl balances
/// whatever the model costs. Whole numbers, exact in a double for lengths below 2^26, as verl's
/// integers are, so ties fall as verl's do.
[[nodiscard]] inline std::vector<double> verl_workloads(std::span<const double> lengths) {
    std::vector<double> out(lengths.size());
    for (std::size_t i = 0; i < lengths.size(); ++i)
        out[i] = 24576.0 * lengths[i] + lengths[i] * lengths[i];
    return out;
}

/// `verl_dynamic`: balance_batch over the step's global batch (in sampler order, a multiple of R
/// records), then verl_rearrange on every rank, both on verl_workloads.
[[nodiscard]] inline rank_micro_batches verl_dynamic_plan(std::span<const double> lengths,
                                                          std::size_t ranks, double max_tokens,
                                                          std::size_t multiple) {
    const std::vector<double> workloads = verl_workloads(lengths);
    return verl_rearrange(verl_balance_batch(workloads, ranks), lengths, workloads, max_tokens,
                          multiple);
}

// ---------------------------------------------------------------------------------------------
// SkyRL: balanced bin packing per worker.
// ---------------------------------------------------------------------------------------------

/// SkyRL's Balanced packer (skyrl/train/dataset/bin_packing.py): `items` (indices into
/// `lengths`) sorted longest first (ties in their order, a stable sort), each placed in the
/// least-loaded bin (a heap on (tokens, bin)) when it fits there, otherwise in a new bin; a
/// record above the capacity gets a bin of its own (SkyRL's soft cap). Bins in the order they
/// were opened. O(n log n).
[[nodiscard]] inline micro_batches skyrl_balanced_pack(std::span<const std::uint32_t> items,
                                                       std::span<const double> lengths,
                                                       double capacity) {
    std::vector<std::uint32_t> order(items.begin(), items.end());
    std::stable_sort(order.begin(), order.end(),
                     [&](std::uint32_t a, std::uint32_t b) { return lengths[a] > lengths[b]; });
    micro_batches bins;
    using slot = std::pair<double, std::size_t>; // (tokens, bin): Python's tuple order
    std::priority_queue<slot, std::vector<slot>, std::greater<>> heap;
    for (const std::uint32_t i : order) {
        if (!heap.empty() && heap.top().first + lengths[i] <= capacity) {
            const slot least = heap.top();
            heap.pop();
            bins[least.second].push_back({i, lengths[i]});
            heap.push({least.first + lengths[i], least.second});
            continue;
        }
        bins.push_back({{i, lengths[i]}});
        heap.push({lengths[i], bins.size() - 1});
    }
    return bins;
}

/// `skyrl`: SkyRL's TokenBasedBatchIterator on every worker. The step's global batch (sampler
/// order) is chunked contiguously, R equal chunks (MeshDispatch); each worker packs its chunk
/// with skyrl_balanced_pack and runs its bins in order, then as many padding micro-batches (one
/// masked token each, costed 0 here) as make its count the largest over the workers.
[[nodiscard]] inline rank_micro_batches skyrl_plan(std::span<const double> lengths,
                                                   std::size_t ranks, double max_tokens) {
    rank_micro_batches out(ranks);
    const std::size_t chunk = lengths.size() / ranks;
    for (std::size_t r = 0; r < ranks; ++r) {
        std::vector<std::uint32_t> items(chunk);
        std::iota(items.begin(), items.end(), static_cast<std::uint32_t>(r * chunk));
        out[r] = skyrl_balanced_pack(items, lengths, max_tokens);
    }
    pad_to_equal(out, 1);
    return out;
}

// ---------------------------------------------------------------------------------------------
// NeMo-RL: sequence packing.
// ---------------------------------------------------------------------------------------------

/// `nemo_rl`: NeMo-RL's sequence packing (BatchedDataDict.shard_by_batch_size with
/// sequence_packing_args, its default algorithm modified_first_fit_decreasing and microbatch_order
/// "packer"): the step's global batch packed by mffd_pack into bins of T tokens
/// (max_tokens_per_microbatch), the bin count adjusted to a multiple of R (adjust_bin_count with
/// min_bin_count = bin_count_multiple = R), bin b to rank b mod R as its micro-batch b / R. Throws
/// peer_refuses where NeMo-RL raises: a length above T or not above 0.
[[nodiscard]] inline rank_micro_batches nemo_rl_plan(std::span<const double> lengths,
                                                     std::size_t ranks, double max_tokens) {
    for (const double l : lengths)
        if (l > max_tokens || !(l > 0.0))
            throw peer_refuses(fmt::format("NeMo-RL raises: sequence length {} {}", l,
                                           l > max_tokens
                                               ? fmt::format("exceeds bin capacity {}", max_tokens)
                                               : std::string("is not positive")));
    std::vector<std::vector<std::uint32_t>> bins = mffd_pack(lengths, max_tokens);
    adjust_bin_count(bins, ranks, ranks);
    rank_micro_batches out(ranks);
    for (std::size_t b = 0; b < bins.size(); ++b)
        out[b % ranks].push_back(as_micro_batches({bins[b]}, lengths).front());
    return out;
}

} // namespace bcl_sim
