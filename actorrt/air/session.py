"""``ray.air.session`` of Ray 2.7: the training function's calls under their older names.

``report(metrics, checkpoint=None)`` is ``train.report``: in a training function run by a
trainer, or in a Tune function trainable, where it reports to the trial. The getters read
the same context as ``train.get_context()``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .._shared._deprecation import warn_deprecated
from ..train import Checkpoint
from ..train import get_checkpoint as _get_checkpoint
from ..train import get_context as _get_context
from ..train import report as _report

__all__ = [
    "get_checkpoint",
    "get_experiment_name",
    "get_local_rank",
    "get_local_world_size",
    "get_node_rank",
    "get_trial_dir",
    "get_trial_id",
    "get_trial_name",
    "get_world_rank",
    "get_world_size",
    "report",
]


def _deprecated(name: str) -> None:
    """Ray 2.7 disbanded ``ray.air``: its session functions moved to ``ray.train`` (and
    ``ray.tune`` in a trial); they still work here, with this warning."""
    warn_deprecated(
        f"`ray.air.session.{name}` is deprecated: ray.air's session functions moved in "
        f"Ray 2.7; use `ray.train.{name}` in a training function, `ray.tune.{name}` in "
        "a Tune trial (actorrt.train / actorrt.tune)",
        stacklevel=3,
    )


def report(metrics: Mapping[str, Any], *, checkpoint: Checkpoint | None = None) -> None:
    """Report metrics (and optionally a checkpoint): ``train.report``, with Ray's
    deprecation warning."""
    _deprecated("report")
    _report(metrics, checkpoint=checkpoint)


def get_checkpoint() -> Checkpoint | None:
    """The checkpoint to resume from: ``train.get_checkpoint()``, with Ray's deprecation
    warning."""
    _deprecated("get_checkpoint")
    return _get_checkpoint()


def _call(method: str) -> Any:
    context = _get_context()
    getter = getattr(context, method, None)
    if getter is None:
        raise RuntimeError(
            f"air.session.{method}() works inside a Tune trial; here the context is {context!r}"
        )
    return getter()


def get_world_rank() -> int:
    """This worker's rank (``0`` in a Tune trial)."""
    return int(_call("get_world_rank"))


def get_local_rank() -> int:
    """This worker's rank on its node."""
    return int(_call("get_local_rank"))


def get_world_size() -> int:
    """How many workers (``1`` in a Tune trial)."""
    return int(_call("get_world_size"))


def get_local_world_size() -> int:
    """How many workers on this node."""
    return int(_call("get_local_world_size"))


def get_node_rank() -> int:
    """This worker's node's rank among its gang's nodes (``0`` in a Tune trial)."""
    return int(_call("get_node_rank"))


def get_experiment_name() -> str:
    """The experiment's (or run's) name."""
    return str(_call("get_experiment_name"))


def get_trial_id() -> str:
    """The Tune trial's id (in a Tune trial only)."""
    return str(_call("get_trial_id"))


def get_trial_name() -> str:
    """The Tune trial's name (in a Tune trial only)."""
    return str(_call("get_trial_name"))


def get_trial_dir() -> str:
    """The Tune trial's folder (in a Tune trial only)."""
    return str(_call("get_trial_dir"))
