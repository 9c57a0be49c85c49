#!/usr/bin/env bash
# Install the Debian packages needed to build bcl and run its tools and demo (only those missing).
#   bash scripts/setup.sh           # the C++ tools, benchmarks, MPI bench and the demo's plot
#   bash scripts/setup.sh --python  # and the Python package's build and runtime (Debian's torch)
#   bash scripts/setup.sh --all     # and everything the whole test command needs
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

packages=(cmake ninja-build g++ libfmt-dev catch2 libbenchmark-dev libcli11-dev nlohmann-json3-dev openmpi-bin libopenmpi-dev python3-matplotlib)
python_packages=(python3 python3-venv python3-pip python3-torch python3-numpy python3-setuptools
                 python3-pybind11 pybind11-dev)
case "${1:-}" in
"") ;;
--python) packages+=("${python_packages[@]}") ;;
--all)
    # The test command's second compiler, fuzzers and style checks; libtorch for the sampler
    # adapter and its trainer (with an optimized BLAS: the reference one is 8x slower); the Python
    # package, its tests and their checks.
    packages+=(clang-16 libc++-16-dev libc++abi-16-dev libclang-rt-16-dev clang-format-14 clang-tidy-16)
    packages+=(libtorch-dev libopenblas0-pthread)
    packages+=("${python_packages[@]}" python3-pytest python3-hypothesis python3-mypy flake8)
    ;;
*)
    echo "setup.sh: unknown argument '$1' (expected nothing, --python or --all)" >&2
    exit 2
    ;;
esac

missing=()
for pkg in "${packages[@]}"; do
    status="$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null || true)"
    if [[ "$status" != "install ok installed" ]]; then
        missing+=("$pkg")
    fi
done

if ((${#missing[@]} == 0)); then
    exit 0
fi

if [[ "$(id -u)" -eq 0 ]]; then
    as_root=()
elif command -v sudo >/dev/null 2>&1; then
    as_root=(sudo)
else
    echo "setup.sh: missing packages (${missing[*]}) and not root, and sudo is unavailable" >&2
    exit 1
fi

echo "setup.sh: installing ${missing[*]}"
apt=(env DEBIAN_FRONTEND=noninteractive apt-get -qq -o=Dpkg::Use-Pty=0)
${as_root[@]+"${as_root[@]}"} "${apt[@]}" update >/dev/null
${as_root[@]+"${as_root[@]}"} "${apt[@]}" install -y --no-install-recommends "${missing[@]}" >/dev/null
