#!/usr/bin/env python3
"""Checks that every relative link and #anchor in README.md and docs/*.md resolves.

What it reads: each Markdown link `[text](target)` of README.md and docs/*.md, outside fenced
code blocks and inline code spans (link text may wrap across lines). Targets with a scheme
(https:, mailto:, ...) are left alone. For the others:

- the path (relative to the file that links, empty for the file itself) must name a file or a
  directory of the repository;
- an anchor (`#part`) on a Markdown file must be one of that file's headings, as GitHub names
  them: the heading's text (inline code and emphasis markers, and links reduced to their text),
  lowercased, every character dropped that is not a letter, a digit, a space, `-` or `_`, each
  space then a hyphen; a heading whose name is already taken gets `-1`, then `-2`, ...

Prints each link that does not resolve as `file:line: [text](target): why` and exits 1 if there
is any; exits 0 with a one-line count otherwise. Needs python3 and its standard library only.

    python3 scripts/check_doc_links.py [ROOT]    # ROOT: the repository (default: this one's)
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
ATX_HEADING = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.*?)[ \t]*#*[ \t]*$")
CODE_SPAN = re.compile(r"(`+)(.+?)\1", re.DOTALL)
LINK = re.compile(r"(!?)\[((?:[^\[\]]|\[[^\[\]]*\])*)\]\(\s*<?([^()\s<>]*)>?(?:\s+\"[^\"]*\")?\s*\)")
SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")


def prose(text: str) -> str:
    """The text with every fenced code block's lines blanked (line numbers kept)."""
    out = []
    fence = None
    for line in text.split("\n"):
        m = FENCE.match(line)
        if fence is None and m:
            fence = m.group(1)[0] * len(m.group(1))
            out.append("")
        elif fence is not None:
            if line.strip().startswith(fence) and set(line.strip()) <= {fence[0]}:
                fence = None
            out.append("")
        else:
            out.append(line)
    return "\n".join(out)


def without_code_spans(text: str) -> str:
    """Inline code spans blanked to spaces of their length (newlines kept)."""
    return CODE_SPAN.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), text)


def heading_text(raw: str) -> str:
    """A heading's text as GitHub renders it: code spans and links reduced to their text."""
    text = CODE_SPAN.sub(lambda m: m.group(2).strip(), raw)
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = re.sub(r"<[^>]+>", "", text)
    return text


def slug(text: str) -> str:
    text = heading_text(text).strip().lower()
    text = "".join(c for c in text if c.isalnum() or c in " -_")
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """Every anchor GitHub gives the headings of the Markdown file at `path`."""
    seen: dict[str, int] = {}
    names = set()
    for line in prose(path.read_text(encoding="utf-8")).split("\n"):
        m = ATX_HEADING.match(line)
        if not m:
            continue
        base = slug(m.group(2))
        count = seen.get(base, 0)
        seen[base] = count + 1
        names.add(base if count == 0 else f"{base}-{count}")
    return names


def check(root: Path) -> int:
    files = [root / "README.md"] + sorted((root / "docs").glob("*.md"))
    cache: dict[Path, set[str]] = {}
    problems = 0
    links = 0
    for source in files:
        text = without_code_spans(prose(source.read_text(encoding="utf-8")))
        for m in LINK.finditer(text):
            target = m.group(3)
            if not target or SCHEME.match(target):
                continue
            links += 1
            line = text.count("\n", 0, m.start()) + 1
            where = f"{source.relative_to(root)}:{line}: [{' '.join(m.group(2).split())}]({target})"
            path_part, _, anchor = target.partition("#")
            resolved = (source.parent / path_part).resolve() if path_part else source
            if not resolved.exists():
                print(f"{where}: no such file or directory", file=sys.stderr)
                problems += 1
                continue
            if not anchor:
                continue
            if resolved.suffix != ".md" or not resolved.is_file():
                print(f"{where}: an anchor on a file that is not Markdown", file=sys.stderr)
                problems += 1
                continue
            if resolved not in cache:
                cache[resolved] = anchors(resolved)
            if anchor not in cache[resolved]:
                print(f"{where}: no heading of {resolved.relative_to(root)} has the anchor "
                      f"#{anchor}", file=sys.stderr)  # fmt: skip
                problems += 1
    if problems:
        print(f"check_doc_links: {problems} of {links} relative links do not resolve",
              file=sys.stderr)  # fmt: skip
        return 1
    print(f"== links: all {links} relative links and anchors of {len(files)} pages resolve")
    return 0


if __name__ == "__main__":
    sys.exit(check(Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).parent.parent)))
