"""bcl.plan_micro_batches against verl's dynamic batch size, on the same held batches.

An RL trainer holds a global batch of rollouts, R ranks times n records, and each rank trains its
share in micro-batches of at most T tokens (verl's use_dynamic_bsz with ppo_max_token_len_per_gpu
= T), every rank as many of them, all ranks in lockstep: FSDP reduces each backward pass's
gradients, so a micro-step lasts as long as its slowest rank.

verl, as its code runs it (a model written here from verl/utils/seqlen_balancing.py and the
trainer's _balance_batch): the global batch is split into R groups of n with balanced workload
(24576 L + L^2; Karmarkar-Karp with equal sizes), each group ordered by workload, smaller ones at
both ends; then each rank cuts its group into ceil(its tokens / T) micro-batches (the largest
count over the ranks, an all-reduce), by Karmarkar-Karp of any sizes over the workloads, which
balances the micro-batches' workloads but does not bound their tokens, and orders them by
workload, the smaller ones at both ends. The Karmarkar-Karp is bench_plan_batches.py's. That is
verl up to b178a3cd5 (row "verl"); verl #7553 (merged 2026-08) makes T strict: while a
micro-batch on some rank is above T, the count grows by one on every rank and every rank cuts its
share again (row "verl_strict", a model of the pull request's description).

bcl.plan_micro_batches plans all R*n records at once: micro-batches of at most T tokens, as many
on every rank, the dear ones lined up in the same micro-steps.

Reported per workload, over the held batches:

- efficiency: per micro-step, the mean rank's cost over the slowest rank's, summed over the
  micro-steps (cost L + L^2/24576, verl's workload / 24576);
- micro-steps: micro-batches per rank, and the bound ceil(tokens / (R*T)) that no plan beats;
- over_budget: the share of micro-batches above T tokens (what would run out of memory), and the
  most tokens of one, over T.

Exits 1 if any plan gives ranks unequal counts, or bcl a micro-batch above T.

    build-python/venv/bin/python bench/python/bench_micro_batches.py
"""

import argparse
import math
import pathlib
import sys

import numpy as np

import bcl

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import bench_plan_batches as kk  # noqa: E402 - its Karmarkar-Karp, beside this script

ROOT = pathlib.Path(__file__).resolve().parents[2]
# (file, T, records a rank): long-context workloads with budgets that fit their longest record.
WORKLOADS = {
    "sharegpt": ("sharegpt_8k_filtered_llama2_total_tokens.txt", 16384, 64),
    "azure": ("azure_llm_2023_conv_total_tokens.txt", 16384, 64),
    "mooncake": ("mooncake_fast25_conversation_total_tokens.txt", 131072, 16),
}


def workload(lengths):
    """verl's calculate_workload: 24576 L + L^2."""
    return 24576 * lengths + lengths**2


def smaller_at_both_ends(items):
    """items sorted ascending, laid out as verl lays a rank's records out: items[::2] then
    items[1::2] reversed."""
    return items[::2] + items[1::2][::-1]


def verl_micro_batches(lengths, ranks, max_tokens, strict):
    """verl's plan of one global batch: plan[rank][j], indices into lengths. strict: T a strict
    bound, as verl #7553 made it (the count grows by one, on every rank alike, and every rank
    cuts its share again until every micro-batch on every rank fits T, or a record a
    micro-batch)."""
    work = workload(lengths).tolist()
    shares = []
    for group in kk.karmarkar_karp(work, ranks, equal_size=True):  # _balance_batch
        shares.append(smaller_at_both_ends(sorted(group, key=lambda i: (work[i], i))))
    # rearrange_micro_batches on each rank, its count the largest over the ranks.
    count = max(min(len(s), -(-int(lengths[s].sum()) // max_tokens)) for s in shares)
    while True:
        plan = []
        for share in shares:
            local = [work[i] for i in share]
            parts = kk.karmarkar_karp(local, count, equal_size=False)
            parts.sort(key=lambda p: (sum(local[i] for i in p), p[0] if p else 0), reverse=True)
            parts = parts[::2][::-1] + parts[1::2]
            plan.append([[share[i] for i in p] for p in parts])
        fits = all(int(lengths[b].sum()) <= max_tokens for p in plan for b in p)
        if not strict or fits or count >= min(len(s) for s in shares):
            return plan
        count += 1


def measure(plan, lengths, max_tokens):
    """(efficiency per micro-step, micro-steps, share of micro-batches above T, most tokens of a
    micro-batch / T); a ValueError if the ranks' counts differ."""
    counts = {len(p) for p in plan}
    if len(counts) != 1:
        raise ValueError(f"ranks run different numbers of micro-batches: {sorted(counts)}")
    costs = lengths + lengths.astype(np.float64) ** 2 / 24576
    slowest = sum(max(costs[b].sum() for b in step) for step in zip(*plan))
    tokens = [int(lengths[b].sum()) for p in plan for b in p]
    over = sum(t > max_tokens for t in tokens) / len(tokens)
    return costs.sum() / (len(plan) * slowest), counts.pop(), over, max(tokens) / max_tokens


def draw_batches(name, batches, ranks, seed):
    """(lengths of each held batch, T) for a workload: R * n records drawn with replacement."""
    file, max_tokens, per_rank = WORKLOADS[name]
    table = np.loadtxt(ROOT / "bench" / "workloads" / file).astype(np.int64)
    rng = np.random.default_rng(seed)
    return [rng.choice(table, size=ranks * per_rank) for _ in range(batches)], max_tokens


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=8)
    parser.add_argument("--batches", type=int, default=50, help="held batches per workload")
    parser.add_argument("--lookahead", type=int, default=1, help="K for plan_micro_batches")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    r = args.ranks
    print(f"R = {r} ranks, {args.batches} held batches per workload; cost = L + L^2/24576; "
          f"bcl.plan_micro_batches with lookahead={args.lookahead}")  # fmt: skip
    print(f"{'workload':9} {'T':>6} {'n/rank':>6} {'plan':>11} {'efficiency':>10} "
          f"{'micro-steps':>11} {'bound':>6} {'over_budget':>11} {'max tokens/T':>12}")
    failed = False
    for name in WORKLOADS:
        held, max_tokens = draw_batches(name, args.batches, r, args.seed)
        k = args.lookahead
        rows = {"verl": [], "verl_strict": [], "bcl": []}
        bounds = []
        for first in range(0, len(held) - k + 1, k):
            lengths = np.concatenate(held[first : first + k])
            planned = bcl.plan_micro_batches(lengths, r, max_tokens, lookahead=k)
            try:
                rows["bcl"].append(measure(planned, lengths, max_tokens))
                for s in range(k):  # verl plans each held batch on its own
                    for plan, strict in (("verl", False), ("verl_strict", True)):
                        verl = verl_micro_batches(held[first + s], r, max_tokens, strict)
                        rows[plan].append(measure(verl, held[first + s], max_tokens))
            except ValueError as e:
                print(f"{name}: {e}", file=sys.stderr)
                failed = True
                continue
            bounds += [math.ceil(h.sum() / (r * max_tokens)) for h in held[first : first + k]]
            if rows["bcl"][-1][2] > 0:
                print(f"{name}: bcl planned a micro-batch above T", file=sys.stderr)
                failed = True
        for plan, results in rows.items():
            if not results:
                continue
            efficiency, steps, over, most = (np.mean([x[i] for x in results]) for i in range(4))
            steps /= k if plan == "bcl" else 1  # per held batch
            print(f"{name:9} {max_tokens:>6} {len(held[0]) // r:>6} {plan:>11} {efficiency:>10.4f} "
                  f"{steps:>11.2f} {np.mean(bounds):>6.2f} {over:>11.3f} "
                  f"{max(x[3] for x in results):>12.3f}")  # fmt: skip
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
