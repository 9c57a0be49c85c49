"""bcl.plan_batches against verl's balancing of a global batch, on the same rollouts.

A trainer that holds a global batch of n rollouts (RL: generated responses) spreads it over R
ranks, each of which trains its n / R in micro-batches of B, one micro-batch per optimizer
micro-step, all ranks in lockstep. verl's balance_batch splits the global batch into R groups of
n / R with balanced total workload (Karmarkar-Karp largest differencing over the rollouts'
workloads, get_seqlen_balanced_partitions(..., equal_size=True), each group returned as sorted
indices), and each rank then takes its group's micro-batches in that order. bcl.plan_batches
plans the micro-batches themselves, aligned across ranks by cost. Where ranks synchronize at
every micro-batch (FSDP reduces the gradients of each backward pass), each micro-step costs its
slowest rank: "per micro-step" = (mean rank's total) / (sum over micro-steps of the slowest
rank). Where they synchronize once per global batch (gradient accumulation without
communication until the last micro-batch), the rank totals are what count, and that is what
verl's balancing optimizes: "per global batch" = mean rank total / largest rank total.

The Karmarkar-Karp here is this project's own implementation of the method as verl runs it
(the C++ model bench/sim/verl_kk.hpp, written from verl's description and code): rollouts sorted
by (workload, index) cut into runs of R, each run a state of R one-item sets; the two states of
largest spread merge, heaviest set with lightest, until one is left. Its ties may break
differently from verl's in rare cases, which does not move the figures.

    build-python/venv/bin/python bench/python/bench_plan_batches.py
"""

import argparse
import heapq
import pathlib

import numpy as np

import bcl

ROOT = pathlib.Path(__file__).resolve().parents[2]
WORKLOADS = {
    "gsm8k": "gsm8k_train_llama3_tokens.txt",
    "alpaca": "alpaca_en_demo999_llama3_tokens.txt",
    "sharegpt": "sharegpt_8k_filtered_llama2_total_tokens.txt",
    "azure": "azure_llm_2023_conv_total_tokens.txt",
    "mooncake": "mooncake_fast25_conversation_total_tokens.txt",
}


def karmarkar_karp(values, k, equal_size):
    """k groups of the indices of `values` by largest differencing (see above): with equal_size
    len(values) / k each (the rollouts sorted and cut into runs of k, each run a state of k
    one-item sets), else of any size (each rollout a state of its own: one one-item set and k - 1
    empty ones), as verl's karmarkar_karp(..., equal_size) starts. Each group in ascending order.
    """
    order = sorted(range(len(values)), key=lambda i: (values[i], i))
    step = k if equal_size else 1
    runs = [order[o : o + step] for o in range(0, len(order), step)]
    heap = []
    for run, items in enumerate(runs):
        sets = sorted(([values[i], [i]] for i in items), reverse=True)
        sets += [[0, []] for _ in range(k - len(items))]
        heapq.heappush(heap, (-(sets[0][0] - sets[-1][0]), run, sets))
    count = len(heap)
    while len(heap) > 1:
        _, _, a = heapq.heappop(heap)
        _, _, b = heapq.heappop(heap)
        merged = [[a[i][0] + b[k - 1 - i][0], a[i][1] + b[k - 1 - i][1]] for i in range(k)]
        merged.sort(key=lambda s: s[0], reverse=True)
        heapq.heappush(heap, (-(merged[0][0] - merged[-1][0]), count, merged))
        count += 1
    return [sorted(s[1]) for s in heap[0][2]]


def karmarkar_karp_equal(values, k):
    """R = k groups of len(values) / k indices each, by largest differencing (see above)."""
    return karmarkar_karp(values, k, equal_size=True)


def efficiency(micro_batches, costs):
    """micro_batches[rank][j]: the sum over j of the mean rank's cost over the slowest's."""
    mean = slowest = 0.0
    for step in zip(*micro_batches):
        loads = [costs[batch].sum() for batch in step]
        mean += float(np.mean(loads))
        slowest += float(max(loads))
    return mean / slowest


def totals_efficiency(micro_batches, costs):
    """Mean rank's total over the largest rank's total (one synchronization per global batch)."""
    loads = [sum(costs[batch].sum() for batch in rank) for rank in micro_batches]
    return float(np.mean(loads) / max(loads))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=8)
    parser.add_argument("--micro-batch", type=int, default=16)
    parser.add_argument("--global-batch", type=int, default=1024)
    parser.add_argument("--batches", type=int, default=50, help="global batches per workload")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    r, b, n = args.ranks, args.micro_batch, args.global_batch
    print(f"R = {r} ranks, global batch {n}, micro-batches of {b}, {args.batches} global "
          f"batches each; cost = L + L^2/24576 (verl's workload / 24576)")  # fmt: skip
    print(f"{'':10} {'per micro-step':^33}  {'per global batch':^33}")
    print(f"{'workload':10} " + f"{'in order':>9} {'verl KK':>9} {'plan_batches':>13}  " * 2)
    rng = np.random.default_rng(args.seed)
    for name, file in WORKLOADS.items():
        lengths = np.loadtxt(ROOT / "bench" / "workloads" / file)
        steps = {"in order": [], "verl KK": [], "plan_batches": []}
        whole = {"in order": [], "verl KK": [], "plan_batches": []}
        for _ in range(args.batches):
            batch_lengths = rng.choice(lengths, size=n)
            costs = batch_lengths + batch_lengths**2 / 24576
            share = n // r
            plain = [list(range(rank * share, (rank + 1) * share)) for rank in range(r)]
            groups = karmarkar_karp_equal(list(costs * 24576), r)
            planned = bcl.plan_batches(costs, r, b)
            for key, groups_of in (("in order", plain), ("verl KK", groups)):
                micro = [[np.array(g[j : j + b]) for j in range(0, len(g), b)] for g in groups_of]
                steps[key].append(efficiency(micro, costs))
                whole[key].append(totals_efficiency(micro, costs))
            micro = [[np.array(x) for x in p] for p in planned]
            steps["plan_batches"].append(efficiency(micro, costs))
            whole["plan_batches"].append(totals_efficiency(micro, costs))
        row = " ".join(f"{np.mean(v):>9.4f}" for v in steps.values())
        row += "  " + " ".join(f"{np.mean(v):>9.4f}" for v in whole.values())
        print(f"{name:10} {row}")


if __name__ == "__main__":
    main()
