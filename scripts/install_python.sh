#!/usr/bin/env bash
# Install the Python package (import bcl) into a virtual environment over Debian's torch:
#   bash scripts/install_python.sh                # into build-python/venv (git ignores build*/)
#   bash scripts/install_python.sh /path/to/venv  # or into a venv of your own (made if missing)
# Installs the Debian packages it builds against first (scripts/setup.sh --python). Nothing is
# downloaded from the Python package index: the build uses Debian's setuptools and pybind11.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

venv="${1:-build-python/venv}"
bash scripts/setup.sh --python

if [[ ! -x "$venv/bin/python" ]]; then
    echo "== creating $venv (with Debian's torch and numpy visible)"
    /usr/bin/python3 -m venv --system-site-packages "$venv"
fi
echo "== building and installing the package (about a minute)"
"$venv/bin/pip" install --quiet --no-build-isolation --no-deps ./python
"$venv/bin/python" -c 'import bcl, torch; print("installed bcl", bcl.__version__, "with torch", torch.__version__)'
echo "== use it: $venv/bin/python your_trainer.py (or: source $venv/bin/activate)"
