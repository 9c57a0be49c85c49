"""Token-budget micro-batches: bcl.plan_micro_batches (held batches, bcl::token_planner) and the
shape of the sampler's token mode (an epoch planned by bcl::token_epoch_planner).

A micro-batch holds at most ``max_tokens`` (T) tokens, every rank runs as many of them in every
step, and micro-batch j of every rank runs together (a micro-step): the plans line heavy
micro-batches up in the same micro-steps, so a micro-step's slowest rank waits little.
"""

from __future__ import annotations

from typing import Any, Callable, Optional

import numpy as np

from . import _core
from . import _inputs as inputs
from . import _stages
from ._core import Error

#: What ``oversized=`` takes: "error" refuses a record above max_tokens, "alone" gives it a
#: micro-batch of its own (bcl::token_plan_options::oversized_alone).
OVERSIZED = ("error", "alone")

# Only what the C++ checks (_core.check_token_input: bcl::check_token_budget, check_token_window,
# check_token_options, bcl::detail::tokens::checked_length, the costs) cannot say in the Python
# arguments' words is checked here: an argument of 0 (the C++ check names R, T, m and K together,
# as ranks and steps), the spelling of an option, and a group by its id.


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


PADDINGS = ("error", "empty")


def padding_option(who: str, padding: Any, choices: tuple = PADDINGS) -> str:
    """How a plan whose records are too few for every rank's micro-batches ends."""
    if not isinstance(padding, str) or padding not in choices:
        names = ", ".join(repr(c) for c in choices)
        raise Error(f"{who}: padding must be one of {names} (got {padding!r})")
    return padding


def cost_values(costs: Any) -> Optional[np.ndarray]:
    """None (the default cost, L + L^2/24576), or the costs as float64 values (their count and
    range are checked in C++, with the lengths)."""
    return None if costs is None else inputs.real_array("costs", costs)


class MicroBatchPlan(list):
    """Each rank's micro-batches, as bcl.plan_micro_batches returns them: ``plan[rank]`` is a list
    of micro-batches (lists of indices into ``lengths``), step after step. ``plan.summary`` is
    the plan's summary (docs/python.md, "Token-budget micro-batches"); its
    ``step_micro_batches`` says how many of them each step holds."""

    summary: dict

    def __init__(self, ranks: list, summary: dict) -> None:
        super().__init__(ranks)
        self.summary = summary

    def steps(self, rank: int) -> list[list[list[int]]]:
        """Rank `rank`'s micro-batches step by step: ``plan.steps(rank)[s]`` is step s's
        ``summary["step_micro_batches"][s]`` micro-batches (the trainer steps its optimizer
        after each). Every rank's step s holds as many. IndexError for a rank not in the plan."""
        batches = self[rank]
        out, first = [], 0
        for count in self.summary["step_micro_batches"]:
            out.append(batches[first : first + count])
            first += count
        return out


def _check_groups(
    who: str, tokens: np.ndarray, ids: np.ndarray, groups: Any, t: int, pad: int
) -> None:
    """With group_together: bcl.Error naming the first group (by its first record, and its id as
    given: the C++ check can only number the groups) that cannot share one micro-batch: its
    tokens (each length counted padded to a multiple of `pad`) exceed max_tokens, or it holds a
    record above max_tokens (alone in its micro-batch) and others. The lengths were checked
    (check_token_input): each is at most 2^31, so padding one cannot overflow."""
    tokens = (tokens + np.uint64(pad - 1)) // np.uint64(pad) * np.uint64(pad)
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
    sync: str = "stage",
) -> MicroBatchPlan:  # fmt: skip
    """For a trainer that holds a global batch (RL rollouts): each rank's micro-batches of at
    most ``max_tokens`` tokens, as many on every rank.

    Plans the records of ``lookahead`` (K) held batches together (bcl::token_planner::plan_held):
    their micro-steps are planned as one count C, the smallest multiple of ``multiple_of`` (m)
    with which the records fit (at least the token bound, and m a step), records moving between
    the K steps and ranks; then dealt to the steps, each C/K rounded down to a multiple of m, the
    first steps m more until all C are dealt (``summary["step_micro_batches"]``: 5 micro-steps in
    K = 2 steps with m = 1 are 3 and 2; one count for every step would have needed 6). With
    ``groups`` kept to a rank (without ``group_together``) every step holds the same count.
    Micro-batch j of every rank runs together, and the plan lines up costs across ranks so that
    the sum over micro-steps of the slowest rank's micro-batch is small. None is empty (but with
    ``padding="empty"``), none holds more than max_tokens tokens (but a record above it with
    ``oversized="alone"``, alone in its micro-batch), every index appears once; the same plan on
    every rank and platform.

    Args:
        lengths: each record's tokens (integers >= 0: a sequence, array or integer tensor).
        num_ranks: R, data-parallel ranks.
        max_tokens: T, the most tokens one micro-batch holds (at most 2^31).
        costs: each record's cost (a real number >= 0), or None for L + L^2/24576 (computed in
            integers, the same on every platform); or a table of shape (N, D), each record's
            cost in each of D stages that synchronise separately (a vision encoder and a
            language model under FSDP): the micro-steps are then balanced stage by stage, a
            micro-step costing the sum over stages of its dearest micro-batch
            (bcl::token_stage_planner, docs/stages.md); the budget stays on tokens.
        groups: None, or one id per record (an integer or a string): a group's records stay on
            one rank and in one step (GRPO: one prompt's responses); with ``group_together``
            also in one micro-batch.
        multiple_of: m, every step's micro-batch count is a multiple of it.
        lookahead: K, held batches (steps) planned together.
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
        sync: with stage costs, "stage" (default) balances them stage by stage; "step" plans
            their sums (the stages meet once a micro-step).

    Returns:
        ``plan[rank]``, that rank's micro-batches in order, step after step (each a list of
        indices, in ascending order; ``plan.steps(rank)`` groups them by step), a list that also
        carries ``plan.summary``, a dict: ``steps`` (K), ``step_micro_batches`` (each step's
        count, the same on every rank: step s is micro-batches
        [sum(step_micro_batches[:s]), sum(step_micro_batches[:s+1])) of every rank),
        ``micro_batches`` (the most any step holds), ``micro_steps`` (their sum, C),
        ``micro_steps_bound`` (the fewest the tokens allow, ceil(tokens / (R*T))), ``records``,
        ``tokens``, ``oversized`` (records above T), ``padding_micro_batches`` (empty ones),
        ``total`` (the costs' sum), ``objective`` (the sum over micro-steps of the dearest
        micro-batch), ``heaviest``, ``lower_bound`` (on the objective), ``efficiency`` (total /
        (R * objective)), ``digest``. With stage costs, the cost figures are the stages' (the
        objective: the sum over micro-steps and stages of the dearest micro-batch) and the
        summary adds ``stages``, ``summed_objective`` (the plan of the summed costs'),
        ``steps_restaged`` and ``steps_from_stage`` (as bcl.plan_batches').

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
    t = positive(who, "max_tokens", max_tokens)
    m = positive(who, "multiple_of", multiple_of)
    k = positive(who, "lookahead", lookahead)
    alone = oversized_alone(who, oversized)
    together = inputs.flag("group_together", group_together)
    empty = padding_option(who, padding) == "empty"
    pad = inputs.whole("pad_to_multiple_of", pad_to_multiple_of)
    if n == 0:
        raise Error(f"{who}: lengths is empty: no records to plan")
    if sync not in ("stage", "step"):
        raise Error(f"{who}: sync must be 'stage' or 'step' (got {sync!r})")
    stages = _stages.stage_costs("costs", costs)
    if stages is not None and (stages.shape[1] == 1 or sync == "step"):
        costs, stages = stages.sum(axis=1), None  # one number a record
    if stages is not None and len(stages) != n:
        raise Error(f"{who}: costs has {len(stages)} rows but lengths has {n}")
    table = cost_values(costs) if stages is None else None
    ids = None
    if groups is not None:
        ids = inputs.group_ids("groups", groups)
        if len(ids) != n:
            raise Error(f"{who}: groups has {len(ids)} entries but lengths has {n}")
    elif together:
        raise Error(f"{who}: group_together=True keeps groups in one micro-batch: pass groups=")
    budget = _core.token_budget(r, t, m)
    if together and ids is not None:
        # The records and settings first (the group sums read valid lengths), then the groups.
        _core.check_token_input(tokens, table, budget, k, None, alone, pad, "record", who)
        _check_groups(who, tokens, ids, groups, t, pad)
    # The records and settings are checked again there (check_token_input), before the plan.
    if stages is not None:
        ranks, summary = _core.plan_stage_micro_batches(
            tokens, stages, ids, budget, k, alone, together, empty, pad
        )
    else:
        ranks, summary = _core.plan_micro_batches(
            tokens, table, ids, budget, k, alone, together, empty, pad
        )
    return MicroBatchPlan(list(ranks), dict(summary))


class TokenShape:
    """The token mode of bcl.DistributedBalancedBatchSampler: the lengths (and costs) of every
    dataset index and the budget, checked whole at construction, so that every rank refuses a
    bad table before its first step; each epoch's order planned by bcl::token_epoch_planner.
    Beside _fixed.FixedShape, with the same interface."""

    #: The state format of a sampler in token mode (fixed batches have their own).
    format = "bcl.DistributedBalancedBatchSampler/tokens/1"
    #: What a pass hands out, for the messages.
    unit = "micro-batches"
    #: What the plan's digest depends on besides the order, for the message of a state that
    #: does not match.
    tables = "lengths or costs"
    #: A micro-batch holds the records that fit max_tokens: no batch size.
    batch_size: Optional[int] = None

    def __init__(
        self, who: str, lengths: Any, costs: Any, num_replicas: int, lookahead: int,
        max_tokens: Any, micro_batches: Any, multiple_of: Any, oversized: Any,
        padding: Any = "repeat", pad_to_multiple_of: Any = 1, keyed: bool = False,
    ) -> None:  # fmt: skip
        if lengths is None:
            raise Error(f"{who}: max_tokens= needs lengths=, the tokens of each dataset index")
        if inputs.is_lookup(lengths) or inputs.is_lookup(costs):
            raise Error(
                f"{who}: lengths and costs must be whole tables (sequences, arrays or tensors): "
                "every rank plans every rank's indices"
            )
        table = None if costs is None else _stages.stage_costs("costs", costs)
        if table is not None and table.shape[1] == 1:
            costs = table[:, 0]  # one column: one cost a record
        elif table is not None:
            raise Error(
                f"{who}: costs of shape (N, D) are stage costs, which the token mode does not take "
                "(it plans one cost a record); bcl.plan_micro_batches plans them for held batches, "
                "and batches of batch_size for streams; or pass each record's summed cost"
            )
        self.who = who
        # order="keyed" plans window by window (_core.token_windows) over the tables read in
        # place, any integer (and, for costs, float) dtype: nothing of the epoch's size is made,
        # the tables not copied. randperm's order is a whole array anyway; its epoch is planned
        # whole (_core.token_epoch), over uint64 lengths and float64 costs, kept by reference
        # where they are already of those types. plan() checks them again if a plan fails.
        self.keyed = keyed
        self.tokens = (
            inputs.counts_in_place("lengths", lengths)
            if keyed
            else inputs.token_counts("lengths", lengths)
        )
        self.max_tokens = positive(who, "max_tokens", max_tokens)
        self.multiple_of = positive(who, "multiple_of", multiple_of)
        if micro_batches is None:
            raise Error(
                f"{who}: max_tokens= needs micro_batches=, the micro-batches each rank runs in a "
                "step (the optimizer steps once per micro_batches)"
            )
        self.micro_batches = inputs.whole("micro_batches", micro_batches)
        # In the users' words, as fixed batches say it (check_token_window refuses it again,
        # naming ranks and steps).
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
        self.pad = inputs.whole("pad_to_multiple_of", pad_to_multiple_of)
        self.costs = (
            (None if costs is None else inputs.table_in_place("costs", costs))
            if keyed
            else cost_values(costs)
        )
        self.budget = _core.token_budget(num_replicas, self.max_tokens, self.multiple_of)
        self.lookahead = lookahead
        self._inputs: Optional[int] = None  # the digest of the tables and the settings (keyed)
        self.check_tables()
        n = len(self.tokens)
        if n < num_replicas * self.multiple_of:
            raise Error(
                f"{who}: {n} dataset indices cannot give one to each of the num_replicas * "
                f"multiple_of = {num_replicas} * {self.multiple_of} micro-batches of a step"
            )

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

    def epoch_length(self, planned: Callable[[], Any]) -> int:
        """This rank's micro-batches in an epoch, which depend on its order: those of the
        epoch's plan, `planned()`."""
        return int(planned().batches)

    def check_tables(self) -> None:
        """bcl.Error for settings, lengths or costs that no plan takes (check_token_input),
        naming the setting, or the entry by its dataset index. Keyed: each table read in place in
        one streaming pass that also takes its digest (_core.token_table, _core.table_view)."""
        if self.keyed:
            n = len(self.tokens)
            if self.costs is not None and len(self.costs) != n:
                raise Error(
                    f"{self.who}: costs has {len(self.costs)} entries but lengths has {n}; give "
                    "one per dataset index"
                )
            # One pass over the lengths: each checked, for the budget too, and the digest taken.
            self.tokens_view = _core.token_table(
                self.tokens, self.budget, self.micro_batches, self.lookahead, self.alone,
                self.pad, self.who,
            )  # fmt: skip
            self.costs_view = (
                None if self.costs is None else _core.table_view(self.costs, "costs")
            )
            return
        _core.check_token_input(
            self.tokens, self.costs, self.budget, self.lookahead, self.micro_batches, self.alone,
            self.pad, "dataset index", self.who,
        )  # fmt: skip

    def plan(
        self, epoch: int, order: Callable[[], np.ndarray], rank: int, common: dict,
        rest: Optional[tuple] = None, ranks: Optional[int] = None,
    ) -> Any:  # fmt: skip
        """This rank's micro-batches of `epoch`. Keyed: planned window by window as they are
        asked for, the order bcl::keyed_order's (`order` not called), over `rest` (a
        checkpoint's (start, span, taken): the records of the epoch left) or the whole epoch, at
        `ranks` ranks (default the sampler's); its digest is that of the tables, the settings
        (`common`, the sampler's, but the rank and the ranks), the ranks, the epoch and the rest.
        Else the global order is `order()`, drawn and planned whole. bcl.Error naming the dataset
        index of an entry of lengths or costs edited since construction to a value they refuse
        (see check_tables_again()), else the plan's own error."""
        if self.keyed:
            if self._inputs is None:
                settings = dict(common, **self.settings())
                settings.pop("rank", None)
                settings.pop("num_replicas", None)
                tables = self.tokens_view.digest
                if self.costs_view is not None:
                    tables = _core.settings_digest(tables, f"costs {self.costs_view.digest:x}")
                self._inputs = int(_core.settings_digest(tables, repr(sorted(settings.items()))))
            budget = self.budget
            if ranks is not None:
                budget = _core.token_budget(ranks, self.max_tokens, self.multiple_of)
            return _core.token_windows(
                self.tokens_view, self.costs_view, common["seed"], epoch, common["shuffle"],
                budget, self.micro_batches, self.lookahead, rank, self.alone, self.padding,
                self.pad, self._inputs, rest,
            )  # fmt: skip
        assert rest is None and ranks is None  # a randperm epoch resumes whole, at its ranks
        try:
            return _core.token_epoch(
                self.tokens, self.costs, order(), self.budget, self.micro_batches, self.lookahead,
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
            self.check_tables()
        except Error as e:
            detail = str(e).removeprefix(f"{self.who}: ")
            raise Error(
                f"{self.who}: {detail}; the sampler reads lengths and costs by reference, and "
                "they were edited after it was built (edit a copy, or build a new sampler)"
            ) from failure
