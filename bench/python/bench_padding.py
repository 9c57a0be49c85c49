"""What a padding collate_fn costs, and what batching="padded" buys back, on the same records.

A collate_fn that pads every sequence of a batch to the batch's longest makes a rank spend
B * cost(longest) on a batch, whatever the other records' lengths. The samplers balance what
they are told a batch costs: batching="packed" (the default) balances the sum of the records'
costs, batching="padded" the padded cost. This script runs R ranks' samplers over one epoch of
a workload's lengths, charges every batch its padded cost, and reports per sampler:

- step efficiency: mean rank step / step time (each step lasts as long as its slowest rank);
- goodput: the records' own (unpadded) cost over what the ranks spend, R * the sum of step
  times: it counts both the padding and the waiting;
- speedup: the plain batches' epoch time (the sum of step times) over this sampler's.

The cost of a record of length L is L + L^2/24576 (bcl-sim's default). Ranks draw their records
as DistributedSampler does (shared seed); plain batches are what BatchSampler over it gives.

    build-python/venv/bin/python bench/python/bench_padding.py
"""

import argparse
import pathlib

import numpy as np
import torch
from torch.utils.data import BatchSampler, DistributedSampler

import bcl

ROOT = pathlib.Path(__file__).resolve().parents[2]


class _Sized:
    def __init__(self, n: int) -> None:
        self.n = n

    def __len__(self) -> int:
        return self.n


def padded_steps(per_rank_batches, costs):
    """The (R, steps) padded cost of every rank's batches and the (R, steps) unpadded sums."""
    ranks = len(per_rank_batches)
    steps = min(len(b) for b in per_rank_batches)
    assert all(len(b) == steps for b in per_rank_batches), "ranks disagree on the batch count"
    padded = np.zeros((ranks, steps))
    useful = np.zeros((ranks, steps))
    for r, batches in enumerate(per_rank_batches):
        for s, batch in enumerate(batches):
            c = costs[np.asarray(batch)]
            padded[r, s] = len(batch) * c.max()
            useful[r, s] = c.sum()
    return padded, useful


def measure(per_rank_batches, costs):
    padded, useful = padded_steps(per_rank_batches, costs)
    step = padded.max(axis=0)
    efficiency = padded.mean(axis=0).sum() / step.sum()
    goodput = useful.sum() / (padded.shape[0] * step.sum())
    return efficiency, goodput, step.sum()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--workload", default="sharegpt_8k_filtered_llama2_total_tokens.txt")
    parser.add_argument("--ranks", type=int, default=8)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()

    lengths = np.loadtxt(ROOT / "bench" / "workloads" / args.workload)
    costs = lengths + lengths**2 / 24576.0
    n, ranks, batch = len(costs), args.ranks, args.batch_size
    dataset = _Sized(n)

    def shard(rank: int) -> DistributedSampler:
        s = DistributedSampler(dataset, num_replicas=ranks, rank=rank, seed=args.seed)
        s.set_epoch(0)
        return s

    runs = {
        "plain batches (BatchSampler)": [
            list(BatchSampler(shard(r), batch, drop_last=False)) for r in range(ranks)
        ],
    }
    for batching in ("packed", "padded"):
        runs[f'BalancedBatchSampler, batching="{batching}"'] = [
            list(bcl.BalancedBatchSampler(shard(r), costs, batch, batching=batching))
            for r in range(ranks)
        ]
    for batching in ("packed", "padded"):
        runs[f'DistributedBalancedBatchSampler, batching="{batching}"'] = [
            list(
                bcl.DistributedBalancedBatchSampler(
                    costs, batch, num_replicas=ranks, rank=r, seed=args.seed,
                    batching=batching, check_digest=False,
                )
            )
            for r in range(ranks)
        ]

    print(f"{args.workload}: {n} records, R={ranks}, B={batch}, one epoch, "
          f"every batch charged B * cost(longest), torch {torch.__version__}")
    print(f"{'sampler':<52} {'step efficiency':>15} {'goodput':>8} {'speedup':>8}")
    plain_time = None
    for name, batches in runs.items():
        efficiency, goodput, epoch_time = measure(batches, costs)
        plain_time = plain_time or epoch_time
        print(f"{name:<52} {efficiency:>15.3f} {goodput:>8.3f} {plain_time / epoch_time:>8.2f}")


if __name__ == "__main__":
    main()
