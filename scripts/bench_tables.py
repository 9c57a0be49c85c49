#!/usr/bin/env python3
"""Markdown tables for docs/benchmarks.md from a bcl-bench JSON file.

Usage:
    build-bench/bin/bcl-bench --benchmark_min_time=0.3 --benchmark_repetitions=3 \\
        --benchmark_report_aggregates_only=true --benchmark_out=bench.json \\
        --benchmark_out_format=json
    python3 scripts/bench_tables.py bench.json

Reads the medians when the run has repetitions (the plain results otherwise) and prints, per
target shape, ns/record, the ratio to baseline/sort of the same shape, gap_to_lb and allocations
per window; then the K x B grids of ns/record (with that ratio) for the baselines and the adapters,
and of gap_to_lb for partition/default; then the targets of issue 3 and 5 checked on these numbers;
then, if the run has them, the distribution/* tables of docs/partitioners.md (gap_to_lb, with
ns/record in parentheses).
"""

import json
import re
import sys

NAME = re.compile(r"^(?P<bench>.+)/K:(?P<k>\d+)/B:(?P<b>\d+)(?:_(?P<aggregate>\w+))?$")


def load(path):
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    rows = {}
    has_medians = any(b.get("aggregate_name") == "median" for b in data["benchmarks"])
    for b in data["benchmarks"]:
        if has_medians and b.get("aggregate_name") != "median":
            continue
        m = NAME.match(b["name"])
        if not m:
            continue
        key = (m["bench"], int(m["k"]), int(m["b"]))
        rows[key] = {
            "ns": b["time_per_record"] * 1e9 if b["time_per_record"] < 1e-3 else b["time_per_record"],
            "gap": b.get("gap_to_lb", 0.0),
            "allocs": b.get("allocs_per_window", 0.0),
        }
    return rows, data.get("context", {})


def ns_per_record(row):
    # time_per_record is an inverted rate: Google Benchmark reports it in seconds.
    return row["ns"]


def shape_table(rows, k, b, names):
    sort = rows.get(("baseline/sort", k, b))
    out = [f"| K:{k}/B:{b} | ns/record | x sort | gap_to_lb | allocs/window |",
           "|---|---:|---:|---:|---:|"]
    for name in names:
        row = rows.get((name, k, b))
        if row is None:
            continue
        ratio = ns_per_record(row) / ns_per_record(sort) if sort else float("nan")
        gap = "-" if name.startswith("baseline/") else f"{row['gap']:.1e}"
        out.append(f"| `{name}` | {ns_per_record(row):.1f} | {ratio:.2f} | {gap} | {row['allocs']:g} |")
    return "\n".join(out)


def grid(rows, name, value, title=None):
    ks = sorted({k for (n, k, _) in rows if n == name})
    bs = sorted({b for (n, _, b) in rows if n == name})
    out = [title or f"`{name}`", "", "| K \\ B | " + " | ".join(str(b) for b in bs) + " |",
           "|---|" + "---:|" * len(bs)]
    for k in ks:
        cells = []
        for b in bs:
            row = rows.get((name, k, b))
            cells.append("" if row is None else value(row, k, b))
        out.append(f"| {k} | " + " | ".join(cells) + " |")
    return "\n".join(out)


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    rows, context = load(sys.argv[1])

    def with_ratio(row, k, b):
        sort = rows.get(("baseline/sort", k, b))
        if sort is None:
            return f"{ns_per_record(row):.1f}"
        return f"{ns_per_record(row):.1f} ({ns_per_record(row) / ns_per_record(sort):.2f}x)"

    names = ["baseline/sort", "baseline/passthrough", "adapter/tumbling", "adapter/sliding",
             "partition/default", "partition/lpt_swap", "partition/lpt", "partition/karmarkar_karp",
             "partition/karmarkar_karp_swap", "partition/snake", "partition/snake_swap"]
    print(f"<!-- from {sys.argv[1]}: {context.get('date', '')}, "
          f"{context.get('num_cpus', '?')} CPUs, load {context.get('load_avg', '?')} -->\n")
    for k, b in [(8, 64), (64, 16)]:
        print(shape_table(rows, k, b, names) + "\n")
    for name in ["baseline/sort", "baseline/passthrough", "adapter/tumbling", "adapter/sliding",
                 "partition/default"]:
        value = (lambda row, k, b: f"{ns_per_record(row):.1f}") if name == "baseline/sort" else with_ratio
        print(grid(rows, name, value) + "\n")
    print(grid(rows, "partition/default",
               lambda row, k, b: "0" if row["gap"] == 0 else f"{row['gap']:.1e}",
               "`partition/default`, mean gap_to_lb (0: every window met the bound)") + "\n")

    def at(name, k, b):
        return rows.get((name, k, b))

    checks = []
    sort = at("baseline/sort", 8, 64)
    for name, limit in [("adapter/tumbling", 2.0), ("adapter/sliding", 3.0)]:
        row = at(name, 8, 64)
        if row and sort:
            ratio = ns_per_record(row) / ns_per_record(sort)
            checks.append(f"- `{name}/K:8/B:64` = {ratio:.2f}x `baseline/sort` (target <= {limit}x): "
                          f"{'holds' if ratio <= limit else 'DOES NOT HOLD'}")
    row = at("adapter/tumbling", 8, 64)
    if row:
        checks.append(f"- `adapter/tumbling/K:8/B:64` = {ns_per_record(row):.1f} ns/record (target <= 60): "
                      f"{'holds' if ns_per_record(row) <= 60 else 'DOES NOT HOLD'}")
    for k, b in [(64, 16), (8, 64)]:
        row = at("partition/default", k, b)
        if row:
            checks.append(f"- `partition/default/K:{k}/B:{b}` gap_to_lb = {row['gap']:.1e} (target <= 1e-4): "
                          f"{'holds' if row['gap'] <= 1e-4 else 'DOES NOT HOLD'}")
    allocating = [f"{n}/K:{k}/B:{b}" for (n, k, b), row in rows.items() if row["allocs"] > 0]
    checks.append("- allocations per window after warm-up: "
                  + ("0 in every benchmark" if not allocating else "NOT 0 in " + ", ".join(allocating)))
    print("\n".join(checks))

    sources = ["lognormal", "pareto", "uniform", "sharegpt", "alpaca", "gsm8k", "azure_conv",
               "mooncake", "proteins"]
    algorithms = ["lpt_swap", "lpt_swap_single", "lpt", "karmarkar_karp", "karmarkar_karp_swap",
                  "snake"]
    shapes = sorted({(k, b) for (n, k, b) in rows if n.startswith("distribution/")},
                    key=lambda kb: (kb[0] * kb[1], kb[0]))
    for k, b in shapes:
        print(f"\nK:{k}/B:{b} ({k * b} records per window)\n")
        print("| lengths | " + " | ".join(f"`{a}`" for a in algorithms) + " |")
        print("|---|" + "---:|" * len(algorithms))
        for src in sources:
            cells = []
            for a in algorithms:
                row = rows.get((f"distribution/{src}/{a}", k, b))
                if row is None:
                    cells.append("")
                    continue
                # Below 1e-12 the gap is the rounding of the loads' sums: at the bound.
                gap = "0" if row["gap"] < 1e-12 else f"{row['gap']:.1e}"
                cells.append(f"{gap} ({ns_per_record(row):.0f})")
            print(f"| {src} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
