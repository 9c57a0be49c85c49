#!/usr/bin/env python3
"""The layering rule of include/bcl (docs/design.md, "Layers"): a header includes only headers of
its own layer or lower ones, and the component folders of one layer include none of each other.
Prints every include that breaks it and exits non-zero."""
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent / "include"

# From the bottom up. A header's layer is that of the first pattern its path matches.
LAYERS = [
    ("vocabulary", [r"bcl/(error|version|record|cost_estimator|cost_check|record_model|"
                    r"calibrated_cost|statistics|options)\.hpp", r"bcl/detail/[a-z_]+\.hpp"]),
    ("partitioners", [r"bcl/partition/"]),
    ("policies", [r"bcl/detail/(rounds|caps|plan)/"]),
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
print("\n".join(problems) if problems else "== layers: no header includes one above it")
sys.exit(1 if problems else 0)
