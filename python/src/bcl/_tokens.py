"""Token-budget micro-batches: bcl.plan_micro_batches (held batches, bcl::token_planner) and the
shape of the sampler's token mode (an epoch planned by bcl::token_epoch_planner).

A micro-batch holds at most ``max_tokens`` (T) tokens, every rank runs as many of them in every
step, and micro-batch j of every rank runs together (a micro-step): the plans line heavy
micro-batches up in the same micro-steps, so a micro-step's slowest rank waits little.
"""

from __future__ import annotations

from typing import Any, Optional

import numpy as np

from . import _core
from . import _inputs as inputs
from ._core import Error

#: The most tokens a micro-batch's budget, and a record, may hold (bcl::token_budget::max_tokens).
MAX_TOKENS = 1 << 31

#: What ``oversized=`` takes: "error" refuses a record above max_tokens, "alone" gives it a
#: micro-batch of its own (bcl::token_plan_options::oversized_alone).
OVERSIZED = ("error", "alone")


def positive(who: str, name: str, value: Any) -> int:
    """An integer option that must be at least 1, or bcl.Error naming it."""
    count = inputs.whole(name, value)
    if count == 0:
        raise Error(f"{who}: {name} must be at least 1 (got 0)")
    return count


def oversized_alone(who: str, oversized: Any) -> bool:
    if not isinstance(oversized, str) or oversized not in OVERSIZED:
        raise Error(f"{who}: oversized must be 'error' or 'alone' (got {oversized!r})")
    return oversized == "alone"


def budget_tokens(who: str, max_tokens: Any) -> int:
    """T: an integer in [1, 2^31]."""
    t = positive(who, "max_tokens", max_tokens)
    if t > MAX_TOKENS:
        raise Error(f"{who}: max_tokens is {t}, above 2^31, the most a micro-batch may hold")
    return t


PADDINGS = ("error", "empty")


def padding_option(who: str, padding: Any, choices: tuple = PADDINGS) -> str:
    """How a plan whose records are too few for every rank's micro-batches ends."""
    if not isinstance(padding, str) or padding not in choices:
        names = ", ".join(repr(c) for c in choices)
        raise Error(f"{who}: padding must be one of {names} (got {padding!r})")
    return padding


def pad_multiple(who: str, value: Any, max_tokens: int) -> int:
    """pad_to_multiple_of: an integer in [1, max_tokens]."""
    k = positive(who, "pad_to_multiple_of", value)
    if k > max_tokens:
        raise Error(
            f"{who}: pad_to_multiple_of is {k}, above max_tokens ({max_tokens}); it must be at "
            "most max_tokens"
        )
    return k


def check_fit(
    who: str, tokens: np.ndarray, max_tokens: int, alone: bool, multiple: int = 1
) -> None:
    """bcl.Error naming the index of the first length above max_tokens, each counted as rounded
    up to a multiple of `multiple` (with `alone`, above 2^31, the most a record may hold)."""
    limit = MAX_TOKENS if alone else max_tokens
    above = np.flatnonzero(tokens > limit)
    if len(above) == 0 and multiple > 1 and not alone:
        # Every length is at most T (2^31): rounding it up cannot overflow.
        above = np.flatnonzero((tokens + (multiple - 1)) // multiple * multiple > limit)
    if len(above) == 0:
        return
    i = int(above[0])
    if alone:
        raise Error(f"{who}: lengths[{i}] is {int(tokens[i])}, above 2^31, the most a record holds")
    length = int(tokens[i])
    padded = -(-length // multiple) * multiple
    shown = f"{length}"
    if padded != length:
        shown += f" ({padded} padded to a multiple of {multiple})"
    raise Error(
        f"{who}: lengths[{i}] is {shown}, above max_tokens ({max_tokens}); truncate it, or pass "
        "oversized='alone' to give such a record a micro-batch of its own"
    )


def cost_array(who: str, costs: Any, n: int) -> Optional[np.ndarray]:
    """None (the default cost, L + L^2/24576), or one valid cost per record as float64, checked
    whole (bcl.Error naming the index of a bad one, or the lengths that differ)."""
    if costs is None:
        return None
    table = inputs.real_array("costs", costs)
    if len(table) != n:
        raise Error(
            f"{who}: costs has {len(table)} entries but lengths has {n}; give one per record"
        )
    _core.cost_table(table, None)  # every cost checked, each error naming its index
    return table


class MicroBatchPlan(list):
    """Each rank's micro-batches, as bcl.plan_micro_batches returns them: ``plan[rank]`` is a list
    of micro-batches (lists of indices into ``lengths``). ``plan.summary`` is the plan's summary
    (docs/python.md, "Token-budget micro-batches")."""

    summary: dict

    def __init__(self, ranks: list, summary: dict) -> None:
        super().__init__(ranks)
        self.summary = summary


def _check_groups(who: str, tokens: np.ndarray, ids: np.ndarray, groups: Any, t: int) -> None:
    """With group_together: bcl.Error naming the first group (by its first record) that cannot
    share one micro-batch: its tokens exceed max_tokens, or it holds a record above max_tokens
    (alone in its micro-batch) and others."""
    count = int(ids.max()) + 1
    sums = np.zeros(count, dtype=np.uint64)
    np.add.at(sums, ids.astype(np.intp), np.minimum(tokens, np.uint64(t)))
    sizes = np.bincount(ids.astype(np.intp), minlength=count)
    holds_oversized = np.zeros(count, dtype=bool)
    holds_oversized[ids[tokens > t].astype(np.intp)] = True
    over = np.flatnonzero((sums > t) | (holds_oversized & (sizes > 1)))
    if len(over) == 0:
        return
    first = int(np.argmax(ids == over[0]))
    value = groups[first]
    value = value.item() if hasattr(value, "item") else value  # a numpy or torch scalar
    why = (
        f"has {int(sums[over[0]])} tokens, above max_tokens ({t})"
        if sums[over[0]] > t
        else "holds a record above max_tokens, alone in its micro-batch, and others"
    )
    raise Error(
        f"{who}: the group of groups[{first}] ({value!r}) {why}, and group_together=True "
        "keeps a group in one micro-batch"
    )


def plan_micro_batches(
    lengths: Any, num_ranks: int, max_tokens: int, costs: Any = None, groups: Any = None,
    multiple_of: int = 1, lookahead: int = 1, *, group_together: bool = False,
    oversized: str = "error", padding: str = "error", pad_to_multiple_of: int = 1,
) -> MicroBatchPlan:  # fmt: skip
    """For a trainer that holds a global batch (RL rollouts): each rank's micro-batches of at
    most ``max_tokens`` tokens, as many on every rank.

    Plans the records of ``lookahead`` (K) held batches together (bcl::token_planner::plan_held):
    every rank gets K*M micro-batches, M the smallest multiple of ``multiple_of`` with which the
    records fit (at least the token bound), step s being micro-batches [s*M, (s+1)*M); records
    move between the K steps and ranks. Micro-batch j of every rank runs together, and the plan
    lines up costs across ranks so that the sum over micro-steps of the slowest rank's
    micro-batch is small. None is empty (but with ``padding="empty"``), none holds more than
    max_tokens tokens (but a record above it with ``oversized="alone"``, alone in its
    micro-batch), every index appears once; the same plan on every rank and platform.

    Args:
        lengths: each record's tokens (integers >= 0: a sequence, array or integer tensor).
        num_ranks: R, data-parallel ranks.
        max_tokens: T, the most tokens one micro-batch holds (at most 2^31).
        costs: each record's cost (a real number >= 0), or None for L + L^2/24576 (computed in
            integers, the same on every platform).
        groups: None, or one id per record (an integer or a string): a group's records stay on
            one rank and in one step (GRPO: one prompt's responses); with ``group_together``
            also in one micro-batch.
        multiple_of: m, every step's micro-batch count is a multiple of it.
        lookahead: K, held batches planned together.
        group_together: keep each group in one micro-batch (default False).
        oversized: "error" (default) refuses a record above max_tokens; "alone" gives it a
            micro-batch of its own.
        padding: "error" (default) refuses records too few (or too large) to give every rank's
            micro-batches one; "empty" gives the ranks short of records empty micro-batches
            (as few as the plan needs, every rank the same count; counted in
            ``summary["padding_micro_batches"]``): a trainer runs each as a step of zero weight
            that still joins the collectives (docs/tokens.md).
        pad_to_multiple_of: k, each record counts as its length rounded up to a multiple of k,
            for max_tokens and the default cost (context parallelism pads each sequence to a
            multiple of 2 * CP); 1 (default) counts lengths as they are; at most max_tokens.

    Returns:
        ``plan[rank]``, that rank's K*M micro-batches in order (each a list of indices, in
        ascending order), a list that also carries ``plan.summary``, a dict: ``steps`` (K),
        ``micro_batches`` (M), ``micro_steps`` (K*M), ``micro_steps_bound`` (the fewest the
        tokens allow, ceil(tokens / (R*T))), ``records``, ``tokens``, ``oversized`` (records
        above T), ``padding_micro_batches`` (empty ones), ``total`` (the costs' sum),
        ``objective`` (the sum over micro-steps of the dearest micro-batch), ``heaviest``,
        ``lower_bound`` (on the objective), ``efficiency`` (total / (R * objective)), ``digest``.

    Raises:
        bcl.Error: naming the argument (and index) that is wrong: lengths that are not integers
            >= 0, costs or groups of another length, a bad cost, a record above max_tokens, a
            group above it with group_together, R, T, m or K of 0, a shape above 2^30 cells or
            records, a padding or pad_to_multiple_of out of range, and (with padding="error")
            records too few (or too large) to give every rank's micro-batches one.
    """
    who = "bcl.plan_micro_batches"
    tokens = inputs.token_counts("lengths", lengths)
    n = len(tokens)
    r = positive(who, "num_ranks", num_ranks)
    t = budget_tokens(who, max_tokens)
    m = positive(who, "multiple_of", multiple_of)
    k = positive(who, "lookahead", lookahead)
    alone = oversized_alone(who, oversized)
    together = inputs.flag("group_together", group_together)
    empty = padding_option(who, padding) == "empty"
    pad = pad_multiple(who, pad_to_multiple_of, t)
    if n == 0:
        raise Error(f"{who}: lengths is empty: no records to plan")
    table = cost_array(who, costs, n)
    ids = None
    if groups is not None:
        ids = inputs.group_ids("groups", groups)
        if len(ids) != n:
            raise Error(f"{who}: groups has {len(ids)} entries but lengths has {n}")
    elif together:
        raise Error(f"{who}: group_together=True keeps groups in one micro-batch: pass groups=")
    check_fit(who, tokens, t, alone, pad)
    if together and ids is not None:
        _check_groups(who, tokens, ids, groups, t)
    ranks, summary = _core.plan_micro_batches(
        tokens, table, ids, _core.token_budget(r, t, m), k, alone, together, empty, pad
    )
    return MicroBatchPlan(list(ranks), dict(summary))


class TokenShape:
    """The token mode of bcl.DistributedBalancedBatchSampler: the lengths (and costs) of every
    dataset index and the budget, checked whole at construction, so that every rank refuses a
    bad table before its first step; each epoch's order planned by bcl::token_epoch_planner."""

    #: The state format of a sampler in token mode (fixed batches have their own).
    format = "bcl.DistributedBalancedBatchSampler/tokens/1"
    unit = "micro-batches"

    def __init__(
        self, who: str, lengths: Any, costs: Any, num_replicas: int, lookahead: int,
        max_tokens: Any, micro_batches: Any, multiple_of: Any, oversized: Any,
        padding: Any = "repeat", pad_to_multiple_of: Any = 1,
    ) -> None:  # fmt: skip
        if lengths is None:
            raise Error(f"{who}: max_tokens= needs lengths=, the tokens of each dataset index")
        if inputs.is_lookup(lengths) or inputs.is_lookup(costs):
            raise Error(
                f"{who}: lengths and costs must be whole tables (sequences, arrays or tensors): "
                "every rank plans every rank's indices"
            )
        self.who = who
        # Kept by reference where they are already uint64 and float64 (a memory-mapped table is
        # not copied): plan() checks them again if a plan fails.
        self.tokens = inputs.token_counts("lengths", lengths)
        self.max_tokens = budget_tokens(who, max_tokens)
        self.multiple_of = positive(who, "multiple_of", multiple_of)
        if micro_batches is None:
            raise Error(
                f"{who}: max_tokens= needs micro_batches=, the micro-batches each rank runs in a "
                "step (the optimizer steps once per micro_batches)"
            )
        self.micro_batches = positive(who, "micro_batches", micro_batches)
        if self.micro_batches % self.multiple_of != 0:
            raise Error(
                f"{who}: micro_batches is {self.micro_batches}, not a multiple of multiple_of "
                f"({self.multiple_of})"
            )
        cells = num_replicas * lookahead * self.micro_batches
        if cells > _core.max_plan_records:
            raise Error(
                f"{who}: num_replicas * lookahead * micro_batches = {num_replicas} * {lookahead} "
                f"* {self.micro_batches} = {cells} micro-batches in one plan window, above the "
                f"{_core.max_plan_records} a window may hold; lower lookahead or micro_batches"
            )
        self.oversized = oversized
        self.alone = oversized_alone(who, oversized)
        self.padding = padding_option(who, padding, ("repeat", "empty", "error"))
        self.pad = pad_multiple(who, pad_to_multiple_of, self.max_tokens)
        n = len(self.tokens)
        self.costs = cost_array(who, costs, n)
        check_fit(who, self.tokens, self.max_tokens, self.alone, self.pad)
        if n < num_replicas * self.multiple_of:
            raise Error(
                f"{who}: {n} dataset indices cannot give one to each of the num_replicas * "
                f"multiple_of = {num_replicas} * {self.multiple_of} micro-batches of a step"
            )
        self.budget = _core.token_budget(num_replicas, self.max_tokens, self.multiple_of)
        self.lookahead = lookahead

    @property
    def dataset_size(self) -> int:
        return len(self.tokens)

    def settings(self) -> dict:
        """The settings a state carries. padding and pad_to_multiple_of only where they are not
        the defaults, so that a state saved before they existed still loads (and one saved with
        them is refused by a sampler without them, naming the setting)."""
        out = {
            "max_tokens": self.max_tokens, "micro_batches": self.micro_batches,
            "multiple_of": self.multiple_of, "oversized": self.oversized,
        }  # fmt: skip
        if self.padding != "repeat":
            out["padding"] = self.padding
        if self.pad != 1:
            out["pad_to_multiple_of"] = self.pad
        return out

    def plan(self, order: np.ndarray, rank: int) -> Any:
        """This rank's micro-batches of the epoch whose global order is `order`. bcl.Error naming
        the dataset index of an entry of lengths or costs edited since construction to a value
        they refuse (see check_tables_again()), else the plan's own error."""
        try:
            return _core.token_epoch(
                self.tokens, self.costs, order, self.budget, self.micro_batches, self.lookahead,
                rank, self.alone, self.padding, self.pad,
            )  # fmt: skip
        except Error as e:
            self.check_tables_again(e)
            raise

    def check_tables_again(self, failure: Error) -> None:
        """Checks the tables whole again, after `failure`: they are read by reference, so an
        entry edited after construction reaches the plan unchecked, where an error could only
        name the record's position in its plan window. An entry now wrong is a bcl.Error naming
        its dataset index (as at construction), chained to `failure`."""
        try:
            check_fit(self.who, self.tokens, self.max_tokens, self.alone, self.pad)
            if self.costs is not None:
                _core.cost_table(self.costs, None)  # each error naming its index
        except Error as e:
            detail = str(e).removeprefix(f"{self.who}: ")
            raise Error(
                f"{self.who}: {detail}; the sampler reads lengths and costs by reference, and "
                "they were edited after it was built (edit a copy, or build a new sampler)"
            ) from failure
