"""bcl.DistributedBalancedBatchSampler and bcl.plan_batches: the global plan (bcl::plan_window)
for map-style datasets, where every rank sees the whole epoch's order and cost table; in batches
of B indices (_fixed.FixedShape), or (with max_tokens=) in micro-batches of at most T tokens
(_tokens.TokenShape). The sampler chooses its shape once, at construction; the epoch's order,
the passes, the digest check and the state are its own, the same for either shape."""

from __future__ import annotations

from typing import Any, Callable, Optional, Protocol, Union

import numpy as np

from . import _core
from . import _inputs as inputs
from . import _stages
from ._core import Error
from ._fixed import FixedShape
from ._protocol import StatefulBatchSampler
from ._state import Reader
from ._tokens import TokenShape

STATE_FORMAT = FixedShape.format
# Format 1's checksum did not cover the settings.
_EARLIER_FORMATS = ("bcl.DistributedBalancedBatchSampler/1",)
_WHO = "bcl.DistributedBalancedBatchSampler"
#: The epoch's order: DistributedSampler's torch.randperm, or bcl::keyed_order.
_ORDERS = ("randperm", "keyed")
# Every field but the checksum itself.
_CHECKED_FIELDS = ("format", "epoch", "position", "digest", "settings")


def _torch_distributed() -> Any:
    """torch.distributed, if a process group is up, else None."""
    try:
        import torch.distributed as dist
    except ImportError:  # pragma: no cover
        return None
    return dist if dist.is_available() and dist.is_initialized() else None


def _digest_group(process_group: Any, num_replicas: int) -> Any:
    """The group the digest check all-reduces over: `process_group` if given (its size must be
    num_replicas), else the world group when its size is num_replicas, else None when no process
    group is up (one process: nothing to compare). bcl.Error otherwise, naming process_group: an
    all-reduce over ranks that do not all build this sampler would wait forever."""
    dist = _torch_distributed()
    if process_group is not None:
        if dist is None:
            raise Error(f"{_WHO}: process_group is given, but torch.distributed is not initialized")
        size = dist.get_world_size(process_group)
        if size != num_replicas:
            raise Error(
                f"{_WHO}: the process_group has {size} ranks, but num_replicas is {num_replicas}"
            )
        return process_group
    if dist is None:
        return None
    world = dist.get_world_size()
    if world != num_replicas:
        raise Error(
            f"{_WHO}: num_replicas is {num_replicas}, but the world has {world} processes: pass "
            "process_group=<the data-parallel group> (the ranks that build this sampler), or "
            "check_digest=False"
        )
    return dist.group.WORLD


def _departs(value: Any, default: Any) -> bool:
    """Whether an argument was given another value than its default (an array always is)."""
    if value is default:
        return False
    if default is None or not isinstance(value, (bool, int, str, np.generic)):
        return True
    return bool(value != default)


def _only_defaults(arguments: tuple, why: str) -> None:
    """bcl.Error for the first (name, value, default) of `arguments` given another value than
    its default, in the words of `why` (a format of name and value)."""
    for name, value, default in arguments:
        if _departs(value, default):
            raise Error(f"{_WHO}: " + why.format(name=name, value=value))


class _Shape(Protocol):
    """What the sampler asks of its batch shape (FixedShape, TokenShape), each checking its own
    arguments when built."""

    format: str  # the state format of a sampler of this shape
    unit: str  # what a pass hands out, for the messages ("batches")
    tables: str  # what the plan depends on besides the order, for the messages ("costs")
    batch_size: Optional[int]  # B, or None where a batch holds what fits

    @property
    def dataset_size(self) -> int: ...

    def settings(self) -> dict: ...  # the shape's settings in a state

    def epoch_length(self, planned: Callable[[], Any]) -> int: ...  # this rank's batches

    def plan(  # this rank's share of an epoch (or of its rest), its order drawn if needed
        self, epoch: int, order: Callable[[], np.ndarray], rank: int, common: dict,
        rest: Optional[tuple] = None, ranks: Optional[int] = None,
    ) -> Any: ...  # fmt: skip


class _Pass:
    """One pass over a planned epoch: this rank's batches (or micro-batches), handed out in
    order."""

    __slots__ = ("epoch", "plan", "handed_out", "done")

    def __init__(self, epoch: int, plan: Any, position: int = 0) -> None:
        self.epoch = epoch
        self.plan = plan
        self.handed_out = position
        self.done = False

    @property
    def batches(self) -> int:
        return int(self.plan.batches)

    def ends_at(self, position: int) -> bool:
        """Whether the pass ends after `position` batches. A plan walked window by window whose
        count is known only at its end (keyed token mode) answers by walking to `position`
        (ends_at); the others by their count."""
        ends_at = getattr(self.plan, "ends_at", None)
        return bool(ends_at(position)) if ends_at is not None else position >= self.plan.batches

    def next_batch(self) -> Optional[list[int]]:
        if self.ends_at(self.handed_out):
            return None
        batch = self.plan.batch(self.handed_out)
        self.handed_out += 1
        return batch


class DistributedBalancedBatchSampler(StatefulBatchSampler):
    """Batches of exactly ``batch_size`` indices for this rank, planned with every rank's.

    A drop-in for ``DistributedSampler`` + ``BatchSampler`` over a map-style dataset of
    ``len(costs)`` indices: each epoch draws the same global permutation as DistributedSampler
    (``torch.randperm`` seeded with ``seed + epoch``, padded or cut to a multiple of
    ``num_replicas`` the same way), and every rank computes the same global plan of each window of
    ``lookahead`` steps of all ranks' records (``bcl::plan_window``: the steps' batches balanced
    across ranks), then keeps its own share. No communication: every rank holds the permutation
    and the cost table, and the plan is bit-identical on every rank (integer arithmetic). Every
    rank gets the same number of batches, all of exactly ``batch_size`` indices but the last,
    which has the rest on every rank (dropped with ``drop_last``); every index of the epoch's
    order comes out exactly once over all ranks.

    With ``max_tokens=`` (token mode) it yields micro-batches instead: each epoch's order is
    planned in windows of ``lookahead`` steps of ``micro_batches`` (M) micro-batches of at most
    T tokens on every rank (bcl::token_epoch_planner), a micro-batch as many records as fit, and
    this rank's micro-batches come out one at a time, a DataLoader batch each; the trainer steps
    its optimizer after every M of them and after the epoch's last (the last step may be short,
    the same on every rank). ``len()`` is this rank's micro-batches in the epoch, the same on
    every rank, which depends on the epoch's order: the epoch is planned when first asked, once
    (over order="keyed", walked window by window, keeping nothing but where each window starts).

    Iterators, states and copies follow the samplers' protocol (docs/python.md, "Iterators,
    states and copies"): each iterator is a pass of its own, state_dict() describes the one
    started last, and a copy (pickle, deepcopy) continues where the sampler stood.

    Args:
        costs: the estimated cost of each dataset index, a sequence, array or tensor (the whole
            table: every rank plans every rank's records). Checked whole here. In token mode
            optional: None (the default) prices a record of L tokens L + L^2/24576.
        batch_size: B, indices per batch. None in token mode (a micro-batch holds the records
            that fit max_tokens): any other value is refused there.
        num_replicas, rank: the number of ranks and this one (default: those of
            ``process_group``, or of the world).
        shuffle, seed, drop_last: as DistributedSampler's (``drop_last`` also drops each rank's
            short last batch, as BatchSampler's does). ``seed`` and every epoch are in [0, 2^63).
        order: the epoch's shuffled order: ``"randperm"`` (the default) draws
            DistributedSampler's, ``torch.randperm`` seeded with ``seed + epoch``, the same
            indices in the same order as a job without bcl; ``"keyed"`` draws
            bcl::keyed_order's, a keyed bijection of the indices computed position by position
            from (seed, epoch), the same in C++, libtorch and Python, without torch's O(N)
            permutation (docs/python.md, "The epoch's order").
        lookahead: K, steps planned together (default 8). num_replicas * lookahead *
            batch_size is at most 2^30, the records of one plan window.
        batching: ``"packed"`` or ``"padded"`` (a collate_fn that pads to the batch's longest).
        cap: None, a number (each cost clipped to it for planning) or a quantile of the table
            such as ``"p99"``, as the rank-local sampler spells it.
        level_steps: bcl::plan_options::level_steps (default True).
        check_digest: at each pass's start, all-reduce the epoch's plan digest once, so that
            ranks whose plans differ (other costs, another order) raise at once instead of
            losing or repeating indices (default True; nothing to check in one process).
        process_group: the data-parallel group the digest check all-reduces over (as torch's
            collectives take it). Default: the world, which must then have num_replicas ranks;
            a job whose data-parallel group is a subgroup (pipeline or tensor parallel) passes
            its group, or every rank would wait for ranks that never build this sampler. Not
            pickled: a copy made by pickle checks over the world (give the copy its group with
            ``copy.process_group = group``); a deep copy shares it.
        max_tokens: T, token mode: the most tokens one micro-batch holds (at most 2^31).
        micro_batches: M, token mode: micro-batches each rank runs in a step (a multiple of
            multiple_of); num_replicas * lookahead * micro_batches is at most 2^30.
        lengths: token mode: the tokens of each dataset index (integers >= 0, the whole table;
            checked whole here, a record above T refused naming its index).
        multiple_of: m, token mode: the epoch's last step also runs a multiple of m
            micro-batches (default 1).
        oversized: token mode: "error" (default) refuses a record above T at construction;
            "alone" gives each such record a micro-batch of its own.
        padding: token mode, an epoch whose records cannot give every rank as many non-empty
            micro-batches (e.g. an odd count of records of T tokens on two ranks): "repeat"
            (default) plans the order's first records again at its end, the fewest that plan
            (as DistributedSampler pads its order); "empty" gives the ranks short of records
            empty micro-batches instead (``stats["padding_micro_batches"]``; the trainer runs
            each as a zero-weight step that still joins the collectives); "error" refuses it.
        pad_to_multiple_of: token mode, k: each record counts as its length rounded up to a
            multiple of k, for max_tokens and the default cost (context parallelism pads each
            sequence to a multiple of 2 * CP). Default 1; at most max_tokens.
        In token mode ``drop_last``, ``batching``, ``cap`` and ``level_steps`` keep their
        defaults (anything else is refused: every record is planned, packed, by its own cost).

    Raises:
        bcl.Error: bad options or costs (naming the index), or a bad state.
    """

    _who = _WHO
    _format = STATE_FORMAT
    _earlier_formats = _EARLIER_FORMATS
    _checked_fields = _CHECKED_FIELDS
    _optional_fields = ("rest",)  # what a checkpoint left of the epoch, after a resize

    def __init__(
        self,
        costs: Any = None,
        batch_size: Optional[int] = None,
        num_replicas: Optional[int] = None,
        rank: Optional[int] = None,
        shuffle: bool = True,
        seed: int = 0,
        drop_last: bool = False,
        lookahead: int = 8,
        *,
        batching: str = "packed",
        cap: Union[None, float, str] = None,
        level_steps: bool = True,
        check_digest: bool = True,
        process_group: Any = None,
        max_tokens: Optional[int] = None,
        micro_batches: Optional[int] = None,
        lengths: Any = None,
        multiple_of: int = 1,
        oversized: str = "error",
        padding: str = "repeat",
        pad_to_multiple_of: int = 1,
        order: str = "randperm",
    ) -> None:
        arguments = dict(
            costs=costs, batch_size=batch_size, num_replicas=num_replicas, rank=rank,
            shuffle=shuffle, seed=seed, drop_last=drop_last, lookahead=lookahead,
            batching=batching, cap=cap, level_steps=level_steps, check_digest=check_digest,
            max_tokens=max_tokens, micro_batches=micro_batches, lengths=lengths,
            multiple_of=multiple_of, oversized=oversized, padding=padding,
            pad_to_multiple_of=pad_to_multiple_of, order=order,
        )  # fmt: skip
        dist = _torch_distributed()
        if num_replicas is None:
            if dist is None:
                raise Error(f"{_WHO}: num_replicas is needed without a torch.distributed group")
            num_replicas = dist.get_world_size(process_group)
        if rank is None:
            if dist is None:
                raise Error(f"{_WHO}: rank is needed without a torch.distributed group")
            rank = dist.get_rank(process_group)
        self.num_replicas = inputs.whole("num_replicas", num_replicas)
        self.rank = inputs.whole("rank", rank)
        if self.num_replicas == 0 or self.rank >= self.num_replicas:
            raise Error(
                f"{_WHO}: rank {self.rank} of num_replicas {self.num_replicas}: the rank must be "
                "in [0, num_replicas)"
            )
        self.lookahead = inputs.whole("lookahead", lookahead)
        if self.lookahead == 0:
            raise Error(f"{_WHO}: lookahead must be at least 1")
        self.shuffle = inputs.flag("shuffle", shuffle)
        self.seed = inputs.counter("seed", seed)
        self.drop_last = inputs.flag("drop_last", drop_last)
        if order not in _ORDERS:
            raise Error(f"{_WHO}: order is {order!r}, not one of {', '.join(map(repr, _ORDERS))}")
        self.order = order
        self._check_digest = inputs.flag("check_digest", check_digest)
        self._shape: _Shape
        if max_tokens is None:
            _only_defaults(
                (("micro_batches", micro_batches, None), ("lengths", lengths, None),
                 ("multiple_of", multiple_of, 1), ("oversized", oversized, "error"),
                 ("padding", padding, "repeat"), ("pad_to_multiple_of", pad_to_multiple_of, 1)),
                "{name}= is for token-budget micro-batches: pass max_tokens= too (or leave it "
                "out for batches of batch_size)",
            )  # fmt: skip
            self._shape = FixedShape(
                _WHO, costs, batch_size, self.num_replicas, self.lookahead, self.drop_last,
                batching, cap, level_steps, keyed=order == "keyed",
            )  # fmt: skip
        else:
            if batch_size is not None:
                raise Error(
                    f"{_WHO}: batch_size is {batch_size!r}, but with max_tokens a micro-batch "
                    "holds as many records as fit max_tokens tokens: leave batch_size out"
                )
            _only_defaults(
                (("drop_last", self.drop_last, False), ("batching", batching, "packed"),
                 ("cap", cap, None), ("level_steps", level_steps, True)),
                "{name}={value!r} is for batches of batch_size; with max_tokens every record is "
                "planned, packed, at its own cost (leave it out)",
            )  # fmt: skip
            self._shape = TokenShape(
                _WHO, lengths, costs, self.num_replicas, self.lookahead, max_tokens,
                micro_batches, multiple_of, oversized, padding, pad_to_multiple_of,
                keyed=order == "keyed",
            )  # fmt: skip
        self.batch_size = self._shape.batch_size
        self.dataset_size = self._shape.dataset_size
        self._format = self._shape.format
        self.process_group = process_group
        if self._check_digest:
            _digest_group(process_group, self.num_replicas)  # refused now rather than at next()
        self.epoch = 0
        self._planned_epoch: Optional[tuple] = None  # (epoch, its plan): the last planned
        self._keep_arguments(arguments)

    # -- the epoch -----------------------------------------------------------------------------

    def __len__(self) -> int:
        # The batches of the epoch the next iterator hands out: a loaded state's, else the epoch
        # set_epoch() named; planned once, when first asked, where the count depends on it.
        if self._resume is not None:  # a loaded state's rest of its epoch
            return int(self._resume.plan.batches)
        epoch = self.epoch
        return self._shape.epoch_length(lambda: self._planned(epoch))

    def set_epoch(self, epoch: int) -> None:
        """The epoch the next iteration plans (as DistributedSampler.set_epoch); in [0, 2^63).
        A loaded state of a finished epoch gives way to another epoch; one loaded mid-epoch is
        still resumed first (its rest is owed)."""
        self.epoch = inputs.counter("epoch", epoch)
        resume = self._resume
        if resume is not None and resume.epoch != epoch and resume.ends_at(resume.handed_out):
            self._resume = None

    def _order(self, epoch: int) -> np.ndarray:
        """The epoch's global order, as DistributedSampler draws it (the plan lays it out,
        padding or cutting it as DistributedSampler does)."""
        n = self.dataset_size
        if not self.shuffle:
            return np.arange(n, dtype=np.int64)
        if self.order == "keyed":
            return _core.keyed_order(n, self.seed, epoch, 0, n)
        import torch

        g = torch.Generator()
        g.manual_seed(self.seed + epoch)
        return np.ascontiguousarray(torch.randperm(n, generator=g).numpy(), dtype=np.int64)

    def _planned(self, epoch: int) -> Any:
        """The plan of `epoch`, kept for the passes after the first (plans are immutable)."""
        if self._planned_epoch is not None and self._planned_epoch[0] == epoch:
            return self._planned_epoch[1]
        plan = self._shape.plan(epoch, lambda: self._order(epoch), self.rank, self._common())
        self._planned_epoch = (epoch, plan)
        return plan

    def _begin(self) -> _Pass:
        return _Pass(self.epoch, self._planned(self.epoch))

    def _started(self, cursor: Any) -> None:
        self.epoch = cursor.epoch
        self._agree(cursor)

    def _agree(self, cursor: _Pass) -> None:
        """One all-reduce of the epoch's digest over the digest group: bcl.Error on every rank
        if any rank planned another epoch."""
        if not self._check_digest:
            return
        group = _digest_group(self.process_group, self.num_replicas)
        if group is None:
            return
        import torch
        import torch.distributed as dist

        d = int(cursor.plan.digest)
        halves = [d >> 32, d & 0xFFFFFFFF]
        device = "cpu"
        if dist.get_backend(group) == "nccl":
            device = torch.device("cuda", torch.cuda.current_device())
        t = torch.tensor(halves + [-h for h in halves], dtype=torch.int64, device=device)
        dist.all_reduce(t, op=dist.ReduceOp.MAX, group=group)
        high, low, neg_high, neg_low = (int(x) for x in t.cpu().tolist())
        if (high, low) != (-neg_high, -neg_low):
            raise Error(
                f"{_WHO}: rank {self.rank}'s plan of epoch {cursor.epoch} differs from another "
                "rank's (different costs, seed, options or world size): its batches would lose "
                "or repeat indices"
            )

    @property
    def stats(self) -> dict:
        """The current (or last) epoch's plans: windows, batches, the chain of their digests,
        the efficiency the plans promise and their gap to the lower bound. In token mode:
        windows, batches (this rank's micro-batches), steps, micro_steps_bound (the fewest
        micro-steps the tokens allow), oversized, padded (the order's first records planned again
        at its end), padding_micro_batches (empty micro-batches of every rank), digest and
        planned_efficiency (per micro-step). Over order="keyed" (planned window by window): of
        the windows planned so far (``windows_planned``; in token mode ``batches`` is None until
        the pass has walked to its end, as len() does)."""
        cursor = self._current()
        plan = cursor.plan if cursor is not None else self._planned(self.epoch)
        return dict(plan.stats())

    # -- state ---------------------------------------------------------------------------------

    def _common(self) -> dict:
        """The settings every shape shares, its own aside."""
        common: dict = {
            "dataset_size": self.dataset_size, "num_replicas": self.num_replicas,
            "rank": self.rank, "lookahead": self.lookahead, "shuffle": self.shuffle,
            "seed": self.seed,
        }  # fmt: skip
        if self.order != "randperm":  # states saved before the choice existed still load
            common["order"] = self.order
        return common

    def _settings(self) -> dict:
        return dict(self._common(), **self._shape.settings())

    def _fields(self, cursor: Optional[_Pass], position: int, ended: bool) -> dict:
        """The pass's epoch, its batches taken and its plan's digest (and, for a pass over what
        a checkpoint left of its epoch, that rest); or, with no pass, an ended one, or a
        finished one whose epoch set_epoch() has since replaced, the epoch not started."""
        finished = cursor is not None and cursor.ends_at(position)
        rest = None
        if cursor is None or ended or (finished and cursor.epoch != self.epoch):
            epoch, position, digest = self.epoch, 0, None
        elif hasattr(cursor.plan, "point"):
            # Walked window by window (keyed token mode): the rest at the window's start and the
            # position within it, so that a resumed pass walks nothing twice.
            epoch = cursor.epoch
            position, point_digest, rest = cursor.plan.point(position)
            digest = f"{point_digest:016x}"
        else:
            epoch, digest = cursor.epoch, f"{cursor.plan.digest:016x}"
            rest = getattr(cursor.plan, "rest", None)
        fields = {"epoch": epoch, "position": position, "digest": digest,
                  "settings": self._settings()}  # fmt: skip
        if rest is not None:
            fields["rest"] = {"start": int(rest[0]), "span": int(rest[1]), "taken": bytes(rest[2])}
        return fields

    def _load(self, read: Reader, extra: Any) -> None:
        """Checks every field (the settings one by one, as their types), then plans the saved
        epoch (or its rest) and compares its digest; commits only then. A state over the keyed
        order may come from another number of ranks (in token mode, from a step boundary): the
        epoch goes on from what its ranks had taken, planned at this sampler's."""
        settings = read.section("settings")
        mine = self._settings()
        settings.keys(mine)
        resizable = getattr(self._shape, "keyed", False)
        for key, value in mine.items():
            if not (resizable and key in ("num_replicas", "rank")):
                settings.same(key, value)
        saved_ranks = self.num_replicas
        if resizable:  # any rank's state at a step boundary serves every rank, at any size
            saved_ranks = settings.count("num_replicas")
            if saved_ranks == 0 or settings.count("rank") >= saved_ranks:
                raise settings.error("rank", f"is not below num_replicas ({saved_ranks})")
        epoch, position = read.count("epoch"), read.count("position")
        digest = read.get("digest")
        rest = self._saved_rest(read, resizable, digest is not None)
        resume = None
        if digest is not None:
            saved = read.text("digest")
            common = self._common()
            if rest is None and saved_ranks == self.num_replicas:
                plan = self._planned(epoch)
            else:
                # At another size, the saving ranks' plan (any one's: the rest is theirs alike).
                rank = min(self.rank, saved_ranks - 1)
                plan = self._shape.plan(epoch, lambda: self._order(epoch), rank, common,
                                        rest=rest, ranks=saved_ranks)  # fmt: skip
            if f"{plan.digest:016x}" != saved:
                raise Error(
                    f"{_WHO}: the state's digest does not match this sampler's plan of epoch "
                    f"{epoch}: the {self._shape.tables} differ from when it was saved"
                )
            if position > 0 and _Pass(epoch, plan).ends_at(position - 1):
                # A plan walked window by window knows its count only once walked to its end.
                count = "epoch's" if hasattr(plan, "ends_at") else str(plan.batches)
                raise read.error("position", f"is {position}, past the {count} {self._shape.unit}")
            if saved_ranks != self.num_replicas:
                # What every saving rank had taken, the records left planned at this size.
                left = plan.rest_after(position)
                plan = self._shape.plan(epoch, lambda: self._order(epoch), self.rank, common,
                                        rest=left)  # fmt: skip
                position = 0
            resume = _Pass(epoch, plan, position)
        elif position != 0:
            raise read.error("position", f"is {position} for an epoch not started")
        self.epoch = epoch
        self._resume = resume
        self._latest = None

    @staticmethod
    def _saved_rest(read: Reader, resizable: bool, started: bool) -> Optional[tuple]:
        """The state's rest of its epoch, (start, span, taken), or None for the whole epoch;
        checked against the epoch by the plan that takes it (bcl::epoch_rest::from_parts)."""
        if "rest" not in read.state:
            return None
        if not resizable or not started:
            raise read.error("rest", "is for a started epoch over the keyed order")
        part = read.section("rest")
        part.keys(("start", "span", "taken"))
        return (part.count("start"), part.count("span"), part.data("taken"))

    def _shared_on_copy(self) -> dict:
        return {"process_group": self.process_group}


def plan_batches(
    costs: Any, num_ranks: int, batch_size: int, *, batching: str = "packed",
    level_steps: bool = True, cap: Union[None, float, str] = None, sync: str = "stage",
) -> list[list[list[int]]]:  # fmt: skip
    """For a trainer that holds a global batch (RL rollouts): each rank's micro-batches.

    Plans all ``len(costs)`` records (a multiple of ``num_ranks``) into micro-batches of exactly
    ``batch_size`` indices (the last may hold fewer, as many on every rank), aligned across ranks
    by cost: micro-batch j of every rank costs about the same (bcl::held_batch_planner: the
    global plan of one window, never worse per micro-step than verl's Karmarkar-Karp split of the
    same batch). Returns ``out[rank][j]``, a list of indices into ``costs``; every index appears
    once. The same arguments give the same plan on every rank and platform.

    Args:
        costs: the estimated cost of each record of the held batch (a sequence, array or
            tensor of real numbers, finite, >= 0 and at most 1e120), or a table of shape (N, D):
            each record's cost in each of D stages that synchronise separately (a vision encoder
            and a language model under FSDP or ZeRO-3, where a micro-step lasts the sum over
            stages of the slowest rank in that stage; D at most ``bcl._core.max_plan_stages``).
            A table of one column plans as a 1-d one.
        num_ranks: R, the ranks the batch is shared among.
        batch_size: B, records a rank holds in each micro-batch.
        batching: ``"packed"`` (the default: a micro-batch costs the sum of its records' costs)
            or ``"padded"`` (a collate_fn that pads to the longest: a micro-batch costs its size
            times its dearest record's cost), as bcl::plan_options::batching.
        level_steps: bcl::plan_options::level_steps (default True): a micro-step led by a record
            dearer than the mean batch is formed first and its other batches filled up to it;
            the plan is still never worse than the same batch planned without it.
        cap: None (the default), a number (each cost clipped to it for planning) or a quantile
            of the held batch's own costs such as ``"p99"``, as the samplers spell it.
        sync: with a table of stage costs, how the ranks meet: ``"stage"`` (the default: in
            every stage; the batch is planned on the summed costs, then each micro-step's records
            are shared among the ranks stage by stage, bcl::held_stage_planner, never worse by
            that measure than the summed plan, and the result also carries ``.summary``,
            docs/stages.md) or ``"step"`` (once a micro-step, plain DDP with one gradient bucket:
            the plan of the summed costs).

    Raises:
        bcl.Error: num_ranks or batch_size of 0, a batch that is not a multiple of num_ranks, a
            bad cost (naming its index; with stage costs, the record and the stage), a bad
            option, and ``cap`` or ``batching="padded"`` with stage costs.
    """
    if sync not in ("stage", "step"):
        raise Error(f"bcl.plan_batches: sync must be 'stage' or 'step' (got {sync!r})")
    stages = _stages.stage_costs("costs", costs)
    if stages is not None and sync == "step":
        stages = stages.sum(axis=1, keepdims=True)
    if stages is not None and stages.shape[1] > 1:
        for name, value, default in (("cap", cap, None), ("batching", batching, "packed")):
            if _departs(value, default):
                raise Error(
                    f"bcl.plan_batches: {name}={value!r} is for one cost a record; stage costs "
                    "are planned packed, each stage at its own cost (leave it out)"
                )
        return _stages.plan_stage_batches(
            stages, inputs.whole("num_ranks", num_ranks), inputs.whole("batch_size", batch_size),
            _core.batch_cost.packed, inputs.flag("level_steps", level_steps),
        )  # fmt: skip
    table = inputs.real_array("costs", costs if stages is None else stages[:, 0])
    r = inputs.whole("num_ranks", num_ranks)
    b = inputs.whole("batch_size", batch_size)
    mode = inputs.enum_value(_core.batch_cost, "batching", batching)
    level = inputs.flag("level_steps", level_steps)
    _core.cost_table(table, None)  # every cost checked, each error naming its index
    plan_cap = inputs.table_cap(cap, table)
    return list(_core.plan_held_batch(table, r, b, mode, plan_cap, level))
