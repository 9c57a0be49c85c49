"""The fixed-size shape of bcl.DistributedBalancedBatchSampler: batches of exactly B indices, each
epoch's order planned in windows of K steps of every rank's batches (bcl::plan_window, through
bcl::epoch_planner). Beside _tokens.TokenShape, with the same interface, so that the sampler
chooses its shape once and calls it without asking which it holds."""

from __future__ import annotations

from typing import Any, Callable, Optional

import numpy as np

from . import _core
from . import _inputs as inputs
from . import _stages
from ._core import Error


class FixedShape:
    """Batches of ``batch_size`` indices: the cost table (the whole of it, every rank plans every
    rank's indices) and the plan's options, checked at construction, so that every rank refuses
    a bad table before its first step."""

    #: The state format of a sampler of fixed batches (token mode has its own).
    format = "bcl.DistributedBalancedBatchSampler/2"
    #: What a pass hands out, for the messages.
    unit = "batches"
    #: What the plan's digest depends on besides the order, for the message of a state that
    #: does not match.
    tables = "costs"

    def __init__(
        self, who: str, costs: Any, batch_size: Any, num_replicas: int, lookahead: int,
        drop_last: bool, batching: Any, cap: Any, level_steps: Any, keyed: bool = False,
    ) -> None:  # fmt: skip
        if batch_size is None:
            raise Error(
                f"{who}: batch_size is needed (or max_tokens= and micro_batches= for "
                "token-budget micro-batches)"
            )
        self.batch_size: Optional[int] = inputs.whole("batch_size", batch_size)
        if self.batch_size == 0:
            raise Error(f"{who}: batch_size and lookahead must be at least 1")
        # In the users' words, before any plan (bcl::check_epoch_shape refuses it again, in the
        # planner's).
        window = num_replicas * lookahead * self.batch_size
        if window > _core.max_plan_records:
            raise Error(
                f"{who}: num_replicas * lookahead * batch_size = {num_replicas} * {lookahead} * "
                f"{self.batch_size} = {window} records in one plan window, above the "
                f"{_core.max_plan_records} a window may hold; lower lookahead or batch_size"
            )
        self.batching = inputs.enum_value(_core.batch_cost, "batching", batching)
        self.level_steps = inputs.flag("level_steps", level_steps)
        if costs is None:
            raise Error(f"{who}: costs is needed, the estimated cost of each dataset index")
        if inputs.is_lookup(costs):
            raise Error(
                f"{who}: costs must be the whole table (a sequence, array or tensor): every "
                "rank plans every rank's indices"
            )
        # order="keyed" plans window by window (_core.global_windows) over the table read in
        # place: nothing of the epoch's size is made, the table itself not copied. randperm's
        # order is a whole array anyway; its epoch is planned whole (_core.global_epoch).
        self.keyed = keyed
        # A table of shape (N, D) holds D stage costs a record (a vision encoder's and a
        # language model's): each window's steps are balanced stage by stage. One column plans
        # as one cost a record.
        stages = _stages.stage_costs("costs", costs)
        if stages is not None and stages.shape[1] == 1:
            costs, stages = stages[:, 0], None
        self.stages = 1 if stages is None else int(stages.shape[1])
        if stages is not None:
            for name, value, default in (
                ("cap", cap, None), ("batching", self.batching, _core.batch_cost.packed),
            ):
                if value is not default and value != default:
                    raise Error(
                        f"{who}: {name}={value!r} is for one cost a record; stage costs are "
                        "planned packed, uncapped (leave it out)"
                    )
            _core.check_stage_costs(stages, who)  # naming the record and the stage
            table = stages
            self.table = _core.table_view(stages, "costs") if keyed else stages
        elif keyed:
            table = inputs.table_in_place("costs", costs)
            self.table = _core.table_view(table, "costs")  # every cost checked, its digest taken
        else:
            table = inputs.real_array("costs", costs)
            self.table = _core.cost_table(table, None)  # checks every cost, naming its index
        self.cap = inputs.table_cap(cap, table) if stages is None else 0.0
        self.num_replicas = num_replicas
        self.lookahead = lookahead
        self.drop_last = drop_last
        self.dataset_size = len(table)
        self._inputs: Optional[int] = None  # the digest of the table and the settings (keyed)

    def settings(self) -> dict:
        """The settings a state carries, beside the sampler's own."""
        settings = {
            "batch_size": self.batch_size, "drop_last": self.drop_last,
            "batching": str(self.batching.name), "cap": self.cap, "level_steps": self.level_steps,
        }  # fmt: skip
        if self.stages > 1:  # (one cost a record: the settings as they always were)
            settings["stages"] = self.stages
        return settings

    def epoch_length(self, planned: Callable[[], Any]) -> int:
        """This rank's batches in an epoch: the same in every epoch, known without a plan
        (`planned`, the epoch's plan, is not called)."""
        return int(_core.epoch_batches(self.dataset_size, self.num_replicas, self.batch_size,
                                       self.drop_last))  # fmt: skip

    def plan(
        self, epoch: int, order: Callable[[], np.ndarray], rank: int, common: dict,
        rest: Optional[tuple] = None, ranks: Optional[int] = None,
    ) -> Any:  # fmt: skip
        """This rank's batches of `epoch`, whose global order is `order()` (laid out, padded or
        cut, as DistributedSampler does). Keyed: planned window by window as they are asked for,
        the order bcl::keyed_order's (`order` not called), over `rest` (a checkpoint's
        (start, span, taken): the records of the epoch left) or the whole epoch, at `ranks` ranks
        (default the sampler's); its digest is that of the table, the settings (`common`, the
        sampler's, but the rank and the ranks), the ranks, the epoch and the rest."""
        if self.keyed:
            if self._inputs is None:
                settings = dict(common, **self.settings())
                settings.pop("rank", None)
                settings.pop("num_replicas", None)
                text = repr(sorted(settings.items()))
                self._inputs = int(_core.settings_digest(self.table.digest, text))
            return _core.global_windows(
                self.table, common["seed"], epoch, common["shuffle"],
                self.num_replicas if ranks is None else ranks, self.lookahead, self.batch_size,
                rank, self.batching, self.cap, self.level_steps, self.drop_last, self._inputs,
                rest,
            )  # fmt: skip
        return _core.global_epoch(
            self.table, order(), self.num_replicas, self.lookahead, self.batch_size, rank,
            self.batching, self.cap, self.level_steps, self.drop_last,
        )  # fmt: skip
