"""The samplers' state_dict() layout, read field by field.

A state is input like any other: every field is read with its type checked, and a state that
lacks a field, holds a value of the wrong type, or whose checksum does not match its fields is a
bcl.Error naming the field. What the fields must agree with (the balancer's bytes, the epoch's
indices, the sampler it is loaded into) is checked by the sampler and the C++ core.
"""

from __future__ import annotations

import hashlib
import numbers
from collections.abc import Mapping
from typing import Any, Optional

import numpy as np

from ._core import Error


def indices_digest(indices: np.ndarray) -> str:
    """A digest of an epoch's indices, in order: the inner sampler must repeat them on resume."""
    data = np.ascontiguousarray(indices, dtype="<i8").tobytes()
    return hashlib.blake2b(data, digest_size=16).hexdigest()


def format_of(state: Any) -> Any:
    """A state's "format" field, to compare with the formats a loader knows: the field itself when
    it is a string or None, otherwise a description (the type's name, in angle brackets) that
    equals no format, so that comparing never raises (a numpy array compared with a string gives
    an array, whose truth is an error). A state that is not a mapping is described the same way.
    """
    if not isinstance(state, Mapping):
        return f"<{type(state).__name__}>"
    value = state.get("format")
    return value if value is None or isinstance(value, str) else f"<{type(value).__name__}>"


def _canonical(value: Any) -> bytes:
    """Bytes that identify `value`, one of the types a state holds, unambiguously; anything else
    by its type's name, which no state written by state_dict() holds (so its checksum fails)."""
    if value is None:
        return b"N"
    if isinstance(value, bool):
        return b"T" if value else b"F"
    if isinstance(value, numbers.Integral):
        return b"I" + str(int(value)).encode()
    if isinstance(value, float):
        return b"D" + value.hex().encode()
    if isinstance(value, str):
        data = value.encode()
        return b"S" + str(len(data)).encode() + b":" + data
    if isinstance(value, (bytes, bytearray)):
        return b"B" + str(len(value)).encode() + b":" + bytes(value)
    if isinstance(value, np.ndarray) and value.ndim == 0:
        return b"?ndarray0"  # a 0-d array has no len(); state_dict() writes none
    if isinstance(value, (list, tuple, np.ndarray)):
        return b"L" + str(len(value)).encode() + b"[" + b",".join(_canonical(v) for v in value)
    if isinstance(value, Mapping):
        items = sorted(value.items(), key=lambda item: _canonical(item[0]))
        return b"M" + str(len(items)).encode() + b"{" + b",".join(
            _canonical(k) + b":" + _canonical(v) for k, v in items
        )
    return b"?" + type(value).__name__.encode()


def checksum(state: Mapping, fields: tuple) -> str:
    """A checksum over `fields` of `state` (absent fields count as absent): it catches a state
    edited by hand or damaged in storage. It is not a signature: a state rebuilt with a new
    checksum is still checked field by field against the balancer, the epoch and the sampler."""
    h = hashlib.blake2b(digest_size=16, person=b"bcl-state")
    for key in fields:
        h.update(key.encode() + b"=")
        h.update(_canonical(state[key]) if key in state else b"<absent>")
        h.update(b";")
    return h.hexdigest()


class Reader:
    """Reads the fields of a state dict, each with its type checked; who: the sampler's (or the
    stream's) name, holder: what it is, as messages call it."""

    def __init__(self, state: Mapping, who: str, prefix: str = "", holder: str = "sampler") -> None:
        self.state = state
        self.who = who
        self.prefix = prefix  # "settings." for the fields of a nested mapping
        self.holder = holder

    def error(self, key: str, what: str) -> Error:
        return Error(f"{self.who}: the state's {self.prefix}{key} {what}")

    def get(self, key: str) -> Any:
        try:
            return self.state[key]
        except KeyError:
            raise Error(f"{self.who}: the state has no {self.prefix + key!r}") from None

    def keys(self, expected: Any) -> None:
        """bcl.Error unless the fields are exactly `expected`, naming one missing or unknown."""
        extra = sorted(str(k) for k in self.state if k not in expected)
        missing = sorted(k for k in expected if k not in self.state)
        if missing:
            raise Error(f"{self.who}: the state has no {self.prefix + missing[0]!r}")
        if extra:
            raise Error(f"{self.who}: the state has an unknown field {self.prefix + extra[0]!r}")

    def flag(self, key: str) -> bool:
        value = self.get(key)
        if not isinstance(value, (bool, np.bool_)):
            raise self.error(key, f"must be True or False (got {value!r})")
        return bool(value)

    def count(self, key: str) -> int:
        value = self.get(key)
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
            raise self.error(key, f"must be an integer (got {value!r})")
        if not 0 <= int(value) < 1 << 63:
            raise self.error(key, f"must be in [0, 2^63) (got {value})")
        return int(value)

    def optional_count(self, key: str) -> Optional[int]:
        return None if self.get(key) is None else self.count(key)

    def text(self, key: str) -> str:
        value = self.get(key)
        if not isinstance(value, str):
            raise self.error(key, f"must be a string (got {type(value).__name__})")
        return value

    def data(self, key: str) -> bytes:
        value = self.get(key)
        if not isinstance(value, (bytes, bytearray)):
            raise self.error(key, f"must be bytes (got {type(value).__name__})")
        return bytes(value)

    def number(self, key: str) -> Optional[float]:
        value = self.get(key)
        if value is None:
            return None
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
            raise self.error(key, f"must be a number or None (got {value!r})")
        return float(value)

    def epoch(self, key: str = "epoch") -> Optional[int]:
        value = self.get(key)
        if value is None:
            return None
        return self.count(key)

    def sequence(self, key: str, of: str = "dataset indices") -> Any:
        value = self.get(key)
        if not isinstance(value, (list, tuple, np.ndarray)):
            raise self.error(key, f"must be a list of {of} (got {type(value).__name__})")
        return value

    def same(self, key: str, mine: Any, name: Optional[str] = None) -> None:
        """bcl.Error unless the state's `key` is `mine`, read as the same type (an int as an
        integer, never a bool or a float; a bool as True or False; a str as a string; a float as
        a number), naming the field and both values."""
        if isinstance(mine, bool):
            saved: Any = self.flag(key)
        elif isinstance(mine, int):
            saved = self.count(key)
        elif isinstance(mine, float):
            saved = self.get(key)
            if not isinstance(saved, float):
                raise self.error(key, f"must be a float (got {saved!r})")
        elif isinstance(mine, str):
            saved = self.text(key)
        elif mine is None:
            saved = self.get(key)
            if saved is not None:
                raise self.error(key, f"must be None (got {saved!r})")
        else:  # pragma: no cover - every setting is one of the above
            raise TypeError(f"no rule to read a {type(mine).__name__}")
        if saved != mine or (isinstance(mine, float) and saved.hex() != mine.hex()):
            raise Error(
                f"{self.who}: the state was saved with {name or key}={saved!r}, but this "
                f"{self.holder} has {name or key}={mine!r}"
            )

    def same_or_none(self, key: str, mine: Any) -> None:
        """As same(), for a setting that may be None on either side: None against a value is a
        mismatch of settings, not of types."""
        saved = self.get(key)
        if (saved is None) != (mine is None):
            raise Error(
                f"{self.who}: the state was saved with {key}={saved!r}, but this {self.holder} "
                f"has {key}={mine!r}"
            )
        if mine is not None:
            self.same(key, mine)

    def section(self, key: str) -> "Reader":
        """The reader of a nested mapping of fields, whose messages name them as key.field."""
        value = self.get(key)
        if not isinstance(value, Mapping):
            raise self.error(key, f"must be a mapping of fields (got {type(value).__name__})")
        return Reader(value, self.who, prefix=f"{self.prefix}{key}.", holder=self.holder)

    def verify(self, fields: tuple) -> None:
        """bcl.Error unless the state's checksum matches its fields."""
        saved = self.text("checksum")
        if saved != checksum(self.state, fields):
            raise Error(
                f"{self.who}: the state's checksum does not match its fields: it was edited or "
                "damaged after state_dict() wrote it"
            )


def inner_kind(sampler: Any) -> str:
    """The inner sampler's kind as a state records it: its class, by module and name."""
    kind = type(sampler)
    return f"{kind.__module__}.{kind.__qualname__}"
