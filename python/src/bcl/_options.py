"""The options of a rank-local balancer as Python spells them, parsed in one place for every
front end: bcl.BalancedBatchSampler (over dataset indices), bcl.balance and
bcl.BalancedIterableDataset (over records). One set of names, defaults, rules and messages; the
ranges are bcl::validate's, so each rule and its message is the C++ library's.

What differs between the front ends is what they balance (``of="indices"`` or ``"records"``):
it decides which mean-cost modes make sense (a stream has no epoch to average up front) and how
a message names the unit.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Union

from . import _core
from . import _inputs as inputs
from ._core import Error
from ._cost import AffineQuadratic

# The mean-cost modes, by what balances: a sampler draws its epoch's indices up front, so it can
# aim at the epoch's own mean; a stream only knows the records it has taken.
_MODES = {"indices": ("epoch", "running"), "records": ("running",)}

# How a state names the mean-cost mode it ran in, for a load_state_dict() message.
MEAN_COST_MODES = {
    "epoch": "mean_cost='epoch' (each epoch's own)",
    "fixed": "a fixed mean_cost",
    "running": "mean_cost='running'",
}


def mean_cost_mode(mean_cost: Union[float, str], of: str = "indices") -> tuple[str, float]:
    """("epoch" | "fixed" | "running", the options::mean_cost the balancer's options hold: the
    level when fixed, else 0, which bcl::options reads as "not given")."""
    modes = _MODES[of]
    if of == "records" and mean_cost == "epoch":
        raise Error(
            "bcl::options::mean_cost='epoch' is each epoch's own mean cost, which needs every "
            "cost of the epoch before its first batch; a stream takes its records one chunk at a "
            "time: use 'running' (the default: the mean of the costs taken so far) or a fixed "
            "cost > 0 (e.g. the mean cost of a sample of the stream)"
        )
    named = " or ".join(f"'{m}'" for m in modes) if of == "records" else "'epoch', 'running'"
    if isinstance(mean_cost, str):
        if mean_cost not in modes:
            raise Error(
                f"bcl::options::mean_cost must be {named} or a cost > 0 (got {mean_cost!r})"
            )
        return mean_cost, 0.0
    level = inputs.real("mean_cost", mean_cost)
    if level == 0.0:
        hint = (
            "'epoch' for each epoch's own mean, the default, or 'running' for the balancer's "
            "running mean"
            if of == "indices"
            else "'running' for the balancer's running mean, the default"
        )
        raise Error(
            f"bcl::options::mean_cost must be {named} or a cost > 0 (got 0: name the mode, {hint})"
        )
    return "fixed", level


#: The balancer's options with their defaults, as every front end spells them (bcl.options'
#: defaults; the mean cost's default depends on what is balanced: MEAN_COST_DEFAULT).
OPTION_DEFAULTS = {
    "lookahead": 8, "policy": "sliding", "drop_last": False, "seed": 0, "cap": None,
    "memory": None, "memory_budget": 0.0, "emission": "costliest_first", "batching": "packed",
    "buffer_windows": 2, "max_age": 2, "largest_first": False, "cap_warmup": 0,
    "cap_action": "clip", "cap_prior": 0.0,
}  # fmt: skip
MEAN_COST_DEFAULT = {"indices": "epoch", "records": "running"}


def balancer_options(settings: Mapping, of: str) -> tuple[Any, str]:
    """(bcl::options, the mean-cost mode) from the Python spelling: `settings` maps each name of
    OPTION_DEFAULTS (those absent take their default), "batch_size" and "mean_cost" to the value
    given; other keys are not read. Each option is checked where it enters and the whole by
    bcl::validate; bcl.Error names the first that is wrong. Of "memory" only whether there is a
    memory estimate matters here."""

    def get(name: str) -> Any:
        return settings.get(name, OPTION_DEFAULTS[name])

    opt = _core.options()
    opt.batch_size = inputs.whole("batch_size", settings["batch_size"])
    opt.lookahead = inputs.whole("lookahead", get("lookahead"))
    opt.drop_last = inputs.flag("drop_last", get("drop_last"))
    opt.seed = inputs.counter("seed", get("seed"))
    opt.emission = inputs.enum_value(_core.emission_order, "emission", get("emission"))
    opt.batching = inputs.enum_value(_core.batch_cost, "batching", get("batching"))
    opt.policy = inputs.enum_value(_core.lookahead_policy, "policy", get("policy"))
    opt.buffer_windows = inputs.whole("buffer_windows", get("buffer_windows"))
    opt.max_age = inputs.whole("max_age", get("max_age"))
    mode, opt.mean_cost = mean_cost_mode(settings.get("mean_cost", MEAN_COST_DEFAULT[of]), of)
    opt.cap = inputs.cap_options(
        get("cap"), get("cap_warmup"), get("cap_action"), get("cap_prior"), of=of
    )
    opt.memory_budget = inputs.real("memory_budget", get("memory_budget"))
    opt.largest_first = inputs.flag("largest_first", get("largest_first"))
    _core.validate(opt)
    if opt.memory_budget > 0.0 and get("memory") is None:
        unit = "per-index" if of == "indices" else "per-record"
        raise Error(
            "bcl::options::memory_budget is set, but no memory estimate was given: pass "
            f"memory= ({unit} memory, in the budget's unit)"
        )
    return opt, mode


def calibration_prior(cost: Any, calibrate: Any, memory: Any, spelling: str) -> tuple:
    """The prior (a, b, c) a calibrated cost starts from, or () without calibration. bcl.Error
    unless calibrate is a flag and, when True, the cost is bcl.affine_quadratic(...) and there is
    no memory estimate. `spelling` is how the caller's message shows that argument."""
    if not inputs.flag("calibrate", calibrate):
        return ()
    if not isinstance(cost, AffineQuadratic):
        raise Error(
            "calibrate=True fits a + b*L + c*L^2 to the step times: pass "
            f"{spelling}, the prior the fit starts from"
        )
    if memory is not None:
        raise Error("calibrate=True takes no memory estimate (a calibrated cost has none)")
    return cost.coefficients
