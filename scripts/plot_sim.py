#!/usr/bin/python3
"""Plot a bcl-sim step trace: how long each synchronous step takes under each policy.

    build/bin/bcl-sim --dist file:bench/workloads/sharegpt_8k_filtered_llama2_total_tokens.txt \
        --steps 1000 --trace sim_trace.csv --format json > sim.json
    scripts/plot_sim.py sim_trace.csv --summary sim.json -o sim_trace.png

The trace (written by `bcl-sim --trace PATH`) has one row per policy and step:
`policy,step,max_cost,mean_cost`, where max_cost is the slowest rank's cost in that step (the step
time) and mean_cost the ranks' average. Every step time is divided by the policy's ideal step
time, the mean over all steps and ranks of a rank's cost (the same for every policy on the same
records), so 1.0 means no rank waited; bcl-sim's efficiency is 1 / the mean of these ratios.

Three panels: (a) the distribution of step times of every policy (violins, mean marked);
(b) the same for bcl's policies alone, on their own scale, since the worst
baselines would flatten them to slivers in (a); (c) step time over the run (a rolling mean) for
those and `none`. A trace without both bcl's and other policies has no (b), and (c) shows them
all. Each policy keeps its colour in every panel. `--summary` takes bcl-sim's JSON
output (`--format json`) of the same run, for the workload and R, B, K in the title.

Exit codes: 0 written, 2 for input it cannot use (a missing or unreadable file, a file that is not
a bcl-sim trace, a summary that is not bcl-sim's JSON, an output it cannot write), 1 without
matplotlib. Needs only matplotlib (Debian: python3-matplotlib, for /usr/bin/python3, hence the #!
line; run it with another interpreter only if that one has matplotlib).
"""

import argparse
import csv
import json
import math
import sys
from collections import OrderedDict

PROG = "plot_sim.py"

# bcl's rank-local policies, and its coordinated global plan that bounds them: panel (b) and (c).
BCL_POLICIES = ("tumbling", "sliding")
ZOOM_POLICIES = ("global",) + BCL_POLICIES

# One colour per policy, the same in every panel; others take the rest of the cycle.
COLOURS = {
    "none": "#7f7f7f",
    "length_grouped": "#ff7f0e",
    "mffd": "#8c564b",
    "global": "#2ca02c",
    "tumbling": "#1f77b4",
    "sliding": "#d62728",
}
SPARE_COLOURS = ["#9467bd", "#e377c2", "#bcbd22", "#17becf", "#000000"]


def fail(message):
    """Bad input: one line on stderr, exit code 2."""
    print(f"{PROG}: error: {message}", file=sys.stderr)
    sys.exit(2)


def read_text(path, what):
    try:
        with open(path, newline="", encoding="utf-8") as f:
            return f.read()
    except OSError as e:
        fail(f"cannot read {what} {path}: {e.strerror or e}")
    except UnicodeDecodeError:
        fail(f"{path} is not a text file, so not a {what}")


def read_trace(path):
    """Returns {policy: (max_costs, mean_costs)} in the order the trace lists the policies."""
    text = read_text(path, "bcl-sim trace")
    if text.lstrip().startswith("{"):
        try:
            summary = isinstance(json.loads(text).get("config"), dict)
        except (ValueError, AttributeError):
            summary = False
        fail(f"{path} is JSON, not a bcl-sim trace"
             + (" (it is bcl-sim's --format json output: pass it as --summary)" if summary else "")
             + "; plot_sim.py plots the CSV that bcl-sim --trace PATH writes")
    need = ["policy", "step", "max_cost", "mean_cost"]
    reader = csv.DictReader(text.splitlines())
    if reader.fieldnames is None or not set(need).issubset(reader.fieldnames):
        fail(f"{path} is not a bcl-sim trace: its first line should be {','.join(need)}")
    series = OrderedDict()
    for line, row in enumerate(reader, start=2):
        costs = []
        for field in ("max_cost", "mean_cost"):
            try:
                costs.append(float(row[field]))
            except (TypeError, ValueError):
                costs.append(math.nan)
            if not (math.isfinite(costs[-1]) and costs[-1] >= 0):
                shown = "(missing)" if row[field] is None else f"'{row[field]}'"
                fail(f"{path}:{line}: {field} {shown} is not a cost (a finite number >= 0)")
        maxes, means = series.setdefault(row["policy"], ([], []))
        maxes.append(costs[0])
        means.append(costs[1])
    if not series:
        fail(f"{path} has no steps: an empty bcl-sim trace")
    return series


def read_summary(path):
    """The title line from bcl-sim's --format json output."""
    try:
        doc = json.loads(read_text(path, "bcl-sim JSON summary"))
        cfg = doc["config"]
        dist = cfg["dist"]
        workload = dist.get("path", dist["resolved"]).rsplit("/", 1)[-1]
        return (f"{workload}: R={cfg['ranks']} ranks, B={cfg['batch']}, K={cfg['lookahead']}, "
                f"{cfg['steps']} steps, seed {cfg['seed']}")
    except (ValueError, KeyError, TypeError, AttributeError):
        fail(f"{path} is not bcl-sim's JSON output (bcl-sim --format json): no config with dist, "
             "ranks, batch, lookahead, steps and seed")


def rolling_mean(values, window):
    out, total = [], 0.0
    for i, v in enumerate(values):
        total += v
        if i >= window:
            total -= values[i - window]
        out.append(total / min(i + 1, window))
    return out


def colour_of(names):
    spare = iter(SPARE_COLOURS * (1 + len(names) // len(SPARE_COLOURS)))
    return {n: COLOURS[n] if n in COLOURS else next(spare) for n in names}


def violins(ax, names, relative, colour):
    parts = ax.violinplot([relative[n] for n in names], showmeans=True, showextrema=False,
                          widths=0.8)
    for name, body in zip(names, parts["bodies"]):
        body.set_facecolor(colour[name])
        body.set_edgecolor(colour[name])
        body.set_alpha(0.6)
    parts["cmeans"].set_color("black")
    for i, n in enumerate(names):
        mean = sum(relative[n]) / len(relative[n])
        ax.annotate(f"eff {1 / mean:.3f}", (i + 1, mean), xytext=(8, 3),
                    textcoords="offset points", fontsize=8)
    ax.axhline(1.0, color="black", lw=0.8, ls=":")
    ax.set_xticks(range(1, len(names) + 1), names, rotation=15)
    ax.grid(axis="y", alpha=0.3)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("trace", help="CSV written by bcl-sim --trace")
    parser.add_argument("-o", "--output", default=None,
                        help="PNG to write (default: trace name + .png)")
    parser.add_argument("--summary", default=None,
                        help="bcl-sim's --format json output of the same run, for the title")
    parser.add_argument("--title", default=None, help="figure title (instead of the summary's)")
    parser.add_argument("--window", type=int, default=20,
                        help="steps in the rolling mean over the run (default 20)")
    args = parser.parse_args()
    if args.window < 1:
        fail(f"--window {args.window}: the rolling mean needs at least 1 step")

    series = read_trace(args.trace)
    subtitle = read_summary(args.summary) if args.summary else args.trace
    try:
        import matplotlib
    except ImportError:
        sys.exit(f"{PROG}: matplotlib is missing for {sys.executable} "
                 "(Debian: apt-get install python3-matplotlib, then run /usr/bin/python3)")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(series)
    relative = {}
    for name, (maxes, means) in series.items():
        ideal = sum(means) / len(means)
        relative[name] = [m / ideal if ideal > 0 else 1.0 for m in maxes]
    colour = colour_of(names)
    zoomed = [n for n in names if n in ZOOM_POLICIES]
    # Without both kinds in the trace there is nothing to zoom on: (b) is left out.
    has_zoom = 0 < len(zoomed) < len(names)
    over_time = [n for n in names if n == "none" or n in zoomed] if has_zoom else names

    fig = plt.figure(figsize=(13, 9.6))
    grid = fig.add_gridspec(2, 2, height_ratios=[1, 0.85], width_ratios=[1.25, 1])
    overview = fig.add_subplot(grid[0, 0] if has_zoom else grid[0, :])
    timeline = fig.add_subplot(grid[1, :])

    violins(overview, names, relative, colour)
    low = min(min(v) for v in relative.values())
    overview.set_ylim(bottom=max(0.0, min(0.9, low - 0.05)))
    overview.set_ylabel("step time / ideal step time")
    overview.set_title("(a) every policy: step times (mean marked)", fontsize=10)

    if has_zoom:
        zoom = fig.add_subplot(grid[0, 1])
        violins(zoom, zoomed, relative, colour)
        lo = min(min(relative[n]) for n in zoomed)
        hi = max(max(relative[n]) for n in zoomed)
        pad = 0.08 * max(hi - lo, 0.02)
        zoom.set_ylim(min(lo, 1.0) - pad, hi + pad)
        zoom.set_ylabel("step time / ideal step time")
        zoom.set_title(f"(b) zoom on {', '.join(zoomed)} (own y scale)", fontsize=10)
        # Where (b) sits in (a).
        overview.axhspan(min(lo, 1.0) - pad, hi + pad, color="#cccccc", alpha=0.35, lw=0)
        overview.annotate("range of (b)", (len(names) + 0.45, hi + pad), ha="right",
                          va="bottom", fontsize=8, color="#555555")

    for n in over_time:
        timeline.plot(rolling_mean(relative[n], args.window), label=n, color=colour[n],
                      lw=1.8 if n in BCL_POLICIES else 1.2)
    timeline.axhline(1.0, color="black", lw=0.8, ls=":")
    timeline.set_xlabel("step")
    timeline.set_ylabel(f"step time / ideal\n(rolling mean of {args.window} steps)")
    left_out = [n for n in names if n not in over_time]
    timeline.set_title(f"({'c' if has_zoom else 'b'}) step time over the run"
                       + (f" ({', '.join(left_out)}: see (a))" if left_out else ""), fontsize=10)
    timeline.grid(axis="y", alpha=0.3)

    handles = [plt.Rectangle((0, 0), 1, 1, color=colour[n], alpha=0.7) for n in names]
    fig.legend(handles, names, loc="upper center", ncol=len(names), fontsize=9, frameon=False,
               bbox_to_anchor=(0.5, 0.945))
    fig.suptitle(args.title or f"bcl-sim step times: {subtitle}", fontsize=12, y=0.99)
    fig.text(0.5, 0.008,
             "Each step lasts as long as its slowest rank. Plotted: that step time divided by the "
             "ideal step time (the mean rank's cost per step, the same for every policy);\n"
             "1 (dotted) means no rank waits, lower is better. eff = 1 / mean ratio: bcl-sim's "
             "efficiency. none = plain fixed-count batches; tumbling and sliding = bcl, rank-local; "
             "global = bcl, coordinated across ranks.",
             ha="center", va="bottom", fontsize=8.5, color="#333333")
    fig.tight_layout(rect=(0, 0.05, 1, 0.925))
    output = args.output or (args.trace.rsplit(".", 1)[0] + ".png")
    try:
        fig.savefig(output, dpi=110)
    except OSError as e:
        fail(f"cannot write {output}: {e.strerror or e}")
    print(f"{PROG}: wrote {output}")


if __name__ == "__main__":
    main()
