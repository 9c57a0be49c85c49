"""bcl: batches of balanced estimated cost for data-parallel training.

``bcl.BalancedBatchSampler`` wraps any sampler of dataset indices (a ``DistributedSampler``, a
``RandomSampler``, a list) and yields batches of exactly ``batch_size`` indices whose estimated
costs are balanced, so that every rank's step costs about the same. It is the C++ library
``bcl::balancer`` over dataset indices; ``bcl.Error`` (a ``ValueError``) carries its messages.
"""

from ._core import Error
from ._core import version as __version__
from ._sampler import AffineQuadratic, BalancedBatchSampler, affine_quadratic

Error.__module__ = "bcl"

__all__ = ["AffineQuadratic", "BalancedBatchSampler", "Error", "__version__", "affine_quadratic"]
