#!/usr/bin/python3
"""Plot a bcl-sim step trace: how long each synchronous step takes under each policy.

    build/bin/bcl-sim --dist file:bench/workloads/sharegpt_8k_filtered_llama2_total_tokens.txt \
        --steps 400 --trace sim_trace.csv
    scripts/plot_sim.py sim_trace.csv -o sim_trace.png

The trace (written by `bcl-sim --trace PATH`) has one row per policy and step:
`policy,step,max_cost,mean_cost`, where max_cost is the slowest rank's cost in that step (the step
time) and mean_cost the ranks' average. Every step time is divided by the policy's ideal step
time, the mean over all steps and ranks of a rank's cost (the same for every policy on the same
records), so 1.0 means no rank waited. Left: the distribution of step times per policy (violins,
with the mean marked; the efficiency bcl-sim reports is 1 / that mean). Right: step time over
the run (a rolling mean, so the lines stay readable).

Needs only matplotlib (Debian: python3-matplotlib, for /usr/bin/python3, hence the #! line; run
it with another interpreter only if that one has matplotlib).
"""

import argparse
import csv
import sys
from collections import OrderedDict


def read_trace(path):
    """Returns {policy: (max_costs, mean_costs)} in the order the trace lists the policies."""
    series = OrderedDict()
    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        need = {"policy", "step", "max_cost", "mean_cost"}
        if reader.fieldnames is None or not need.issubset(reader.fieldnames):
            sys.exit(f"plot_sim.py: {path} is not a bcl-sim trace (expected columns {sorted(need)})")
        for row in reader:
            maxes, means = series.setdefault(row["policy"], ([], []))
            maxes.append(float(row["max_cost"]))
            means.append(float(row["mean_cost"]))
    if not series:
        sys.exit(f"plot_sim.py: {path} has no rows")
    return series


def rolling_mean(values, window):
    out, total = [], 0.0
    for i, v in enumerate(values):
        total += v
        if i >= window:
            total -= values[i - window]
        out.append(total / min(i + 1, window))
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("trace", help="CSV written by bcl-sim --trace")
    parser.add_argument("-o", "--output", default=None, help="PNG to write (default: trace name + .png)")
    parser.add_argument("--title", default=None, help="figure title")
    parser.add_argument("--window", type=int, default=20, help="steps in the rolling mean (default 20)")
    args = parser.parse_args()

    try:
        import matplotlib
    except ImportError:
        sys.exit(f"plot_sim.py: matplotlib is missing for {sys.executable} "
                 "(Debian: apt-get install python3-matplotlib, then run /usr/bin/python3)")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    series = read_trace(args.trace)
    names = list(series)
    relative = {}
    for name, (maxes, means) in series.items():
        ideal = sum(means) / len(means)
        relative[name] = [m / ideal if ideal > 0 else 1.0 for m in maxes]

    fig, (left, right) = plt.subplots(1, 2, figsize=(13, 5.2), gridspec_kw={"width_ratios": [1, 1.3]})
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]

    parts = left.violinplot([relative[n] for n in names], showmeans=True, showextrema=False, widths=0.8)
    for i, body in enumerate(parts["bodies"]):
        body.set_facecolor(colors[i % len(colors)])
        body.set_alpha(0.55)
    parts["cmeans"].set_color("black")
    for i, n in enumerate(names):
        mean = sum(relative[n]) / len(relative[n])
        left.annotate(f"eff {1 / mean:.3f}", (i + 1, mean), xytext=(6, 4), textcoords="offset points", fontsize=8)
    left.axhline(1.0, color="grey", lw=0.8, ls="--")
    left.set_xticks(range(1, len(names) + 1), names, rotation=20)
    left.set_ylabel("step time / ideal step time")
    left.set_title("distribution of step times (mean marked)")

    for i, n in enumerate(names):
        right.plot(rolling_mean(relative[n], max(1, args.window)), label=n, color=colors[i % len(colors)], lw=1.4)
    right.axhline(1.0, color="grey", lw=0.8, ls="--")
    right.set_xlabel("step")
    right.set_ylabel(f"step time / ideal (rolling mean of {args.window})")
    right.set_title("step time over the run")
    right.legend(fontsize=8, ncol=2)

    # Steps of mostly short records can beat the ideal (length_grouped does), so show them all.
    low = min(min(v) for v in relative.values())
    for ax in (left, right):
        ax.set_ylim(bottom=max(0.0, min(0.9, low - 0.05)))
        ax.grid(axis="y", alpha=0.3)

    fig.suptitle(args.title or f"bcl-sim: {args.trace}", fontsize=11)
    fig.tight_layout()
    output = args.output or (args.trace.rsplit(".", 1)[0] + ".png")
    fig.savefig(output, dpi=110)
    print(f"plot_sim.py: wrote {output}")


if __name__ == "__main__":
    main()
