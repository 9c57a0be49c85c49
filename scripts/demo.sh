#!/usr/bin/env bash
# Build bcl (Release) and run the first example on the ShareGPT workload.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

bash scripts/setup.sh

if [[ -f build/CMakeCache.txt ]]; then
    cmake -S . -B build -DCMAKE_BUILD_TYPE=Release
else
    cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release
fi
cmake --build build -j 2

demo=build/bin/01_balance_workload
if [[ ! -x "$demo" ]]; then
    echo "demo.sh: $demo was not built (is examples/01_balance_workload.cpp there?)" >&2
    exit 1
fi
"$demo" bench/workloads/sharegpt_8k_filtered_llama2_total_tokens.txt
