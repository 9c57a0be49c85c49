"""What the samplers take from their callers, taken strictly.

Options, costs and dataset indices are checked here or in the C++ core before anything uses
them: an integer option is an int (never a bool or a float), a cost is a real number (never a
bool, a complex number, a string, a date or a Decimal), an index is an integer in [0, 2^63).
Every refusal is a bcl.Error naming the option, or the position and the value. Nothing is
coerced silently: a float index is not truncated, a complex cost does not lose its imaginary
part, a masked array does not lose its mask.
"""

from __future__ import annotations

import math
import numbers
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Union

import numpy as np

from . import _core
from ._core import Error

_UINT64_END = 1 << 64

#: What costs (and memory estimates) may be: a sequence, array or tensor indexed by dataset
#: index, a mapping, or a callable index -> value.
CostSource = Union[Sequence[float], np.ndarray, Mapping[int, float], Callable[[int], float], Any]


def enum_value(enum_type: Any, option: str, value: Any) -> Any:
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


#: The one range of an epoch and of a seed, wherever either enters (constructors, set_epoch(),
#: states): [0, 2^63), so that seed + epoch (DistributedSampler's generator seed) fits 64 bits and
#: a state can hold either as a signed 64-bit integer.
COUNTER_END = 1 << 63


def _integer(label: str, value: Any, end: int, in_range: str) -> int:
    """`value` as an int in [0, end), strictly (never a bool or a float), or bcl.Error."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        raise Error(f"{label} must be an integer (got {value!r})")
    value = int(value)
    if not 0 <= value < end:
        raise Error(f"{label} must be {in_range} (got {value})")
    return value


def counter(option: str, value: Any) -> int:
    """An epoch or a seed: an int in [0, 2^63)."""
    return _integer(option, value, COUNTER_END, "an integer in [0, 2^63)")


def whole(option: str, value: Any) -> int:
    """`value` as a non-negative int that fits a std::size_t/std::uint64_t."""
    return _integer(f"bcl::options::{option}", value, _UINT64_END, "a non-negative integer")


def real(option: str, value: Any) -> float:
    """`value` as a float; the C++ validation then checks its range (NaN included)."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise Error(f"bcl::options::{option} must be a number (got {value!r})")
    try:
        return float(value)
    except OverflowError:
        raise Error(f"bcl::options::{option} is too large for a float (got {value!r})") from None


def flag(option: str, value: Any) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise Error(f"bcl::options::{option} must be True or False (got {value!r})")
    return bool(value)


_QUANTILE = re.compile(r"p(\d+(?:\.\d*)?)")


def cap_options(
    cap: Any, cap_warmup: Any = 0, cap_action: Any = "clip", cap_prior: Any = 0.0,
    of: str = "indices",
) -> Any:  # fmt: skip
    """bcl::cap_options from the Python spelling, the one parser of every sampler, stream and of
    plan_batches: None (no cap), a number (a fixed cap, finite and > 0) or a quantile of the
    costs such as "p99" (strictly between p0 and p100). Checked by bcl::validate, so each rule
    and its message is the C++ library's. `of`: what is balanced ("indices" or "records"), for
    the message that refuses truncation."""
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
        c.value = real("cap.value", cap)
    c.warmup = whole("cap.warmup", cap_warmup)
    c.prior = real("cap.prior", cap_prior)
    action = enum_value(_core.cap_action, "cap.action", cap_action)
    if action == _core.cap_action.truncate:
        raise Error(
            "bcl::options::cap.action 'truncate' shrinks a record to fit under the cap, and a "
            + (
                "dataset index cannot be shrunk: truncate the sequences in the dataset itself and "
                "pass their new costs"
                if of == "indices"
                else "stream holds its records as they are, by reference: truncate them upstream "
                "(before bcl.balance takes them)"
            )
            + ", or keep cap_action='clip', which balances with the capped estimate and leaves "
            "the record as it is"
        )
    c.action = action
    probe = _core.options()
    probe.batch_size = 1
    probe.cap = c
    _core.validate(probe)  # the cap's own rules: a fixed value finite and > 0, a quantile in (0, 1)
    return c


def table_cap(cap: Any, costs: np.ndarray) -> float:
    """The cap of a plan over the whole cost table (plan_options::cap; 0 for none), from the
    spelling cap_options() takes: a fixed cap as given, a quantile as the table's own nearest-rank
    quantile, an element of the table, so that every rank computes the same value bit for bit.
    bcl.Error for a quantile that is 0 in this table: a cap of 0 would make every cost 0."""
    option = cap_options(cap)
    if option.kind == _core.cap_kind.none:
        return 0.0
    if option.kind == _core.cap_kind.fixed:
        return float(option.value)
    if len(costs) == 0:
        return 0.0
    k = min(len(costs) - 1, max(0, math.ceil(option.quantile * len(costs)) - 1))
    value = float(np.partition(costs, k)[k])
    if value == 0.0:
        raise Error(
            f"cap={cap!r} is 0 for these costs (at least that share of them is 0), and a cap of 0 "
            "would make every cost 0; choose a higher quantile or a fixed cap"
        )
    return value


def _is_tensor(value: Any) -> bool:
    # A torch tensor, recognised without importing torch.
    return hasattr(value, "detach") and hasattr(value, "is_complex")


def _plain_tensor(name: str, tensor: Any) -> None:
    """bcl.Error for a tensor of a sparse or quantized layout, whose values the caller should
    spell out."""
    layout = str(getattr(tensor, "layout", "torch.strided"))
    if layout != "torch.strided":
        raise Error(f"{name} is a {layout} tensor; pass {name}.to_dense()")
    if getattr(tensor, "is_quantized", False):
        raise Error(f"{name} is a quantized tensor; pass {name}.dequantize()")


def _tensor_values(name: str, tensor: Any) -> np.ndarray:
    """A tensor of real numbers as float64 values, widened exactly (bfloat16, float16 and the
    integer types included), from any device; bcl.Error for a sparse or quantized layout (whose
    values the caller should spell out) and for complex or boolean values."""
    _plain_tensor(name, tensor)
    if tensor.is_complex() or str(tensor.dtype) == "torch.bool":
        raise Error(f"{name} must hold real numbers (got a tensor of {tensor.dtype})")
    try:
        return tensor.detach().cpu().double().numpy()
    except (RuntimeError, TypeError, NotImplementedError) as e:
        raise Error(
            f"{name}: a tensor of {tensor.dtype} on {tensor.device} cannot be read as numbers ({e})"
        ) from None


def _is_real_number(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_))


def _unmasked(name: str, values: Any) -> None:
    if isinstance(values, np.ma.MaskedArray):
        raise Error(
            f"{name} is a masked array, whose mask the sampler would ignore; pass "
            f"{name}.filled(value) or the values themselves"
        )


def _array_like(values: Any) -> bool:
    """A pandas Series, an xarray: something with values of its own that is not a sequence."""
    return hasattr(values, "__array__") and not isinstance(values, (np.ndarray, Sequence))


def _sequence(name: str, values: Any, what: str) -> Sequence:
    if not isinstance(values, Sequence) or isinstance(values, (str, bytes)):
        raise Error(f"{name} must be {what} (got {type(values).__name__})")
    return values


def real_array(name: str, values: Any) -> np.ndarray:
    """`values` (a sequence, numpy array or tensor of real numbers) as a one-dimensional float64
    array, or bcl.Error naming what is wrong and where. The values' range is checked in C++."""
    _unmasked(name, values)
    if _is_tensor(values):
        values = _tensor_values(name, values)
    elif _array_like(values):
        values = np.asarray(values)  # their values, by their own rule
    if not isinstance(values, np.ndarray):
        what = (
            "a sequence, array or tensor of numbers indexed by dataset index, a mapping, or a "
            f"callable index -> {name}"
        )
        for position, value in enumerate(_sequence(name, values, what)):
            if not _is_real_number(value):
                raise Error(f"{name}[{position}] is {value!r}, not a real number")
            try:
                float(value)
            except OverflowError:
                raise Error(f"{name}[{position}] is {value!r}, too large for a float") from None
        values = np.asarray(values, dtype=np.float64)
    if values.dtype.kind not in "iuf":
        raise Error(f"{name} must hold real numbers (got an array of dtype {values.dtype})")
    if values.ndim != 1:
        raise Error(f"{name} must be one-dimensional (got shape {values.shape})")
    return np.ascontiguousarray(values, dtype=np.float64)


# The tensor dtypes whose numpy view a table_view reads as it is.
_IN_PLACE_TENSORS = {
    "torch.uint8", "torch.int8", "torch.int16", "torch.int32", "torch.int64", "torch.float32",
    "torch.float64",
}  # fmt: skip


def table_in_place(name: str, values: Any) -> np.ndarray:
    """`values` as a one-dimensional array to read in place (_core.table_view): a numpy array of
    integers, float32 or float64 (a memory map from ``np.load(path, mmap_mode="r")`` too) as it
    is, with no copy when it is C-contiguous; anything else as real_array() reads it (float64).
    A CPU tensor of integers, float32 or float64 is read through its numpy view (no copy);
    other tensors (bfloat16, float16, on a device) as real_array() widens them. bcl.Error, as
    real_array's, for what holds no real numbers (bool, complex, object)."""
    _unmasked(name, values)
    if _is_tensor(values) and str(getattr(values, "device", "cpu")) == "cpu":
        _plain_tensor(name, values)
        if str(values.dtype) in _IN_PLACE_TENSORS:
            values = values.detach().numpy()
    if isinstance(values, np.ndarray) and values.dtype.kind in "iuf":
        if values.ndim != 1:
            raise Error(f"{name} must be one-dimensional (got shape {values.shape})")
        if values.dtype.kind == "f" and values.dtype.itemsize not in (4, 8):
            return np.ascontiguousarray(values, dtype=np.float64)  # float16, longdouble
        if values.dtype.byteorder not in "=|":
            return np.ascontiguousarray(values, dtype=values.dtype.newbyteorder("="))
        return np.ascontiguousarray(values)  # the array itself when C-contiguous
    return real_array(name, values)


def counts_in_place(name: str, values: Any) -> np.ndarray:
    """`values` as a one-dimensional array of integers to read in place (_core.table_view with
    integers_only): a numpy array of integers (a memory map too) as it is, with no copy when it
    is C-contiguous in native byte order; a tensor of integers as its numpy view (no copy on the
    CPU); anything else as token_counts() reads it (uint64). bcl.Error, as token_counts', for
    what holds no integers (floats, bools, complex, object); negative entries are refused by the
    table_view, naming their index."""
    _unmasked(name, values)
    if _is_tensor(values):
        _plain_tensor(name, values)
        if values.is_floating_point() or values.is_complex() or str(values.dtype) == "torch.bool":
            raise Error(f"{name} must hold integers (got a tensor of {values.dtype})")
        values = values.detach().cpu().numpy()  # a view of a CPU tensor
    if isinstance(values, np.ndarray) and values.dtype.kind in "iu":
        if values.ndim != 1:
            raise Error(f"{name} must be one-dimensional (got shape {values.shape})")
        if values.dtype.byteorder not in "=|":
            return np.ascontiguousarray(values, dtype=values.dtype.newbyteorder("="))
        return np.ascontiguousarray(values)  # the array itself when C-contiguous
    return token_counts(name, values)


def _is_integer(value: Any) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, (bool, np.bool_))


def token_counts(name: str, values: Any) -> np.ndarray:
    """`values` (a sequence, numpy array or tensor of integers >= 0, such as each record's
    tokens) as a one-dimensional uint64 array, or bcl.Error naming the position and value of the
    first that is not one. Floats are refused, whole ones too (512.0 may be a mean, rounded):
    pass integers (``lengths.astype(np.int64)``); so are bools and masked arrays."""
    _unmasked(name, values)
    if _is_tensor(values):
        _plain_tensor(name, values)
        if values.is_floating_point() or values.is_complex() or str(values.dtype) == "torch.bool":
            raise Error(f"{name} must hold integers (got a tensor of {values.dtype})")
        values = values.detach().cpu().numpy()
    elif _array_like(values):
        values = np.asarray(values)
    if not isinstance(values, np.ndarray):
        what = "a sequence, array or tensor of integers (one per record)"
        for position, value in enumerate(_sequence(name, values, what)):
            if not _is_integer(value):
                raise Error(f"{name}[{position}] is {value!r}, not an integer")
            if not 0 <= int(value) < _UINT64_END:
                raise Error(f"{name}[{position}] is {int(value)}, not in [0, 2^64)")
        values = np.array([int(v) for v in values], dtype=np.uint64)
    if values.dtype.kind not in "iu":
        raise Error(
            f"{name} must hold integers (got an array of dtype {values.dtype}); pass whole "
            f"counts, e.g. {name}.astype(np.int64)"
        )
    if values.ndim != 1:
        raise Error(f"{name} must be one-dimensional (got shape {values.shape})")
    if values.dtype.kind == "i" and values.size and values.min() < 0:
        position = int(np.argmax(values < 0))
        raise Error(f"{name}[{position}] is {int(values[position])}, negative")
    return np.ascontiguousarray(values, dtype=np.uint64)


def group_ids(name: str, values: Any) -> np.ndarray:
    """Group ids (integers or strings, one per record; records of equal ids form one group) as
    dense uint64 numbers in the order of their groups' first records, or bcl.Error naming the
    position and value of the first that is neither (a float, a bool, None)."""
    _unmasked(name, values)
    if _is_tensor(values) or _array_like(values) or isinstance(values, np.ndarray):
        array = np.asarray(values.detach().cpu() if _is_tensor(values) else values)
        if array.ndim != 1:
            raise Error(f"{name} must be one-dimensional (got shape {array.shape})")
        if array.dtype.kind in "iuU":
            _, first, inverse = np.unique(array, return_index=True, return_inverse=True)
            rank = np.empty(len(first), dtype=np.uint64)
            rank[np.argsort(first, kind="stable")] = np.arange(len(first), dtype=np.uint64)
            return np.ascontiguousarray(rank[inverse.reshape(-1)])
        if array.dtype.kind != "O":
            raise Error(f"{name} must hold integers or strings (got an array of {array.dtype})")
        values = array.tolist()
    dense: dict = {}
    out = np.empty(len(_sequence(name, values, "a sequence of integers or strings")), np.uint64)
    for position, value in enumerate(values):
        if not (_is_integer(value) or isinstance(value, str)):
            raise Error(f"{name}[{position}] is {value!r}; a group id is an integer or a string")
        out[position] = dense.setdefault(int(value) if _is_integer(value) else value, len(dense))
    return out


def real_value(name: str, index: int, value: Any) -> float:
    """What a cost (or memory) source gave for dataset index `index`, as a float, or bcl.Error
    naming the index and the value: a real number, or a 0-d array or one-element tensor of one."""
    return real_number(f"{name} of dataset index {index}", value)


def real_number(subject: str, value: Any) -> float:
    """`value` as a float, or bcl.Error naming `subject` ("costs of dataset index 7", "the cost
    of record 7 of the stream") and the value: a real number, or a 0-d array or one-element
    tensor of one."""
    if not _is_real_number(value):
        if _is_tensor(value) and value.numel() == 1 and not value.is_complex():
            if str(value.dtype) != "torch.bool":
                value = value.item()
        elif isinstance(value, np.ndarray) and value.size == 1 and value.dtype.kind in "iuf":
            value = value.item()
    if not _is_real_number(value):
        raise Error(
            f"{subject} is {value!r}; a cost must be a real number "
            f"(an int or a float, not {type(value).__name__})"
        )
    try:
        return float(value)
    except OverflowError:
        raise Error(f"{subject} is {value!r}, too large for a float") from None


class Lookup:
    """Costs known one index at a time: a callable, a mapping, or (for memory beside callable
    costs) a sequence. A callable's own exceptions propagate unchanged; a mapping or sequence
    without the index is a bcl.Error naming it."""

    def __init__(self, name: str, source: Any) -> None:
        self.name = name
        if callable(source) and not isinstance(source, (Mapping, np.ndarray)):
            self._get = source
            self._owned = False
        elif isinstance(source, Mapping):
            self._get = source.__getitem__
            self._owned = True
        else:
            self._get = real_array(name, source).__getitem__
            self._owned = True

    def values(self, indices: np.ndarray) -> np.ndarray:
        out = np.empty(len(indices), dtype=np.float64)
        for k, index in enumerate(indices.tolist()):
            if self._owned:
                try:
                    value = self._get(index)
                except (IndexError, KeyError):
                    raise Error(f"{self.name} has no entry for dataset index {index}") from None
            else:
                value = self._get(index)  # the user's callable: its errors are its own
            out[k] = real_value(self.name, index, value)
        return out


def is_lookup(source: Any) -> bool:
    """Whether costs (or memory) are given one index at a time rather than as a table."""
    return source is not None and (
        isinstance(source, Mapping) or (callable(source) and not isinstance(source, np.ndarray))
    )


def strict_indices(source: Any, what: str) -> np.ndarray:
    """The dataset indices `source` yields, as an int64 array (see _core.strict_indices)."""
    if _is_tensor(source):
        if str(source.dtype) == "torch.bool" or source.is_floating_point() or source.is_complex():
            raise Error(f"{what} gave a tensor of {source.dtype}; dataset indices must be integers")
        source = source.detach().cpu().numpy()
    return _core.strict_indices(source, what)


# The readers the package's other modules share (_stages).
is_tensor = _is_tensor
tensor_values = _tensor_values
array_like = _array_like
