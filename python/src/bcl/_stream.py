"""bcl.balance: balanced batches of the records of any iterable, with exact resume.

A stream takes its records from the upstream a lookahead window at a time, asks ``cost`` for
each (once, unless it raises or gives no valid cost), and pushes the chunk into a C++
bcl::balancer over the records' arrival positions (python/src/stream.hpp), which holds the
records by reference and hands them back a batch at a time. Records taken from upstream and not
yet in the balancer (only ever after an exception) wait in the stream's intake, so an exception
from the upstream or from ``cost`` loses nothing: the next ``next()`` carries on from there.
"""

from __future__ import annotations

import pickle
import sys
from collections.abc import Iterator, Mapping
from itertools import islice
from typing import Any, Optional, Union

import numpy as np

from . import _core
from . import _inputs as inputs
from ._core import Error
from ._cost import record_cost, record_value
from ._options import OPTION_DEFAULTS, balancer_options, calibration_prior
from ._state import Reader, checksum, format_of

STATE_FORMAT = "bcl.balance/1"

# The fields the checksum covers: all but the upstream's own state, which is the upstream's to
# check.
_CHECKED_FIELDS = (
    "format", "upstream_consumed", "returned", "balancer", "positions", "pending", "intake",
    "keyed", "cost", "memory", "length", "worker",
)  # fmt: skip
_FIELDS = _CHECKED_FIELDS + ("upstream", "checksum")

_WHO = "bcl.balance"
_END = object()


def _worker_identity() -> Optional[list]:
    """[id, num_workers] of the DataLoader worker this process is, or None (no worker)."""
    data = sys.modules.get("torch.utils.data")
    info = None if data is None else data.get_worker_info()
    return None if info is None else [int(info.id), int(info.num_workers)]


def _where(worker: Optional[list]) -> str:
    return "the main process" if worker is None else f"DataLoader worker {worker[0]} of {worker[1]}"


def _stateful(source: Any) -> bool:
    """Whether the upstream saves and restores its own position (torchdata's Stateful)."""
    return callable(getattr(source, "state_dict", None)) and callable(
        getattr(source, "load_state_dict", None)
    )


class BalancedStream(Iterator[list]):
    """Batches of exactly ``batch_size`` records of ``iterable`` whose estimated costs are
    balanced; what ``bcl.balance(...)`` returns.

    An iterator: each ``next()`` returns a batch, a list of the records themselves (held by
    reference, never copied), the last one short (``len(records) % batch_size``) or dropped with
    ``drop_last``. The contract of the C++ library holds: ceil(N / batch_size) batches (floor with
    ``drop_last``) whatever the costs, every record exactly once, a record at most K - 1
    batches late under the tumbling policy and (max_age + 1) * K - 1 under the sliding policy (23
    at the defaults, K = 8 and max_age = 2). It reads the upstream a lookahead window ahead (up to
    ``buffer_windows * lookahead * batch_size`` records under the sliding policy) and starts at
    the first ``next()``.

    Errors: a cost that is not a real number, NaN, negative, infinite or above 1e120 is a
    bcl.Error naming the record's position in the stream (from 0), raised before the balancer
    takes any record of its chunk. An exception from the upstream or from ``cost`` propagates
    unchanged. Either way every record taken stays in the stream and comes out if iteration goes
    on: the next ``next()`` asks ``cost`` again for the record it failed on (and only for it), or
    reads on from the upstream. ``finish()`` ends the input instead and hands back the records
    not yet balanced.

    Args:
        iterable: any iterable of records (a list, a generator, an IterableDataset, a Hugging
            Face streaming dataset); iterated once, from the first ``next()``.
        cost: the estimated cost of a record: a callable ``record -> cost``, a field name (the key
            of a mapping record, else the attribute; its value is the cost), ``len``, or
            ``bcl.affine_quadratic(length, a, b, c)`` with ``length`` in one of those forms.
            Costs are real, finite, >= 0 and at most 1e120.
        batch_size, lookahead: B and K.
        **options: ``policy``, ``drop_last``, ``seed``, ``cap``, ``cap_warmup``, ``cap_action``,
            ``cap_prior``, ``memory_budget``, ``emission``, ``batching``, ``buffer_windows``,
            ``max_age``, ``largest_first``: as for ``bcl.BalancedBatchSampler``, with the same
            defaults, rules and messages (bcl._options.OPTION_DEFAULTS).
        memory: the memory estimate of a record, in the forms ``cost`` takes; needed by
            ``memory_budget``.
        mean_cost: the mean cost the sliding rounds aim at: ``"running"`` (the default: the mean
            of the costs taken so far) or a fixed number > 0. ``"epoch"`` needs every cost of the
            epoch up front, which a stream does not have (a bcl.Error).
        calibrate: fit ``cost = bcl.affine_quadratic(...)`` to the step times ``observe()`` is told.
        length: the number of records the upstream yields, where it is known (a rank's shard):
            an upstream that ends before it or yields more is a bcl.Error where that is found,
            never a different number of batches.
        key, restore: save the pending records by ``key(record)`` and rebuild them with
            ``restore(key)`` on load, instead of pickling the records (both or neither).

    State: ``state_dict()`` and ``load_state_dict()``, in the protocol torchdata's
    StatefulDataLoader uses (docs/python.md, "Streams").
    """

    def __init__(
        self,
        iterable: Any,
        cost: Any,
        batch_size: int,
        lookahead: int = 8,
        *,
        mean_cost: Union[float, str] = "running",
        calibrate: bool = False,
        length: Optional[int] = None,
        key: Any = None,
        restore: Any = None,
        **options: Any,
    ) -> None:
        unknown = sorted(set(options) - set(OPTION_DEFAULTS))
        if unknown:
            raise Error(
                f"{_WHO} has no option {unknown[0]!r}; besides mean_cost, calibrate, length, key "
                f"and restore, it takes those of bcl.BalancedBatchSampler: "
                f"{', '.join(OPTION_DEFAULTS)}"
            )
        settings = dict(options, batch_size=batch_size, lookahead=lookahead, mean_cost=mean_cost)
        self._options, _ = balancer_options(settings, of="records")
        memory = options.get("memory")
        prior = calibration_prior(
            cost, calibrate, memory, "cost=bcl.affine_quadratic(length, a, b, c)"
        )
        self._cost = record_cost(cost, prior)
        self._memory = None if memory is None else record_value("memory", memory)
        self.length: Optional[int] = None if length is None else inputs.counter("length", length)
        if (key is None) != (restore is None) or not all(
            f is None or callable(f) for f in (key, restore)
        ):
            raise Error(
                f"{_WHO}: key= and restore= come together, both callables: key(record) is what a "
                "state saves of a pending record, restore(key) rebuilds the record on load"
            )
        self._key, self._restore = key, restore
        self.batch_size: int = self._options.batch_size
        self.drop_last: bool = self._options.drop_last
        self._source = iterable
        self._upstream: Any = None  # the upstream's iterator, from the first next()
        self._core: Any = None  # the C++ stream, from the first next() (or a load)
        self._pop: Any = None  # its pop(), once started
        self._intake: list = []  # records taken from upstream, not yet in the balancer
        self._values: list = []  # the costs (or lengths) of the first of them
        self._memory_values: list = []
        self._refused: list = []  # (list, index) of a value the core refused, to ask again
        self._consumed = 0  # records taken from upstream
        self._returned = 0  # records finish() handed back
        self._ended = False  # the upstream has ended (or finish() ended the input)
        self._broken: Optional[Error] = None  # a broken length promise, raised at every next()
        self._worker = _worker_identity()
        self._resumed_in: Any = False  # where a loaded state was saved, checked at the start

    # -- iteration -------------------------------------------------------------------------------

    def __iter__(self) -> BalancedStream:
        return self

    def __next__(self) -> list:
        if self._broken is not None:
            raise self._broken
        pop = self._pop or self._start()
        while True:
            batch = pop()  # a batch, or how many records the balancer takes before its next round
            if batch.__class__ is list:
                return batch
            self._fill(batch)

    def _start(self) -> Any:
        """The C++ stream's pop(), and the upstream's iterator, made at the first next()."""
        if self._resumed_in is not False and self._resumed_in != _worker_identity():
            raise Error(
                f"{_WHO}: the state was saved in {_where(self._resumed_in)}, but this stream runs "
                f"in {_where(_worker_identity())}; each DataLoader worker's stream resumes from "
                "its own state (a loader's load_state_dict() hands each worker its own)"
            )
        self._resumed_in = False
        if self._upstream is None and not self._ended:
            self._upstream = iter(self._source)
        self._pop = self._started_core().pop
        return self._pop

    def _started_core(self) -> Any:
        if self._core is None:
            self._core = self._new_core()
        return self._core

    def _new_core(self, *restored: Any) -> Any:
        """A C++ stream for these options (restored: from (bytes, positions, records, values,
        records pushed))."""
        if self._cost.prior:
            kind = _core.calibrated_stream
        else:
            kind = _core.stream if self._memory is None else _core.memory_stream
        return kind(
            *self._cost.prior, self._options, self._cost.name, self._cost.pricing,
            inputs.real_number, *restored,
        )  # fmt: skip

    def _fill(self, room: int) -> None:
        """Takes records until the balancer can run its next round (`room` of them), and pushes
        them (the C++ side removes them from the intake as they enter); ends the input at the
        upstream's end. Whatever raises leaves every record taken in the intake."""
        intake = self._intake
        want = room - len(intake)
        if want > 0 and not self._ended:
            self._take(want)
        self._value_all(self._values, self._cost.value)
        if self._memory is not None:
            self._value_all(self._memory_values, self._memory[0])
        if intake:
            memory = self._memory_values if self._memory is not None else None
            try:
                self._core.push(intake, self._values, memory)
            except BaseException:
                self._note_refused(memory)
                raise
        elif self._ended:
            self._core.finish()

    def _note_refused(self, memory: Optional[list]) -> None:
        """Notes the value the core refused, if the push refused one (it set it to None and took
        nothing), to be asked for again. The core says which, so no list is searched: their other
        items, valued but not yet checked, may be anything (an array whose == is elementwise)."""
        refused = self._core.refused
        if refused is not None:
            is_memory, at = refused
            self._refused.append((memory if is_memory else self._values, at))

    def _value_all(self, values: list, value_of: Any) -> None:
        """Asks `value_of` for each record of the intake not yet valued, and again for a value the
        core refused. list.extend keeps the values computed before an exception, so a failure
        costs nothing already asked."""
        for refused, at in self._refused:
            if refused is values:
                values[at] = value_of(self._intake[at])
        self._refused = [(v, at) for v, at in self._refused if v is not values]
        if len(values) < len(self._intake):
            values.extend(map(value_of, self._intake[len(values) :]))

    def _take(self, want: int) -> None:
        """Takes up to `want` records from upstream into the intake; at a promised length, checks
        that the upstream ends there."""
        intake = self._intake
        limit = want if self.length is None else min(want, self.length - self._consumed)
        before = len(intake)
        try:
            if limit > 0:
                intake.extend(islice(self._upstream, limit))  # keeps what came before a raise
        finally:
            self._consumed += len(intake) - before
        if len(intake) - before < limit:
            self._ended = True
            if self.length is not None:
                self._broken = Error(
                    f"{_WHO}: the upstream ended after {self._consumed} records, but length="
                    f"{self.length} was promised; every rank must take the same number of "
                    "records to emit the same number of batches"
                )
                raise self._broken
        elif self.length is not None and self._consumed == self.length:
            if next(self._upstream, _END) is not _END:
                self._broken = Error(
                    f"{_WHO}: the upstream yields more than length={self.length} records; every "
                    "rank must take the same number of records to emit the same number of "
                    "batches (cut the upstream to a common length, e.g. itertools.islice)"
                )
                raise self._broken
            self._ended = True

    def finish(self) -> list:
        """Ends the input now, whatever the upstream still holds: the next ``next()`` calls
        drain what the balancer holds (the short batch last). Returns the records taken from
        upstream that are not yet balanced (after an exception from ``cost``: the chunk of the
        record it failed on, in order), which are the caller's again. The batch count is then
        that of the records balanced."""
        core = self._started_core()
        back = self._intake[:]
        self._returned += len(back)
        self._intake.clear()
        self._values.clear()
        self._memory_values.clear()
        self._refused.clear()
        self._ended = True
        core.finish()
        return back

    # -- what it reports -------------------------------------------------------------------------

    @property
    def upstream_consumed(self) -> int:
        """The number of records taken from upstream so far."""
        return self._consumed

    @property
    def stats(self) -> dict:
        """The balancer's statistics, as bcl.BalancedBatchSampler.stats gives them."""
        stats = self._started_core().stats()
        if self._cost.prior:
            stats["calibration"] = self._started_core().calibration()
        return stats

    def observe(self, batch_index: int, seconds: float) -> None:
        """Calibration (``calibrate=True``): the time the training step of the stream's batch
        number ``batch_index`` (from 0) took on this rank, its own compute; as
        bcl.BalancedBatchSampler.observe."""
        if not self._cost.prior:
            raise Error(f"{_WHO}.observe: the stream does not calibrate (calibrate=True)")
        index = inputs.counter("batch_index", batch_index)
        self._started_core().observe(index, inputs.real("seconds", seconds))

    # -- state -----------------------------------------------------------------------------------

    def state_dict(self) -> dict:
        """Everything needed to continue exactly, as plain values: the balancer's bytes, the
        records it holds (pickled, or by key=) and their positions, the records taken and not yet
        balanced, ``upstream_consumed`` (records taken from upstream), the settings the state
        depends on (the cost's spelling, the memory estimate's, length, the DataLoader worker),
        a checksum over all of those, and the upstream's own ``state_dict()`` where it has one."""
        data, pending, positions = self._started_core().save()
        state: dict = {
            "format": STATE_FORMAT,
            "upstream_consumed": self._consumed,
            "returned": self._returned,
            "balancer": bytes(data),
            "positions": positions.tolist(),
            "pending": self._pack(pending),
            "intake": self._pack(self._intake),
            "keyed": self._key is not None,
            "cost": self._cost.fingerprint,
            "memory": None if self._memory is None else self._memory[1],
            "length": self.length,
            "worker": self._worker,
        }
        state["checksum"] = checksum(state, _CHECKED_FIELDS)
        state["upstream"] = self._source.state_dict() if _stateful(self._source) else None
        return state

    def load_state_dict(self, state: Mapping) -> None:
        """Continues a saved stream in this one, which must not have started. Every field is
        checked (its type, the checksum, against the others, the balancer's bytes and this
        stream's settings) before anything is kept; whatever is wrong is a bcl.Error naming the
        field, and leaves this stream (and its upstream) as it was.

        The upstream then continues where the saved one stood: an upstream with
        ``state_dict()``/``load_state_dict()`` is given its saved state; a re-iterable one (a
        list, a dataset: ``iter()`` gives a new iterator) is iterated afresh past the
        ``upstream_consumed`` records; an iterator (a generator) must be given already past them.
        """
        if self._consumed or self._core is not None and self._core.pushed:
            raise Error(
                f"{_WHO}: load_state_dict() continues a saved stream in a stream that has not "
                f"started; this one has taken {self._consumed} records from its upstream"
            )
        got = format_of(state)
        if got != STATE_FORMAT:
            raise Error(
                f"{_WHO}: not a state of a stream (format {got!r}, expected {STATE_FORMAT!r})"
            )
        read = Reader(state, _WHO, holder="stream")
        read.keys(_FIELDS)
        read.verify(_CHECKED_FIELDS)
        read.same("cost", self._cost.fingerprint)
        read.same_or_none("memory", None if self._memory is None else self._memory[1])
        read.same_or_none("length", self.length)
        keyed = read.flag("keyed")
        if keyed != (self._key is not None):
            raise read.error(
                "keyed",
                f"is {keyed}: the state holds its pending records "
                + ("by key, but this stream has no restore= to rebuild them" if keyed else
                   "by value, but this stream has key=/restore="),
            )  # fmt: skip
        worker = self._read_worker(read)
        consumed, returned = read.count("upstream_consumed"), read.count("returned")
        positions = inputs.strict_indices(
            read.sequence("positions", "arrival positions"), f"{_WHO}: the state's positions"
        )
        pending, intake = self._unpack(read, "pending"), self._unpack(read, "intake")
        if len(intake) + returned > consumed:
            raise read.error(
                "upstream_consumed",
                f"is {consumed}, fewer than the {len(intake)} records of its intake and the "
                f"{returned} returned",
            )
        if self.length is not None and consumed > self.length:
            raise read.error("upstream_consumed", f"is {consumed}, past length={self.length}")
        values = np.zeros(len(pending))
        if self._cost.prior:  # a calibrated balancer recomputes its records' features
            values = np.array([inputs.real_number("a pending record's length", self._cost.value(r))
                               for r in pending], dtype=np.float64)  # fmt: skip
        core = self._new_core(
            read.data("balancer"), positions, pending, values, consumed - len(intake) - returned
        )
        if returned and not core.finished:
            raise read.error(
                "returned", f"is {returned}, but only finish() returns records, and its balancer "
                "has not finished"
            )  # fmt: skip
        upstream = self._position_upstream(read, consumed)
        # Everything checked: kept from here on.
        self._core, self._upstream = core, upstream
        self._intake, self._values, self._memory_values = list(intake), [], []
        self._refused = []
        self._consumed, self._returned = consumed, returned
        self._ended, self._broken = bool(core.finished), None
        self._resumed_in, self._pop = worker, None

    def _read_worker(self, read: Reader) -> Optional[list]:
        worker = read.get("worker")
        ok = worker is None or (
            isinstance(worker, list) and len(worker) == 2
            and all(isinstance(w, int) and not isinstance(w, bool) for w in worker)
        )  # fmt: skip
        if not ok:
            raise read.error("worker", f"must be None or [id, num_workers] (got {worker!r})")
        here = _worker_identity()
        if worker != here:
            raise Error(
                f"{_WHO}: the state was saved in {_where(worker)}, but it is loaded in "
                f"{_where(here)}; each DataLoader worker's stream resumes from its own state"
            )
        return worker

    def _position_upstream(self, read: Reader, consumed: int) -> Any:
        """The upstream's iterator, past the `consumed` records the state took (see
        load_state_dict()); the last step of a load, undone if it fails."""
        saved = read.get("upstream")
        source = self._source
        if _stateful(source):
            if saved is None:
                raise read.error(
                    "upstream", "is None, but this stream's upstream has state_dict(): the state "
                    "was saved over another upstream"
                )  # fmt: skip
            before = source.state_dict()
            try:
                source.load_state_dict(saved)
                return iter(source)
            except BaseException:
                source.load_state_dict(before)
                raise
        if saved is not None:
            raise read.error(
                "upstream", "holds the upstream's state_dict(), but this stream's upstream has "
                "no load_state_dict()"
            )  # fmt: skip
        upstream = iter(source)
        if upstream is source:  # an iterator: the caller has positioned it
            return upstream
        skipped = sum(1 for _ in islice(upstream, consumed))
        if skipped < consumed:
            raise Error(
                f"{_WHO}: the upstream yields {skipped} records, fewer than the {consumed} the "
                "state took from it (upstream_consumed): it is not the upstream the state was "
                "saved over"
            )
        return upstream

    def _pack(self, records: list) -> bytes:
        items = records if self._key is None else [self._key(r) for r in records]
        try:
            return pickle.dumps(list(items), protocol=pickle.HIGHEST_PROTOCOL)
        except Exception as e:  # noqa: BLE001 - whatever a record's pickling raises
            what, hint = "pending records", "pass key= and restore= to save them by key"
            if self._key is not None:
                what = "keys key= gave the pending records"
                hint = "key(record) must return a value that pickles (an id, a path)"
            why = f"{type(e).__name__}: {e}"
            raise Error(f"{_WHO}: the {what} do not pickle ({why}); {hint}") from e

    def _unpack(self, read: Reader, field: str) -> list:
        data = read.data(field)
        try:
            items = pickle.loads(data)
        except Exception as e:  # noqa: BLE001 - whatever the bytes hold, the field is wrong
            raise read.error(field, f"does not unpickle ({type(e).__name__}: {e})") from None
        if not isinstance(items, list):
            raise read.error(field, f"must hold a list (got {type(items).__name__})")
        if self._restore is None:
            return items
        restored = []
        for k in items:
            try:
                restored.append(self._restore(k))
            except Exception as e:  # the state names a key restore() cannot rebuild
                raise read.error(
                    field, f"holds the key {k!r}, which restore() refused ({type(e).__name__}: {e})"
                ) from e
        return restored


#: ``bcl.balance(iterable, cost, batch_size, lookahead=8, ...)``: a BalancedStream.
balance = BalancedStream
