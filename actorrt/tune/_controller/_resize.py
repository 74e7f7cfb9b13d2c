"""Growing or shrinking a running trial (ResourceChangingScheduler), through the broker.

A trial normally holds its own group: its driver actor was spawned with
``placement_group=`` its factory's bundles. A new size is taken in two steps:

1. At a result, :func:`try_reserve` decides without waiting. The new size is taken only when
   what is free now plus what the trial holds covers it (``actorrt.available_resources()``)
   and no trial of the experiment waits for resources (those were first in line). Then the
   new group is submitted at once, while the trial still holds its old one. If the broker
   grants it, or queues it behind nothing but the trial's own old group, the trial's
   attempt ends at this result. Otherwise nothing happens: the trial keeps running with what
   it has, and the allocation function is asked again at its next result.
2. Once the old attempt's actor has stopped (its group is released by that, or removed by
   the controller when the controller held it), the new group, already first in the queue,
   is granted from the released resources: :func:`await_group` waits for it, with a bound.
   The trial restarts from its checkpoint with its driver in bundle 0 of the new group
   (``placement=pg.bundle(0)``); its workers are captured into the group as before. The
   controller holds the group and removes it when the trial ends.

So a trial that grows never goes back to the end of the queue, and one that cannot grow is
never interrupted. If an outside request (not of this experiment) takes the released
resources within the bound, the trial falls back to its old size, queued as usual; this is
logged as a warning.
"""

from __future__ import annotations

import logging
from typing import Any

import actorrt

from ..execution.placement_groups import PlacementGroupFactory

__all__ = [
    "RESIZE_WAIT_S", "ClusterTotals", "await_group", "bundle_options", "shortfall", "try_reserve"
]

logger = logging.getLogger("actorrt.tune")

_warned: set[str] = set()  # an empty bundle 0 is refused: warned about once
RESIZE_WAIT_S = 30.0  # how long a granted swap may take for the old group to be released


def shortfall(
    old: PlacementGroupFactory, new: PlacementGroupFactory, available: dict[str, float]
) -> dict[str, float]:
    """What ``new`` needs beyond ``old`` plus what is free now (empty: it fits)."""
    held = old.required_resources
    short: dict[str, float] = {}
    for key, amount in new.required_resources.items():
        missing = amount - held.get(key, 0.0) - available.get(key, 0.0)
        if missing > 1e-9:
            short[key] = round(missing, 4)
    return short


def try_reserve(trial: Any, new: PlacementGroupFactory, waiting: int) -> Any:
    """Submit ``new``'s group for ``trial`` if it can be had now (see the module docstring);
    the group, or ``None`` with the reason logged at INFO."""
    old = trial.resources
    name = trial.trial_name
    if new.head_bundle_is_empty:
        log = logger.info if _warned else logger.warning
        _warned.add(name)
        log(
            "tune: trial %s keeps %s: the new resources %s have an empty bundle 0, and a "
            "trial restarted in a new group needs its driver's bundle to hold something",
            name, old.group_bundles, new.group_bundles,
        )
        return None
    if waiting:
        logger.info(
            "tune: trial %s keeps %s for now: %d trial(s) wait for resources and come "
            "first; it asks again at its next result", name, old.group_bundles, waiting,
        )
        return None
    short = shortfall(old, new, actorrt.available_resources())
    if short:
        logger.info(
            "tune: trial %s keeps running with %s: %s would need %s more than is free; it "
            "asks again at its next result", name, old.group_bundles, new.group_bundles, short,
        )
        return None
    try:
        return actorrt.placement_group(new.group_bundles, new.strategy)
    except actorrt.InfeasibleResourceError as exc:
        logger.info("tune: trial %s keeps %s: %s", name, old.group_bundles, exc)
        return None


async def await_group(trial: Any, group: Any, new: PlacementGroupFactory) -> bool:
    """Wait (bounded) for the group of a trial that is being resized; ``False`` (and the
    group withdrawn) when something else took the released resources first."""
    try:
        await group.ready(timeout=RESIZE_WAIT_S)
    except TimeoutError:
        await group.remove()  # a timed-out ready() leaves the group queued
        logger.warning(
            "tune: trial %s could not take its new resources %s within %.0f s of giving "
            "back its old ones (another request took them); it goes on with %s, queued",
            trial.trial_name, new.group_bundles, RESIZE_WAIT_S, trial.resources.group_bundles,
        )
        return False
    except BaseException:
        await group.remove()
        raise
    return True


def bundle_options(bundle: dict[str, float]) -> dict[str, Any]:
    """Actor options that ask for exactly ``bundle`` (a driver filling bundle 0)."""
    options: dict[str, Any] = {}
    custom = {}
    for key, amount in bundle.items():
        if key == "CPU":
            options["num_cpus"] = amount
        elif key == "GPU":
            options["num_gpus"] = amount
        elif key == "memory":
            options["memory"] = int(amount)
        else:
            custom[key] = amount
    if custom:
        options["resources"] = custom
    return options


class ClusterTotals:
    """The cluster's CPUs and GPUs, as Ray's controller's ``_resource_updater`` gives them
    to allocation functions."""

    def get_num_cpus(self) -> float:
        return float(actorrt.cluster_resources().get("CPU", 0.0))

    def get_num_gpus(self) -> float:
        return float(actorrt.cluster_resources().get("GPU", 0.0))
