"""bcl.BalancedBatchSampler: the Python face of bcl::balancer over dataset indices."""

import hashlib
import numbers
import re
from collections.abc import Mapping

import numpy as np

from . import _core
from ._core import Error

# Identifies the layout of state_dict(); load_state_dict() refuses any other but the previous
# one, whose epochs ran with each balancer's running mean (level 0).
STATE_FORMAT = "bcl.BalancedBatchSampler/2"
_RUNNING_MEAN_FORMAT = "bcl.BalancedBatchSampler/1"

_UINT64_END = 1 << 64


def _enum(enum_type, option, value):
    """The member of a _core enum named `value` (its C++ name), or bcl.Error listing the names."""
    if isinstance(value, enum_type):
        return value
    members = enum_type.__members__
    if isinstance(value, str) and value in members:
        return members[value]
    raise Error(
        f"bcl::options::{option} has no such value ({value!r}); "
        f"choose one of {', '.join(repr(m) for m in members)}"
    )


def _whole(option, value):
    """`value` as a non-negative int that fits a std::size_t/std::uint64_t."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise Error(f"bcl::options::{option} must be an integer (got {value!r})")
    value = int(value)
    if not 0 <= value < _UINT64_END:
        raise Error(f"bcl::options::{option} must be a non-negative integer (got {value})")
    return value


def _real(option, value):
    """`value` as a float; the C++ validation then checks its range (NaN included)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise Error(f"bcl::options::{option} must be a number (got {value!r})")
    return float(value)


def _mean_cost_mode(mean_cost):
    """("epoch" | "fixed" | "running", the options::mean_cost the sampler's options hold)."""
    if isinstance(mean_cost, str):
        if mean_cost != "running":
            raise Error(
                f"bcl::options::mean_cost must be a number or 'running' (got {mean_cost!r})"
            )
        return "running", 0.0
    level = _real("mean_cost", mean_cost)
    return ("epoch" if level == 0.0 else "fixed"), level


# How a state_dict() names the mean-cost mode its epoch ran in, for load_state_dict()'s message.
_MEAN_COST_MODES = {
    "epoch": "mean_cost=0 (each epoch's own)",
    "fixed": "a fixed mean_cost",
    "running": "mean_cost='running'",
}


def _flag(option, value):
    if not isinstance(value, (bool, np.bool_)):
        raise Error(f"bcl::options::{option} must be True or False (got {value!r})")
    return bool(value)


_QUANTILE = re.compile(r"p(\d+(?:\.\d*)?)")


def _cap_options(cap, cap_warmup, cap_action, cap_prior):
    """bcl::cap_options from the Python spelling: None, a number (fixed cap) or "p99"."""
    c = _core.cap_options()
    if cap is None:
        c.kind = _core.cap_kind.none
    elif isinstance(cap, str):
        match = _QUANTILE.fullmatch(cap.strip())
        if not match:
            raise Error(
                f"cap must be None, a number (a fixed cap) or a quantile such as 'p99' "
                f"(got {cap!r})"
            )
        c.kind = _core.cap_kind.quantile
        c.quantile = float(match.group(1)) / 100.0
    else:
        c.kind = _core.cap_kind.fixed
        c.value = _real("cap.value", cap)
    c.warmup = _whole("cap.warmup", cap_warmup)
    c.prior = _real("cap.prior", cap_prior)
    action = _enum(_core.cap_action, "cap.action", cap_action)
    if action == _core.cap_action.truncate:
        raise Error(
            "bcl::options::cap.action 'truncate' shrinks a record to fit under the cap, and a "
            "dataset index cannot be shrunk: truncate the sequences in the dataset itself and "
            "pass their new costs, or keep cap_action='clip', which balances with the capped "
            "estimate and leaves the record as it is"
        )
    c.action = action
    return c


def _as_function(name, values):
    """A callable index -> float for `values` (a callable, a mapping or a sequence)."""
    if callable(values):
        return values
    if isinstance(values, Mapping):
        return values.__getitem__
    array = _as_array(name, values)
    return array.__getitem__


def _as_array(name, values):
    """`values` as a one-dimensional float64 array, or bcl.Error."""
    try:
        if hasattr(values, "detach"):  # a torch tensor, without importing torch
            values = values.detach().cpu().numpy()
        array = np.ascontiguousarray(values, dtype=np.float64)
    except (TypeError, ValueError) as e:
        raise Error(
            f"{name} must be a sequence or array of numbers indexed by dataset index, or a "
            f"callable index -> {name} ({e})"
        ) from None
    if array.ndim != 1:
        raise Error(f"{name} must be one-dimensional (got shape {array.shape})")
    return array


def _digest(indices):
    return hashlib.blake2b(indices.tobytes(), digest_size=16).hexdigest()


class _Run:
    """One epoch in progress: the C++ balancer, the epoch's indices, what restores it."""

    __slots__ = ("core", "level", "indices", "inner_state", "epoch", "done", "_digest")

    def __init__(self, core, level, indices, inner_state, epoch, digest=None):
        self.core = core
        self.level = level  # the mean cost the epoch's balancer aims at (its options::mean_cost)
        self.done = False  # the iterator has ended (not merely handed out the last batch)
        self.indices = indices
        self.inner_state = inner_state
        self.epoch = epoch
        self._digest = digest

    def digest(self):
        if self._digest is None:
            self._digest = _digest(self.indices)
        return self._digest


class BalancedBatchSampler:
    """Batches of exactly ``batch_size`` dataset indices with balanced estimated cost.

    Wraps ``sampler`` (any iterable of dataset indices, iterated afresh each epoch, e.g. a
    ``DistributedSampler``): each epoch its indices are buffered a lookahead window of
    ``lookahead * batch_size`` at a time and repartitioned into batches whose total cost, looked
    up in ``costs``, is balanced. The contract of the C++ library holds: every batch has exactly
    ``batch_size`` indices but a short last one (dropped with ``drop_last``), the number of
    batches is ceil(N / batch_size) (floor with ``drop_last``) whatever the costs, so every rank
    emits the same count, and every index of the epoch comes out exactly once.

    Args:
        sampler: iterable of dataset indices (ints).
        costs: the estimated cost of each dataset index: a sequence, numpy array or tensor
            indexed by dataset index, a mapping, or a callable ``index -> cost``. Costs must be
            finite and >= 0.
        batch_size: B, indices per batch.
        lookahead: K, batches per lookahead window (default 8).
        policy: ``"sliding"`` (default) or ``"tumbling"``.
        drop_last: drop the short final batch (default False).
        seed: seed of every random choice (default 0).
        cap: outlier cap on the estimated cost: None (default), a number (a fixed cap) or a
            quantile of the costs seen, such as ``"p99"``. ``cap_warmup``, ``cap_prior`` and
            ``cap_action`` (only ``"clip"``: an index cannot be truncated) as in C++.
        memory: per-index memory estimate, in the same forms as ``costs``.
        memory_budget: largest total memory of one batch (0: no limit); needs ``memory``.
        mean_cost: the mean cost of an index that the sliding rounds aim at. 0, the default:
            each epoch, the mean cost of that epoch's indices on this rank, as the cap clips
            them (``bcl::stream_mean_cost``), computed when the epoch starts; the sampler holds
            the epoch's indices anyway. A number > 0 fixes it for every epoch instead.
            ``"running"``: each epoch's balancer estimates it from the indices it has taken
            so far (the C++ balancer's default, options::mean_cost 0), starting afresh every
            epoch, so the ranks aim at levels far apart early in each epoch.
        emission, batching, buffer_windows, max_age, largest_first: the ``bcl::options``
            fields of the same names, enum values by their C++ names (``"costliest_first"``,
            ``"shuffled"``, ``"packed"``, ``"padded"``).

    Raises:
        bcl.Error: invalid options or costs, or a bad state in load_state_dict(), with the C++
            library's message.
    """

    def __init__(
        self,
        sampler,
        costs,
        batch_size,
        lookahead=8,
        policy="sliding",
        drop_last=False,
        seed=0,
        cap=None,
        memory=None,
        memory_budget=0.0,
        *,
        emission="costliest_first",
        batching="packed",
        buffer_windows=2,
        max_age=2,
        mean_cost=0.0,
        largest_first=False,
        cap_warmup=0,
        cap_action="clip",
        cap_prior=0.0,
    ):
        opt = _core.options()
        opt.batch_size = _whole("batch_size", batch_size)
        opt.lookahead = _whole("lookahead", lookahead)
        opt.drop_last = _flag("drop_last", drop_last)
        opt.seed = _whole("seed", seed)
        opt.emission = _enum(_core.emission_order, "emission", emission)
        opt.batching = _enum(_core.batch_cost, "batching", batching)
        opt.policy = _enum(_core.lookahead_policy, "policy", policy)
        opt.buffer_windows = _whole("buffer_windows", buffer_windows)
        opt.max_age = _whole("max_age", max_age)
        self._mean_cost_mode, opt.mean_cost = _mean_cost_mode(mean_cost)
        opt.cap = _cap_options(cap, cap_warmup, cap_action, cap_prior)
        opt.memory_budget = _real("memory_budget", memory_budget)
        opt.largest_first = _flag("largest_first", largest_first)
        _core.validate(opt)
        if opt.memory_budget > 0.0 and memory is None:
            raise Error(
                "bcl::options::memory_budget is set, but no memory estimate was given: pass "
                "memory= (per-index memory, in the budget's unit)"
            )
        if costs is None:
            raise Error("costs is required: the estimated cost of each dataset index")

        self.sampler = sampler
        self.batch_size = opt.batch_size
        self.drop_last = opt.drop_last
        self._options = opt
        self._epoch_type = _core.epoch if memory is None else _core.memory_epoch
        if callable(costs) or isinstance(costs, Mapping) or callable(memory) or isinstance(
            memory, Mapping
        ):
            # Costs known one index at a time: looked up for each epoch's new indices.
            self._cost_of = _as_function("costs", costs)
            self._memory_of = None if memory is None else _as_function("memory", memory)
            self._table = _core.cost_table(memory is not None)
        else:
            self._cost_of = self._memory_of = None
            self._table = _core.cost_table(
                _as_array("costs", costs), None if memory is None else _as_array("memory", memory)
            )
        self._epoch = None  # the last set_epoch() value
        self._run = None  # the epoch being iterated, or the last one
        self._resume = None  # a loaded state, waiting for the next __iter__

    # -- iteration -----------------------------------------------------------------------------

    def __len__(self):
        """Batches per epoch: ceil(N / batch_size), or floor with drop_last (N = len(sampler))."""
        n = len(self.sampler)
        if self.drop_last:
            return n // self.batch_size
        return (n + self.batch_size - 1) // self.batch_size

    def __iter__(self):
        # The epoch starts at the first next(), not here: a DataLoader calls iter() on its batch
        # sampler and may drop that iterator unused, which must not consume the inner sampler
        # (nor a loaded state).
        run = self._start()
        next_batch = run.core.next_batch
        batch = next_batch()
        while batch is not None:
            yield batch
            batch = next_batch()
        run.done = True

    def _start(self):
        """Begins an epoch (or the loaded state's): pulls its indices, feeds the balancer."""
        resume, self._resume = self._resume, None
        if resume is None:
            inner_state = self._inner_state()
            epoch = self._current_epoch()
            position = 0
            indices = self._pull()
            self._complete_table(indices)
            level = self._options.mean_cost
            if self._mean_cost_mode == "epoch":
                level = self._table.mean_cost(indices, self._options.cap)
            core = self._epoch_type(self._table, _core.with_mean_cost(self._options, level))
            digest = None
        else:
            core, level, inner_state, epoch, position, length, digest = resume
            indices = self._pull()
            if len(indices) != length or _digest(indices) != digest:
                raise Error(
                    "bcl.BalancedBatchSampler: the inner sampler yields other indices for this "
                    f"epoch than when the state was saved ({len(indices)} indices now, {length} "
                    "then); restoring needs an inner sampler that repeats an epoch's order "
                    "(e.g. a DistributedSampler with the same seed and epoch) or one with "
                    "state_dict()/load_state_dict()"
                )
            self._complete_table(indices)
        core.feed(indices, position)
        self._run = _Run(core, level, indices, inner_state, epoch, digest)
        return self._run

    def set_epoch(self, epoch):
        """Passes the epoch to the inner sampler (if it has set_epoch) and keeps it for resume."""
        self._epoch = epoch
        if hasattr(self.sampler, "set_epoch"):
            self.sampler.set_epoch(epoch)

    @property
    def stats(self):
        """The statistics of the balancer of the current (or last) epoch, as a dict."""
        if self._resume is not None:
            return self._resume[0].stats()
        if self._run is not None:
            return self._run.core.stats()
        return self._epoch_type(self._table, self._options).stats()

    @property
    def mean_cost(self):
        """The mean cost per index the current (or last) epoch's balancer aims at: the option
        when it is fixed, else the epoch's own mean; 0 before the first epoch has started, and
        always 0 with mean_cost='running' (the balancer's own running estimate)."""
        if self._resume is not None:
            return self._resume[1]
        if self._run is not None:
            return self._run.level
        return self._options.mean_cost

    # -- resume --------------------------------------------------------------------------------

    def state_dict(self):
        """The position mid-epoch, the buffered indices and the inner sampler's state.

        Plain Python values (ints, str, bytes, lists, dicts), so it pickles. A sampler restored
        from it with load_state_dict() yields exactly the batches this one would yield next.
        """
        state = {"format": STATE_FORMAT}
        if self._resume is not None:
            core, level, inner_state, epoch, position, length, digest = self._resume
            running = True
        elif self._run is not None and not self._run.done:
            run = self._run
            core, level, inner_state, epoch = run.core, run.level, run.inner_state, run.epoch
            position, length, digest = core.position, len(run.indices), run.digest()
            running = True
        else:
            running = False
        if not running:
            state.update(running=False, epoch=self._current_epoch(), inner=self._inner_state())
            return state
        data, pending = core.save()
        state.update(
            running=True,
            epoch=epoch,
            inner=inner_state,
            position=int(position),
            length=int(length),
            digest=digest,
            # The level computed for the epoch, or None where it is not the epoch's own.
            epoch_mean_cost=float(level) if self._mean_cost_mode == "epoch" else None,
            mean_cost_mode=self._mean_cost_mode,
            balancer=bytes(data),
            pending=pending.tolist(),
        )
        return state

    def load_state_dict(self, state):
        """Continues from state_dict(): the next __iter__ resumes the saved epoch mid-way.

        Raises bcl.Error for a state of another format, a corrupted one, or one saved with other
        options (the message names the option).
        """
        formats = (STATE_FORMAT, _RUNNING_MEAN_FORMAT)
        if not isinstance(state, Mapping) or state.get("format") not in formats:
            got = state.get("format") if isinstance(state, Mapping) else type(state).__name__
            raise Error(
                f"bcl.BalancedBatchSampler: not a state of this sampler (format {got!r}, "
                f"expected {STATE_FORMAT!r})"
            )
        try:
            running = _flag("running", state["running"])
            resume = None
            if running:
                pending = state["pending"]
                if isinstance(pending, np.ndarray):
                    pending = pending.tolist()
                if not isinstance(state["balancer"], (bytes, bytearray)) or not all(
                    isinstance(i, numbers.Integral) for i in pending
                ):
                    raise Error("bcl.BalancedBatchSampler: the state's balancer or pending "
                                "indices have the wrong type")
                level = self._resumed_level(state)
                core = self._epoch_type(
                    self._table,
                    _core.with_mean_cost(self._options, level),
                    bytes(state["balancer"]),
                    [int(i) for i in pending],
                )
                position = _whole("position", state["position"])
                length = _whole("length", state["length"])
                if position > length or not isinstance(state["digest"], str):
                    raise Error("bcl.BalancedBatchSampler: the state's position is inconsistent")
                resume = (
                    core,
                    level,
                    state["inner"],
                    state["epoch"],
                    position,
                    length,
                    state["digest"],
                )
            epoch, inner = state["epoch"], state["inner"]
        except KeyError as e:
            raise Error(f"bcl.BalancedBatchSampler: the state has no {e.args[0]!r}") from None
        except (TypeError, OverflowError) as e:
            raise Error(
                f"bcl.BalancedBatchSampler: the state has a value of the wrong type ({e})"
            ) from None
        if epoch is not None:
            self.set_epoch(epoch)
        if inner is not None and hasattr(self.sampler, "load_state_dict"):
            self.sampler.load_state_dict(inner)
        self._resume = resume
        self._run = None

    # -- helpers -------------------------------------------------------------------------------

    def _resumed_level(self, state):
        """The mean cost the saved epoch's balancer aims at, or bcl.Error naming mean_cost."""
        fixed = self._options.mean_cost
        if state["format"] == _RUNNING_MEAN_FORMAT:
            # Saved before epochs had their own level: the balancer ran with the option itself
            # (0: its running mean), and refuses the state if that differs from this one's.
            return fixed
        computed = state["epoch_mean_cost"]
        # States saved before mean_cost='running' existed have no mode: theirs follows from
        # whether the epoch had its own level.
        saved = state.get("mean_cost_mode", "fixed" if computed is None else "epoch")
        if saved not in _MEAN_COST_MODES or (computed is None) != (saved != "epoch"):
            raise Error("bcl.BalancedBatchSampler: the state's mean_cost_mode is inconsistent")
        if saved != self._mean_cost_mode:
            raise Error(
                f"bcl.BalancedBatchSampler: the state was saved with {_MEAN_COST_MODES[saved]}, "
                f"but this sampler has {_MEAN_COST_MODES[self._mean_cost_mode]}; "
                "bcl::options::mean_cost must be the same"
            )
        return fixed if computed is None else _real("epoch_mean_cost", computed)

    def _current_epoch(self):
        if self._epoch is not None:
            return self._epoch
        epoch = getattr(self.sampler, "epoch", None)
        return epoch if isinstance(epoch, numbers.Integral) else None

    def _inner_state(self):
        if hasattr(self.sampler, "state_dict"):
            return self.sampler.state_dict()
        return None

    def _pull(self):
        """The epoch's indices from the inner sampler, as one int64 array."""
        sampler = self.sampler
        if isinstance(sampler, np.ndarray):
            return np.array(sampler, dtype=np.int64).reshape(-1)
        if isinstance(sampler, (range, list, tuple)):
            return np.asarray(sampler, dtype=np.int64).reshape(-1)
        try:
            return np.fromiter(iter(sampler), dtype=np.int64)
        except (TypeError, ValueError, OverflowError) as e:
            raise Error(
                f"bcl.BalancedBatchSampler: the inner sampler must yield integer dataset "
                f"indices ({e})"
            ) from None

    def _complete_table(self, indices):
        """With callable costs: looks up the indices the table has no cost for yet."""
        if self._cost_of is None:
            return
        missing = self._table.missing(indices)
        if len(missing) == 0:
            return
        cost = self._values(self._cost_of, "costs", missing)
        memory = None
        if self._memory_of is not None:
            memory = self._values(self._memory_of, "memory", missing)
        self._table.assign(missing, cost, memory)

    @staticmethod
    def _values(function, name, indices):
        values = np.empty(len(indices), dtype=np.float64)
        for k, index in enumerate(indices.tolist()):
            try:
                values[k] = float(function(index))
            except (TypeError, ValueError) as e:
                raise Error(
                    f"bcl.BalancedBatchSampler: {name} of dataset index {index} is not a "
                    f"number ({e})"
                ) from None
            except (IndexError, KeyError):
                raise Error(
                    f"bcl.BalancedBatchSampler: {name} has no entry for dataset index {index}"
                ) from None
        return values
