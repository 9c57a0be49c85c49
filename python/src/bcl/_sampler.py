"""bcl.BalancedBatchSampler: the Python face of bcl::balancer over dataset indices."""

from __future__ import annotations

import numbers
from typing import Any, Optional, Union

import numpy as np

from . import _core
from . import _inputs as inputs
from . import _stages
from ._core import Error
from ._cost import AffineQuadratic
from ._options import MEAN_COST_MODES, balancer_options, calibration_prior
from ._protocol import StatefulBatchSampler
from ._state import Reader, format_of, indices_digest, inner_kind

# Identifies the layout of state_dict(). Format 3 is still read (it lacks "finished", which it
# never was); the formats before it are refused: their balancer bytes do not name the records of
# the waiting batches, so nothing could check them.
STATE_FORMAT = "bcl.BalancedBatchSampler/4"
_EARLIER_FORMATS = ("bcl.BalancedBatchSampler/1", "bcl.BalancedBatchSampler/2")

# The fields the checksum covers: all but the inner sampler's own state, which is the inner
# sampler's to check.
_CHECKED_FIELDS = (
    "format", "running", "finished", "epoch", "position", "length", "digest", "epoch_mean_cost",
    "mean_cost_mode", "balancer", "pending", "dataset_size", "inner_kind", "learned",
)  # fmt: skip
_FORMAT_3 = "bcl.BalancedBatchSampler/3"
_FORMAT_3_FIELDS = tuple(f for f in _CHECKED_FIELDS if f != "finished")

# The fields only a state saved mid-epoch has ("learned" is only a state's between epochs).
_RUNNING_FIELDS = (
    "position", "length", "digest", "epoch_mean_cost", "mean_cost_mode", "balancer", "pending",
)  # fmt: skip

_WHO = "bcl.BalancedBatchSampler"


class _Run:
    """One pass over an epoch: the C++ epoch (which holds the epoch's indices), what restores it."""

    __slots__ = ("core", "level", "inner_state", "epoch", "batches", "done", "_digest")

    def __init__(self, core: Any, level: float, inner_state: Any, epoch: Optional[int],
                 batches: int, digest: Optional[str] = None) -> None:  # fmt: skip
        self.core = core
        self.level = level  # the mean cost the epoch's balancer aims at (its options::mean_cost)
        self.done = False  # the iterator has ended (not merely handed out the last batch)
        self.inner_state = inner_state
        self.epoch = epoch
        self.batches = batches  # the epoch's batches: ceil(N / B), or floor with drop_last
        self._digest = digest

    @property
    def handed_out(self) -> int:
        return int(self.core.handed_out)

    def next_batch(self) -> Optional[list[int]]:
        return self.core.next_batch()

    def digest(self) -> str:
        if self._digest is None:
            self._digest = indices_digest(self.core.indices)
        return self._digest


class Finished:
    """A loaded state of an epoch whose every batch was taken: a pass that yields nothing."""

    __slots__ = ("epoch", "done")
    handed_out = batches = 0

    def __init__(self, epoch: Optional[int]) -> None:
        self.epoch = epoch
        self.done = False

    @staticmethod
    def next_batch() -> None:
        return None


class BalancedBatchSampler(StatefulBatchSampler):
    """Batches of exactly ``batch_size`` dataset indices with balanced estimated cost.

    Wraps ``sampler`` (any iterable of dataset indices, iterated afresh each epoch, e.g. a
    ``DistributedSampler``): each epoch its indices are buffered a lookahead window of
    ``lookahead * batch_size`` at a time and repartitioned into batches whose total cost, looked
    up in ``costs``, is balanced. One balancer runs from epoch to epoch: what it learned (a
    quantile cap, the heavy slots, the running mean) carries over, only the indices drain. The
    contract of the C++ library holds: every batch has exactly ``batch_size`` indices but a
    short last one (dropped with ``drop_last``), the number of
    batches is ceil(N / batch_size) (floor with ``drop_last``) whatever the costs, so every rank
    emits the same count, and every index of the epoch comes out exactly once.

    Iterators, states and copies follow the samplers' protocol (docs/python.md, "Iterators,
    states and copies"): each iterator is a pass of its own, state_dict() describes the one
    started last, and a copy (pickle, deepcopy) continues where the sampler stood (the inner
    sampler and the costs are copied with it).

    Args:
        sampler: iterable of dataset indices (ints; a bool, a float or a string is a bcl.Error).
        costs: the estimated cost of each dataset index: a sequence, numpy array or tensor
            indexed by dataset index (checked whole here: a NaN, a negative or absurd cost is a
            bcl.Error naming its index before any epoch starts), a mapping, or a callable
            ``index -> cost`` (asked once per index, each answer checked). Costs must be real,
            finite and >= 0. A table of shape (N, D), D >= 2, gives each index's cost in each of
            D stages that synchronise separately: every stage of every batch is then balanced
            toward that stage's mean over the epoch's indices (bcl::stage_balancer; docs/
            stages.md), and cap, memory, calibrate, padded batching and a mean_cost other than
            "epoch" are refused.
        batch_size: B, indices per batch.
        lookahead: K, batches per lookahead window (default 8).
        policy: ``"sliding"`` (default) or ``"tumbling"``.
        drop_last: drop the short final batch (default False).
        seed: seed of every random choice (default 0), in [0, 2^63) as every epoch is.
        cap: outlier cap on the estimated cost: None (default), a number (a fixed cap) or a
            quantile of the costs seen, such as ``"p99"``. ``cap_warmup``, ``cap_prior`` and
            ``cap_action`` (only ``"clip"``: an index cannot be truncated) as in C++.
        memory: per-index memory estimate, in the same forms as ``costs``.
        memory_budget: largest total memory of one batch (0: no limit); needs ``memory``.
        mean_cost: the mean cost of an index that the sliding rounds aim at, by name.
            ``"epoch"``, the default: each epoch, the mean cost of that epoch's indices on this
            rank, as the cap clips them (``bcl::stream_mean_cost``), computed when the epoch
            starts; the sampler holds the epoch's indices anyway. ``"running"``: the balancer
            estimates it from the indices it has taken so far (what a C++ balancer does when
            options::mean_cost is not given), so the ranks aim at levels far apart early in the
            first epoch. A number > 0 fixes it for every epoch.
        emission, batching, buffer_windows, max_age, largest_first: the ``bcl::options``
            fields of the same names, enum values by their C++ names (``"costliest_first"``,
            ``"shuffled"``, ``"packed"``, ``"padded"``). A collate_fn that pads every sequence
            to the batch's longest wants ``batching="padded"``.
        calibrate: fit the cost model to the step times the training loop reports with
            ``observe()`` (default False). ``costs`` must then be ``bcl.affine_quadratic(lengths,
            a, b, c)``, whose coefficients are the prior the fit starts from.
        prefetch_limit: how many batches back from the last one handed out
            ``state_dict(consumed=k)`` can reach (default 64: a DataLoader keeps up to
            ``num_workers * prefetch_factor`` batches in flight).

    Raises:
        bcl.Error: invalid options or costs, or a bad state in load_state_dict(), with the C++
            library's message.
    """

    _who = _WHO
    _format = STATE_FORMAT
    _earlier_formats: tuple = _EARLIER_FORMATS
    _checked_fields: tuple = _CHECKED_FIELDS

    def __init__(
        self,
        sampler: Any,
        costs: inputs.CostSource,
        batch_size: int,
        lookahead: int = 8,
        policy: str = "sliding",
        drop_last: bool = False,
        seed: int = 0,
        cap: Union[None, float, str] = None,
        memory: Optional[inputs.CostSource] = None,
        memory_budget: float = 0.0,
        *,
        emission: str = "costliest_first",
        batching: str = "packed",
        buffer_windows: int = 2,
        max_age: int = 2,
        mean_cost: Union[float, str] = "epoch",
        largest_first: bool = False,
        cap_warmup: int = 0,
        cap_action: str = "clip",
        cap_prior: float = 0.0,
        prefetch_limit: int = 64,
        calibrate: bool = False,
    ) -> None:
        arguments = dict(
            sampler=sampler, costs=costs, batch_size=batch_size, lookahead=lookahead,
            policy=policy, drop_last=drop_last, seed=seed, cap=cap, memory=memory,
            memory_budget=memory_budget, emission=emission, batching=batching,
            buffer_windows=buffer_windows, max_age=max_age, mean_cost=mean_cost,
            largest_first=largest_first, cap_warmup=cap_warmup, cap_action=cap_action,
            cap_prior=cap_prior, prefetch_limit=prefetch_limit, calibrate=calibrate,
        )  # fmt: skip
        opt, self._mean_cost_mode = balancer_options(arguments, of="indices")
        if costs is None:
            raise Error("costs is required: the estimated cost of each dataset index")
        table = _stages.stage_costs("costs", costs)
        if table is not None and table.shape[1] == 1:
            costs = table[:, 0]  # one column: one cost a record
        elif table is not None:
            # Costs of shape (N, D), D >= 2, are stage costs: the sampler is one of the stage
            # balancer (bcl._stage_sampler, which imports this module), whose methods take over.
            from ._stage_sampler import StageBalancedBatchSampler

            if type(self) not in (BalancedBatchSampler, StageBalancedBatchSampler):
                raise Error(f"{_WHO}: a subclass of it cannot take stage costs")
            self.__class__ = StageBalancedBatchSampler
            self.init_stages(arguments, opt, table)
            return
        self._prefetch_limit = inputs.whole("prefetch_limit", prefetch_limit)
        self.sampler = sampler
        self.batch_size: int = opt.batch_size
        self.drop_last: bool = opt.drop_last
        self._options = opt
        # A calibrated cost's prior (a, b, c), the epochs' extra argument.
        self._prior: tuple = calibration_prior(
            costs, calibrate, memory, "costs=bcl.affine_quadratic(lengths, a, b, c)"
        )
        self._epoch_type = _core.epoch if memory is None else _core.memory_epoch
        if isinstance(costs, AffineQuadratic) and self._prior:
            self._epoch_type = _core.calibrated_epoch
            costs = costs.lengths  # the table holds lengths; the estimator prices them
        elif isinstance(costs, AffineQuadratic):
            costs = costs.costs()
        if inputs.is_lookup(costs) or inputs.is_lookup(memory):
            # Costs known one index at a time: looked up for each epoch's new indices.
            self._cost_of: Optional[inputs.Lookup] = inputs.Lookup("costs", costs)
            self._memory_of = None if memory is None else inputs.Lookup("memory", memory)
            self._table = _core.cost_table(memory is not None)
        else:
            self._cost_of = self._memory_of = None
            self._table = _core.cost_table(
                inputs.real_array("costs", costs),
                None if memory is None else inputs.real_array("memory", memory),
            )
        self._epoch: Optional[int] = None  # the last set_epoch() value
        self._carry: Any = None  # a loaded epoch between epochs: what the balancer learned
        self._keep_arguments(arguments)

    # -- iteration -----------------------------------------------------------------------------

    def __len__(self) -> int:
        """Batches per epoch: ceil(N / batch_size), or floor with drop_last (N = len(sampler))."""
        n = len(self.sampler)
        if self.drop_last:
            return n // self.batch_size
        return (n + self.batch_size - 1) // self.batch_size

    def _batches_of(self, length: int) -> int:
        b = self.batch_size
        return length // b if self.drop_last else (length + b - 1) // b

    def _begin(self) -> _Run:
        """Begins a pass over the inner sampler's epoch. The balancer of the epoch before carries
        on into it when that epoch was drained (what it learned, the cap and the heavy slots,
        stays); an epoch left unfinished leaves a new one."""
        carried, self._carry = self._carry, None
        latest = self._latest
        if carried is None and isinstance(latest, _Run) and latest.core.drained:
            carried = latest.core
        inner_state = self._inner_state()
        epoch = self._current_epoch()
        indices = self._pull()
        self._complete_table(indices)
        level = self._options.mean_cost
        if self._mean_cost_mode == "epoch":
            level = _core.epoch_mean_cost(self._table, indices, self._options.cap)
        if carried is not None:
            core = carried
            core.next_epoch(level, indices)
        else:
            core = self._new_epoch(_core.with_mean_cost(self._options, level), indices)
            core.keep_states_for(self._prefetch_limit)
        return _Run(core, level, inner_state, epoch, self._batches_of(len(indices)))

    def set_epoch(self, epoch: int) -> None:
        """Passes the epoch (in [0, 2^63)) to the inner sampler, if it has set_epoch, and keeps
        it for resume. A loaded state of a finished epoch gives way to another epoch; one loaded
        mid-epoch is still resumed first (its rest is owed)."""
        epoch = inputs.counter("epoch", epoch)
        if hasattr(self.sampler, "set_epoch"):
            self.sampler.set_epoch(epoch)
        self._epoch = epoch
        if isinstance(self._resume, Finished) and self._resume.epoch != epoch:
            self._resume = None

    @property
    def stats(self) -> dict:
        """The statistics of the balancer of the current (or last) epoch, as a dict: counts of
        records and batches, and running statistics (count, mean, cv, stddev, min, max), each
        with an "of" entry saying what it is taken over (``batch_cost`` counts full batches
        only: the short last batch would distort its spread)."""
        run = self._current()
        core = run.core if isinstance(run, _Run) else self._carry
        if core is None:
            core = self._new_epoch(self._options, np.empty(0, np.int64))
        stats = core.stats()
        if self._prior:
            stats["calibration"] = core.calibration()
        return stats

    @property
    def mean_cost(self) -> float:
        """The mean cost per index the current (or last) epoch's balancer aims at: the option
        when it is fixed, else the epoch's own mean; 0 before the first epoch has started, and
        always 0 with mean_cost="running" (the balancer's own running estimate)."""
        run = self._current()
        return run.level if isinstance(run, _Run) else self._options.mean_cost

    # -- resume --------------------------------------------------------------------------------

    def _fields(self, cursor: Any, position: int, ended: bool) -> dict:
        """A pass mid-epoch: its position, the balancer's bytes and what they hold, the inner
        sampler's state when the epoch began. A pass whose every batch was taken: the epoch
        finished, with what its balancer carries into the next. No pass, an ended one, or a
        finished one whose epoch set_epoch() has since replaced: the epoch not started, with what
        the last one left the balancer."""
        state: dict = {}
        finished = cursor is not None and position == cursor.batches
        if cursor is None or ended or (finished and cursor.epoch != self._current_epoch()):
            state.update(running=False, finished=False, epoch=self._current_epoch(),
                         inner=self._inner_state(), learned=self._learned_state())  # fmt: skip
        elif finished:
            learned = self._carry if isinstance(cursor, Finished) else cursor.core
            state.update(running=False, finished=True, epoch=cursor.epoch,
                         inner=self._inner_state(),
                         learned=bytes(learned.learned_state(self._options.mean_cost)))  # fmt: skip
        else:
            if position == cursor.handed_out:
                data, pending, at = cursor.core.save()
            else:
                data, pending, at = cursor.core.save_at(position)
            state.update(
                running=True,
                finished=False,
                epoch=cursor.epoch,
                inner=cursor.inner_state,
                position=int(at),
                length=int(cursor.core.length),
                digest=cursor.digest(),
                # The level computed for the epoch, or None where it is not the epoch's own.
                epoch_mean_cost=float(cursor.level) if self._mean_cost_mode == "epoch" else None,
                mean_cost_mode=self._mean_cost_mode,
                balancer=bytes(data),
                pending=pending.tolist(),
            )
        state.update(dataset_size=self._table.dataset_size, inner_kind=inner_kind(self.sampler))
        return state

    def _load_checked(self, state: Any, extra: Any) -> None:
        if format_of(state) == _FORMAT_3:
            # Format 3: the same fields but "finished", which its states never were.
            read = Reader(state, _WHO)
            read.verify(_FORMAT_3_FIELDS)
            self._load(read, extra)
            return
        super()._load_checked(state, extra)

    def _load(self, read: Reader, extra: Any) -> None:
        """Checks every field against the others, the balancer's bytes, the epoch's indices
        (the inner sampler is asked for them again, unless a copy carries them) and this
        sampler; commits only then. Whatever fails leaves this sampler as it was (its inner
        sampler's epoch and state are put back, where it has set_epoch/state_dict)."""
        self._check_same_sampler(read)
        has_finished = format_of(read.state) == STATE_FORMAT
        running, finished, epoch, inner = self._read_pass(read, _RUNNING_FIELDS, has_finished)
        saved = self._read_run(read) if running else None
        carry = None if running else self._read_learned(read)
        if finished and carry is None:
            raise read.error("learned", "is None, but a finished epoch's balancer carries on")
        resume = None if saved is None else (
            lambda: self._prepare_resume(saved, inner, epoch, extra))  # fmt: skip
        self._commit_resume(epoch, inner, finished, resume)
        self._carry = carry

    def _read_pass(self, read: Reader, running_fields: tuple, has_finished: bool = True) -> tuple:
        """(running, finished, epoch, inner) of a state, each checked against the others: a
        running pass is not finished, only a running one holds `running_fields`, and only an inner
        sampler with a state_dict() gives a state one (see _inner_state)."""
        running = read.flag("running")
        finished = read.flag("finished") if has_finished else False
        if running and finished:
            raise read.error("finished", "is True, but running says the epoch is under way")
        present = [key for key in running_fields if key in read.state]
        if not running and present:
            raise read.error(
                "running", f"is False, but it holds a running epoch's {', '.join(present)}"
            )
        epoch, inner = read.epoch(), read.get("inner")
        if inner is not None and not hasattr(self.sampler, "state_dict"):
            raise read.error("inner", "holds a state, but the inner sampler keeps none")
        return running, finished, epoch, inner

    def _commit_resume(self, epoch: Optional[int], inner: Any, finished: bool,
                       running_pass: Any) -> None:  # fmt: skip
        """Sets the epoch and the inner sampler's state, then the pass to resume: the running
        one `running_pass()` rebuilds and checks (`running_pass` None when the state is between
        epochs), or a finished one; whatever fails puts back what was changed."""
        rollback = self._inner_rollback()
        try:
            if epoch is not None:
                self.set_epoch(epoch)
            if inner is not None and hasattr(self.sampler, "load_state_dict"):
                self.sampler.load_state_dict(inner)
            if running_pass is not None:
                resume = running_pass()
            else:
                resume = Finished(epoch) if finished else None
        except BaseException:
            rollback()
            raise
        self._resume = resume
        self._latest = None

    def _epoch_indices(self, length: int, digest: str, copied: Any) -> np.ndarray:
        """The saved epoch's indices: those the inner sampler yields again, or those a copy
        carries; bcl.Error unless they are the ones the state was saved with."""
        if copied is None:
            indices = self._pull()
        else:
            indices = inputs.strict_indices(copied, f"{_WHO}: the copied epoch's indices")
        if len(indices) != length or indices_digest(indices) != digest:
            raise Error(
                f"{_WHO}: the inner sampler yields other indices for this epoch than when the "
                f"state was saved ({len(indices)} indices now, {length} then); restoring needs "
                "an inner sampler that repeats an epoch's order (e.g. a DistributedSampler with "
                "the same seed and epoch) or one with state_dict()/load_state_dict()"
            )
        return indices

    def _copy_extra(self) -> Any:
        """A copy of a pass mid-epoch takes the epoch's indices along, so that it need not ask
        the inner sampler to repeat them."""
        cursor = self._current()
        return cursor.core.indices.copy() if isinstance(cursor, _Run) else None

    # -- helpers -------------------------------------------------------------------------------

    def _new_epoch(self, options: Any, *args: Any) -> Any:
        """A C++ epoch over this sampler's table (new: args = (indices,); restored: args =
        (state bytes, pending, indices, position))."""
        return self._epoch_type(self._table, *self._prior, options, *args)

    # -- calibration ---------------------------------------------------------------------------

    def observe(self, batch_index: int, seconds: float) -> None:
        """Calibration (``calibrate=True``): the time the training step of this epoch's batch
        number ``batch_index`` (from 0) took on this rank, its own compute (not the wait for the
        other ranks), in any unit. Times may come late and in any order, within 256 batches;
        the fit applies from the next round on. bcl.Error for a time that is negative or not
        finite, or a batch not handed out, too old or already observed."""
        if not self._prior:
            raise Error(f"{_WHO}.observe: the sampler does not calibrate (calibrate=True)")
        run = self._current()
        if not isinstance(run, _Run):
            raise Error(f"{_WHO}.observe: no batch of this epoch has been handed out")
        whole = isinstance(batch_index, numbers.Integral)
        if isinstance(batch_index, (bool, np.bool_)) or not whole:
            raise Error(f"{_WHO}.observe: batch_index must be an integer (got {batch_index!r})")
        if not 0 <= int(batch_index) < 1 << 64:
            raise Error(f"{_WHO}.observe: batch_index must be >= 0 (got {batch_index})")
        run.core.observe(int(batch_index), inputs.real("seconds", seconds))

    def _learned_state(self) -> Optional[bytes]:
        """What the balancer of the last (drained) epoch carries into the next, as bytes."""
        core = self._carry
        latest = self._latest
        if core is None and isinstance(latest, _Run) and latest.core.drained:
            core = latest.core
        return None if core is None else bytes(core.learned_state(self._options.mean_cost))

    def _read_learned(self, read: Reader) -> Any:
        """A state between epochs: the balancer it carries (checked: a balancer of these options
        with nothing of an epoch in it), or None."""
        if read.get("learned") is None:
            return None
        empty = np.empty(0, dtype=np.int64)
        return self._new_epoch(self._options, read.data("learned"), empty, empty, 0)

    def _check_same_sampler(self, read: Reader) -> None:
        """The state's dataset size and inner sampler's kind must be this sampler's."""
        size, mine = read.optional_count("dataset_size"), self._table.dataset_size
        if size != mine:
            raise Error(
                f"{_WHO}: the state's dataset_size is {size}, but this sampler's costs cover "
                f"{mine} dataset indices" + (" (given one at a time)" if mine is None else "")
            )
        kind = read.text("inner_kind")
        if kind != inner_kind(self.sampler):
            raise Error(
                f"{_WHO}: the state's inner_kind is {kind}, but this sampler wraps a "
                f"{inner_kind(self.sampler)}"
            )

    def _read_run(self, read: Reader) -> tuple:
        """The fields of a running epoch, each checked for its type (not yet for agreement)."""
        level = self._resumed_level(read)
        position, length, digest = read.count("position"), read.count("length"), read.text("digest")
        if position > length:
            raise read.error("position", f"is {position}, past the epoch's length {length}")
        pending = inputs.strict_indices(read.sequence("pending"), f"{_WHO}: the state's pending")
        return level, position, length, digest, read.data("balancer"), pending

    def _prepare_resume(self, saved: tuple, inner_state: Any, epoch: Optional[int],
                        indices: Any = None) -> _Run:  # fmt: skip
        """The saved epoch, rebuilt and checked against its indices: those the inner sampler
        yields, or those a copy carries."""
        level, position, length, digest, data, pending = saved
        indices = self._epoch_indices(length, digest, indices)
        self._complete_table(indices)
        options = _core.with_mean_cost(self._options, level)
        core = self._new_epoch(options, data, pending, indices, position)
        core.keep_states_for(self._prefetch_limit)
        return _Run(core, level, inner_state, epoch, self._batches_of(length), digest)

    def _inner_rollback(self) -> Any:
        """A function that puts back what load_state_dict() may change before it fails: this
        sampler's epoch, and the inner sampler's epoch and state where it exposes them."""
        epoch, sampler, resume = self._epoch, self.sampler, self._resume
        inner_epoch = getattr(sampler, "epoch", None)
        inner_state = self._inner_state()

        def rollback() -> None:
            self._epoch, self._resume = epoch, resume
            if hasattr(sampler, "set_epoch") and inner_epoch is not None:
                sampler.set_epoch(inner_epoch)
            if inner_state is not None and hasattr(sampler, "load_state_dict"):
                sampler.load_state_dict(inner_state)

        return rollback

    def _resumed_level(self, read: Reader) -> float:
        """The mean cost the saved epoch's balancer aims at, or bcl.Error naming mean_cost."""
        fixed = self._options.mean_cost
        computed = read.number("epoch_mean_cost")
        saved = read.text("mean_cost_mode")
        if saved not in MEAN_COST_MODES or (computed is None) != (saved != "epoch"):
            raise read.error("mean_cost_mode", "is inconsistent with its epoch_mean_cost")
        if saved != self._mean_cost_mode:
            raise Error(
                f"{_WHO}: the state was saved with {MEAN_COST_MODES[saved]}, "
                f"but this sampler has {MEAN_COST_MODES[self._mean_cost_mode]}; "
                "bcl::options::mean_cost must be the same"
            )
        return fixed if computed is None else inputs.real("epoch_mean_cost", computed)

    def _current_epoch(self) -> Optional[int]:
        if self._epoch is not None:
            return self._epoch
        epoch = getattr(self.sampler, "epoch", None)
        return epoch if isinstance(epoch, int) and not isinstance(epoch, bool) else None

    def _inner_state(self) -> Any:
        if hasattr(self.sampler, "state_dict"):
            return self.sampler.state_dict()
        return None

    def _pull(self) -> np.ndarray:
        """The epoch's indices from the inner sampler, as one int64 array (strictly: see
        bcl._inputs; what the inner sampler raises propagates unchanged)."""
        return inputs.strict_indices(self.sampler, "the inner sampler")

    def _complete_table(self, indices: np.ndarray) -> None:
        """With costs given one index at a time: looks up the indices the table lacks."""
        if self._cost_of is None:
            return
        missing = self._table.missing(indices)
        if len(missing) == 0:
            return
        cost = self._cost_of.values(missing)
        memory = None if self._memory_of is None else self._memory_of.values(missing)
        self._table.assign(missing, cost, memory)
