"""This example demonstrates bcl.BalancedBatchSampler and bcl.DistributedBalancedBatchSampler in a
real data-parallel training run: two processes (torch.distributed, gloo backend, CPU, one thread
each) train a small causal transformer on variable-length sequences without padding, once with
plain batches (DistributedSampler + BatchSampler) and once with each of bcl's samplers asked for,
and measure the time per step of each.
Requires: torch (Debian's python3-torch), numpy, and bcl installed (docs/python.md).

Every sequence gets its own forward and backward pass (no padding, no packing), gradients are
accumulated over the batch and averaged across the ranks by one all-reduce per step, so a step
takes as long as the slower rank's batch. Sequence lengths are ShareGPT conversation lengths
(bench/workloads/sharegpt_8k_filtered_llama2_total_tokens.txt) scaled by --scale. bcl's cost
estimate is a + b*L + c*L^2 with a, b, c fitted on this machine at start-up (both ranks time
a few lengths by CPU time; the least of the two is fitted).

Each policy has its own model, optimizer and loader over the same records; they take turns step
by step (which one goes first rotates), for --repeats epochs, so background load on a shared
machine hits them alike. Printed: the wall time per step (the slower rank's), each rank's compute
(CPU time of the forward and backward passes, which load on the machine barely changes), the
balance (mean rank compute over the slowest rank's, per step), the same balance of the batches'
estimated costs (what bcl balances), and the speedups. The run checks that every rank ran the
same number of steps in every epoch (a rank that runs one step more hangs a real trainer) and
exits 1 if not.

    build-python/venv/bin/python examples/python/train_ddp.py            # the measured run
    build-python/venv/bin/python examples/python/train_ddp.py --smoke    # seconds: a quick check
    build-python/venv/bin/python examples/python/train_ddp.py --running-mean   # a third policy
    build-python/venv/bin/python examples/python/train_ddp.py --policy bcl,global

The policies (--policy, a comma list; `none` always runs, as the reference):
  none         DistributedSampler + BatchSampler: plain batches.
  bcl          bcl.BalancedBatchSampler over the same DistributedSampler, with its defaults: each
               rank balances its own batches (the rank-local sliding policy, lookahead 8).
  bcl-running  the same with mean_cost="running": each epoch's balancer aims at the running mean
               of the costs it has taken so far, instead of the epoch's own mean cost (the
               default). --running-mean adds it to the list.
  global       bcl.DistributedBalancedBatchSampler: both ranks draw DistributedSampler's
               permutation of the epoch and compute the same plan of each window of 8 steps of
               both ranks' records (bcl::global_planner), and each keeps its share: the batches
               of a step cost about the same on both ranks, with no communication (one all-reduce
               of the plan's digest per epoch checks that the ranks planned alike).
"""

import argparse
import datetime
import math
import os
import pathlib
import socket
import statistics
import sys
import time

# One thread per rank, BLAS included: torch.set_num_threads(1) does not reach the OpenBLAS that
# Debian's torch calls, whose extra threads would compete with the other rank for the two cores.
# Set before torch loads OpenBLAS; the spawned ranks inherit it.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402
import torch.nn as nn  # noqa: E402
from torch.utils.data import BatchSampler, DataLoader, Dataset, DistributedSampler  # noqa: E402

import bcl  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[2]
LENGTHS = ROOT / "bench" / "workloads" / "sharegpt_8k_filtered_llama2_total_tokens.txt"
RANKS = 2
VOCAB = 256
MAX_LENGTH = 2048
POLICIES = ("none", "bcl", "bcl-running", "global")


class TinyLM(nn.Module):
    """A small causal transformer language model over byte-sized tokens."""

    def __init__(self, d_model=128, layers=2, heads=4):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, d_model)
        self.position = nn.Embedding(MAX_LENGTH, d_model)
        layer = nn.TransformerEncoderLayer(
            d_model, heads, 4 * d_model, dropout=0.0, batch_first=True
        )
        self.body = nn.TransformerEncoder(layer, layers)
        self.head = nn.Linear(d_model, VOCAB)

    def forward(self, tokens):
        length = tokens.shape[1]
        causal = torch.triu(torch.full((length, length), float("-inf")), diagonal=1)
        h = self.embed(tokens) + self.position(torch.arange(length))[None]
        return self.head(self.body(h, mask=causal))


class Sequences(Dataset):
    """Sequence i: `lengths[i]` tokens that mostly follow a fixed rule (t' = 7t + 11 mod 256),
    with 10% random tokens, so there is something to learn. Built from i alone."""

    def __init__(self, lengths):
        self.lengths = lengths

    def __len__(self):
        return len(self.lengths)

    def __getitem__(self, i):
        rng = np.random.default_rng(int(i))
        n = int(self.lengths[i])
        noise = rng.integers(0, VOCAB, size=n).tolist()
        keep = (rng.random(n) < 0.9).tolist()
        tokens = noise[:1]
        for j in range(1, n):
            tokens.append((7 * tokens[-1] + 11) % VOCAB if keep[j] else noise[j])
        return torch.tensor(tokens, dtype=torch.int64)


def sequence_loss(model, tokens):
    logits = model(tokens[None, :-1])
    return nn.functional.cross_entropy(logits.reshape(-1, VOCAB), tokens[1:])


def calibrate(model, lengths, repeats=3):
    """One sequence's forward + backward time at each of `lengths`: the least over `repeats` runs
    of the CPU time of this thread (time.thread_time: on a shared machine, wall time would also
    count the time the process waited for a core)."""
    times = []
    for length in lengths:
        tokens = torch.randint(0, VOCAB, (int(length) + 1,))
        best = math.inf
        for _ in range(repeats):
            start = time.thread_time()
            sequence_loss(model, tokens).backward()
            best = min(best, time.thread_time() - start)
        times.append(best)
    model.zero_grad(set_to_none=True)
    return np.array(times)


def fit_cost_model(lengths, times):
    """Least-squares a, b, c >= 0 of t = a + b*L + c*L^2 (weighted by 1/t, so short sequences
    count as much as long ones)."""
    lengths = np.asarray(lengths, dtype=np.float64)
    rows = np.stack([np.ones_like(lengths), lengths, lengths**2], axis=1) / times[:, None]
    fit, *_ = np.linalg.lstsq(rows, np.ones_like(times), rcond=None)
    return np.maximum(fit, 0.0)


def average_gradients(model):
    """The data-parallel step: one all-reduce of every gradient, which waits for the slowest rank
    (what DistributedDataParallel does, here without overlap so compute and wait are apart)."""
    grads = [p.grad for p in model.parameters()]
    flat = torch.cat([g.reshape(-1) for g in grads])
    dist.all_reduce(flat)
    flat /= RANKS
    offset = 0
    for g in grads:
        g.copy_(flat[offset : offset + g.numel()].view_as(g))
        offset += g.numel()


def train_step(policy, batch):
    """One data-parallel step on `batch` (a list of sequences, None once this rank's epoch is
    over). Returns (wall seconds, this rank's compute seconds, mean loss), or None when every
    rank's epoch is over; raises if only some ranks have a batch (their steps no longer pair up).

    The step starts together on every rank (the all-reduce of who has a batch) and ends after the
    gradient all-reduce and the optimizer, so its wall time is that of the slower rank. Compute
    is this thread's CPU time (time.thread_time) for the forward and backward passes: on a shared
    machine a rank's wall time also counts the time it waited for a core."""
    have = torch.tensor([0.0 if batch is None else 1.0])
    dist.all_reduce(have)
    if have.item() == 0:
        return None
    if have.item() != RANKS:
        raise RuntimeError(f"only {have.item():.0f} of {RANKS} ranks have a batch for this step")
    start = time.perf_counter()
    began = time.thread_time()
    model, optimizer = policy["model"], policy["optimizer"]
    optimizer.zero_grad(set_to_none=False)
    total = 0.0
    for tokens in batch:  # one forward and backward per sequence: no padding
        loss = sequence_loss(model, tokens) / len(batch)
        loss.backward()
        total += loss.item()
    compute = time.thread_time() - began
    average_gradients(model)
    optimizer.step()
    return time.perf_counter() - start, compute, total


def gathered(value):
    """`value` (any picklable value) from every rank, as a list."""
    out = [None] * RANKS
    dist.all_gather_object(out, value)
    return out


def worker(rank, args, port):
    torch.set_num_threads(1)
    if args.own_session and hasattr(os, "setsid"):
        # Each rank its own session, so its own scheduling group where Linux's autogroup is on:
        # the kernel then shares the cores between the ranks as between separate jobs, and a
        # rank waiting in the all-reduce leaves its share to the machine, not to the other rank
        # (as a GPU waiting for the others computes nothing). In one group, the ranks of a
        # loaded machine share one budget of CPU, and the waiting rank's time goes to the slower
        # one, which hides exactly the imbalance this measures.
        os.setsid()
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    # A rank left alone (the other one died) gives up after a while instead of waiting forever.
    dist.init_process_group("gloo", rank=rank, world_size=RANKS,
                            timeout=datetime.timedelta(minutes=10))
    try:
        run(rank, args)
    finally:
        dist.destroy_process_group()


def run(rank, args):
    rng = np.random.default_rng(args.seed)
    raw = rng.choice(np.loadtxt(LENGTHS), size=args.records)
    lengths = np.clip(np.rint(raw * args.scale), 2, MAX_LENGTH).astype(np.int64)
    dataset = Sequences(lengths)

    # The cost model: both ranks time the same lengths, the least time of either is kept (the
    # least disturbed by other processes), and the same fit makes every rank balance alike.
    torch.manual_seed(args.seed)
    probe = TinyLM(layers=args.layers)
    grid = np.unique(np.geomspace(8, min(MAX_LENGTH - 1, lengths.max()), 8).astype(int))
    times = torch.tensor(calibrate(probe, grid))
    dist.all_reduce(times, op=dist.ReduceOp.MIN)
    a, b, c = (float(x) for x in fit_cost_model(grid, times.numpy()))

    def estimated_cost(length):  # of a sequence of `length` tokens (or an array of lengths)
        return a + b * length + c * length ** 2

    costs = estimated_cost(lengths.astype(np.float64))
    if rank == 0:
        ratio = f"1/{b / c:.0f}" if c > 0 and b > 0 else "n/a"
        print(
            f"lengths: {args.records} ShareGPT records x {args.scale}: mean {lengths.mean():.0f}, "
            f"max {lengths.max()} tokens; fitted cost (s) = {a:.2e} + {b:.2e} L + {c:.2e} L^2 "
            f"(c/b = {ratio})",
            flush=True,
        )

    policies = {}
    for name in args.policies:
        torch.manual_seed(args.seed)
        model = TinyLM(layers=args.layers)  # the same initial weights on every rank
        for p in model.parameters():
            p.grad = torch.zeros_like(p)
        shard = DistributedSampler(dataset, num_replicas=RANKS, rank=rank, shuffle=True,
                                   seed=args.seed)
        if name == "none":
            batches = BatchSampler(shard, args.batch_size, drop_last=False)
        elif name == "global":
            # The same permutation as `shard` (DistributedSampler's, seed and epoch), planned
            # over both ranks' records: no inner sampler, the sampler draws the order itself.
            batches = bcl.DistributedBalancedBatchSampler(costs, args.batch_size,
                                                          num_replicas=RANKS, rank=rank,
                                                          shuffle=True, seed=args.seed)
        else:
            mean_cost = "running" if name == "bcl-running" else "epoch"
            batches = bcl.BalancedBatchSampler(shard, costs, args.batch_size,
                                               mean_cost=mean_cost)
        loader = DataLoader(dataset, batch_sampler=batches, collate_fn=list)
        optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
        policies[name] = dict(model=model, shard=shard, batches=batches, loader=loader,
                              optimizer=optimizer, wall=[], cpu=[], estimate=[], loss=[])

    # The policies take turns step by step (which goes first rotates), so background load on
    # the machine hits them alike; each has its own model, data and optimizer.
    equal_steps = True
    for epoch in range(args.repeats):
        for p in policies.values():
            if isinstance(p["batches"], (bcl.BalancedBatchSampler,
                                         bcl.DistributedBalancedBatchSampler)):
                p["batches"].set_epoch(epoch)  # reaches its DistributedSampler, or plans it
            else:
                p["shard"].set_epoch(epoch)
            p["iterator"], p["epoch_steps"], p["epoch_loss"] = iter(p["loader"]), 0, []
        running = list(policies)
        step = 0
        while running:
            first = step % len(running)
            for name in running[first:] + running[:first]:
                p = policies[name]
                try:
                    batch = next(p["iterator"], None)
                    out = train_step(p, batch)
                except RuntimeError as e:
                    print(f"rank {rank}, {name}, epoch {epoch}: {e}", flush=True)
                    equal_steps = False
                    running = []
                    break
                if out is None:
                    running.remove(name)
                    continue
                wall, compute, loss = out
                p["wall"].append(wall)
                p["cpu"].append(compute)
                p["estimate"].append(sum(estimated_cost(len(t)) for t in batch))
                p["epoch_steps"] += 1
                p["epoch_loss"].append(loss)
            step += 1
        if not equal_steps:
            break
        # Every rank reports its step counts and times; rank 0 prints them.
        for name, p in policies.items():
            steps = gathered(p["epoch_steps"])
            equal_steps &= steps == [len(p["batches"])] * RANKS
            p["loss"].append(statistics.mean(p["epoch_loss"]))
            if rank == 0:
                wall = p["wall"][-p["epoch_steps"] :]
                print(
                    f"epoch {epoch} {name:4s}: steps per rank {steps}, "
                    f"{statistics.mean(wall) * 1e3:6.1f} ms/step, loss {p['loss'][-1]:.3f}",
                    flush=True,
                )

    # Per step: the wall time (the slower rank's, as the all-reduce waits for it) and the
    # compute of every rank.
    for p in policies.values():
        p["wall"] = np.max(gathered(p["wall"]), axis=0)
        p["cpu"] = np.array(gathered(p["cpu"])).T  # steps x ranks
        p["estimate"] = np.array(gathered(p["estimate"])).T
    if rank == 0:
        wall, slowest = {}, {}
        for name, p in policies.items():
            cpu = p["cpu"]
            wall[name] = p["wall"].mean()
            slowest[name] = cpu.max(axis=1).mean()
            estimate = p["estimate"]
            print(
                f"{name:4s}: {len(p['wall'])} steps, {wall[name] * 1e3:.1f} ms per step (wall); "
                f"compute per step: mean rank {cpu.mean() * 1e3:.1f} ms, slowest rank "
                f"{slowest[name] * 1e3:.1f} ms (balance {cpu.mean() / slowest[name]:.3f}, "
                f"estimated {estimate.mean() / estimate.max(axis=1).mean():.3f}); "
                f"loss {p['loss'][0]:.3f} -> {p['loss'][-1]:.3f}"
            )
        for name in policies:
            if name == "none":
                continue
            which = "bcl's default" if name == "bcl" else name
            print(f"speedup of {which} over none, wall time per step: "
                  f"{wall['none'] / wall[name]:.3f}")
            print(f"speedup of {which} over none, slowest rank's compute per step: "
                  f"{slowest['none'] / slowest[name]:.3f}")
        if "global" in policies and "bcl" in policies:
            print(f"speedup of global over bcl's default, wall time per step: "
                  f"{wall['bcl'] / wall['global']:.3f}; slowest rank's compute per step: "
                  f"{slowest['bcl'] / slowest['global']:.3f}")
        print(f"every rank ran the same number of steps in every epoch: {equal_steps}")
    if not equal_steps:
        raise SystemExit(1)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=0.1, help="length scale (default 0.1)")
    parser.add_argument("--records", type=int, default=1024, help="records per epoch, all ranks")
    parser.add_argument("--batch-size", type=int, default=8, help="sequences per rank and step")
    parser.add_argument("--repeats", type=int, default=4, help="epochs of each policy")
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--shared-session", dest="own_session", action="store_false",
                        help="keep the ranks in the launcher's session (one scheduling group)")
    parser.add_argument("--policy", default="none,bcl",
                        help="comma list of " + ", ".join(POLICIES) + " (default none,bcl); "
                        "none always runs, as the reference")
    parser.add_argument("--running-mean", action="store_true",
                        help="also run bcl with mean_cost='running' (bcl-running)")
    parser.add_argument("--smoke", action="store_true",
                        help="a few short steps: checks that it runs, measures nothing")
    args = parser.parse_args()
    if args.smoke:
        args.scale, args.records, args.repeats = 0.01, 96, 2
        args.own_session = False  # measures nothing; stays where the caller can stop it
    if args.batch_size < 1 or args.records < RANKS or args.repeats < 1 or args.scale <= 0:
        parser.error("--batch-size, --repeats and --scale must be positive, --records >= 2")
    names = [n.strip() for n in args.policy.split(",") if n.strip()]
    unknown = [n for n in names if n not in POLICIES]
    if unknown:
        parser.error(f"--policy: unknown {', '.join(unknown)} (expected some of "
                     f"{', '.join(POLICIES)})")
    if args.running_mean:
        names.append("bcl-running")
    # none first (the reference), then in the order asked, each once.
    args.policies = list(dict.fromkeys(["none"] + names))
    mp.spawn(worker, args=(args, free_port()), nprocs=RANKS, join=True)


if __name__ == "__main__":
    try:
        main()
    except mp.ProcessRaisedException as e:
        sys.exit(f"a rank failed:\n{e}")
    except mp.ProcessExitedException as e:
        sys.exit(f"a rank exited with code {e.exit_code}")
