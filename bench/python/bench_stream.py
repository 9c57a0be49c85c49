"""Iteration time per record of bcl.balance against plain chunking, and its balance on ShareGPT
against bcl.BalancedBatchSampler over the same order.

Records are objects with a `tokens` sequence whose length is a ShareGPT conversation's
(bench/workloads), drawn with replacement. Three ways to batch them are timed over whole
streams, alternately, in one run, so background load on the machine hits all alike:
  plain       chunks of B taken with itertools.islice, and the cost of each record computed (what a
              loader that does not balance, but calls the same cost, spends);
  bcl.balance the default options (sliding, K = 8), with the same cost callable;
  bcl.balance with the cost spelled bcl.affine_quadratic(length, a, b, c): Python asks only for
              the length, the C++ side prices it.
Each for two costs: len(r.tokens) (the cheapest cost a stream can have: the ratio's worst case)
and a + b*L + c*L^2 of a small CPU transformer written in Python.

Then the batch-cost cv over all 30,731 conversations in one shuffled order, B = 16, K = 8: plain
batches, bcl.balance, and BalancedBatchSampler over the same order and costs, with the same
mean-cost mode (the running mean; and the stream's mean given as a number against the
sampler's own mean of the epoch). Exits 1 if a stream's batch count is wrong or the cv reductions
of the stream and the sampler differ by more than 0.01. Last, what state_dict() costs when the
records are large, pickled by value or saved by key.

    build-python/venv/bin/python bench/python/bench_stream.py             # N = 200k, 5 repeats
    build-python/venv/bin/python bench/python/bench_stream.py --n 30000 --repeats 2
"""

import argparse
import itertools
import pathlib
import statistics
import sys
import time

import numpy as np

import bcl

ROOT = pathlib.Path(__file__).resolve().parents[2]
LENGTHS = ROOT / "bench" / "workloads" / "sharegpt_8k_filtered_llama2_total_tokens.txt"
A, B_, C = 3.4e-3, 2.4e-5, 1.45e-7  # seconds: a + b*L + c*L^2 of a small CPU transformer


class Conversation:
    __slots__ = ("tokens",)

    def __init__(self, tokens):
        self.tokens = tokens


def conversations(lengths):
    """One record per length; records of one length share their (byte) tokens."""
    shared = {}
    return [Conversation(shared.setdefault(int(n), bytes(int(n)))) for n in lengths]


def token_count(r):
    return len(r.tokens)


def model_cost(r):
    n = len(r.tokens)
    return A + n * (B_ + C * n)


def plain(records, cost, b):
    it, batches = iter(records), 0
    while chunk := list(itertools.islice(it, b)):
        list(map(cost, chunk))
        batches += 1
    return batches


def balanced(records, cost, b):
    return sum(1 for _ in bcl.balance(records, cost, b))


def timing(args, lengths):
    rng = np.random.default_rng(0)
    records = conversations(rng.choice(lengths, size=args.n))
    b = args.batch_size
    rows = {
        "len(r.tokens)": [
            ("plain chunking + cost", plain, token_count),
            ("bcl.balance", balanced, token_count),
        ],
        "a + b*L + c*L^2": [
            ("plain chunking + cost", plain, model_cost),
            ("bcl.balance", balanced, model_cost),
            ("bcl.balance, affine_quadratic", balanced,
             bcl.affine_quadratic(token_count, A, B_, C)),
        ],
    }  # fmt: skip
    expected = -(-args.n // b)
    times = {(cost, name): [] for cost, row in rows.items() for name, _, _ in row}
    for _ in range(args.repeats):
        for cost, row in rows.items():
            for name, run, spelled in row:
                start = time.perf_counter()
                batches = run(records, spelled, b)
                times[(cost, name)].append(time.perf_counter() - start)
                if batches != expected:
                    sys.exit(f"{name}: {batches} batches, expected {expected}")
    print(
        f"N = {args.n} records, B = {b}, K = 8 (defaults); median of {args.repeats} streams "
        "each, alternated"
    )
    for cost, row in rows.items():
        base = statistics.median(times[(cost, row[0][0])])
        print(f"cost {cost}:")
        for name, _, _ in row:
            t = times[(cost, name)]
            median = statistics.median(t)
            print(
                f"  {name:30s} {median / args.n * 1e9:7.1f} ns/record  (min "
                f"{min(t) / args.n * 1e9:6.1f})  {median / base:5.2f}x plain"
            )


def cv(batch_costs, full):
    values = np.array(batch_costs[:full])
    return float(values.std() / values.mean())


def balance_on_sharegpt(lengths):
    order = np.random.default_rng(0).permutation(len(lengths))
    costs = A + lengths * (B_ + C * lengths)
    records = conversations(lengths[order])
    full = len(lengths) // 16
    cost_of = model_cost  # the stream's cost: the same model, of each record's tokens
    plain_cv = cv([costs[order[i : i + 16]].sum() for i in range(0, len(order), 16)], full)
    print(f"ShareGPT, {len(lengths)} conversations in one shuffled order, B = 16, K = 8:")
    print(f"  plain batches                      batch-cost cv {plain_cv:.4f}")
    worst = 0.0
    modes = (("running", "running", "running mean"),
             (float(costs.mean()), "epoch", "the epoch's mean"))  # fmt: skip
    for stream_mean, sampler_mean, label in modes:
        batches = bcl.balance(records, cost_of, 16, 8, mean_cost=stream_mean)
        stream = [sum(cost_of(r) for r in batch) for batch in batches]
        batches = bcl.BalancedBatchSampler(order.tolist(), costs, 16, 8, mean_cost=sampler_mean)
        sampler = [costs[batch].sum() for batch in batches]
        reductions = [1 - cv(c, full) / plain_cv for c in (stream, sampler)]
        worst = max(worst, abs(reductions[0] - reductions[1]))
        print(
            f"  {label + ':':19s}bcl.balance        cv {cv(stream, full):.4f} (reduction "
            f"{reductions[0]:.3f}); BalancedBatchSampler cv {cv(sampler, full):.4f} "
            f"(reduction {reductions[1]:.3f})"
        )
    if worst > 0.01:
        sys.exit(f"the stream's cv reduction differs from the sampler's by {worst:.4f} > 0.01")


def state_cost(lengths):
    """What state_dict() costs with ShareGPT-sized records (dicts with a list of token ids), after
    50 batches: the records the balancer holds pickled by value, or by key."""
    records = [{"id": i, "input_ids": list(range(int(n)))} for i, n in enumerate(lengths[:5000])]

    def ids(r):
        return len(r["input_ids"])

    print("state_dict() with ShareGPT-sized records, after 50 batches of 16:")
    by_key = dict(key=lambda r: r["id"], restore=records.__getitem__)
    for label, options in (("by value", {}), ("by key", by_key)):
        stream = bcl.balance(records, ids, 16, **options)
        for _ in range(50):
            next(stream)
        times, state = [], None
        for _ in range(5):
            start = time.perf_counter()
            state = stream.state_dict()
            times.append(time.perf_counter() - start)
        print(
            f"  {label:8s} {statistics.median(times) * 1e3:6.2f} ms, {len(state['positions'])} "
            f"records held, their field {len(state['pending']):9d} bytes"
        )


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=200_000, help="records per timed stream")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=5, help="streams of each, alternated")
    args = parser.parse_args()
    lengths = np.loadtxt(LENGTHS)
    timing(args, lengths)
    balance_on_sharegpt(lengths)
    state_cost(lengths)


if __name__ == "__main__":
    main()
