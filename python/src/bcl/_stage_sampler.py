"""bcl.BalancedBatchSampler over a table of stage costs: bcl::stage_balancer over dataset indices.

A sampler given costs of shape (N, D), D >= 2, is one of these (BalancedBatchSampler's
constructor makes it one): each epoch's indices go through a rank-local bcl::stage_balancer,
which levels every stage of every batch toward that stage's mean, so that a model whose stages
synchronise separately (a vision encoder, then a language model, each meeting at its own
collectives) waits little in each stage, with no communication.

The balancer is a function of the epoch's indices, their costs and the options, so the whole
epoch is balanced when it starts (the sampler draws the epoch's indices up front anyway), and a
state names the epoch, the batches taken and digests of the indices and of their costs: resuming
balances the epoch again, checks both digests, and skips what was taken.
"""

from __future__ import annotations

import hashlib
from typing import Any, Optional

import numpy as np

from . import _core
from . import _inputs as inputs
from ._core import Error
from ._sampler import BalancedBatchSampler
from ._state import Reader, indices_digest, inner_kind

STAGE_STATE_FORMAT = "bcl.BalancedBatchSampler.stages/1"

_WHO = "bcl.BalancedBatchSampler"

# The options a stage balancer does not apply, by their Python names: each bounds or aims one
# cost, not D stage costs.
_ONE_COST_ONLY = {
    "cap": (None, "a cap bounds one cost, not D stage costs"),
    "memory": (None, "a memory budget is kept on one cost"),
    "memory_budget": (0.0, "a memory budget is kept on one cost"),
    "calibrate": (False, "calibration fits one cost model to batch times (bcl::stage_calibration "
                  "fits each stage's in C++)"),
    "batching": ("packed", "a padded batch's cost is one number"),
    "mean_cost": ("epoch", "each stage aims at its own mean over the epoch's indices"),
}


def refuse_one_cost_options(arguments: dict) -> None:
    """bcl.Error naming the first option given that a stage balancer does not apply."""
    for name, (default, why) in _ONE_COST_ONLY.items():
        value = arguments[name]
        if default is None:
            given = value is not None
        else:
            given = isinstance(value, np.ndarray) or bool(value != default)
        if given:
            raise Error(
                f"{_WHO}: with stage costs (a table of shape (N, D)), {name} must be "
                f"{default!r} (got {value!r}): {why}"
            )


class StageRun:
    """One pass over an epoch of stage costs: its indices, balanced, and how many were taken."""

    __slots__ = ("indices", "flat", "starts", "stats", "epoch", "inner_state", "position", "done",
                 "_table", "_digest", "_costs_digest")  # fmt: skip

    def __init__(self, table: np.ndarray, indices: np.ndarray, flat: np.ndarray,
                 sizes: np.ndarray, stats: dict, epoch: Optional[int],
                 inner_state: Any) -> None:  # fmt: skip
        self._table = table
        self.indices = indices
        self.flat = flat
        self.starts = np.concatenate(([0], np.cumsum(sizes))).astype(np.int64)
        self.stats = stats
        self.epoch = epoch
        self.inner_state = inner_state
        self.position = 0  # batches handed out
        self.done = False
        self._digest: Optional[str] = None
        self._costs_digest: Optional[str] = None

    @property
    def handed_out(self) -> int:
        return self.position

    @property
    def batches(self) -> int:
        return len(self.starts) - 1

    def next_batch(self) -> Optional[list[int]]:
        if self.position == self.batches:
            return None
        begin, end = self.starts[self.position], self.starts[self.position + 1]
        self.position += 1
        return self.flat[begin:end].tolist()

    def digest(self) -> str:
        if self._digest is None:
            self._digest = indices_digest(self.indices)
        return self._digest

    def costs_digest(self) -> str:
        """A digest of the epoch's indices' stage costs, in order, and of D."""
        if self._costs_digest is None:
            h = hashlib.blake2b(digest_size=16, person=b"bcl-stages")
            h.update(int(self._table.shape[1]).to_bytes(8, "little"))
            h.update(np.ascontiguousarray(self._table[self.indices], dtype="<f8").tobytes())
            self._costs_digest = h.hexdigest()
        return self._costs_digest


class StageBalancedBatchSampler(BalancedBatchSampler):
    """bcl.BalancedBatchSampler over costs of shape (N, D), D >= 2: BalancedBatchSampler's
    constructor checks the arguments, finds the table of stage costs, makes its instance one of
    this class and hands over to init_stages(); the methods below replace those of one cost a
    record."""

    _format = STAGE_STATE_FORMAT
    _earlier_formats: tuple = ()
    _checked_fields: tuple = ("format", "running", "finished", "epoch", "stages", "dataset_size",
                              "inner_kind")  # fmt: skip
    _optional_fields = ("position", "length", "digest", "costs_digest")

    def init_stages(self, arguments: dict, opt: Any, table: np.ndarray) -> None:
        refuse_one_cost_options(arguments)
        _core.check_stage_costs(table, _WHO)
        self._prefetch_limit = inputs.whole("prefetch_limit", arguments["prefetch_limit"])
        self.sampler = arguments["sampler"]
        self.batch_size = opt.batch_size
        self.drop_last = opt.drop_last
        self._options = opt
        self._prior = ()  # observe() is refused: nothing calibrates
        self._stage_table = table
        self._epoch = None
        self._keep_arguments(arguments)

    @property
    def stages(self) -> int:
        """D, the costs of a record."""
        return int(self._stage_table.shape[1])

    # -- iteration ---------------------------------------------------------------------------

    def _plan(self, indices: np.ndarray, epoch: Optional[int], inner_state: Any) -> StageRun:
        """The epoch's batches: each stage aims at its mean over the epoch's indices."""
        table = self._stage_table
        flat, sizes, stats = _core.stage_local_epoch(table, indices, self._options, True)
        return StageRun(table, indices, flat, sizes, stats, epoch, inner_state)

    def _begin(self) -> Any:  # a StageRun
        inner_state = self._inner_state()
        epoch = self._current_epoch()
        return self._plan(self._pull(), epoch, inner_state)

    @property
    def stats(self) -> dict:
        """The statistics of the current (or last) epoch's balancer: counts of records and
        batches, each stage's batch cost (count, mean, cv, min, max over the full batches), the
        full windows' efficiency (every stage of every record over K times the sum over stages of
        the dearest batch in that stage) and the stage means aimed at; empty before the first."""
        run = self._current()
        return dict(run.stats) if isinstance(run, StageRun) else {}

    @property
    def mean_cost(self) -> Any:  # a list, a mean a stage
        """The mean of each stage the current (or last) epoch aims at; [] before the first."""
        return list(self.stats.get("stage_means", []))

    # -- resume ------------------------------------------------------------------------------

    def _fields(self, cursor: Any, position: int, ended: bool) -> dict:
        state: dict = {}
        finished = cursor is not None and position == cursor.batches
        if cursor is None or ended or (finished and cursor.epoch != self._current_epoch()):
            state.update(running=False, finished=False, epoch=self._current_epoch(),
                         inner=self._inner_state())  # fmt: skip
        elif finished:
            state.update(running=False, finished=True, epoch=cursor.epoch,
                         inner=self._inner_state())  # fmt: skip
        else:
            state.update(running=True, finished=False, epoch=cursor.epoch,
                         inner=cursor.inner_state, position=int(position),
                         length=len(cursor.indices), digest=cursor.digest(),
                         costs_digest=cursor.costs_digest())  # fmt: skip
        state.update(stages=self.stages, dataset_size=int(self._stage_table.shape[0]),
                     inner_kind=inner_kind(self.sampler))  # fmt: skip
        return state

    def _load(self, read: Reader, extra: Any) -> None:
        """Checks every field against the others, this sampler and the epoch's indices and costs
        (the inner sampler is asked for the indices again, unless a copy carries them); commits
        only then. Whatever fails leaves this sampler as it was."""
        read.same("stages", self.stages, "stages (D) of the costs")
        read.same("dataset_size", int(self._stage_table.shape[0]),
                  "dataset indices the costs cover")  # fmt: skip
        kind = read.text("inner_kind")
        if kind != inner_kind(self.sampler):
            raise Error(
                f"{_WHO}: the state's inner_kind is {kind}, but this sampler wraps a "
                f"{inner_kind(self.sampler)}"
            )
        running, finished, epoch, inner = self._read_pass(read, self._optional_fields)
        saved = None
        if running:
            saved = (read.count("position"), read.count("length"), read.text("digest"),
                     read.text("costs_digest"))  # fmt: skip
        resume = None if saved is None else (lambda: self._resumed(saved, inner, epoch, extra))
        self._commit_resume(epoch, inner, finished, resume)

    def _resumed(self, saved: tuple, inner: Any, epoch: Optional[int], indices: Any) -> StageRun:
        position, length, digest, costs_digest = saved
        indices = self._epoch_indices(length, digest, indices)
        run = self._plan(indices, epoch, inner)
        if run.costs_digest() != costs_digest:
            raise Error(
                f"{_WHO}: the stage costs of this epoch's indices are not the ones the state was "
                "saved with (its costs_digest differs); the batches would differ, so records "
                "would be lost or repeated: resume with the same costs"
            )
        if position > run.batches:
            raise Error(
                f"{_WHO}: the state's position is {position}, past the epoch's {run.batches} "
                "batches"
            )
        run.position = position
        return run

    def _copy_extra(self) -> Any:
        cursor = self._current()
        return cursor.indices.copy() if isinstance(cursor, StageRun) else None
