"""bcl-sim's stage mode (--stages): bcl's stage plan against the one-number plans and the peers on
the same vision-language records, held batches, streams and rank-local streams, R = 8 and 64,
seeds 1-3, and the targets bcl's stage plan and stage balancer are held to.

Runs bcl-sim --stages --sync stage (docs/simulator.md, "Stage mode") for each row of RUNS and
prints, per run and policy, the mean over the seeds of: the efficiency when the ranks meet in
every stage (per stage) and its bound, each stage's own efficiency (vision encoder, language
model) and its bound, and the efficiency when they meet once (per step). Then checks:

- held batches (R * B records, one micro-step), R = 8, B = 16: stages >= summed + 0.05 per stage;
- held batches, R = 64: stages >= summed and >= every peer (none, lm, omnibal) per stage;
- streams, windows of K = 8 steps, R = 8 and 64: stages >= 0.97 per stage, or within 0.01 of its
  bound;
- rank-local streams (--shape local: each rank balances its own share alone, K = 8), R = 8 and
  64: stages (bcl::stage_balancer, sliding) >= every peer (none, lm, summed-tumbling and
  summed-sliding: bcl::balancer on the summed cost) per stage, and stages-tumbling >=
  summed-tumbling.

Exits 1 if a target is missed.

    /usr/bin/python3 bench/sim/stage_table.py [--sim build/bin/bcl-sim] [--held-steps 100]
                                              [--stream-steps 400] [--local-steps 400]
"""

import argparse
import json
import pathlib
import shlex
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
SEEDS = (1, 2, 3)
POLICIES = ("none", "lm", "omnibal", "summed", "stages")
LOCAL_POLICIES = ("none", "lm", "summed-tumbling", "summed-sliding", "stages-tumbling", "stages")
LOCAL = "local K=8"
# (name, R, shape flags)
RUNS = [
    ("held", 8, ["--shape", "held"]),
    ("held", 64, ["--shape", "held"]),
    ("stream K=8", 8, ["--lookahead", "8"]),
    ("stream K=8", 64, ["--lookahead", "8"]),
    (LOCAL, 8, ["--shape", "local", "--lookahead", "8"]),
    (LOCAL, 64, ["--shape", "local", "--lookahead", "8"]),
]


def command(sim, ranks, flags, seed, steps):
    return [sim, "--stages", "--sync", "stage", "--ranks", str(ranks), "--batch", "16",
            "--seed", str(seed), "--steps", str(steps), "--format", "json", "--progress", "off",
            *flags]  # fmt: skip


def figures(policy):
    """The columns of a policy's row, from its JSON."""
    stage, bound = policy["stage_efficiency"], policy["stage_bound"]
    return [policy["stage_sync_efficiency"], policy["stage_sync_bound"], stage["vision"],
            bound["vision"], stage["language"], bound["language"],
            policy["step_sync_efficiency"]]  # fmt: skip


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sim", default=str(ROOT / "build" / "bin" / "bcl-sim"))
    parser.add_argument("--held-steps", type=int, default=100, help="held batches per seed")
    parser.add_argument("--stream-steps", type=int, default=400, help="stream steps per seed")
    parser.add_argument("--local-steps", type=int, default=400,
                        help="rank-local stream steps per seed")  # fmt: skip
    args = parser.parse_args()
    print(f"<!-- {' '.join(shlex.quote(a) for a in sys.argv)} -->")
    print(f"<!-- e.g. {' '.join(command('bcl-sim', 8, RUNS[0][2], 1, args.held_steps))} -->")
    print("| R | shape | policy | per stage | bound | vision | bound | language | bound "
          "| per step |")  # fmt: skip
    print("|---:|---|---|---:|---:|---:|---:|---:|---:|---:|")
    means = {}
    for name, ranks, flags in RUNS:
        steps = {"held": args.held_steps, LOCAL: args.local_steps}.get(name, args.stream_steps)
        policies = LOCAL_POLICIES if name == LOCAL else POLICIES
        rows = {p: [] for p in policies}
        for seed in SEEDS:
            out = subprocess.run(command(args.sim, ranks, flags, seed, steps), check=True,
                                 capture_output=True, text=True).stdout  # fmt: skip
            for p in json.loads(out)["policies"]:
                rows[p["policy"]].append(figures(p))
        for p in policies:
            m = [sum(column) / len(column) for column in zip(*rows[p])]
            means[(name, ranks, p)] = m
            cells = " | ".join(f"{x:.4f}" for x in m)
            best = "**" if p == "stages" else ""
            print(f"| {ranks} | {name} | {best}{p}{best} | {cells} |")

    def per_stage(name, ranks, policy):
        return means[(name, ranks, policy)][0]

    checks = []
    gain = per_stage("held", 8, "stages") - per_stage("held", 8, "summed")
    checks.append((f"held R=8: stages - summed = {gain:.4f} >= 0.05", gain >= 0.05))
    best_other = max(per_stage("held", 64, p) for p in ("none", "lm", "omnibal", "summed"))
    stages = per_stage("held", 64, "stages")
    checks.append((f"held R=64: stages {stages:.4f} >= summed and every peer (the best of them "
                   f"{best_other:.4f})", stages >= best_other))  # fmt: skip
    for ranks in (8, 64):
        value, bound = means[("stream K=8", ranks, "stages")][:2]
        checks.append((f"stream K=8 R={ranks}: stages {value:.4f} >= 0.97 or within 0.01 of its "
                       f"bound {bound:.4f}", value >= 0.97 or bound - value <= 0.01))  # fmt: skip
    for ranks in (8, 64):
        stages = per_stage(LOCAL, ranks, "stages")
        peers = {p: per_stage(LOCAL, ranks, p) for p in ("none", "lm", "summed-tumbling",
                                                         "summed-sliding")}  # fmt: skip
        best = max(peers, key=peers.get)
        checks.append((f"local K=8 R={ranks}: stages {stages:.4f} >= every peer (the best of "
                       f"them {best} {peers[best]:.4f})", stages >= peers[best]))  # fmt: skip
        window = per_stage(LOCAL, ranks, "stages-tumbling")
        checks.append((f"local K=8 R={ranks}: stages-tumbling {window:.4f} >= summed-tumbling "
                       f"{peers['summed-tumbling']:.4f}",
                       window >= peers["summed-tumbling"]))  # fmt: skip
    print()
    for text, ok in checks:
        print(f"- {'met' if ok else 'MISSED'}: {text}")
    return 0 if all(ok for _, ok in checks) else 1


if __name__ == "__main__":
    sys.exit(main())
