#!/usr/bin/env bash
# The Python package's checks: builds bcl (./python) into a virtual environment over Debian's
# python3-torch, numpy, pybind11, pytest and hypothesis (nothing is downloaded), runs its test
# suite, quick runs of the sampler and stream benchmarks, and short smoke runs of the DDP and
# streaming examples.
# Exits non-zero on any failure (2 if the Debian packages it needs are missing). 1 to 3 min on
# this 2-core machine (by its load), the build included.
#
#   bash scripts/test_python.sh            # venv in build-python/venv
#   BCL_PYTHON_VENV=/tmp/v bash scripts/test_python.sh
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

# Debian's interpreter: the one with python3-torch & co. (another python3 may come first on PATH).
python="${BCL_PYTHON:-/usr/bin/python3}"
venv="${BCL_PYTHON_VENV:-build-python/venv}"

# The Debian packages this needs; the caller installs them (apt-get).
if ! command -v "$python" > /dev/null || ! command -v g++ > /dev/null ||
    ! "$python" -c 'import ensurepip, numpy, pybind11, pytest, hypothesis, setuptools, torch' \
        2> /dev/null || ! "$python" -m flake8 --version > /dev/null 2>&1 ||
    ! "$python" -m mypy --version > /dev/null 2>&1; then
    echo "scripts/test_python.sh: missing prerequisites. It needs $python and g++ with the" >&2
    echo "Debian packages python3-torch python3-numpy python3-setuptools python3-pybind11" >&2
    echo "pybind11-dev python3-pytest python3-hypothesis python3-venv python3-mypy flake8" >&2
    echo "(apt-get install them)." >&2
    exit 2
fi

if [[ ! -x "$venv/bin/python" ]]; then
    echo "== creating $venv"
    "$python" -m venv --system-site-packages "$venv"
fi
echo "== pip install --no-build-isolation ./python"
"$venv/bin/pip" install --quiet --no-build-isolation --no-deps --force-reinstall ./python

echo "== flake8 and mypy"
# Debian's flake8 and mypy, with the settings in .flake8 and python/pyproject.toml.
"$python" -m flake8 python examples/python bench/python bench/sim
(cd python && "$python" -m mypy --cache-dir ../build-python/mypy_cache)

echo "== pytest python/tests"
# From python/tests' parent's parent, so the installed package is imported, not the sources.
"$venv/bin/python" -m pytest -q -p no:cacheprovider python/tests

echo "== bench/python/bench_sampler.py (quick)"
"$venv/bin/python" bench/python/bench_sampler.py --n 100000 --repeats 2

echo "== bench/python/bench_stream.py (quick)"
# Fails if a stream's batch count is wrong or its cv reduction on ShareGPT is not the sampler's.
"$venv/bin/python" bench/python/bench_stream.py --n 30000 --repeats 2

echo "== bench/python/bench_padding.py, bench_plan_batches.py and bench_micro_batches.py (quick)"
# All fail if any plan gives ranks different batch counts; bench_micro_batches.py also if bcl
# plans a micro-batch above max_tokens.
"$venv/bin/python" bench/python/bench_padding.py
"$venv/bin/python" bench/python/bench_plan_batches.py
"$venv/bin/python" bench/python/bench_micro_batches.py --batches 10

echo "== bench/python/bench_stages.py (quick: held batches, streams, token budget)"
# Fails if a stage plan is not one micro-batch of B on every rank, or a rank's stream is short.
"$venv/bin/python" bench/python/bench_stages.py --ranks 8 --batches 5 --seeds 1
"$venv/bin/python" bench/python/bench_stages.py --stream --ranks 8 --windows 1 --seeds 1
"$venv/bin/python" bench/python/bench_stages.py --tokens --ranks 8 --batches 3 --seeds 1

echo "== bench/python/bench_scale.py (quick)"
# Fails if any sampler's epoch (token mode too) hands out another count of batches than its len().
"$venv/bin/python" bench/python/bench_scale.py --n 100000 --ranks 64 --repeats 1 --steady 50 --tokens

echo "== examples/python/train_ddp.py --smoke --running-mean --policy bcl,global"
# A bounded wait: two ranks that cannot reach each other would otherwise wait for gloo's timeout.
# Exits 1 if any policy ran a different number of steps on the two ranks in any epoch.
timeout -k 10 240 "$venv/bin/python" examples/python/train_ddp.py --smoke --running-mean \
    --policy bcl,global

echo "== examples/python/stream_finetune.py --smoke"
# One process, then two DDP ranks; exits 1 unless the resumed run gives the same batches.
timeout -k 10 120 "$venv/bin/python" examples/python/stream_finetune.py --smoke

echo "== examples/python/resize_resume.py (2 ranks, checkpoint, restart on 3)"
# Exits 1 if an index of the epoch is lost or repeated beyond the padding, or ranks' counts differ.
timeout -k 10 120 "$venv/bin/python" examples/python/resize_resume.py
echo "== examples/python/resize_resume.py --tokens (the same in token mode, from a step boundary)"
timeout -k 10 120 "$venv/bin/python" examples/python/resize_resume.py --tokens

echo "== python checks passed"
