#!/usr/bin/env python3
"""Checks that every figure of the README's results links to the docs page holding its command.

The rule, precisely:

- The results are the list items of README.md's section headed `## Measured results`, up to the
  next heading of level 1 or 2. An item is a line starting with `- ` and the lines after it up to
  the next such line, a blank line or a heading.
- A figure is a number with a decimal point (`0.982`), a percentage (`93%`) or a ratio written
  with an x (`1.10x`, `2.3x`).
- An item that holds a figure must hold at least one link to a page docs/<name>.md (an anchor
  may follow), and every docs page it links must show a command: a line of a fenced code block,
  or an inline code span, that runs one of the project's tools (it starts, after an optional
  `$ `, with `build/bin/`, `build-torch/bin/`, `build-python/venv/bin/python`, `/usr/bin/python3`,
  `python3 `, `mpirun `, `bash scripts/` or `scripts/`).
- The section must exist and hold at least one figure (so the check cannot pass by finding none).

Prints each item that breaks the rule (`README.md:line: ...`) and exits 1 if there is any.
Needs python3 and its standard library only.

    python3 scripts/check_readme_figures.py [ROOT]    # ROOT: the repository (default: this one's)
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

SECTION = "## Measured results"
FIGURE = re.compile(r"(?<![\w.])(\d+\.\d+|\d+(?:\.\d+)?%|\d+(?:\.\d+)?x)(?![\w])")
DOC_LINK = re.compile(r"\]\(((?:\.\/)?docs/([A-Za-z0-9_.-]+\.md))(#[^)\s]*)?\)")
COMMAND = re.compile(
    r"^(?:\$ )?(?:build/bin/|build-torch/bin/|build-python/venv/bin/python|/usr/bin/python3|"
    r"python3 |mpirun |bash scripts/|scripts/)"
)
FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
CODE_SPAN = re.compile(r"(`+)(.+?)\1", re.DOTALL)


def results(readme: list[str]) -> list[tuple[int, str]]:
    """(first line number, text) of each list item of the results section."""
    try:
        start = next(i for i, line in enumerate(readme) if line.strip() == SECTION)
    except StopIteration:
        return []
    items: list[tuple[int, str]] = []
    for i in range(start + 1, len(readme)):
        line = readme[i]
        if re.match(r"^#{1,2} ", line):
            break
        if line.startswith("- "):
            items.append((i + 1, line))
        elif line.strip() == "" or line.startswith("#"):
            if items and not items[-1][1].endswith("\n\n"):
                items[-1] = (items[-1][0], items[-1][1] + "\n\n")
        elif items and not items[-1][1].endswith("\n\n"):
            items[-1] = (items[-1][0], items[-1][1] + "\n" + line)
    return [(n, text.strip()) for n, text in items]


def shows_a_command(page: Path) -> bool:
    fence = None
    text = page.read_text(encoding="utf-8")
    for line in text.split("\n"):
        m = FENCE.match(line)
        if fence is None and m:
            fence = m.group(1)
            continue
        if fence is not None:
            if line.strip().startswith(fence):
                fence = None
            elif COMMAND.match(line.strip()):
                return True
    return any(COMMAND.match(m.group(2).strip()) for m in CODE_SPAN.finditer(text))


def check(root: Path) -> int:
    readme = (root / "README.md").read_text(encoding="utf-8").split("\n")
    items = results(readme)
    if not items:
        print(f"check_readme_figures: README.md has no list under '{SECTION}'", file=sys.stderr)
        return 1
    problems = 0
    figures = 0
    for line, text in items:
        found = FIGURE.findall(CODE_SPAN.sub("", text))
        if not found:
            continue
        figures += len(found)
        pages = {m.group(2) for m in DOC_LINK.finditer(text)}
        if not pages:
            print(f"README.md:{line}: figures ({', '.join(found[:4])}...) without a link to a "
                  "docs page", file=sys.stderr)  # fmt: skip
            problems += 1
        for name in sorted(pages):
            page = root / "docs" / name
            if not page.is_file():
                print(f"README.md:{line}: links docs/{name}, which does not exist", file=sys.stderr)
                problems += 1
            elif not shows_a_command(page):
                print(f"README.md:{line}: docs/{name} shows no command to reproduce a figure",
                      file=sys.stderr)  # fmt: skip
                problems += 1
    if figures == 0:
        print(f"check_readme_figures: no figure under '{SECTION}'", file=sys.stderr)
        return 1
    if problems:
        return 1
    print(f"== README figures: all {figures} in {len(items)} results link to a page with a command")
    return 0


if __name__ == "__main__":
    sys.exit(check(Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).parent.parent)))
