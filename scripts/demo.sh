#!/usr/bin/env bash
# Build bcl (Release) and run the simulator on the bundled ShareGPT lengths (extra flags go to bcl-sim).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

bash scripts/setup.sh

if [[ -f build/CMakeCache.txt ]]; then
    cmake -S . -B build -DCMAKE_BUILD_TYPE=Release
else
    cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release
fi
cmake --build build -j 2

# The main job: 8 simulated ranks on real ShareGPT conversation lengths, every policy.
build/bin/bcl-sim --dist file:bench/workloads/sharegpt_8k_filtered_llama2_total_tokens.txt --steps 400 "$@"
