"""bcl: batches of balanced estimated cost for data-parallel training.

Two samplers over dataset indices, both giving every rank the same number of batches of exactly
``batch_size`` indices whose estimated costs are balanced, so no rank waits for a straggler:

- ``bcl.DistributedBalancedBatchSampler``, for map-style datasets: every rank draws the epoch's
  global order (as ``DistributedSampler`` does) and holds the cost table, so every rank computes
  the same coordinated plan of all ranks' batches and keeps its share (``bcl::plan_window``).
- ``bcl.BalancedBatchSampler`` wraps any sampler of this rank's indices (a stream a rank sees
  alone) and balances them rank-locally (``bcl::balancer``).

And streams of records without indices (an IterableDataset, a streaming dataset, a generator of
tokenized texts), balanced rank-locally:

- ``bcl.balance(iterable, cost, batch_size)``, an iterator over batches of the records
  themselves, with ``state_dict()``/``load_state_dict()`` for exact resume;
- ``bcl.BalancedIterableDataset``, the same as a stage of an IterableDataset pipeline.

``bcl.plan_batches`` plans a global batch a trainer already holds into micro-batches of B records;
``bcl.plan_micro_batches`` plans it into micro-batches of at most T tokens, as many on every rank
(the sampler's ``max_tokens=`` and ``micro_batches=`` do the same for a map-style dataset's
epochs). ``bcl.Error`` (a ``ValueError``) carries the C++ library's messages.
"""

from ._core import Error
from ._core import version as __version__
from ._cost import AffineQuadratic, affine_quadratic
from ._dataset import BalancedIterableDataset
from ._distributed import DistributedBalancedBatchSampler, plan_batches
from ._sampler import BalancedBatchSampler
from ._stream import BalancedStream, balance
from ._tokens import MicroBatchPlan, plan_micro_batches

Error.__module__ = "bcl"

__all__ = [
    "AffineQuadratic",
    "BalancedBatchSampler",
    "BalancedIterableDataset",
    "BalancedStream",
    "DistributedBalancedBatchSampler",
    "Error",
    "MicroBatchPlan",
    "__version__",
    "affine_quadratic",
    "balance",
    "plan_batches",
    "plan_micro_batches",
]
