"""What the stream tests feed bcl.balance: records, upstreams and costs that fail on cue."""

import dataclasses
import itertools

import numpy as np
from hypothesis import strategies as st


@dataclasses.dataclass(frozen=True)
class Record:
    """A record with an identity (id) and a cost; pickles by value."""

    id: int
    cost: float


def records(n, seed=0):
    """n records with lognormal costs (about ShareGPT's spread) or, for seed < 0, integer ones."""
    rng = np.random.default_rng(abs(seed))
    lengths = rng.lognormal(mean=6.0, sigma=0.5, size=n)
    costs = 1.0 + lengths + lengths**2 / 165.0
    if seed < 0:
        costs = np.floor(lengths / 40.0)
    return [Record(i, float(c)) for i, c in enumerate(costs)]


def ids(batches):
    return [[r.id for r in batch] for batch in batches]


class UpstreamFailure(RuntimeError):
    """What a flaky upstream raises."""


class CostFailure(LookupError):
    """What a flaky cost raises."""


class FlakyUpstream:
    """An iterator over `items` that raises UpstreamFailure once before each position in `fail_at`
    and then goes on (as a reader that retries does); with state_dict()/load_state_dict() when
    `stateful` (the position only: what a resumable upstream saves)."""

    def __init__(self, items, fail_at=()):
        self.items = list(items)
        self.position = 0
        self.fail_at = set(fail_at)

    def __iter__(self):
        return self

    def __next__(self):
        if self.position in self.fail_at:
            self.fail_at.discard(self.position)
            raise UpstreamFailure(f"read failed before record {self.position}")
        if self.position >= len(self.items):
            raise StopIteration
        self.position += 1
        return self.items[self.position - 1]


class StatefulUpstream(FlakyUpstream):
    """A FlakyUpstream with its own state, as torchdata's stateful iterators have."""

    def state_dict(self):
        return {"position": self.position}

    def load_state_dict(self, state):
        self.position = state["position"]


class FlakyCost:
    """record.cost, raising CostFailure the first time it is asked for each id in `fail_ids`;
    counts its calls per id."""

    def __init__(self, fail_ids=()):
        self.fail_ids = set(fail_ids)
        self.calls = {}

    def __call__(self, record):
        self.calls[record.id] = self.calls.get(record.id, 0) + 1
        if record.id in self.fail_ids:
            self.fail_ids.discard(record.id)
            raise CostFailure(f"no cost for record {record.id} yet")
        return record.cost


def drain(stream, limit=None, max_failures=100):
    """(batches, failures): next() until StopIteration (or `limit` batches, or `max_failures`
    failures in a row), counting the injected failures, which propagate unchanged, and going on
    after each."""
    batches, failures, in_a_row = [], 0, 0
    while (limit is None or len(batches) < limit) and in_a_row < max_failures:
        in_a_row += 1
        try:
            batches.append(next(stream))
            in_a_row = 0
        except StopIteration:
            break
        except (UpstreamFailure, CostFailure):
            failures += 1
    return batches, failures


def positioned(items, consumed):
    """A generator over `items` from position `consumed`: what a user hands a resumed stream
    whose upstream is an iterator."""
    return (item for item in itertools.islice(items, consumed, None))


@st.composite
def stream_options(draw):
    """Options of bcl.balance, drawn for property tests."""
    options = dict(
        batch_size=draw(st.integers(1, 12)),
        lookahead=draw(st.integers(1, 5)),
        policy=draw(st.sampled_from(["sliding", "tumbling"])),
        drop_last=draw(st.booleans()),
        seed=draw(st.integers(0, 2**63 - 1)),
        emission=draw(st.sampled_from(["costliest_first", "shuffled"])),
        batching=draw(st.sampled_from(["packed", "padded"])),
        mean_cost=draw(st.sampled_from(["running", 300.0])),
    )
    if draw(st.booleans()):
        options["cap"] = draw(st.sampled_from(["p90", 500.0]))
        options["cap_warmup"] = draw(st.integers(0, 40))
    return options
