#pragma once
// bcl::torch::distributed_sampler_options, the settings of a
// bcl::torch::distributed_balanced_sampler (either mode), bcl::torch::epoch_order_kind, how an
// epoch's order is drawn, and bcl::torch::token_padding, how a token-mode epoch ends. Plain data:
// no libtorch needed, so that a trainer can build and pass them around without it; the sampler
// checks them at construction (detail/distributed_options_check.hpp).

#include <bcl/detail/config.hpp>

#include <bcl/global_plan.hpp>

#include <cstddef>
#include <cstdint>

namespace bcl::torch {

/// How a shuffled epoch's order of the dataset indices is drawn from (seed, epoch): Python's
/// `order=`. Without `shuffle` the order is 0..N-1 whichever kind.
enum class epoch_order_kind : std::uint8_t {
    /// A Fisher-Yates shuffle of 0..N-1 driven by SplitMix64 (bcl::epoch_order), the order this
    /// sampler has always drawn. The default, so that the plans, digests and archives of a job
    /// that does not choose stay what they were. Not Python's default (torch's randperm).
    fisher_yates,
    /// bcl::keyed_order(N, seed, epoch): a keyed bijection of the indices, any position computed
    /// on its own. The order of Python's `order="keyed"` on the same seed and epoch, so a C++
    /// and a Python job of the same settings plan the same epochs.
    keyed,
};

/// How an epoch ends in token mode when its records cannot give every rank as many non-empty
/// micro-batches (e.g. an odd count of records of T tokens each on two ranks): Python's
/// `padding=`.
enum class token_padding : std::uint8_t {
    /// The order's first records planned again at its end, the fewest that plan, as
    /// DistributedSampler pads its order (bcl::token_epoch_planner::share's `repeat_to_fill`).
    /// The default, as Python's: every micro-batch holds a record.
    repeat,
    /// The ranks short of records get empty micro-batches, as few as the plan needs, every rank
    /// still the same count (bcl::token_plan_options::allow_empty_micro_batches): the trainer
    /// runs each as a step of zero weight that still joins the collectives.
    empty,
    /// Neither: planning such an epoch is a bcl::error (at its first next()).
    error,
};

/// The settings of a bcl::torch::distributed_balanced_sampler. An aggregate:
/// `{.num_replicas = 8, .rank = r, .batch_size = 16}` for batches of B indices, or
/// `{.num_replicas = 8, .rank = r, .max_tokens = 16384, .micro_batches = 4}` for token-budget
/// micro-batches (token mode). The fixed-mode settings must be left at their defaults in token
/// mode, and the token-mode ones in fixed mode: the constructor refuses either, by name.
struct distributed_sampler_options {
    /// R, the data-parallel ranks. No default that could be right: 0 is refused.
    std::size_t num_replicas = 0;
    /// This rank, below num_replicas.
    std::size_t rank = 0;
    /// B, indices per batch (fixed mode, which needs it); 0 in token mode, where a micro-batch
    /// holds as many records as fit max_tokens.
    std::size_t batch_size = 0;
    /// K, steps planned together (one window of R*K*B records, or of R*K*M micro-batches), at
    /// least 1. Default 8, as the positional constructor's and Python's sampler's.
    std::size_t lookahead = 8;
    /// Each epoch's order shuffled from (seed, epoch), else 0..N-1. Default true.
    bool shuffle = true;
    /// The order's seed, below 2^63. Default 0.
    std::uint64_t seed = 0;
    /// How a shuffled epoch's order is drawn (ignored without shuffle, whose order is 0..N-1;
    /// still saved and compared by an archive, as Python's state does). Default
    /// epoch_order_kind::fisher_yates, the order drawn before the choice existed, so that a job
    /// that does not choose keeps its plans, digests and archives; epoch_order_kind::keyed for
    /// Python's order="keyed".
    epoch_order_kind order = epoch_order_kind::fisher_yates;
    /// Fixed mode: the order cut to a multiple of R and each rank's share to whole batches, as
    /// DistributedSampler's and BatchSampler's drop_last together. Default false; must stay false
    /// in token mode (every record is planned).
    bool drop_last = false;
    /// Fixed mode: packed or padded batches, a cap, levelled steps (bcl::plan_options). Must stay
    /// at its defaults in token mode (each record is planned at its own cost, packed).
    bcl::plan_options plan{};

    /// T: token mode when above 0, the most tokens one micro-batch holds (at most 2^31, what
    /// keeps every plan exact in 64-bit integers). 0 (the default) is fixed mode, batches of
    /// batch_size.
    std::uint64_t max_tokens = 0;
    /// M, token mode: the micro-batches each rank runs in a step, a multiple of multiple_of; a
    /// trainer steps its optimizer after each M of them. Token mode needs it; 0 in fixed mode.
    std::size_t micro_batches = 0;
    /// m, token mode: every step's micro-batch count is a multiple of it, the epoch's last
    /// (shorter) step too (pipeline schedules that take micro-batches m at a time), at least 1.
    /// Default 1.
    std::size_t multiple_of = 1;
    /// Token mode: a record above max_tokens gets a micro-batch of its own (false, the default,
    /// refuses such a record at construction, naming its dataset index).
    bool oversized_alone = false;
    /// Token mode: each record counts as its length rounded up to a multiple of this, for the
    /// budget and for the default cost (context-parallel trainers pad each sequence to a multiple
    /// of 2 * CP). 1 (the default) counts lengths as they are; at most max_tokens.
    std::uint64_t pad_to_multiple_of = 1;
    /// Token mode: how an epoch whose records cannot fill every rank's micro-batches ends.
    /// Default token_padding::repeat, as Python's sampler.
    token_padding padding = token_padding::repeat;

    /// Fixed mode: D, the stage costs of each record (a vision encoder's and a language model's,
    /// for a model whose stages synchronise separately): `costs` then holds N rows of D, row
    /// after row, and each window's steps are balanced stage by stage (bcl::stage_window_planner,
    /// docs/stages.md). 1 to bcl::max_plan_stages; 1 (the default) is one cost a record, the
    /// plans unchanged. Must stay 1 in token mode and with a plan cap or padded batching.
    std::size_t stages = 1;
};

} // namespace bcl::torch
