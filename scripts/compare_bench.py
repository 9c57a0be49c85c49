#!/usr/bin/env python3
"""Compares bcl-bench rows of two builds in one run, as ratios (this machine is shared and noisy:
the two builds run interleaved, several rounds, and each row's median time is compared).

    scripts/compare_bench.py BASE_BINARY NEW_BINARY [--filter adapter] [--rounds 3]

Build the base from a revision's headers with scripts/compare_batches.sh's approach, e.g.
    git archive REV include bench | tar -x -C /tmp/base
    g++ -std=c++20 -O3 -DNDEBUG -I/tmp/base/include -I/tmp/base/bench/common \\
        -DBCL_WORKLOADS_DIR='"bench/workloads"' /tmp/base/bench/bcl_bench.cpp -o /tmp/bench_base \\
        -lbenchmark -lfmt -lpthread
"""
import argparse
import json
import statistics
import subprocess

parser = argparse.ArgumentParser()
parser.add_argument("base")
parser.add_argument("new")
parser.add_argument("--filter", default="adapter")
parser.add_argument("--rounds", type=int, default=3)
parser.add_argument("--min-time", default="0.1")
args = parser.parse_args()

times = {"base": {}, "new": {}}
for _ in range(args.rounds):
    for side in ("base", "new"):
        out = subprocess.run([getattr(args, side), f"--benchmark_filter={args.filter}",
                              f"--benchmark_min_time={args.min_time}", "--benchmark_format=json"],
                             check=True, capture_output=True, text=True).stdout
        for row in json.loads(out)["benchmarks"]:
            times[side].setdefault(row["name"], []).append(row["real_time"])

ratios = []
print(f"{'row':48} {'base':>10} {'new':>10} {'new/base':>9}")
for name, base in times["base"].items():
    new = times["new"].get(name)
    if not new:
        continue
    b, n = statistics.median(base), statistics.median(new)
    ratios.append(n / b)
    print(f"{name:48} {b:10.1f} {n:10.1f} {n / b:9.3f}")
print(f"rows {len(ratios)}: median new/base {statistics.median(ratios):.3f}, "
      f"min {min(ratios):.3f}, max {max(ratios):.3f}")
