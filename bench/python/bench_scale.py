"""What bcl.DistributedBalancedBatchSampler costs at scale, against DistributedSampler +
BatchSampler over the same table, in one run.

The table: N token lengths L = round(exp(N(6, 1))), clipped to [1, 131072], as uint32, drawn
with numpy's default_rng(seed) and written with np.save to a temporary directory, beside bcl's
cost table, L + L^2/24576 as float32; every measurement loads them with np.load(mmap_mode="r").
Both bcl samplers get the mapped cost table: order="keyed" reads it in place, window by window;
order="randperm" converts it to float64 once (its epoch is planned whole). The samplers, all
of rank `--rank` of `--ranks`, seed 0:

  DistributedSampler + BatchSampler   torch's DistributedSampler(range(N), R, rank, seed=0)
                                      under BatchSampler(B): the reference;
  bcl randperm                        bcl.DistributedBalancedBatchSampler(costs, B, R, rank,
                                      lookahead=K), order="randperm" (the default);
  bcl keyed                           the same with order="keyed" (bcl::keyed_order);
  bcl tokens, randperm / keyed        with --tokens: token mode, max_tokens=T, micro_batches=M,
                                      lengths=the table (its default cost, L + L^2/24576).

Each sampler is measured in a fresh process (this script with --one), so that memory figures do
not mix: construction time; the first batch of epoch 0 (set_epoch(0), then next(iter(s)),
which is where every variant draws and lays out, or plans, the epoch, or keyed its first window);
the steady rate over the rest of that epoch, at most --steady batches; the whole epoch's
batches of the rank (its first batch, the timed ones and the rest: keyed plans a window every K
batches, which the steady rate includes; not at N = 1e9, where the epoch's rest would take most of
an hour); the first batch of epoch 1 the same way; len() of epoch 2, not started (O(1) for fixed
batches; token mode plans the epoch for it, or keyed walks its windows, keeping nothing); and
memory: the growth of the `Anonymous:` line of /proc/self/smaps_rollup from before
construction to just after epoch 0's first batch (what the sampler keeps), and the peak resident
set over the same span (VmHWM, reset through /proc/self/clear_refs: what it needs on the way).
Prints a markdown table, the command line in a comment above it; --json also writes the rows.

    build-python/venv/bin/python bench/python/bench_scale.py             # N = 1e6, 1e7
    build-python/venv/bin/python bench/python/bench_scale.py --large     # and 1e8 (~6 GB)
    build-python/venv/bin/python bench/python/bench_scale.py --large --huge  # and 1e9, keyed
    build-python/venv/bin/python bench/python/bench_scale.py --tokens --json scale.json
    build-python/venv/bin/python bench/python/bench_scale.py --tokens --only "tokens, keyed" \
        --lookahead 1                                                  # one sampler, K = 1
"""

import argparse
import json
import os
import pathlib
import shlex
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

MU, SIGMA = 6.0, 1.0  # of log L: median length e^6 = 403 tokens
MAX_LENGTH = 131072  # the table's clip, and token mode's max_tokens by default
CHUNK = 1 << 22  # table rows drawn at once: the table for a smaller N is a prefix of a larger
BASELINE = "DistributedSampler + BatchSampler"
VARIANTS = (
    (BASELINE, "fixed", None),
    ("bcl randperm", "fixed", "randperm"),
    ("bcl keyed", "fixed", "keyed"),
)
TOKEN_VARIANTS = (
    ("bcl tokens, randperm", "tokens", "randperm"),
    ("bcl tokens, keyed", "tokens", "keyed"),
)
MIB = 1 << 20
HUGE = 1_000_000_000  # from here on, the keyed samplers alone (--huge)


# -- one measurement, in its own process ---------------------------------------------------------


def _anonymous_bytes() -> int:
    with open("/proc/self/smaps_rollup") as f:
        for line in f:
            if line.startswith("Anonymous:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no Anonymous: line in /proc/self/smaps_rollup")


def _status_bytes(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"no {field} in /proc/self/status")


def _reset_peak() -> None:
    """Resets VmHWM to the current resident set (Linux: "5" to clear_refs)."""
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")


def measure_one(spec: dict) -> dict:
    """Builds one sampler over the mapped table and times and weighs it (see the docstring)."""
    import ctypes
    import gc

    import torch
    from torch.utils.data import BatchSampler, DistributedSampler

    import bcl

    torch.set_num_threads(1)
    n, ranks, rank, b, k = spec["n"], spec["ranks"], spec["rank"], spec["b"], spec["k"]
    lengths = np.load(spec["path"], mmap_mode="r")
    assert lengths.dtype == np.uint32 and len(lengths) == n
    lengths.sum(dtype=np.uint64)  # every page of the map resident before the first reading
    costs = None
    if spec["variant"] != BASELINE and spec["mode"] == "fixed":
        costs = np.load(spec["costs_path"], mmap_mode="r")
        costs.sum(dtype=np.float64)  # resident too

    def build():
        if spec["variant"] == BASELINE:
            inner = DistributedSampler(range(n), ranks, rank, shuffle=True, seed=0)
            return BatchSampler(inner, b, drop_last=False), inner
        if spec["mode"] == "fixed":
            s = bcl.DistributedBalancedBatchSampler(
                costs, b, ranks, rank, seed=0, lookahead=k, order=spec["order"]
            )
        else:
            s = bcl.DistributedBalancedBatchSampler(
                None, None, ranks, rank, seed=0, lookahead=k, order=spec["order"],
                max_tokens=spec["max_tokens"], micro_batches=spec["micro_batches"],
                lengths=lengths,
            )  # fmt: skip
        return s, s

    def first_batch(sampler, epoch_owner, epoch):
        start = time.perf_counter()
        epoch_owner.set_epoch(epoch)
        it = iter(sampler)
        batch = next(it)
        return time.perf_counter() - start, it, batch

    gc.collect()
    _reset_peak()
    anon0, rss0 = _anonymous_bytes(), _status_bytes("VmRSS")

    start = time.perf_counter()
    sampler, epoch_owner = build()
    construct = time.perf_counter() - start

    first0, it, batch = first_batch(sampler, epoch_owner, 0)
    anon1, peak1 = _anonymous_bytes(), _status_bytes("VmHWM")
    ctypes.CDLL("libc.so.6").malloc_trim(0)  # what of the growth is glibc's free memory
    anon1_trimmed = _anonymous_bytes()
    if spec["mode"] == "fixed" and len(batch) != b:
        raise SystemExit(f"{spec['variant']}: first batch of {len(batch)} indices, not {b}")

    # The steady rate leaves out the epoch's last batch and its end, where DistributedSampler's
    # iterator frees the epoch's indices (timed apart, as the drain). Keyed token mode knows
    # its count once it has walked the epoch (len() walks it, keeping nothing): its steady
    # batches are not bounded by it (an epoch holds far more), and len() is timed on epoch 2.
    walked = spec["mode"] == "tokens" and spec["order"] == "keyed"
    steady = spec["steady"] if walked else min(spec["steady"], max(len(sampler) - 2, 0))
    start = time.perf_counter()
    for taken in range(steady):
        if next(it, None) is None:  # walked: an epoch of fewer than steady + 1
            steady = taken
            break
    steady_seconds = time.perf_counter() - start
    # (Keyed token mode undrained, at --huge sizes: epoch 2's count, below, rather than walking
    # epoch 0 for it as well.)
    batches = len(sampler) if spec["drain"] or not walked else None
    rest, drain_seconds = None, None
    if spec["drain"]:
        start = time.perf_counter()
        rest = sum(1 for _ in it)
        drain_seconds = time.perf_counter() - start
        if 1 + steady + rest != batches:
            raise SystemExit(f"{spec['variant']}: {1 + steady + rest} batches, len() {batches}")
    del it

    first1, it, batch = first_batch(sampler, epoch_owner, 1)
    del it
    # len() of an epoch not yet started: O(1) for fixed batches; token mode plans (randperm) or
    # walks (keyed) the epoch for it.
    len_seconds = None
    if spec["len"]:
        epoch_owner.set_epoch(2)
        start = time.perf_counter()
        epoch2_batches = len(sampler)
        len_seconds = time.perf_counter() - start
        if batches is None:
            batches = epoch2_batches
    return {
        "n": n,
        "variant": spec["variant"],
        "mode": spec["mode"],
        "construct_s": construct,
        "first_batch_epoch0_s": first0,
        "first_batch_epoch1_s": first1,
        "epoch_batches": batches,
        "len_s": len_seconds,
        "steady_batches": steady,
        "steady_s": steady_seconds,
        "batches_per_s": steady / steady_seconds if steady else None,
        "drain_batches": rest,
        "drain_s": drain_seconds,
        "anonymous_growth_bytes": anon1 - anon0,
        "anonymous_growth_trimmed_bytes": anon1_trimmed - anon0,
        "peak_rss_growth_bytes": peak1 - rss0,
    }


# -- the run --------------------------------------------------------------------------------------


def write_table(path: pathlib.Path, costs_path: pathlib.Path, n: int, seed: int) -> None:
    """N lengths of the lognormal, clipped, as uint32, and their costs as float32, with np.save."""
    rng = np.random.default_rng(seed)
    table = np.empty(n, dtype=np.uint32)
    for first in range(0, n, CHUNK):
        count = min(CHUNK, n - first)
        draw = np.rint(np.exp(rng.normal(MU, SIGMA, count)))
        table[first : first + count] = np.clip(draw, 1, MAX_LENGTH)
    np.save(path, table)
    costs = np.lib.format.open_memmap(costs_path, mode="w+", dtype=np.float32, shape=(n,))
    for first in range(0, n, CHUNK):
        part = table[first : first + CHUNK].astype(np.float64)
        costs[first : first + len(part)] = part + part * part / 24576.0
    costs.flush()
    del costs


def medians(runs: list) -> dict:
    """One row: the median of each measured figure over `runs` (one variant at one N)."""
    row = {key: runs[0][key] for key in ("n", "variant", "mode", "epoch_batches")}
    row["runs"] = len(runs)
    for key, value in runs[0].items():
        if key in row or key in ("repeat", "load_average") or isinstance(value, str):
            continue
        values = [r[key] for r in runs if r[key] is not None]
        row[key] = statistics.median(values) if values else None
    return row


def load_average() -> float:
    with open("/proc/loadavg") as f:
        return float(f.read().split()[0])


def run_one(spec: dict) -> dict:
    """The measurement of `spec` in a fresh process of this script."""
    command = [sys.executable, os.path.abspath(__file__), "--one", json.dumps(spec)]
    load = load_average()
    start = time.perf_counter()
    out = subprocess.run(command, check=True, stdout=subprocess.PIPE, text=True).stdout
    row = json.loads(out.strip().splitlines()[-1])
    row["process_s"] = time.perf_counter() - start
    row["load_average"] = [load, load_average()]
    return row


def count(text: str) -> int:
    """An N as an integer: 1000000, 1e6 or 1_000_000."""
    value = float(text.replace("_", ""))
    if value != int(value) or value < 1:
        raise argparse.ArgumentTypeError(f"{text} is not a whole number >= 1")
    return int(value)


def size(n: int) -> str:
    """1e7 for a power of ten, else the integer."""
    exponent = len(str(n)) - 1
    return f"1e{exponent}" if n == 10**exponent else f"{n:,}"


def seconds(value: float) -> str:
    return f"{value:.3f}" if value < 10 else f"{value:.1f}"


def mib(value: int) -> str:
    return f"{value / MIB:,.0f}" if abs(value) >= 10 * MIB else f"{value / MIB:.1f}"


def whole_epoch(row: dict) -> str:
    """The rank's whole epoch, where it was drained (not at --huge sizes)."""
    if row.get("drain_s") is None:
        return "-"
    return seconds(row["first_batch_epoch0_s"] + row["steady_s"] + row["drain_s"])


def print_table(rows: list, header: list) -> None:
    for line in header:
        print(f"<!-- {line} -->")
    print(
        "| N | sampler | construct s | first batch, epoch 0, s | x reference | first batch, "
        "epoch 1, s | batches/s (timed) | len() s | whole epoch, s | anonymous growth MiB "
        "(B/record) | peak RSS growth MiB |"
    )
    print("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    reference = {r["n"]: r for r in rows if r["variant"] == BASELINE}
    for r in rows:
        base = reference.get(r["n"])
        ratio = r["first_batch_epoch0_s"] / base["first_batch_epoch0_s"] if base else None
        rate = r["batches_per_s"]
        print(
            f"| {size(r['n'])} | {r['variant']} | {seconds(r['construct_s'])} "
            f"| {seconds(r['first_batch_epoch0_s'])} "
            f"| {'-' if ratio is None else f'{ratio:.2f}x'} "
            f"| {seconds(r['first_batch_epoch1_s'])} "
            f"| {'-' if rate is None else f'{rate:,.0f}'} ({int(r['steady_batches'])}) "
            f"| {'-' if r['len_s'] is None else seconds(r['len_s'])} "
            f"| {whole_epoch(r)} "
            f"| {mib(r['anonymous_growth_bytes'])} "
            f"({r['anonymous_growth_bytes'] / r['n']:.1f}) "
            f"| {mib(r['peak_rss_growth_bytes'])} |"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=count, nargs="+", default=[1_000_000, 10_000_000],
                        help="dataset sizes (default 1e6 1e7)")  # fmt: skip
    parser.add_argument("--large", action="store_true", help="add N = 1e8 (about 6 GB of RAM)")
    parser.add_argument(
        "--huge", action="store_true",
        help="add N = 1e9 for the keyed samplers alone (8 GB of tables on disk; the others "
        "would hold O(N) indices: randperm's alone is 8 GB)",
    )  # fmt: skip
    parser.add_argument("--tokens", action="store_true", help="add the token-mode samplers")
    parser.add_argument(
        "--only", metavar="TEXT",
        help="measure only the samplers whose name holds TEXT (e.g. 'tokens, keyed')",
    )  # fmt: skip
    parser.add_argument("--ranks", type=int, default=1024, help="num_replicas (R)")
    parser.add_argument("--rank", type=int, default=5, help="the rank measured")
    parser.add_argument("--batch-size", type=int, default=16, help="B")
    parser.add_argument("--lookahead", type=int, default=8, help="K")
    parser.add_argument("--max-tokens", type=int, default=MAX_LENGTH, help="T, token mode")
    parser.add_argument("--micro-batches", type=int, default=2, help="M, token mode")
    parser.add_argument(
        "--steady", type=int, default=4000,
        help="batches timed after the first, at most (the epoch's rest)",
    )  # fmt: skip
    parser.add_argument("--repeats", type=int, default=3, help="runs of each sampler (median)")
    parser.add_argument(
        "--no-len", action="store_true",
        help="leave out len() of epoch 2 (keyed token mode walks the epoch for it)",
    )  # fmt: skip
    parser.add_argument("--seed", type=int, default=0, help="the table's seed")
    parser.add_argument("--json", metavar="PATH", help="also write the rows as JSON to PATH")
    parser.add_argument("--one", metavar="SPEC", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one is not None:
        print(json.dumps(measure_one(json.loads(args.one))))
        return

    sizes = sorted(
        set(args.n + ([100_000_000] if args.large else []) + ([HUGE] if args.huge else []))
    )
    variants = VARIANTS + (TOKEN_VARIANTS if args.tokens else ())
    if args.only:
        variants = tuple(v for v in variants if args.only in v[0])
        if not variants:
            parser.error(f"--only {args.only!r} names no sampler")
    import bcl
    import torch

    command = "python " + " ".join(
        shlex.quote(a) for a in [os.path.relpath(__file__)] + sys.argv[1:]
    )
    header = [
        command,
        f"R = {args.ranks}, rank {args.rank}, B = {args.batch_size}, K = {args.lookahead}"
        + (f", token mode T = {args.max_tokens}, M = {args.micro_batches}" if args.tokens else "")
        + f"; lengths round(exp(N({MU:g}, {SIGMA:g}))) in [1, {MAX_LENGTH}], uint32, mmap; "
        "costs L + L^2/24576, float32, mmap",
        f"{os.cpu_count()} cores, torch {torch.__version__}, numpy {np.__version__}, "
        f"bcl {getattr(bcl, '__version__', '?')}; each row one fresh process",
    ]
    runs = []
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="bcl-bench-scale-") as tmp:
        for n in sizes:
            path = pathlib.Path(tmp) / f"lengths-{n}.npy"
            costs_path = pathlib.Path(tmp) / f"costs-{n}.npy"
            write_table(path, costs_path, n, args.seed)
            # Round after round of every variant, so that background load hits them alike.
            for repeat in range(args.repeats):
                for variant, mode, order in variants:
                    if n >= HUGE and order != "keyed":
                        continue
                    spec = dict(
                        path=str(path), costs_path=str(costs_path), n=n, variant=variant,
                        mode=mode, order=order,
                        ranks=args.ranks, rank=args.rank, b=args.batch_size, k=args.lookahead,
                        max_tokens=args.max_tokens, micro_batches=args.micro_batches,
                        steady=args.steady, drain=n < HUGE, len=not args.no_len,
                    )  # fmt: skip
                    runs.append(dict(run_one(spec), repeat=repeat))
                    print(
                        f"  N = {size(n)}, {variant}, run {repeat + 1}: "
                        f"{runs[-1]['process_s']:.1f} s",
                        file=sys.stderr,
                    )
            path.unlink()
            costs_path.unlink()
    total = time.perf_counter() - started
    loads = [x for r in runs for x in r["load_average"]]
    header.append(
        f"medians of {args.repeats} runs each, interleaved; load average "
        f"{min(loads):.1f}-{max(loads):.1f}; {total:.0f} s in all"
    )
    measured = [[r for r in runs if r["n"] == n and r["variant"] == v] for n in sizes
                for v, _, _ in variants]  # fmt: skip
    rows = [medians(m) for m in measured if m]  # (the keyed samplers alone at --huge sizes)
    print_table(rows, header)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"command": command, "header": header, "rows": rows, "runs": runs}, f,
                      indent=1)  # fmt: skip


if __name__ == "__main__":
    main()
