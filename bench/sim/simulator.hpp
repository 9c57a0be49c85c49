#pragma once
// The engine of bcl-sim, the multi-rank simulator: record streams, the cost model, the baseline
// policies, the bcl policies (which go through the library itself, never a re-implementation),
// and the metrics. Header-only so that its tests (bench/sim/tests/, the bcl-sim-tests binary) can
// drive it directly; the command-line front end (flags, table/JSON/CSV output) is bcl_sim.cpp.
//
// The model: R ranks run synchronous data-parallel steps. In every step each rank processes one
// batch; the step lasts as long as its slowest rank. A policy decides which records make up each
// rank's batch in each step; a rank's time is the sum of its records' true costs (or, under
// --batching padded, B times its costliest record's).
//
// This header includes the whole engine, one part per header, each usable on its own:
//   input.hpp           bad input (input_error) and the spec-parsing helpers
//   random.hpp          SplitMix64, stream keys, shuffles: a seed gives the same run everywhere
//   workload.hpp        length distributions, workload files, the per-rank record sources
//   batching.hpp        --batching (packed or padded batch cost) and --emission
//   cost_and_cap.hpp    the cost model, the outlier cap and its prior, truncation, stream_cap
//   metrics.hpp         efficiency, goodput, cv, p99 step ratio, speedup
//   policy_runner.hpp   what every policy shares: sim_context, fetch(), policy_runner
//   baselines.hpp       none, length_grouped
//   mffd.hpp            mffd (NeMo-RL sequence packing)
//   verl_kk.hpp         verl_kk (verl's balance_batch: Karmarkar-Karp per step)
//   bcl_runner.hpp      tumbling and sliding: a bcl::balancer per rank
//   global_runner.hpp   global: one bcl::global_planner plan of all ranks' K-step windows
//   simulate.hpp        the policy table, sim_config, sim_result, simulate()

#include "baselines.hpp"
#include "batching.hpp"
#include "bcl_runner.hpp"
#include "cost_and_cap.hpp"
#include "global_runner.hpp"
#include "input.hpp"
#include "metrics.hpp"
#include "mffd.hpp"
#include "policy_runner.hpp"
#include "random.hpp"
#include "simulate.hpp"
#include "verl_kk.hpp"
#include "workload.hpp"
