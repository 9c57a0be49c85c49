#!/usr/bin/env bash
# The whole test suite, as CI runs it (.ci/run). Installs what is missing (Debian), then:
#
#   style                every relative link and anchor of the docs resolves, and every figure in
#                        the README's results links to the page holding its command;
#                        clang-format-14 on every C++ file; clang-tidy-16 over every header; the
#                        layering rule; every header has its spec.
#   build/               GCC 12, -O2, warnings as errors, the specs in unity batches. Every spec and
#                        property test at full counts (bcl-tests, bcl-sim-tests), each header
#                        compiling alone, the umbrella header with nothing else, the C++17 refusal,
#                        the simulator's and the plot script's command-line tests, the examples and
#                        the README's output, the installed-package consumer, the batch trace, the
#                        MPI benchmark's runs, the benchmarks building; then bcl-sim's token table.
#   build-asan/          clang-16 with libc++, ASan + UBSan at -O0, warnings as errors, the specs
#                        in unity batches. Every spec under the sanitizers (random property cases
#                        cut by BCL_SANITIZED_CASE_DIVISOR, every case kind kept), each header alone
#                        against libc++ with clang's own warnings (-Wsign-conversion and the rest).
#   plan digest          the global and token plans, bit for bit, under six builds: GCC -O0, -O3
#                        -march=native, -ffast-math; clang-16 with libstdc++ at -O0 and -O3
#                        -march=native; clang-16 with libc++. (Clang with libstdc++ is covered here
#                        and by the fuzz targets.)
#   worked example       docs/design.md's new cap kind applies and works.
#   build-torch/         the libtorch samplers' specs (a precompiled header for torch), the doc
#                        snippet and a 2-rank smoke run of bcl-torch-train.
#   Python               the package's tests, benchmarks and examples (scripts/test_python.sh).
#   fuzzing              clang's libFuzzer targets under ASan + UBSan for BCL_FUZZ_SECONDS
#                        (default 180) in all (scripts/fuzz.sh), on one core in the background
#                        from the plan digest to the end of the Python checks, where the others
#                        leave a core idle; its report comes last.
#
# Each section's header says when it started. For the edit loop, scripts/test_fast.sh runs the
# first build alone.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

bash scripts/setup.sh --all

jobs=2
section() { echo "== $1 (at $((SECONDS / 60)) min $((SECONDS % 60)) s)"; }
fuzz_seconds="${BCL_FUZZ_SECONDS:-180}"

section "style (clang-format, clang-tidy, layers, a spec per header)"
bash scripts/check_style.sh

section "GCC 12 Release build, -O2, specs in unity batches (build/)"
bash scripts/test_fast.sh

section "token-budget micro-batches: bcl-sim's targets against the peers (docs/tokens.md)"
python3 bench/sim/token_table.py --sim build/bin/bcl-sim --steps 300

section "clang-16 + libc++ + ASan + UBSan build (build-asan/)"
bash scripts/test_sanitized.sh

section "fuzzing for ${fuzz_seconds} s over all targets starts in the background (its report comes last)"
fuzz_log="$(mktemp "${TMPDIR:-/tmp}/bcl-fuzz-log.XXXXXX")"
# In a session of its own, so that a failing section (which stops this script) stops the fuzzer
# and the target it runs with it.
setsid bash scripts/fuzz.sh "$fuzz_seconds" >"$fuzz_log" 2>&1 &
fuzz_pid=$!
trap 'kill -- -"$fuzz_pid" 2>/dev/null || true' EXIT

section "the global plan is the same under every compiler and floating-point setting"
bash scripts/test_plan_digest.sh

section "docs/design.md's worked example (a new cap kind) applies and works"
bash scripts/check_worked_example.sh

section "libtorch adapter"
bash scripts/test_torch.sh

section "Python package"
bash scripts/test_python.sh

section "fuzzing's report"
fuzz_status=0
wait "$fuzz_pid" || fuzz_status=$?
trap - EXIT
cat "$fuzz_log"
if ((fuzz_status != 0)); then
    echo "== FAILED: fuzzing exit code $fuzz_status"
    exit 1
fi

echo "== all checks passed in $((SECONDS / 60)) min $((SECONDS % 60)) s"
