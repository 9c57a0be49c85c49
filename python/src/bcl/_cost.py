"""How a cost is spelled: per dataset index for the samplers, per record for streams.

``bcl.affine_quadratic(lengths, a, b, c)`` is one object for both: its ``lengths`` is read by
whoever balances. A sampler reads it as the length of each dataset index (a table, a mapping or a
callable index -> length); a stream, whose records have no index, as the length of each record (a
callable record -> length, a field name, or ``len``). Each refuses the forms that do not apply
to it, so one spelling never means two things in one place.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple, Optional

import numpy as np

from . import _inputs as inputs
from ._core import Error


class AffineQuadratic:
    """The cost a + b*L + c*L^2 from a length L (see affine_quadratic)."""

    def __init__(self, lengths: Any, a: float, b: float, c: float) -> None:
        self.lengths = lengths
        self.coefficients = tuple(inputs.real(k, v) for k, v in (("a", a), ("b", b), ("c", c)))
        if not all(0.0 <= v <= 1e300 for v in self.coefficients) or not any(self.coefficients):
            raise Error(
                f"bcl.affine_quadratic: the coefficients must be finite, >= 0 and not all 0 "
                f"(got a={a!r}, b={b!r}, c={c!r})"
            )

    def costs(self) -> Any:
        """The costs of dataset indices, in the form the lengths came in (an array, or a function
        of the index)."""
        a, b, c = self.coefficients
        if inputs.is_lookup(self.lengths):
            length_of = inputs.Lookup("lengths", self.lengths)
            return lambda i: float(np.polyval([c, b, a], length_of.values(np.array([i]))[0]))
        lengths = inputs.real_array("lengths", self.lengths)
        return a + lengths * (b + c * lengths)


def affine_quadratic(
    lengths: Any, a: float = 0.0, b: float = 1.0, c: float = 0.0
) -> AffineQuadratic:
    """The cost a + b*L + c*L^2 from a length L (tokens, patches).

    - For the samplers, ``lengths`` is the length of each dataset index, in the forms ``costs``
      takes (a sequence, array or tensor indexed by dataset index, a mapping, a callable index
      -> length): ``BalancedBatchSampler(sampler, bcl.affine_quadratic(lengths, a, b, c), 16)``.
    - For ``bcl.balance`` and ``bcl.BalancedIterableDataset``, it is the length of each record: a
      callable record -> length, a field name (the key of a mapping record, else the attribute;
      its value is the length) or ``len``:
      ``bcl.balance(records, bcl.affine_quadratic(lambda r: len(r["input_ids"]), 0, 1, 1e-4), 16)``.

    With ``calibrate=True`` the sampler or stream fits (a, b, c) to the step times it is told,
    starting from these."""
    return AffineQuadratic(lengths, a, b, c)


def _field(name: str) -> Callable[[Any], Any]:
    """record -> the value of its field `name`: the key of a mapping record (a dict, as Hugging
    Face datasets yield), else the attribute. Decided once per record type."""
    by_type: dict = {}

    def value(record: Any) -> Any:
        get = by_type.get(type(record))
        if get is None:
            mapping = isinstance(record, Mapping)
            get = by_type[type(record)] = (operator.itemgetter if mapping else operator.attrgetter)(
                name
            )
        return get(record)

    return value


def _callable_name(function: Any) -> str:
    """A callable's name as a state records it: module and qualified name (of its type, for an
    object with __call__ or a functools.partial)."""
    kind = function if hasattr(function, "__qualname__") else type(function)
    return f"{getattr(kind, '__module__', None) or '?'}.{kind.__qualname__}"


def record_value(name: str, spelling: Any) -> tuple[Callable[[Any], Any], str]:
    """(record -> value, its fingerprint) from a per-record spelling: a callable, a field name or
    ``len``. bcl.Error for a table (a sequence, array, mapping or tensor indexed by dataset
    index), which a stream of records cannot use."""
    if isinstance(spelling, str):
        return _field(spelling), f"field {spelling!r}"
    if callable(spelling) and not isinstance(spelling, (Mapping, np.ndarray)):
        return spelling, "len" if spelling is len else _callable_name(spelling)
    if spelling is None:
        raise Error(f"{name} is required: a callable record -> {name}, a field name or len")
    raise Error(
        f"{name} must be a callable record -> {name}, a field name or len (got a "
        f"{type(spelling).__name__}); a stream's records have no dataset index, so a table "
        f"indexed by one, which the samplers take, does not apply"
    )


class RecordCost(NamedTuple):
    """What a stream computes for each record and how the C++ side prices it."""

    value: Callable[[Any], Any]  # record -> its cost, or its length under affine_quadratic
    name: str  # "cost" or "length", as messages name the value
    pricing: Optional[tuple]  # (a, b, c) that price a length, or None (the value is the cost)
    prior: tuple  # a calibrated cost's prior (a, b, c), or ()
    fingerprint: str  # the spelling, as a state records it


def record_cost(cost: Any, prior: tuple) -> RecordCost:
    """The per-record cost of a stream; `prior` is calibration_prior()'s (non-empty: the C++ side
    fits the coefficients, starting from it, so the length goes to it unpriced)."""
    if isinstance(cost, AffineQuadratic):
        length, spelled = record_value("length", cost.lengths)
        a, b, c = cost.coefficients
        fingerprint = f"affine_quadratic({spelled}, a={a!r}, b={b!r}, c={c!r})"
        if prior:
            return RecordCost(length, "length", None, prior, "calibrated " + fingerprint)
        return RecordCost(length, "length", cost.coefficients, (), fingerprint)
    value, fingerprint = record_value("cost", cost)
    return RecordCost(value, "cost", None, (), fingerprint)
