"""Stage costs: a table of N rows of D costs (a vision encoder's and a language model's, say) for
a model whose stages synchronise separately, so that a micro-step lasts the sum over stages of
the slowest rank in that stage. bcl.plan_batches takes such a table (bcl::held_stage_planner)."""

from __future__ import annotations

import numbers
from collections.abc import Sequence
from typing import Any, Optional

import numpy as np

from . import _core
from . import _inputs as inputs
from ._core import Error


class StagePlan(list):
    """Each rank's micro-batches, as bcl.plan_batches returns them for stage costs:
    ``plan[rank][j]`` is micro-batch j of that rank (a list of indices); ``plan.summary`` is the
    plan's summary: ``stages`` (D), ``micro_steps``, ``total`` (every record's every stage),
    ``objective`` (the sum over micro-steps and stages of the slowest rank's load),
    ``summed_objective`` (the same for the plan of the summed costs alone), ``lower_bound``
    (the sum over micro-steps and stages of the larger of the ranks' mean and the dearest
    record), ``steps_restaged`` (micro-steps whose ranks the stages changed), ``steps_from_stage``
    (whose plan's micro-steps were kept: -1 the summed costs', d stage d's alone) and ``efficiency``
    (total / (R * objective))."""

    summary: dict

    def __init__(self, ranks: list, summary: dict) -> None:
        super().__init__(ranks)
        self.summary = summary


def _row_count(name: str, values: Sequence) -> Optional[int]:
    """The stages of each row of a sequence of rows, or None for a sequence of numbers; bcl.Error
    for rows of different lengths (naming the first that differs) or a row that is neither."""
    if len(values) == 0 or isinstance(values[0], numbers.Number) or np.isscalar(values[0]):
        return None
    width = None
    for i, row in enumerate(values):
        if not isinstance(row, (Sequence, np.ndarray)) or isinstance(row, (str, bytes)):
            raise Error(f"{name}[{i}] is {row!r}, not a row of stage costs")
        if width is None:
            width = len(row)
        elif len(row) != width:
            raise Error(
                f"{name}[{i}] has {len(row)} stages, but {name}[0] has {width}: every record has "
                "as many"
            )
    return width


def stage_costs(name: str, values: Any) -> Optional[np.ndarray]:
    """`values` as an (N, D) float64 table of stage costs when it has two dimensions (an array,
    a tensor or a sequence of equal rows), else None (a table of one cost a record, read as
    today). bcl.Error for more dimensions, D of 0 or above bcl's limit, ragged rows or values that
    are not real numbers; the values themselves are checked in C++, naming record and stage."""
    if inputs.is_tensor(values):
        if values.dim() != 2:
            return None
        table = inputs.tensor_values(name, values)
    elif isinstance(values, np.ndarray) or inputs.array_like(values):
        table = np.asarray(values)
        if table.ndim != 2:
            if table.ndim > 2:
                raise Error(f"{name} must be one row per record (got shape {table.shape})")
            return None
    elif isinstance(values, Sequence) and not isinstance(values, (str, bytes)):
        if _row_count(name, values) is None:
            return None
        table = np.asarray([np.asarray(row) for row in values])
    else:
        return None
    if table.dtype.kind not in "iuf":
        raise Error(f"{name} must hold real numbers (got an array of dtype {table.dtype})")
    stages = table.shape[1]
    if not 1 <= stages <= _core.max_plan_stages:
        raise Error(
            f"{name} has {stages} stages a record; a record has 1 to {_core.max_plan_stages}"
        )
    return np.ascontiguousarray(table, dtype=np.float64)


def plan_stage_batches(
    table: np.ndarray, ranks: int, batch_size: int, mode: Any, level: bool
) -> StagePlan:
    """bcl.plan_batches for a table of D >= 2 stage costs (bcl::held_stage_planner)."""
    plan, summary = _core.plan_stage_batch(table, ranks, batch_size, mode, level)
    return StagePlan(list(plan), dict(summary))
