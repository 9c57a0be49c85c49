#!/usr/bin/env bash
# Sweeps the sliding policy's settings (surplus feedback, buffer_windows, max_age) by compiling
# bcl-sim with other defaults, and prints one markdown row of sliding efficiency per setting over
# the workloads of docs/policies.md (R=8, B=16, K=8, 1000 steps, seed 1).
# Usage: scripts/sweep_sliding.sh "FEEDBACK BUFFER_WINDOWS MAX_AGE" ...
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
w=bench/workloads
dists=(file:$w/sharegpt_8k_filtered_llama2_total_tokens.txt file:$w/mooncake_fast25_conversation_total_tokens.txt
       file:$w/azure_llm_2023_conv_total_tokens.txt file:$w/tudataset_proteins_nodes_per_graph.txt
       file:$w/gsm8k_train_llama3_tokens.txt lognormal:mu=6,sigma=1 pareto:xm=100,alpha=1.5 uniform:lo=1,hi=4096)
for setting in "$@"; do
    read -r feedback windows age <<<"$setting"
    rm -rf "$work/include" && cp -r include "$work/include"
    sed -i "s/std::size_t buffer_windows = 2;/std::size_t buffer_windows = $windows;/; s/std::size_t max_age = 2;/std::size_t max_age = $age;/" \
        "$work/include/bcl/options.hpp"
    sed -i "s/static constexpr double surplus_feedback = 0.03;/static constexpr double surplus_feedback = $feedback;/" \
        "$work/include/bcl/detail/rounds/sliding_rounds.hpp"
    g++ -std=c++20 -O2 -I"$work/include" -Ibench/common -Ibench/sim bench/sim/bcl_sim.cpp -lfmt -o "$work/sim"
    row="| $feedback | $windows | $age |"
    for d in "${dists[@]}"; do
        e=$("$work/sim" --dist "$d" --steps "${BCL_SWEEP_STEPS:-1000}" --seed 1 --policy sliding --format csv | tail -1 | cut -d, -f2)
        row="$row $(printf '%.3f' "$e") |"
    done
    echo "$row"
done
