#pragma once
// Umbrella header: the public surface of bcl. The range adaptor and the push/pull core, their
// options and statistics, the cost estimators and what may be attached to them, the partitioner
// concept and the default partitioner.

#include <bcl/detail/config.hpp>

#include <bcl/balance.hpp>
#include <bcl/balancer.hpp>
#include <bcl/cost_check.hpp>
#include <bcl/cost_estimator.hpp>
#include <bcl/error.hpp>
#include <bcl/estimators.hpp>
#include <bcl/options.hpp>
#include <bcl/partition/lpt_swap.hpp>
#include <bcl/partition/partitioner.hpp>
#include <bcl/record.hpp>
#include <bcl/record_model.hpp>
#include <bcl/statistics.hpp>
#include <bcl/stream_mean_cost.hpp>
#include <bcl/validate.hpp>
#include <bcl/version.hpp>
