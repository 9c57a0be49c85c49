#!/usr/bin/env bash
# Build the simulator (Release) and run it on the bundled ShareGPT lengths: 8 ranks, 1000 steps,
# the run whose numbers the README quotes. Extra flags go to bcl-sim and override these (e.g.
# --steps 5000, --ranks 32). Ends with a legend of the table's rows and columns and, when
# /usr/bin/python3 has matplotlib, a plot of the step times (scripts/plot_sim.py). BCL_BUILD_DIR
# picks the build tree (default build/).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

build="${BCL_BUILD_DIR:-build}"

# The format the flags ask bcl-sim for: only its table is followed by the legend below.
format=table
for ((i = 1; i <= $#; ++i)); do
    case "${!i}" in
    --format=*) format="${!i#--format=}" ;;
    --format) j=$((i + 1)) && format="${!j:-table}" ;;
    esac
done

# Installing and building report on stderr, so that stdout holds only what bcl-sim prints (and,
# after a table, its legend): with --format json or csv it stays parsable. Only bcl-sim is built
# (one target, about a minute on two cores); `bash scripts/test.sh` builds everything else.
{
    echo "== demo 1/4: Debian packages (scripts/setup.sh installs only what is missing)"
    bash scripts/setup.sh
    echo "== demo 2/4: configuring $build/ (Release)"
    if [[ -f "$build/CMakeCache.txt" ]]; then
        cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null
    else
        cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DBCL_BUILD_TORCH=OFF >/dev/null
    fi
    echo "== demo 3/4: building bcl-sim, the simulator (one target)"
    cmake --build "$build" -j 2 --target bcl-sim
    echo "== demo 4/4: simulating 8 ranks on ShareGPT's conversation lengths"
} >&2

out="$build/demo"
mkdir -p "$out"
# bcl-sim takes the last value of a repeated flag, so the flags given to this script win.
sim=("$build/bin/bcl-sim" --dist file:bench/workloads/sharegpt_8k_filtered_llama2_total_tokens.txt
     --steps 1000 "$@")

# The main job: 8 simulated ranks on real ShareGPT conversation lengths, every policy.
if [[ "$format" == table ]]; then echo; fi
"${sim[@]}" --trace "$out/sim_trace.csv"

if [[ "$format" == table ]]; then
    cat <<'EOF'

Rows, one per policy, all on the same records: none, plain fixed-count batches, the reference
the others are compared with; length_grouped, mffd and verl_kk, what other trainers do (Hugging
Face group_by_length; NeMo-RL sequence packing, with bins of the context length, the smallest
power of two that holds the longest record, as its users size them; verl's balance_batch); mffd
and verl_kk see every rank's records each step, and mffd gives ranks different record counts.
global: bcl's global plan, K steps of all ranks' records planned together, the same plan computed
by every rank from a shared cost table (no communication). tumbling (the paper's policy) and
sliding (bcl's default): bcl's rank-local balancer, for streams no rank sees whole.
Columns:
  efficiency  mean rank step cost / mean step time (a step lasts as long as its slowest rank);
              1 means no rank ever waits. Higher is better.
  goodput     the share of the ranks' time spent on useful work: efficiency itself with packed
              batches (the default), below it with --batching padded. Higher is better.
  speedup     none's step time / this policy's, on the same records. Higher is better.
  cv          std / mean of a rank's batch cost. Lower is better.
  cv_red      1 - cv / none's cv: the share of none's variability removed. Higher is better.
  p99/mean    99th-percentile step time / the ideal step time. Lower is better (1 at best).
  gap_to_lb   heaviest batch of a window above the best possible (a lower bound), relative,
              averaged over windows; '-' for policies without bcl's partitioner. Lower is better.
  delay       most steps a record is held back behind its plain batch. Lower is better.
  capped      records the outlier cap (--cap) acted on; 0 without a cap.
  peak_tok    most tokens in one rank's batch: its memory peak. Lower is better.
  over_bud    rank-batches above --memory-budget; 0 without one. Lower is better.
  time_s      the simulator's own run time for the policy (not training time).
Notes under the table: round_bound is the best efficiency any partition and emission order of
the same rounds could reach (an upper bound for tumbling); mffd's line gives its bin size.
With no flags given, these are the README's figures (R=8, B=16, K=8, 1000 steps, seed 1).
EOF
fi

# After a table, notes go to stdout with it; after JSON or CSV, to stderr, so stdout stays parsable.
note() {
    if [[ "$format" == table ]]; then printf '\n%s\n' "$1"; else printf '%s\n' "$1" >&2; fi
}
if /usr/bin/python3 -c 'import matplotlib' 2>/dev/null; then
    "${sim[@]}" --format json >"$out/sim.json"
    /usr/bin/python3 scripts/plot_sim.py "$out/sim_trace.csv" --summary "$out/sim.json" \
        -o "$out/sim_trace.png" >/dev/null
    note "Step times of every policy, plotted: $out/sim_trace.png"
else
    note "(No plot: /usr/bin/python3 has no matplotlib; Debian: apt-get install python3-matplotlib.)"
fi
