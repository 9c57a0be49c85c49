#!/usr/bin/env bash
# The style checks the test command runs: first the docs (every relative link and anchor of
# README.md and docs/*.md resolves, scripts/check_doc_links.py; every figure of the README's
# results links to the docs page that shows its command, scripts/check_readme_figures.py), then
# every C++ file as clang-format-14 would lay it out (.clang-format), and clang-tidy-16
# (.clang-tidy: the checks and why some are off) over every header under include/bcl, the layering
# rule (scripts/check_layers.py), and that every header has its spec beside it:
# include/bcl/[detail/]<path>.hpp -> tests/<path>.test.cpp. Prints what differs and exits non-zero
# on any finding.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

# The docs' checks need python3 and its standard library only, and take well under a second.
python3 scripts/check_doc_links.py
python3 scripts/check_readme_figures.py

format="${BCL_CLANG_FORMAT:-clang-format-14}"
tidy="${BCL_CLANG_TIDY:-clang-tidy-16}"

mapfile -t sources < <(git ls-files '*.cpp' '*.hpp' 2>/dev/null || find include tests bench examples fuzz python -name '*.[ch]pp')
echo "== $format on ${#sources[@]} files"
"$format" --dry-run --Werror "${sources[@]}"

# One translation unit that includes every header, so clang-tidy sees each of them.
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mapfile -t headers < <(cd include && find bcl -name '*.hpp' ! -path 'bcl/torch/*' | sort)
for h in "${headers[@]}"; do echo "#include <$h>"; done >"$work/all_headers.cpp"
echo "== $tidy on ${#headers[@]} headers"
"$tidy" --quiet --config-file=.clang-tidy "$work/all_headers.cpp" -- -std=c++20 -Iinclude \
    2> >(grep -v "warnings generated" >&2)
python3 scripts/check_layers.py

# A reader finds a header's promises in the spec of the same name (the folders under detail/ sit at
# the top of tests/, as partition/detail/ and torch/detail/ sit under theirs).
mapfile -t all_headers < <(cd include/bcl && find . -name '*.hpp' | sed 's|^\./||' | sort)
missing=0
for h in "${all_headers[@]}"; do
    spec="tests/$(sed -e 's|^detail/||' -e 's|\.hpp$|.test.cpp|' <<<"$h")"
    if [[ ! -f "$spec" ]]; then
        echo "include/bcl/$h has no spec: $spec is missing" >&2
        missing=$((missing + 1))
    fi
done
[[ $missing -eq 0 ]] || exit 1
echo "== specs: each of the ${#all_headers[@]} headers has its own"
echo "== style checks passed"
