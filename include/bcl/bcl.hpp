#pragma once
// Umbrella header: everything in the public surface of bcl.

#include <bcl/detail/config.hpp>

#include <bcl/balance.hpp>
#include <bcl/balancer.hpp>
#include <bcl/cost_estimator.hpp>
#include <bcl/error.hpp>
#include <bcl/estimators.hpp>
#include <bcl/exact_partitioner.hpp>
#include <bcl/karmarkar_karp_partitioner.hpp>
#include <bcl/lower_bound.hpp>
#include <bcl/lpt_partitioner.hpp>
#include <bcl/lpt_swap_partitioner.hpp>
#include <bcl/options.hpp>
#include <bcl/partitioner.hpp>
#include <bcl/quantile_sketch.hpp>
#include <bcl/record_model.hpp>
#include <bcl/snake_partitioner.hpp>
#include <bcl/statistics.hpp>
#include <bcl/swap_refinement.hpp>
#include <bcl/version.hpp>
