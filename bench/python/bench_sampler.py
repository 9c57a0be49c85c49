"""Iteration time per index of bcl.BalancedBatchSampler against torch's BatchSampler.

Both wrap the same inner sampler (a RandomSampler over N indices) and are iterated over whole
epochs, alternately, in one run, so background load on the machine hits both alike. The costs
are ShareGPT conversation lengths (bench/workloads), drawn with replacement for N indices, under
the cost model a + b*L + c*L^2 of a small CPU transformer. Prints ns per index for each (and for
the inner sampler iterated alone, which both pay) and the ratio to BatchSampler; with
--max-ratio, exits 1 if bcl's default costs more than that many times BatchSampler (medians).

    build-python/venv/bin/python bench/python/bench_sampler.py            # N = 1M, B = 16, K = 8
    build-python/venv/bin/python bench/python/bench_sampler.py --n 50000 --repeats 2
"""

import argparse
import pathlib
import statistics
import sys
import time

import numpy as np
import torch
from torch.utils.data import BatchSampler, RandomSampler

import bcl

ROOT = pathlib.Path(__file__).resolve().parents[2]
LENGTHS = ROOT / "bench" / "workloads" / "sharegpt_8k_filtered_llama2_total_tokens.txt"


class Alone:
    """The inner sampler iterated on its own, one index per item: what every batch sampler over it
    pays before any batching."""

    def __init__(self, inner):
        self.inner = inner

    def __iter__(self):
        return iter(self.inner)


def epoch_seconds(batch_sampler):
    start = time.perf_counter()
    batches = 0
    for _ in batch_sampler:
        batches += 1
    return time.perf_counter() - start, batches


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1_000_000, help="indices per epoch")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--lookahead", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=5, help="epochs of each, alternated")
    parser.add_argument("--max-ratio", type=float, default=None, help="fail above this ratio")
    args = parser.parse_args()
    torch.set_num_threads(1)

    rng = np.random.default_rng(0)
    lengths = rng.choice(np.loadtxt(LENGTHS), size=args.n)
    costs = 3.4e-3 + 2.4e-5 * lengths + 1.45e-7 * lengths**2
    inner = RandomSampler(range(args.n), generator=torch.Generator().manual_seed(0))

    samplers = {
        "inner sampler alone": Alone(inner),
        "torch BatchSampler": BatchSampler(inner, args.batch_size, drop_last=False),
        "bcl sliding (default)": bcl.BalancedBatchSampler(
            inner, costs, args.batch_size, lookahead=args.lookahead
        ),
        "bcl tumbling": bcl.BalancedBatchSampler(
            inner, costs, args.batch_size, lookahead=args.lookahead, policy="tumbling"
        ),
    }
    expected = (args.n + args.batch_size - 1) // args.batch_size
    times = {name: [] for name in samplers}
    for _ in range(args.repeats):
        for name, sampler in samplers.items():
            seconds, batches = epoch_seconds(sampler)
            want = args.n if isinstance(sampler, Alone) else expected
            if batches != want:
                sys.exit(f"{name}: {batches} items, expected {want}")
            times[name].append(seconds)

    print(
        f"N = {args.n} indices, B = {args.batch_size}, K = {args.lookahead}, inner sampler: "
        f"RandomSampler; median of {args.repeats} epochs each, alternated"
    )
    base = statistics.median(times["torch BatchSampler"])
    for name, t in times.items():
        median, fastest = statistics.median(t) / args.n, min(t) / args.n
        print(
            f"  {name:24s} {median * 1e9:7.1f} ns/index  (min {fastest * 1e9:6.1f})"
            f"  {median * args.n / base:5.2f}x BatchSampler"
        )
    ratio = statistics.median(times["bcl sliding (default)"]) / base
    if args.max_ratio is not None and ratio > args.max_ratio:
        sys.exit(f"bcl's default costs {ratio:.2f}x BatchSampler per index, above {args.max_ratio}")


if __name__ == "__main__":
    main()
