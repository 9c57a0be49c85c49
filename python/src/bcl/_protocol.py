"""The protocol both samplers keep with a training loop: iterators, states, copies.

- **Iterators.** Each ``iter(sampler)`` is a pass of its own over the epoch (as with torch's
  ``BatchSampler``): two live iterators (``zip(loader, loader)``, a second DataLoader over the
  same sampler) do not share a position. An epoch starts at its iterator's first ``next()``, so
  an iterator dropped unused consumes nothing, not even a loaded state.
- **States.** ``state_dict()`` describes the iterator started last: its epoch, and how many of
  its batches the training loop has taken (``consumed=k``; by default, those handed out). Once
  the loop has taken every batch of the epoch (``consumed=len(sampler)``, or no ``consumed``
  while the iterator has not ended) the state says "epoch e finished", whether or not a
  prefetching DataLoader has already ended the iterator. A state without ``consumed`` taken
  after the iterator ended (after the loop over the epoch) is that of the next pass, not
  started.
- **Resume.** After ``load_state_dict(state)`` the next iterator continues the saved epoch: it
  hands out the rest, whatever ``set_epoch`` was given since. A finished epoch has no rest: its
  next iterator yields nothing, unless ``set_epoch`` names another epoch first, which then
  starts.
- **Copies.** ``pickle`` and ``copy.deepcopy`` copy a sampler by its constructor's arguments
  (the cost table by value) and its ``state_dict()``: the copy continues where the sampler
  stood, as a loaded state does.

Each sampler supplies its epoch cursors (``next_batch()``, ``handed_out``, ``batches``), the
fields of its state and their checks; the rest is here, once.
"""

from __future__ import annotations

import copy
import numbers
from collections.abc import Iterator, Mapping
from typing import Any, Optional, Protocol

import numpy as np

from ._core import Error
from ._state import Reader, checksum, format_of

_SamplerBase: Any = object
try:  # a torch.utils.data.Sampler where torch is installed (isinstance checks hold), else plain
    import torch.utils.data as _torch_data

    _SamplerBase = _torch_data.Sampler
except ImportError:  # pragma: no cover - the package itself needs only numpy
    pass


class Cursor(Protocol):
    """One pass over an epoch, as a sampler's iterator drives it."""

    done: bool  # its iterator has ended (not merely handed out the last batch)

    @property
    def epoch(self) -> Optional[int]: ...  # the epoch it is a pass of (None: no epochs known)

    @property
    def handed_out(self) -> int: ...  # batches handed out so far

    @property
    def batches(self) -> int: ...  # batches in the whole pass

    def next_batch(self) -> Optional[list[int]]: ...


def taken(consumed: Any, handed_out: int, who: str) -> int:
    """The batches of a pass the loop has taken: `consumed`, checked against the `handed_out`
    ones, or all of those when it is None."""
    if consumed is None:
        return handed_out
    if isinstance(consumed, (bool, np.bool_)) or not isinstance(consumed, numbers.Integral):
        raise Error(f"{who}: consumed must be an integer (got {consumed!r})")
    if not 0 <= int(consumed) <= handed_out:
        raise Error(
            f"{who}: consumed={int(consumed)}, but this epoch has handed out {handed_out} batches"
        )
    return int(consumed)


class StatefulBatchSampler(_SamplerBase):
    """The base of both samplers: iteration, state_dict()/load_state_dict() and copies.

    A subclass sets ``_who``, ``_format``, ``_earlier_formats``, ``_checked_fields`` (and
    ``_optional_fields``, checked when present, so that states without them keep their
    checksums) and calls
    ``_keep_arguments()`` at the end of its constructor; it implements ``_begin()`` (a cursor
    of a new pass), ``_fields(cursor, position, ended)`` (the state's fields) and
    ``_load(read, extra)`` (checks every field, then commits a resume cursor or none), and may
    override
    ``_started(cursor)`` (a pass begins), ``_copy_extra()`` and ``_shared_on_copy()``.
    """

    _who = ""
    _format = ""
    _earlier_formats: tuple = ()
    _checked_fields: tuple = ()
    _optional_fields: tuple = ()

    def _checksummed(self, state: Mapping) -> tuple:
        """The fields the checksum covers: the checked ones, and the optional ones present."""
        return self._checked_fields + tuple(k for k in self._optional_fields if k in state)

    def _keep_arguments(self, arguments: dict) -> None:
        """Keeps the constructor's arguments (for copies) and starts with no pass."""
        self._arguments = arguments
        self._latest: Any = None  # the cursor of the iterator started last
        self._resume: Any = None  # a loaded cursor, waiting for the next iterator

    # -- what a subclass supplies ----------------------------------------------------------------

    def _begin(self) -> Cursor:
        raise NotImplementedError

    def _fields(self, cursor: Any, position: int, ended: bool) -> dict:
        """The state's fields for `cursor` with `position` batches taken; `ended`: the state of
        the pass after it (the iterator has ended and no count was given)."""
        raise NotImplementedError

    def _load(self, read: Reader, extra: Any) -> None:
        raise NotImplementedError

    def _started(self, cursor: Cursor) -> None:
        """A pass begins (the resumed one included): nothing by default."""

    def _copy_extra(self) -> Any:
        """What a copy needs beyond the arguments and the state: nothing by default."""
        return None

    def _shared_on_copy(self) -> dict:
        """Arguments a deep copy shares with the original instead of copying: none by default."""
        return {}

    # -- iteration -------------------------------------------------------------------------------

    def __iter__(self) -> Iterator[list[int]]:
        # A generator: nothing below runs before the first next(), so an iterator that a
        # DataLoader makes and drops unused takes no epoch and no loaded state.
        cursor, self._resume = (self._resume or self._begin()), None
        self._latest = cursor
        self._started(cursor)
        batch = cursor.next_batch()
        while batch is not None:
            yield batch
            batch = cursor.next_batch()
        cursor.done = True

    def _current(self) -> Any:
        """The pass a state describes: a loaded one not yet iterated, else the latest."""
        return self._resume if self._resume is not None else self._latest

    # -- state -----------------------------------------------------------------------------------

    def state_dict(self, consumed: Optional[int] = None) -> dict:
        """The epoch of the iterator started last and how many of its batches were taken.

        Plain Python values (ints, str, bytes, lists, dicts), so it pickles. A sampler restored
        from it with load_state_dict() yields exactly the batches this one would yield next.

        Args:
            consumed: the number of this epoch's batches the training loop has taken. A
                DataLoader with worker processes reads batches ahead of the loop; with
                ``consumed`` the state is the epoch's as it was after those batches, so a
                restored sampler yields the read-ahead ones again. None: as of the last batch
                handed out, right for a DataLoader without workers (``num_workers=0``).
        """
        cursor = self._current()
        position = taken(consumed, 0 if cursor is None else cursor.handed_out, self._who)
        ended = cursor is not None and cursor.done and consumed is None
        state: dict = {"format": self._format}
        state.update(self._fields(cursor, position, ended))
        state["checksum"] = checksum(state, self._checksummed(state))
        return state

    def load_state_dict(self, state: Mapping) -> None:
        """Continues from state_dict(): the next iterator resumes the saved epoch.

        Every field is checked for its type, against the checksum, the others, the epoch it
        describes and this sampler; whatever is wrong is a bcl.Error naming the field, and
        leaves this sampler as it was.
        """
        self._load_checked(state, None)

    def _load_checked(self, state: Any, extra: Any) -> None:
        got = format_of(state)
        if got in self._earlier_formats:
            raise Error(
                f"{self._who}: the state was written by an earlier bcl (format {got!r}), whose "
                "states this one cannot check; start the epoch again (set_epoch) instead of "
                "resuming it, or finish it with the bcl that wrote the state"
            )
        if got != self._format:
            raise Error(
                f"{self._who}: not a state of this sampler (format {got!r}, expected "
                f"{self._format!r})"
            )
        read = Reader(state, self._who)
        read.verify(self._checksummed(state))
        self._load(read, extra)

    # -- copies ----------------------------------------------------------------------------------

    def __reduce__(self) -> tuple:
        return (_restore, (type(self), self._arguments, self.state_dict(), self._copy_extra()))

    def __deepcopy__(self, memo: dict) -> Any:
        shared = self._shared_on_copy()
        arguments = {k: v for k, v in self._arguments.items() if k not in shared}
        return _restore(
            type(self),
            copy.deepcopy(arguments, memo),
            self.state_dict(),
            copy.deepcopy(self._copy_extra(), memo),
            shared,
        )


def _restore(cls: type, arguments: dict, state: dict, extra: Any, shared: Any = None) -> Any:
    """A sampler built from `arguments` (and `shared`), continuing from `state`."""
    sampler = cls(**arguments, **(shared or {}))
    sampler._load_checked(state, extra)
    return sampler
