"""bcl.BalancedIterableDataset: bcl.balance as a stage of an IterableDataset pipeline, for
``DataLoader(stage, batch_size=None)``, resumable in the protocol of torchdata's
StatefulDataLoader (the dataset's ``state_dict()``/``load_state_dict()``)."""

from __future__ import annotations

import multiprocessing
from collections.abc import Iterator, Mapping
from multiprocessing.context import get_spawning_popen
from typing import Any, Optional

from ._core import Error
from ._stream import BalancedStream, _worker_identity

_IterableBase: Any = object
try:  # a torch.utils.data.IterableDataset where torch is installed, so DataLoader treats it as one
    import torch.utils.data as _torch_data

    _IterableBase = _torch_data.IterableDataset
except ImportError:  # pragma: no cover - the package itself needs only numpy
    pass

_WHO = "bcl.BalancedIterableDataset"


class BalancedIterableDataset(_IterableBase):
    """Yields batches (lists of records) of ``dataset``'s records balanced by ``bcl.balance``:
    for ``DataLoader(stage, batch_size=None, collate_fn=...)``.

    Each ``iter()`` is a pass of its own: a new stream over ``iter(dataset)``, started at its
    first ``next()`` (an iterator dropped unused takes nothing). Every option is bcl.balance's,
    checked here.

    Workers: with ``num_workers=W`` every DataLoader worker holds a copy of this stage and runs
    its own stream over what its copy of ``dataset`` yields; the loader interleaves the workers'
    batches. The contract (ceil(n / batch_size) batches of exactly batch_size, every record once)
    holds per worker's stream. ``dataset`` must shard itself per worker (read
    ``torch.utils.data.get_worker_info()`` in its ``__iter__``), or each worker yields every
    record. ``length`` is then what one worker's share yields, and ``len(stage)`` one worker's
    batches.

    DDP: every rank runs its own stage over its own shard, and the ranks emit the same number of
    batches only if their shards (each worker's, with workers) hold the same number of records,
    as with plain batching. ``length=n`` makes that a checked promise: a shard that ends before n
    records or yields more is a bcl.Error where it is found, never a hang or an extra batch.
    ``drop_last=True`` drops each stream's short batch.

    State: ``state_dict()`` describes the pass started last (or a loaded one not yet iterated);
    ``load_state_dict()`` makes the next pass continue it. Under a StatefulDataLoader each worker
    saves and restores its own copy's state. The dataset's own state (where it has
    ``state_dict()``/``load_state_dict()``) travels with it; otherwise a resumed pass iterates
    ``dataset`` afresh past the records the state took (``upstream_consumed``). In the main
    process, ``state_dict()`` is a bcl.Error once a DataLoader worker has started a pass of a
    copy of this stage (and no pass or load here since): the workers' streams are theirs, and
    this process saw none of their records.
    """

    def __init__(self, dataset: Any, cost: Any, batch_size: int, lookahead: int = 8,
                 **options: Any) -> None:  # fmt: skip
        self.dataset = dataset
        self._arguments = dict(cost=cost, batch_size=batch_size, lookahead=lookahead, **options)
        probe = self._stream()  # every option checked now, in the constructor's words
        self.batch_size, self.drop_last = probe.batch_size, probe.drop_last
        self.length = probe.length
        self._next: Optional[BalancedStream] = None  # a loaded stream, the next pass's
        self._latest: Optional[BalancedStream] = None  # the stream of the pass started last
        # 1 once a DataLoader worker has begun a pass of a copy of this stage, in memory the
        # workers share with the main process (a forked worker inherits it; a spawned one is
        # handed it as it is pickled to the worker): the main process reads it in state_dict().
        self._worker_began: Any = multiprocessing.RawValue("b", 0)

    def _stream(self) -> BalancedStream:
        return BalancedStream(self.dataset, **self._arguments)

    def __iter__(self) -> Iterator[list]:
        return _Pass(self)

    def _begin(self) -> BalancedStream:
        stream, self._next = (self._next or self._stream()), None
        self._latest = stream
        self._worker_began.value = 0 if _worker_identity() is None else 1
        return stream

    def __len__(self) -> int:
        """Batches of one stream: ceil(length / batch_size), or floor with drop_last."""
        if self.length is None:
            raise TypeError(f"{_WHO} has a length only when given length= (records per stream)")
        if self.drop_last:
            return self.length // self.batch_size
        return -(-self.length // self.batch_size)

    @property
    def stats(self) -> dict:
        """The statistics of the pass started last (in this process: with num_workers=0)."""
        return (self._latest or self._next or self._stream()).stats

    def observe(self, batch_index: int, seconds: float) -> None:
        """Calibration: as bcl.balance's observe(), for the pass started last; the passes must
        run in this process (num_workers=0)."""
        (self._latest or self._stream()).observe(batch_index, seconds)

    def state_dict(self) -> dict:
        """The state of the pass started last (or of a loaded one not yet iterated; else of a
        pass not started). In the main process, a bcl.Error once a DataLoader worker has begun a
        pass of a copy of this stage since this process last started or loaded one: this
        process's state would be one that took nothing, and loading it would replay the records
        the workers' streams handed out."""
        if self._worker_began.value and _worker_identity() is None:
            raise Error(
                f"{_WHO}: state_dict() in the main process cannot describe the passes DataLoader "
                "workers run: each worker's stream is its own, and this process saw none of "
                "their records. Take each worker's state in that worker (torchdata's "
                "StatefulDataLoader does, after every batch a worker hands out, and hands each "
                "worker its own on resume), or iterate with num_workers=0"
            )
        return self._state()

    def _state(self) -> dict:
        return (self._next or self._latest or self._stream()).state_dict()

    def load_state_dict(self, state: Mapping) -> None:
        """Checked now (bcl.Error naming the field, and nothing changes); the next pass continues
        the saved one."""
        stream = self._stream()
        stream.load_state_dict(state)
        self._next = stream
        if _worker_identity() is None:  # a worker's load is the start of that worker's pass
            self._worker_began.value = 0

    def __reduce__(self) -> tuple:
        """A copy (pickle, deepcopy, a spawned worker) continues where this stage stood. A copy
        pickled to a new process (a spawned DataLoader worker) shares the flag its passes raise
        with this stage; any other copy has its own."""
        started = self._next is not None or self._latest is not None
        shared = self._worker_began if get_spawning_popen() is not None else None
        return (_rebuild, (type(self), self.dataset, self._arguments,
                           self._state() if started else None, shared))  # fmt: skip


class _Pass(Iterator[list]):
    """One pass of a BalancedIterableDataset; its stream starts at the first next()."""

    def __init__(self, stage: BalancedIterableDataset) -> None:
        self._stage = stage
        self._stream: Optional[BalancedStream] = None

    def __next__(self) -> list:
        if self._stream is None:
            self._stream = self._stage._begin()
        return next(self._stream)


def _rebuild(cls: type, dataset: Any, arguments: dict, state: Any, shared: Any = None) -> Any:
    stage = cls(dataset, **arguments)
    if state is not None:
        stage.load_state_dict(state)
    if shared is not None:
        stage._worker_began = shared
    return stage
