#pragma once
// Umbrella header: the public surface of bcl, every header a user includes, in one.
//   - Rank-local balancing: the range adaptor and the push/pull core, their options and
//     statistics, the checks on options, the cost estimators and what may be attached to them
//     (memory, truncation, online calibration), the partitioner concept, the default partitioner,
//     the padded cut and the lower bound.
//   - The global plan: one window (global_plan), a held batch (held_batch), an epoch of fixed
//     batches (epoch_layout, epoch_plan, epoch_window), the keyed order and its pass over an
//     epoch or what a checkpoint left of it (keyed_order, keyed_epoch, epoch_rest).
//   - Token-budget micro-batches: the budget, the plan, an epoch of them and its keyed pass.
//   - Stage costs: the stage plans, the rank-local stage balancer and its estimator concept, the
//     two-stage cost model and its calibration.
// Not here: the deprecated baseline partitioners (partition/lpt.hpp, swap_refinement.hpp,
// karmarkar_karp.hpp, snake.hpp, exact.hpp) and the libtorch adapter (bcl/torch/, which needs
// libtorch). Each header listed also compiles alone.

#include <bcl/detail/config.hpp>

#include <bcl/balance.hpp>
#include <bcl/balancer.hpp>
#include <bcl/calibrated_cost.hpp>
#include <bcl/cost_check.hpp>
#include <bcl/cost_estimator.hpp>
#include <bcl/epoch_layout.hpp>
#include <bcl/epoch_plan.hpp>
#include <bcl/epoch_rest.hpp>
#include <bcl/epoch_window.hpp>
#include <bcl/error.hpp>
#include <bcl/estimators.hpp>
#include <bcl/global_plan.hpp>
#include <bcl/held_batch.hpp>
#include <bcl/keyed_epoch.hpp>
#include <bcl/keyed_order.hpp>
#include <bcl/keyed_token_epoch.hpp>
#include <bcl/multimodal_cost.hpp>
#include <bcl/names.hpp>
#include <bcl/options.hpp>
#include <bcl/partition/lower_bound.hpp>
#include <bcl/partition/lpt_swap.hpp>
#include <bcl/partition/padded_cut.hpp>
#include <bcl/partition/partitioner.hpp>
#include <bcl/record.hpp>
#include <bcl/record_model.hpp>
#include <bcl/stage_balancer.hpp>
#include <bcl/stage_calibration.hpp>
#include <bcl/stage_cost_estimator.hpp>
#include <bcl/stage_plan.hpp>
#include <bcl/statistics.hpp>
#include <bcl/stream_mean_cost.hpp>
#include <bcl/token_budget.hpp>
#include <bcl/token_epoch_plan.hpp>
#include <bcl/token_plan.hpp>
#include <bcl/token_stage_plan.hpp>
#include <bcl/validate.hpp>
#include <bcl/version.hpp>
