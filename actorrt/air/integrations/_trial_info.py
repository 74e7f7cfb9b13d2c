"""What a tracking run is named after: the trial (or Train worker) the code runs in."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ...tune._controller._storage import flatten

__all__ = ["NoopModule", "Where", "numbers", "where"]


@dataclass(frozen=True)
class Where:
    """The enclosing trial's names and this worker's rank (``None``: not in a trial)."""

    trial_id: str | None
    trial_name: str | None
    experiment_name: str | None
    world_rank: int
    trial_dir: str | None = None


def where() -> Where:
    """Read ``train.get_context()``: a Tune trial's ids, or a Train worker's rank."""
    from ...train import get_context

    try:
        context = get_context()
    except RuntimeError:
        return Where(None, None, None, 0)

    def ask(name: str) -> Any:
        getter = getattr(context, name, None)
        return getter() if callable(getter) else None

    rank = ask("get_world_rank")
    return Where(
        ask("get_trial_id"), ask("get_trial_name"), ask("get_experiment_name"),
        int(rank) if rank is not None else 0, ask("get_trial_dir"),
    )


class NoopModule:
    """What ``setup_*`` returns on ranks other than 0: every attribute, and every call,
    does nothing (so ``mlflow.log_metric(...)`` on rank 1 is harmless), as in Ray."""

    def __getattr__(self, name: str) -> NoopModule:
        return NoopModule()

    def __call__(self, *args: Any, **kwargs: Any) -> None:
        return None


def numbers(result: Mapping[str, Any], leave_out: frozenset[str] = frozenset()) -> dict[str, float]:
    """The numeric values of ``result`` (nested dicts flattened to ``a/b``; bools as 0/1;
    NaN kept out), without ``config`` and the keys in ``leave_out``."""
    flat = flatten({k: v for k, v in result.items() if k != "config"})
    out: dict[str, float] = {}
    for key, value in flat.items():
        if key in leave_out or not isinstance(value, int | float):
            continue
        if isinstance(value, float) and math.isnan(value):
            continue
        out[key] = float(value)
    return out
