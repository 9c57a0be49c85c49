"""This example demonstrates a checkpoint that resumes on another number of ranks: a job trains
part of an epoch on two ranks (torch.distributed, gloo, CPU), checkpoints the model and the
sampler, and restarts on three ranks, which finish the epoch. Every index of the epoch is trained
exactly once over both runs (the padding of the last step aside), and every rank of each run takes
as many batches as the others.
Requires: torch (Debian's python3-torch), numpy, and bcl installed (docs/python.md).

The cost table is a memory-mapped file (np.save, then np.load(mmap_mode="r") on every rank), as a
table on shared storage is; the sampler, bcl.DistributedBalancedBatchSampler with
order="keyed", reads it in place and plans each window of steps when first asked. The model is a
small linear regression; each record is one row of a random matrix. Each rank writes the indices
it trained to the run's directory; the parent checks them and prints a summary (exit 1 if an
index is lost or repeated beyond the padding, or if ranks took different counts).

With --tokens the sampler hands out token-budget micro-batches instead (max_tokens=, M
micro-batches a step, the lengths a memory-mapped uint32 table, padding="empty"): the ranks step
their optimizer after every M micro-batches, and the checkpoint is taken after a step, at a step
boundary, as a state that resumes at another number of ranks must be.

    build-python/venv/bin/python examples/python/resize_resume.py
    build-python/venv/bin/python examples/python/resize_resume.py --records 5000 --first 2 --then 5
    build-python/venv/bin/python examples/python/resize_resume.py --tokens
"""

import argparse
import collections
import datetime
import json
import os
import pathlib
import socket
import sys
import tempfile

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402

import bcl  # noqa: E402

FEATURES = 8


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def worker(rank: int, ranks: int, port: int, args: argparse.Namespace, run: str) -> None:
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=ranks,
                            timeout=datetime.timedelta(seconds=60))  # fmt: skip
    torch.set_num_threads(1)
    work = pathlib.Path(args.dir)
    data = torch.from_numpy(np.load(work / "data.npy"))
    target = data.sum(dim=1, keepdim=True)
    model = torch.nn.Linear(FEATURES, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    # Shared storage, read in place.
    if args.tokens:
        lengths = np.load(work / "lengths.npy", mmap_mode="r")
        batches = bcl.DistributedBalancedBatchSampler(
            None, None, ranks, rank, lookahead=args.lookahead, order="keyed",
            max_tokens=args.max_tokens, micro_batches=args.micro_batches, lengths=lengths,
            padding="empty",
        )  # fmt: skip
        per_step = args.micro_batches
    else:
        costs = np.load(work / "costs.npy", mmap_mode="r")
        batches = bcl.DistributedBalancedBatchSampler(
            costs, args.batch_size, ranks, rank, lookahead=args.lookahead, order="keyed"
        )
        per_step = 1
    checkpoint = work / "checkpoint.pt"
    if run == "second":
        saved = torch.load(checkpoint)
        model.load_state_dict(saved["model"])
        optimizer.load_state_dict(saved["optimizer"])
        batches.load_state_dict(saved["sampler"])  # saved at another number of ranks
    else:
        batches.set_epoch(0)

    def step() -> None:
        for p in model.parameters():  # DDP's all-reduce of the gradients, by hand
            dist.all_reduce(p.grad)
            p.grad /= ranks
        optimizer.step()
        optimizer.zero_grad()

    trained, taken, steps, last_loss = [], 0, 0, None
    optimizer.zero_grad()
    for batch in batches:
        if batch:
            loss = torch.nn.functional.mse_loss(model(data[batch]), target[batch])
        else:  # an empty micro-batch (padding="empty"): a step of zero weight, still all-reduced
            loss = model(data[:1]).sum() * 0.0
        (loss / per_step).backward()
        trained += batch
        taken += 1
        last_loss = float(loss)
        if taken % per_step != 0:
            continue
        step()
        steps += 1
        if run == "first" and steps == args.steps:
            # A step boundary: every rank has taken as many batches; any rank's state serves.
            if rank == 0:
                torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                            "sampler": batches.state_dict()}, checkpoint)  # fmt: skip
            break
    if taken % per_step != 0:  # the epoch's last step, short (the same on every rank)
        step()
    with open(work / f"{run}-rank{rank}.json", "w") as f:
        json.dump({"indices": [int(i) for i in trained], "batches": taken, "loss": last_loss}, f)
    dist.barrier()
    dist.destroy_process_group()


def launch(ranks: int, args: argparse.Namespace, run: str) -> list:
    mp.spawn(worker, args=(ranks, free_port(), args, run), nprocs=ranks, join=True)
    out = []
    for rank in range(ranks):
        with open(pathlib.Path(args.dir) / f"{run}-rank{rank}.json") as f:
            out.append(json.load(f))
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1999, help="records in the epoch")
    parser.add_argument("--batch-size", type=int, default=8, help="B")
    parser.add_argument("--lookahead", type=int, default=4, help="K")
    parser.add_argument("--first", type=int, default=2, help="ranks of the first run")
    parser.add_argument("--then", type=int, default=3, help="ranks of the restarted run")
    parser.add_argument("--steps", type=int, default=37, help="steps before the checkpoint")
    parser.add_argument("--tokens", action="store_true",
                        help="token-budget micro-batches instead of batches of --batch-size")
    parser.add_argument("--max-tokens", type=int, default=4096, help="T, with --tokens")
    parser.add_argument("--micro-batches", type=int, default=2, help="M, with --tokens")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bcl-resize-") as tmp:
        args.dir = tmp
        rng = np.random.default_rng(0)
        lengths = np.clip(np.rint(np.exp(rng.normal(6, 1, args.records))), 1, 32768)
        np.save(pathlib.Path(tmp) / "costs.npy", (lengths + lengths**2 / 24576).astype(np.float32))
        np.save(pathlib.Path(tmp) / "lengths.npy", np.minimum(lengths, args.max_tokens).astype(
            np.uint32))  # fmt: skip
        np.save(pathlib.Path(tmp) / "data.npy", rng.normal(size=(args.records, FEATURES)).astype(
            np.float32))  # fmt: skip
        first = launch(args.first, args, "first")
        second = launch(args.then, args, "second")
    counts = collections.Counter(i for r in first + second for i in r["indices"])
    lost = args.records - len(counts)
    repeated = sum(c - 1 for c in counts.values())
    print(f"first run: {args.first} ranks, {[r['batches'] for r in first]} batches each, "
          f"{sum(len(r['indices']) for r in first)} records")  # fmt: skip
    print(f"restart: {args.then} ranks, {[r['batches'] for r in second]} batches each, "
          f"{sum(len(r['indices']) for r in second)} records, last loss {second[0]['loss']}")
    # Token mode pads with empty micro-batches: nothing repeated.
    padding = 0 if args.tokens else args.then - 1
    print(f"over the epoch: {len(counts)} of {args.records} indices trained, {lost} lost, "
          f"{repeated} repeated (the restarted run's padding: at most {padding})")
    equal = all(len({r["batches"] for r in run}) == 1 for run in (first, second))
    ok = lost == 0 and repeated <= padding and equal
    print("every index once, equal counts on every rank" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
