"""bcl.plan_batches with stage costs against one-number plans, on the same vision-language records.

A vision-language model runs two stages a step: the vision encoder over each image's patches,
then the language model over the text and the image tokens. Under FSDP or ZeRO-3 the ranks meet
at every layer's all-gather, so a micro-step lasts, stage by stage, as long as the slowest rank in
that stage: the sum over stages of the slowest rank ("per stage"), which is what the stage plan
balances. With one meeting a micro-step ("per step") the slowest rank's summed cost counts.

The records (synthetic, by these terms): each record's text is a length drawn from a bundled
workload (default ShareGPT); 30% of records are text only, 55% hold one image of lognormal patch
count (median 1000, sigma 0.8, clipped to [64, 16384]) and 15% several images or a video (median
4000, sigma 0.9, clipped to [256, 32768]). The encoder costs 0.09 * (P + P^2 / 8192) for P
patches; the language model T + T^2 / 24576 for T = text + P / 4 tokens. A held batch is R * B
records (one micro-step of B records on each of R ranks), as the design card's prototype runs it.

Policies, on the same records:
  none            the batch as it came: rank r takes records r*B .. r*B+B-1;
  verl KK, LM     verl's balance_batch on the language model's workload alone (what verl and
                  NeMo-RL balance: the sequence's tokens; Karmarkar-Karp into equal groups, as
                  bench_plan_batches.py models it), each rank its group;
  bcl, LM         bcl.plan_batches on the language model's cost alone;
  bcl, summed     bcl.plan_batches on each record's summed cost (one number a record);
  bcl, stages     bcl.plan_batches on the (N, 2) table of stage costs;
  bound           the sum over stages of max(mean rank load, dearest record): no plan does better.
Each figure is the efficiency: the mean rank's load over the slowest rank's, summed over the
held batches (per stage: summed over stages too), the mean over the seeds.

With --stream, the global plan's windows of K steps (bcl.DistributedBalancedBatchSampler over
the (N, 2) table, shuffle off, so that every policy sees the same windows); "verl KK, LM" then
balances each step's R * B records on their tokens. With --tokens, held batches of R * 48
records under a token budget T (bcl.plan_micro_batches): "verl dyn, LM" is verl's dynamic batch
size as bench_micro_batches.py models it (Karmarkar-Karp on the language model's workload, T
strict), the bcl rows plan_micro_batches on each policy's costs; the bound is that of the stage
plan's own micro-steps.

    build-python/venv/bin/python bench/python/bench_stages.py
    build-python/venv/bin/python bench/python/bench_stages.py --stream
    build-python/venv/bin/python bench/python/bench_stages.py --tokens
    build-python/venv/bin/python bench/python/bench_stages.py --ranks 8 --batches 50 --seeds 1
"""

import argparse
import pathlib
import shlex
import sys

import numpy as np

import bcl

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from bench_micro_batches import verl_micro_batches  # noqa: E402
from bench_plan_batches import karmarkar_karp_equal  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[2]
POLICIES = ("none", "verl KK, LM", "bcl, LM", "bcl, summed", "bcl, stages")


def records(text_lengths, n, rng):
    """n records' (encoder, language model) costs, by the terms above."""
    text = rng.choice(text_lengths, size=n).astype(float)
    kind = rng.random(n)
    one = np.clip(rng.lognormal(np.log(1000), 0.8, n), 64, 16384)
    many = np.clip(rng.lognormal(np.log(4000), 0.9, n), 256, 32768)
    patches = np.where(kind < 0.30, 0.0, np.where(kind < 0.85, one, many))
    tokens = text + patches / 4
    return np.stack([0.09 * (patches + patches**2 / 8192), tokens + tokens**2 / 24576], axis=1)


def groups_of(policy, costs, ranks, batch):
    """Each rank's records of one held batch (one micro-step) under `policy`."""
    n = len(costs)
    if policy == "none":
        return [list(range(r * batch, (r + 1) * batch)) for r in range(ranks)]
    if policy == "verl KK, LM":
        return karmarkar_karp_equal(list(costs[:, 1] * 24576), ranks)
    table = {"bcl, LM": costs[:, 1], "bcl, summed": costs.sum(axis=1), "bcl, stages": costs}
    plan = bcl.plan_batches(table[policy], ranks, batch)
    assert all(len(r) == 1 for r in plan) and sum(len(r[0]) for r in plan) == n
    return [r[0] for r in plan]


def loads(costs, groups):
    """Each rank's load in each stage: an R x D array."""
    return np.array([costs[g].sum(axis=0) for g in groups])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, nargs="+", default=[8, 64])
    parser.add_argument("--micro-batch", type=int, default=16, help="B")
    parser.add_argument("--batches", type=int, default=100, help="held batches per seed")
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument(
        "--text", default="sharegpt_8k_filtered_llama2_total_tokens.txt",
        help="the bundled workload of text lengths (bench/workloads/)",
    )  # fmt: skip
    parser.add_argument("--stream", action="store_true",
                        help="streams planned by the global plan's windows, not held batches")
    parser.add_argument("--lookahead", type=int, default=8, help="K, of the streams")
    parser.add_argument("--windows", type=int, default=8, help="windows per seed, of the streams")
    parser.add_argument("--tokens", action="store_true",
                        help="held batches under a token budget (bcl.plan_micro_batches)")
    parser.add_argument("--max-tokens", type=int, default=16384, help="T, of --tokens")
    parser.add_argument("--records-per-rank", type=int, default=48,
                        help="records a rank per held batch, of --tokens")
    args = parser.parse_args()
    text_lengths = np.loadtxt(ROOT / "bench" / "workloads" / args.text)
    if args.tokens:
        print(f"<!-- python {' '.join(shlex.quote(a) for a in sys.argv)} -->")
        token_budget(args, text_lengths)
        return
    if args.stream:
        print(f"<!-- python {' '.join(shlex.quote(a) for a in sys.argv)} -->")
        stream(args, text_lengths)
        return
    b = args.micro_batch
    print(f"<!-- python {' '.join(shlex.quote(a) for a in sys.argv)} -->")
    print(f"<!-- B = {b}, {args.batches} held batches of R * B records per seed, seeds "
          f"{args.seeds}; text from {args.text} -->")  # fmt: skip
    print("| R | policy | per stage | vision encoder | language model | per step |")
    print("|---:|---|---:|---:|---:|---:|")
    for ranks in args.ranks:
        rows = {p: [] for p in POLICIES + ("bound",)}
        for seed in args.seeds:
            rng = np.random.default_rng(seed)
            sums = {p: np.zeros(4) for p in rows}  # mean, slowest per stage; per-step mean, max
            per_stage = {p: np.zeros((2, 2)) for p in rows}
            for _ in range(args.batches):
                costs = records(text_lengths, ranks * b, rng)
                mean = costs.sum(axis=0) / ranks
                for p in POLICIES:
                    lo = loads(costs, groups_of(p, costs, ranks, b))
                    sums[p] += [mean.sum(), lo.max(axis=0).sum(), mean.sum(), lo.sum(axis=1).max()]
                    per_stage[p] += np.stack([mean, lo.max(axis=0)], axis=1)
                bound = np.maximum(mean, costs.max(axis=0))
                sums["bound"] += [mean.sum(), bound.sum(), mean.sum(),
                                  max(mean.sum(), costs.sum(axis=1).max())]  # fmt: skip
                per_stage["bound"] += np.stack([mean, bound], axis=1)
            for p in rows:
                s, st = sums[p], per_stage[p]
                rows[p].append([s[0] / s[1], st[0, 0] / st[0, 1], st[1, 0] / st[1, 1], s[2] / s[3]])
        for p, values in rows.items():
            m = np.mean(values, axis=0)
            print(f"| {ranks} | {p} | {m[0]:.4f} | {m[1]:.4f} | {m[2]:.4f} | {m[3]:.4f} |")


def stream_groups(policy, costs, ranks, batch, lookahead):
    """Each step's groups (one list of records a rank) of a stream of windows of R*K*B records
    under `policy`: the global plan's samplers plan the whole stream (shuffle off, so that every
    policy takes the same records in the same windows)."""
    n = len(costs)
    steps = n // (ranks * batch)
    if policy == "none":  # the stream as it came: step j, rank r, the next B records
        return [[list(range((j * ranks + r) * batch, (j * ranks + r + 1) * batch))
                 for r in range(ranks)] for j in range(steps)]  # fmt: skip
    if policy == "verl KK, LM":  # verl balances each step's global batch on its tokens
        out = []
        for j in range(steps):
            first = j * ranks * batch
            groups = karmarkar_karp_equal(list(costs[first:first + ranks * batch, 1] * 24576),
                                          ranks)  # fmt: skip
            out.append([[first + i for i in g] for g in groups])
        return out
    table = {"bcl, LM": costs[:, 1], "bcl, summed": costs.sum(axis=1), "bcl, stages": costs}
    per_rank = [
        list(bcl.DistributedBalancedBatchSampler(
            table[policy], batch, ranks, r, shuffle=False, lookahead=lookahead,
            check_digest=False))
        for r in range(ranks)
    ]  # fmt: skip
    return [[per_rank[r][j] for r in range(ranks)] for j in range(steps)]


def stream(args, text_lengths):
    """The global plan's windows of K steps: per-stage efficiency of each policy over whole
    streams, the bounds beside them."""
    b, k = args.micro_batch, args.lookahead
    print(f"<!-- streams: windows of R * K * B records, K = {k}, B = {b}, {args.windows} "
          f"windows per seed, seeds {args.seeds}; text from {args.text} -->")  # fmt: skip
    print("| R | policy | per stage | vision encoder | language model | per step |")
    print("|---:|---|---:|---:|---:|---:|")
    for ranks in args.ranks:
        rows = {p: [] for p in POLICIES + ("step bound", "window bound")}
        for seed in args.seeds:
            rng = np.random.default_rng(seed)
            costs = records(text_lengths, args.windows * ranks * k * b, rng)
            for p in POLICIES:
                mean = np.zeros(2)
                slowest = np.zeros(2)
                step_mean = step_max = 0.0
                bound = np.zeros(2)
                for groups in stream_groups(p, costs, ranks, b, k):
                    lo = loads(costs, groups)
                    mean += lo.sum(axis=0) / ranks
                    slowest += lo.max(axis=0)
                    step_mean += lo.sum() / ranks
                    step_max += lo.sum(axis=1).max()
                    records_of_step = costs[[i for g in groups for i in g]]
                    bound += np.maximum(lo.sum(axis=0) / ranks, records_of_step.max(axis=0))
                rows[p].append([mean.sum() / slowest.sum(), mean[0] / slowest[0],
                                mean[1] / slowest[1], step_mean / step_max])  # fmt: skip
                if p == "bcl, stages":  # no plan of these steps does better, stage by stage
                    rows["step bound"].append([mean.sum() / bound.sum(), mean[0] / bound[0],
                                               mean[1] / bound[1], float("nan")])  # fmt: skip
            # Whatever steps the windows' records take: each stage's mean, or its dearest record.
            window = ranks * k * b
            mean = np.zeros(2)
            bound = np.zeros(2)
            for first in range(0, len(costs), window):
                w = costs[first:first + window]
                mean += w.sum(axis=0) / ranks
                bound += np.maximum(w.sum(axis=0) / ranks, w.max(axis=0))
            rows["window bound"].append([mean.sum() / bound.sum(), mean[0] / bound[0],
                                         mean[1] / bound[1], float("nan")])  # fmt: skip
        for p, values in rows.items():
            m = np.mean(values, axis=0)
            step = "" if np.isnan(m[3]) else f"{m[3]:.4f}"
            print(f"| {ranks} | {p} | {m[0]:.4f} | {m[1]:.4f} | {m[2]:.4f} | {step} |")


def micro_plan(policy, costs, tokens, ranks, max_tokens):
    """Each rank's micro-batches of one held batch under `policy` (token budget)."""
    if policy == "verl dyn, LM":  # verl's dynamic batch size: its own KK on L, strict T
        return verl_micro_batches(tokens, ranks, max_tokens, strict=True)
    table = {"bcl, LM": costs[:, 1], "bcl, summed": costs.sum(axis=1), "bcl, stages": costs}
    return bcl.plan_micro_batches(tokens, ranks, max_tokens, costs=table[policy],
                                  oversized="alone")  # fmt: skip


def token_budget(args, text_lengths):
    """Held batches under a token budget (bcl.plan_micro_batches): per-stage efficiency of each
    policy per micro-step, and the bound of bcl's stage plan's micro-steps."""
    t = args.max_tokens
    per_rank = args.records_per_rank
    policies = ("verl dyn, LM", "bcl, LM", "bcl, summed", "bcl, stages")
    print(f"<!-- token budget: held batches of R * {per_rank} records, T = {t}, "
          f"{args.batches} per seed, seeds {args.seeds}; text from {args.text} -->")  # fmt: skip
    print("| R | policy | per stage | vision encoder | language model | micro-steps |")
    print("|---:|---|---:|---:|---:|---:|")
    for ranks in args.ranks:
        rows = {p: [] for p in policies + ("bound",)}
        for seed in args.seeds:
            rng = np.random.default_rng(seed)
            mean = {p: np.zeros(2) for p in rows}
            slowest = {p: np.zeros(2) for p in rows}
            steps = {p: 0 for p in rows}
            for _ in range(args.batches):
                costs = records(text_lengths, ranks * per_rank, rng)
                lm = costs[:, 1]  # T + T^2/24576: the tokens back
                tokens = np.round((np.sqrt(1 + 4 * lm / 24576) - 1) * 12288).astype(np.int64)
                for p in policies:
                    plan = micro_plan(p, costs, tokens, ranks, t)
                    for micro in zip(*plan):
                        lo = np.array([costs[b].sum(axis=0) if b else np.zeros(2) for b in micro])
                        mean[p] += lo.sum(axis=0) / ranks
                        slowest[p] += lo.max(axis=0)
                        steps[p] += 1
                        if p == "bcl, stages":
                            dearest = np.max([costs[b].max(axis=0) for b in micro if b], axis=0)
                            mean["bound"] += lo.sum(axis=0) / ranks
                            slowest["bound"] += np.maximum(lo.sum(axis=0) / ranks, dearest)
                            steps["bound"] += 1
            for p in rows:
                m, sl = mean[p], slowest[p]
                rows[p].append([m.sum() / sl.sum(), m[0] / sl[0], m[1] / sl[1],
                                steps[p] / args.batches])  # fmt: skip
        for p, values in rows.items():
            v = np.mean(values, axis=0)
            print(f"| {ranks} | {p} | {v[0]:.4f} | {v[1]:.4f} | {v[2]:.4f} | {v[3]:.1f} |")


if __name__ == "__main__":
    main()
