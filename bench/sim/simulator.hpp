#pragma once
// The engine of bcl-sim, the multi-rank simulator: record streams, the cost model, the baseline
// policies, the bcl policies (which go through the library itself, never a re-implementation),
// and the metrics. Header-only so that its tests (bench/sim/tests/, the bcl-sim-tests binary) can
// drive it directly; the command-line front end (flags, table/JSON/CSV output) is bcl_sim.cpp.
//
// The model: R ranks run synchronous data-parallel steps. In every step each rank processes one
// batch; the step lasts as long as its slowest rank. A policy decides which records make up each
// rank's batch in each step; a rank's time is the sum of its records' true costs (or, under
// --batching padded, B times its costliest record's). In micro-batch mode (--max-tokens) each
// rank's share of a step is cut into micro-batches of at most T tokens, as many on every rank;
// micro-batch j of every rank runs together and lasts as long as the slowest.
//
// This header includes the whole engine, one part per header, each usable on its own:
//   input.hpp                bad input (input_error) and the spec-parsing helpers
//   random.hpp               SplitMix64, stream keys, shuffles: a seed gives the same run
//   everywhere workload.hpp             length distributions, workload files, the per-rank record
//   sources batching.hpp             --batching (packed or padded batch cost) and --emission
//   cost_and_cap.hpp         the cost model, the outlier cap and its prior, truncation, stream_cap
//   calibration.hpp          --true-cost, --drift, and a calibrated policy's fit and its error
//   metrics.hpp              efficiency, goodput, cv, p99 step ratio, speedup
//   token_settings.hpp       micro-batch mode's settings (--max-tokens and its flags)
//   policy_runner.hpp        what every policy shares: sim_context, fetch(), policy_runner
//   sim_config.hpp           every input of a run (sim_config) and the checks both modes make
//   run_inputs.hpp           what a run resolves before its policies run, and their context
//
// Fixed-size batches (B records a rank a step):
//   baselines.hpp            none, length_grouped
//   mffd.hpp                 mffd (NeMo-RL sequence packing)
//   verl_kk.hpp              verl_kk (verl's balance_batch: Karmarkar-Karp per step)
//   bcl_runner.hpp           tumbling and sliding: a bcl::balancer per rank
//   global_runner.hpp        global: one bcl::global_planner plan of all ranks' K-step windows
//   policy_table.hpp         the policy table
//   simulate.hpp             the mode's checks, a policy's run and metrics, sim_result, simulate()
//
// Micro-batch mode (--max-tokens: micro-batches of at most T tokens, as many on every rank):
//   token_metrics.hpp        efficiency and imbalance per micro-step, the counts every step keeps
//   token_peers.hpp          the peers' own micro-batching (verl, SkyRL, NeMo-RL, WLB-LLM)
//   token_runner.hpp         what every runner shares: the global order, the block builder
//   token_windows.hpp        where a stream's steps and windows end: the library's window rule
//   token_peer_runner.hpp    the peers, step by step
//   token_global_runner.hpp  global: bcl::token_planner's held and stream plans
//   token_fixed_runner.hpp   global_fixed: bcl's fixed-B plan on the same records
//   token_policies.hpp       the policy table
//   token_simulate.hpp       the mode's checks, a policy's run, token_sim_result, simulate_tokens()
//
// Stage mode (--stages: records with a vision encoder's and a language model's cost apart):
//   stage_settings.hpp       the mode's settings (--sync, --shape, --micro-steps, --modality-mix)
//   stage_workload.hpp       the vision-language records and their stage costs
//   stage_metrics.hpp        per-stage and per-step efficiency of each micro-step, and the bound
//   omnibal.hpp              OmniBal's balanced dynamic mini-batch (ISF), groups of B
//   stage_policies.hpp       none, lm (verl), summed and stages (bcl), omnibal: the policy table
//   stage_local.hpp          --shape local: a library balancer per rank (bcl::balancer on one
//                            cost, bcl::stage_balancer on both), the rank-local policy table
//   stage_simulate.hpp       the mode's checks, every policy on the same records, simulate_stages()
//
// The output (bcl_sim.cpp's): report_common.hpp, report.hpp, token_report.hpp, stage_report.hpp.

#include "baselines.hpp"
#include "batching.hpp"
#include "bcl_runner.hpp"
#include "calibration.hpp"
#include "cost_and_cap.hpp"
#include "global_runner.hpp"
#include "input.hpp"
#include "metrics.hpp"
#include "mffd.hpp"
#include "omnibal.hpp"
#include "policy_runner.hpp"
#include "policy_table.hpp"
#include "random.hpp"
#include "run_inputs.hpp"
#include "sim_config.hpp"
#include "simulate.hpp"
#include "stage_local.hpp"
#include "stage_metrics.hpp"
#include "stage_policies.hpp"
#include "stage_settings.hpp"
#include "stage_simulate.hpp"
#include "stage_workload.hpp"
#include "token_fixed_runner.hpp"
#include "token_global_runner.hpp"
#include "token_metrics.hpp"
#include "token_peer_runner.hpp"
#include "token_peers.hpp"
#include "token_policies.hpp"
#include "token_runner.hpp"
#include "token_settings.hpp"
#include "token_simulate.hpp"
#include "token_windows.hpp"
#include "verl_kk.hpp"
#include "workload.hpp"
