#!/usr/bin/env python3
"""The layering rule of the tree (docs/design.md, "Layers" and "Seams"): a header of include/bcl
includes only headers of its own layer or lower ones, and the component folders of one layer
include none of each other; outside include/, the adapters, tools and examples reach into
bcl::detail only through the documented seams. Prints every use that breaks it and exits
non-zero."""
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent / "include"

# From the bottom up. A header's layer is that of the first pattern its path matches.
LAYERS = [
    ("vocabulary", [r"bcl/(error|version|record|cost_estimator|cost_check|record_model|"
                    r"calibrated_cost|statistics|options)\.hpp", r"bcl/detail/[a-z_]+\.hpp"]),
    ("partitioners", [r"bcl/partition/"]),
    ("policies", [r"bcl/detail/(rounds|caps|plan|tokens|stages)/"]),
    ("checks", [r"bcl/validate\.hpp"]),
    ("components", [r"bcl/detail/(intake|split|emission|calibration)/"]),
    ("state", [r"bcl/detail/state/"]),
    ("core", [r"bcl/[a-z_]+\.hpp"]),
    ("adapters", [r"bcl/torch/"]),
]
# Component folders of one layer are siblings: each sees the layers below, not the others
# (placement, step 5, reads the round the policies chose: that is a lower layer).
SIBLINGS = {"components"}


def layer_of(path):
    for index, (name, patterns) in enumerate(LAYERS):
        if any(re.match(p, path) for p in patterns):
            return index, name
    raise SystemExit(f"{path}: no layer (add it to scripts/check_layers.py)")


def folder(path):
    m = re.match(r"bcl/detail/([a-z_]+)/", path)
    return m.group(1) if m else None


problems = []
for header in sorted(ROOT.glob("bcl/**/*.hpp")):
    path = header.relative_to(ROOT).as_posix()
    level, name = layer_of(path)
    for line_number, line in enumerate(header.read_text().splitlines(), 1):
        m = re.match(r"#include <(bcl/[^>]+)>", line)
        if not m:
            continue
        target = m.group(1)
        target_level, target_name = layer_of(target)
        if target_level > level:
            problems.append(f"{path}:{line_number}: {name} includes {target} ({target_name}, above)")
        elif (target_level == level and name in SIBLINGS and
              folder(path).split("/")[0] != folder(target).split("/")[0]):
            problems.append(f"{path}:{line_number}: {name} folder {folder(path)} includes its "
                            f"sibling {target}")

# Outside include/: the adapters (python/src), the tools (bench/) and the examples use the public
# surface only, but for the seams into bcl::detail that docs/design.md ("Seams") documents, each
# with its reason. tests/ and fuzz/ are white-box and may use anything.
TREE = ROOT.parent
SEAMS = {
    # Restoring a balancer whose records are indices or stream positions: its saved pending
    # records checked against the epoch they come from (the libtorch sampler does the same).
    "python/src/": {"bcl/detail/state/index_epoch_check.hpp", "bcl::detail::check_index_epoch",
                    "bcl::detail::balancer_snapshot",
                    # Numbers in messages spelt as the library spells them.
                    "bcl/detail/number_text.hpp", "bcl::detail::number_text",
                    # A keyed epoch's digest of its inputs, mixed as the plan digests are.
                    "bcl/detail/random.hpp", "bcl::detail::mix64"},
    # Micro-benchmarks of the library's internal parts: the partitioners it keeps as baselines
    # and the memory repair.
    "bench/bcl_bench.cpp": {
        "bcl::detail::lpt_partitioner", "bcl::detail::karmarkar_karp_partitioner",
        "bcl::detail::snake_partitioner", "bcl::detail::refined",
        "bcl/detail/split/memory/memory_repair.hpp", "bcl::detail::memory_repair",
    },
    # The simulator caps the baselines' records by the balancer's own rule, so that a capped run
    # compares like with like.
    "bench/sim/cost_and_cap.hpp": {
        "bcl/detail/intake/outlier_cap.hpp", "bcl::detail::outlier_cap",
    },
    # The simulator's stream windows are the token planner's own (its window rule), not a copy.
    "bench/sim/token_windows.hpp": {
        "bcl/detail/tokens/stream_window.hpp", "bcl::detail::tokens",
    },
}
OUTSIDE = ["python/src", "bench", "examples"]
DETAIL_USE = re.compile(r"<(bcl/detail/[a-z0-9_/]+\.hpp)>|(bcl::detail::[a-z0-9_]+)")


def allowed(path):
    return set().union(*(names for prefix, names in SEAMS.items() if path.startswith(prefix)))


for folder_name in OUTSIDE:
    for source in sorted((TREE / folder_name).rglob("*")):
        if source.suffix not in (".hpp", ".cpp", ".h") or "/tests/" in source.as_posix():
            continue
        path = source.relative_to(TREE).as_posix()
        for line_number, line in enumerate(source.read_text().splitlines(), 1):
            for m in DETAIL_USE.finditer(line):
                used = m.group(1) or m.group(2)
                if used not in allowed(path):
                    problems.append(f"{path}:{line_number}: uses {used}, which is no documented "
                                    "seam into bcl::detail (docs/design.md, \"Seams\")")

print("\n".join(problems) if problems else
      "== layers: no header includes one above it; outside include/, only the documented seams")
sys.exit(1 if problems else 0)
