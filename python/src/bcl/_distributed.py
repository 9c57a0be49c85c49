"""bcl.DistributedBalancedBatchSampler and bcl.plan_batches: the global plan (bcl::plan_window)
for map-style datasets, where every rank sees the whole epoch's order and cost table."""

from __future__ import annotations

import math
import numbers
import warnings
from collections.abc import Iterator, Mapping
from typing import Any, Optional, Union

import numpy as np

from . import _core
from . import _inputs as inputs
from ._core import Error
from ._sampler import _loader_with_workers
from ._state import Reader, checksum

STATE_FORMAT = "bcl.DistributedBalancedBatchSampler/1"
_WHO = "bcl.DistributedBalancedBatchSampler"
# Every field but the checksum itself.
_CHECKED_FIELDS = ("format", "epoch", "position", "digest", "settings")

_SamplerBase: Any = object
try:  # a torch.utils.data.Sampler where torch is installed
    import torch.utils.data as _torch_data

    _SamplerBase = _torch_data.Sampler
except ImportError:  # pragma: no cover
    pass


def _process_group() -> Any:
    """torch.distributed, if a process group is up, else None."""
    try:
        import torch.distributed as dist
    except ImportError:  # pragma: no cover
        return None
    return dist if dist.is_available() and dist.is_initialized() else None


def _quantile_cap(costs: np.ndarray, quantile: float) -> float:
    """The cost of nearest rank `quantile` of the table: an element of it, so every rank
    computes the same value bit for bit."""
    if len(costs) == 0:
        return 0.0
    k = min(len(costs) - 1, max(0, math.ceil(quantile * len(costs)) - 1))
    return float(np.partition(costs, k)[k])


def _plan_cap(cap: Union[None, float, str], costs: np.ndarray) -> float:
    if cap is None:
        return 0.0
    if isinstance(cap, str):
        option = inputs.cap_options(cap, 0, "clip", 0.0)
        return _quantile_cap(costs, option.quantile)
    value = inputs.real("cap", cap)
    if not value > 0.0:
        raise Error(f"cap must be > 0 (got {value})")
    return value


class DistributedBalancedBatchSampler(_SamplerBase):
    """Batches of exactly ``batch_size`` indices for this rank, planned with every rank's.

    A drop-in for ``DistributedSampler`` + ``BatchSampler`` over a map-style dataset of
    ``len(costs)`` indices: each epoch draws the same global permutation as DistributedSampler
    (``torch.randperm`` seeded with ``seed + epoch``, padded or cut to a multiple of
    ``num_replicas`` the same way), and every rank computes the same global plan of each window of
    ``lookahead`` steps of all ranks' records (``bcl::plan_window``: the steps' batches balanced
    across ranks), then keeps its own share. No communication: every rank holds the permutation
    and the cost table, and the plan is bit-identical on every rank (integer arithmetic). Every
    rank gets the same number of batches, all of exactly ``batch_size`` indices but the last,
    which has the rest on every rank (dropped with ``drop_last``); every index of the epoch's
    order comes out exactly once over all ranks.

    Args:
        costs: the estimated cost of each dataset index, a sequence, array or tensor (the whole
            table: every rank plans every rank's records). Checked whole here.
        batch_size: B, indices per batch.
        num_replicas, rank: the number of ranks and this one (default: torch.distributed's).
        shuffle, seed, drop_last: as DistributedSampler's (``drop_last`` also drops each rank's
            short last batch, as BatchSampler's does).
        lookahead: K, steps planned together (default 8).
        batching: ``"packed"`` or ``"padded"`` (a collate_fn that pads to the batch's longest).
        cap: None, a number (each cost clipped to it for planning) or a quantile of the table
            such as ``"p99"``.
        level_steps: bcl::plan_options::level_steps (default True).
        check_digest: at each epoch's start, all-reduce the epoch's plan digest once through
            torch.distributed when a process group is up, so that ranks whose plans differ
            (other costs, another order) raise at once instead of losing or repeating indices.

    Raises:
        bcl.Error: bad options or costs (naming the index), or a bad state.
    """

    def __init__(
        self,
        costs: Any,
        batch_size: int,
        num_replicas: Optional[int] = None,
        rank: Optional[int] = None,
        shuffle: bool = True,
        seed: int = 0,
        drop_last: bool = False,
        lookahead: int = 8,
        *,
        batching: str = "packed",
        cap: Union[None, float, str] = None,
        level_steps: bool = True,
        check_digest: bool = True,
    ) -> None:
        group = _process_group()
        if num_replicas is None:
            if group is None:
                raise Error(f"{_WHO}: num_replicas is needed without a torch.distributed group")
            num_replicas = group.get_world_size()
        if rank is None:
            if group is None:
                raise Error(f"{_WHO}: rank is needed without a torch.distributed group")
            rank = group.get_rank()
        self.num_replicas = inputs.whole("num_replicas", num_replicas)
        self.rank = inputs.whole("rank", rank)
        if self.num_replicas == 0 or self.rank >= self.num_replicas:
            raise Error(
                f"{_WHO}: rank {self.rank} of num_replicas {self.num_replicas}: the rank must be "
                "in [0, num_replicas)"
            )
        self.batch_size = inputs.whole("batch_size", batch_size)
        self.lookahead = inputs.whole("lookahead", lookahead)
        if self.batch_size == 0 or self.lookahead == 0:
            raise Error(f"{_WHO}: batch_size and lookahead must be at least 1")
        self.shuffle = inputs.flag("shuffle", shuffle)
        self.seed = inputs.whole("seed", seed)
        self.drop_last = inputs.flag("drop_last", drop_last)
        self._batching = inputs.enum_value(_core.batch_cost, "batching", batching)
        self._level_steps = inputs.flag("level_steps", level_steps)
        self._check_digest = inputs.flag("check_digest", check_digest)
        if inputs.is_lookup(costs):
            raise Error(
                f"{_WHO}: costs must be the whole table (a sequence, array or tensor): every "
                "rank plans every rank's indices"
            )
        table = inputs.real_array("costs", costs)
        self._table = _core.cost_table(table, None)  # checks every cost
        self._cap = _plan_cap(cap, table)
        self._cap_spelling = cap
        self.dataset_size = len(table)
        self.epoch = 0
        self._plan: Any = None  # the epoch being iterated: (epoch, its global_epoch)
        self._position = 0  # batches of that epoch handed out
        self._done = False  # its iterator has ended
        self._resume: Optional[tuple] = None  # a loaded state: (epoch, plan, position)
        self._prefetching = False  # the current epoch is read by a DataLoader with workers

    # -- the epoch -----------------------------------------------------------------------------

    def _samples_per_rank(self) -> int:
        n, r = self.dataset_size, self.num_replicas
        if self.drop_last and n % r != 0:
            return math.ceil((n - r) / r)
        return math.ceil(n / r)

    def __len__(self) -> int:
        m = self._samples_per_rank()
        return m // self.batch_size if self.drop_last else math.ceil(m / self.batch_size)

    def set_epoch(self, epoch: int) -> None:
        """The epoch the next iteration plans (as DistributedSampler.set_epoch)."""
        self.epoch = inputs.whole("epoch", epoch)

    def _order(self, epoch: int) -> np.ndarray:
        """The epoch's global order, as DistributedSampler draws it, padded or cut."""
        n = self.dataset_size
        if self.shuffle:
            import torch

            g = torch.Generator()
            g.manual_seed(self.seed + epoch)
            order = torch.randperm(n, generator=g).numpy()
        else:
            order = np.arange(n, dtype=np.int64)
        total = self._samples_per_rank() * self.num_replicas
        if total > n:  # padded with the order's first indices, repeated as needed
            order = np.concatenate([order, np.resize(order, total - n)])
        return np.ascontiguousarray(order[:total], dtype=np.int64)

    def _planned(self, epoch: int) -> Any:
        return _core.global_epoch(
            self._table, self._order(epoch), self.num_replicas, self.lookahead, self.batch_size,
            self.rank, self._batching, self._cap, self._level_steps, self.drop_last,
        )  # fmt: skip

    def _agree(self, plan: Any) -> None:
        """One all-reduce of the epoch's digest, when a process group is up: bcl.Error on every
        rank if any rank planned another epoch."""
        group = _process_group()
        if not self._check_digest or group is None:
            return
        import torch

        d = int(plan.digest)
        halves = [d >> 32, d & 0xFFFFFFFF]
        device = "cpu"
        if group.get_backend() == "nccl":
            device = torch.device("cuda", torch.cuda.current_device())
        t = torch.tensor(halves + [-h for h in halves], dtype=torch.int64, device=device)
        group.all_reduce(t, op=group.ReduceOp.MAX)
        high, low, neg_high, neg_low = (int(x) for x in t.cpu().tolist())
        if (high, low) != (-neg_high, -neg_low):
            raise Error(
                f"{_WHO}: rank {self.rank}'s plan of epoch {self.epoch} differs from another "
                "rank's (different costs, seed, options or world size): its batches would lose "
                "or repeat indices"
            )

    def __iter__(self) -> Iterator[list[int]]:
        resume, self._resume = self._resume, None
        if resume is not None:
            self.epoch, plan, position = resume
        else:
            plan, position = self._planned(self.epoch), 0
        self._agree(plan)
        self._plan, self._position, self._done = (self.epoch, plan), position, False
        self._prefetching = _loader_with_workers()
        while self._position < plan.batches:
            batch = plan.batch(self._position)
            self._position += 1
            yield batch
        self._done = True

    @property
    def stats(self) -> dict:
        """The current (or last) epoch's plans: windows, batches, the chain of their digests,
        the efficiency the plans promise and their gap to the lower bound."""
        plan = self._resume[1] if self._resume else (self._plan[1] if self._plan else None)
        if plan is None:
            plan = self._planned(self.epoch)
        return dict(plan.stats())

    # -- resume --------------------------------------------------------------------------------

    def _settings(self) -> dict:
        return {
            "dataset_size": self.dataset_size, "num_replicas": self.num_replicas,
            "rank": self.rank, "batch_size": self.batch_size, "lookahead": self.lookahead,
            "shuffle": self.shuffle, "seed": self.seed, "drop_last": self.drop_last,
            "batching": str(self._batching.name), "cap": self._cap,
            "level_steps": self._level_steps,
        }  # fmt: skip

    def state_dict(self, consumed: Optional[int] = None) -> dict:
        """The epoch and how many of its batches were taken: ``consumed`` (the training loop's
        count, for a DataLoader that reads ahead) or, by default, those handed out. A restored
        sampler plans the epoch again (its digest must match) and hands out the rest."""
        if self._resume is not None:
            epoch, plan, position = self._resume
        elif self._plan is not None and not (self._done and consumed is None):
            (epoch, plan), position = self._plan, self._position
        else:
            epoch, plan, position = self.epoch, None, 0
        if consumed is None and self._prefetching and plan is not None and not self._done:
            warnings.warn(
                f"{_WHO}.state_dict(): a DataLoader with worker processes reads batches ahead of "
                "the training loop, and a state as of the last batch handed out loses those; "
                "pass consumed=<batches the loop has taken this epoch>",
                stacklevel=2,
            )
        if consumed is not None:
            whole = isinstance(consumed, numbers.Integral) and not isinstance(consumed, bool)
            if not whole or not 0 <= int(consumed) <= position:
                raise Error(
                    f"{_WHO}: consumed must be an integer from 0 to the {position} batches "
                    f"handed out (got {consumed!r})"
                )
            position = int(consumed)
        if plan is not None and position == plan.batches and self._done:
            epoch, plan, position = self.epoch, None, 0  # the epoch is over: the next one
        state = {
            "format": STATE_FORMAT,
            "epoch": epoch,
            "position": position,
            "digest": None if plan is None else f"{plan.digest:016x}",
            "settings": self._settings(),
        }
        state["checksum"] = checksum(state, _CHECKED_FIELDS)
        return state

    def load_state_dict(self, state: Mapping) -> None:
        """Continues from state_dict(): bcl.Error naming the field for another format, a
        checksum that does not match, other settings (dataset size, ranks, seed, options), a
        position past the epoch, or a plan whose digest differs; nothing changes then."""
        got = state.get("format") if isinstance(state, Mapping) else type(state).__name__
        if got != STATE_FORMAT:
            raise Error(f"{_WHO}: not a state of this sampler (format {got!r})")
        read = Reader(state, _WHO)
        read.verify(_CHECKED_FIELDS)
        settings = read.get("settings")
        mine = self._settings()
        if not isinstance(settings, Mapping) or set(settings) != set(mine):
            raise read.error("settings", "are not this sampler's kind of settings")
        for key, value in mine.items():
            if settings[key] != value:
                raise Error(
                    f"{_WHO}: the state was saved with {key}={settings[key]!r}, but this sampler "
                    f"has {key}={value!r}"
                )
        epoch, position = read.count("epoch"), read.count("position")
        digest = read.get("digest")
        plan = None
        if digest is not None:
            plan = self._planned(epoch)
            if f"{plan.digest:016x}" != read.text("digest"):
                raise Error(
                    f"{_WHO}: the state's digest does not match this sampler's plan of epoch "
                    f"{epoch}: the costs differ from when it was saved"
                )
            if position > plan.batches:
                raise read.error("position", f"is {position}, past the {plan.batches} batches")
        elif position != 0:
            raise read.error("position", f"is {position} for an epoch not started")
        self.epoch = epoch
        self._plan, self._position, self._done = None, 0, False
        self._resume = (epoch, plan, position) if plan is not None else None


def plan_batches(
    costs: Any, num_ranks: int, batch_size: int, *, batching: str = "packed",
    level_steps: bool = True,
) -> list[list[list[int]]]:  # fmt: skip
    """For a trainer that holds a global batch (RL rollouts): each rank's micro-batches.

    Plans all ``len(costs)`` records (a multiple of ``num_ranks``) into micro-batches of exactly
    ``batch_size`` indices (the last may hold fewer, as many on every rank), aligned across ranks
    by cost: micro-batch j of every rank costs about the same (bcl::plan_window over one window).
    Returns ``out[rank][j]``, a list of indices into ``costs``; every index appears once.
    """
    table = inputs.real_array("costs", costs)
    r = inputs.whole("num_ranks", num_ranks)
    b = inputs.whole("batch_size", batch_size)
    if r == 0 or b == 0:
        raise Error("plan_batches: num_ranks and batch_size must be at least 1")
    if len(table) % r != 0:
        raise Error(
            f"plan_batches: {len(table)} records do not split equally over {r} ranks; give a "
            "multiple of num_ranks"
        )
    steps = max(1, math.ceil(len(table) / (r * b)))
    mode = inputs.enum_value(_core.batch_cost, "batching", batching)
    level = inputs.flag("level_steps", level_steps)
    slots = _core.plan_window(table, r, steps, b, mode, 0.0, level)
    out: list[list[list[int]]] = [[[] for _ in range(steps)] for _ in range(r)]
    for i, (step, rank) in enumerate(slots.tolist()):
        out[rank][step].append(i)
    return [[batch for batch in batches if batch] for batches in out]
