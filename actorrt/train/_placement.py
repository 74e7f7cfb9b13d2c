"""Where a run's workers go: the caller's own bundles, or one gang reserved for them.

docs/train.md. Standalone (the driver program, or an actor outside any placement group),
the trainer reserves only the worker bundles, as one placement group: all or nothing.
Inside an actor whose placement group has more bundles than its own (a Tune trial declared
with ``with_resources(driver, scaling_config)``), bundles ``1..n`` must be the workers'
bundles and the workers go there. Inside an actor whose group holds only its own bundle,
the trainer reserves the worker gang from the cluster, as one request that the broker's
deadlock rule covers. Any other shape is a ``ValueError`` showing both.

A gang is reserved with ``actorrt.placement_group()``, from the driver program or from
inside an actor alike: called in an actor (also in a worker process) the group is
reserved by the owning runtime and held by that actor, so it ends with the caller if the
caller ends first, and the wait in ``ready()`` is the caller's wait for the deadlock check.
Called inside a group it is never captured into it: it goes to the cluster.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import actorrt

from ._scaling import ScalingConfig


@dataclass
class GangPlacement:
    """One placement per worker, and what the trainer reserved for them: a placement
    group, or nothing (the workers go into the caller's own bundles)."""

    placements: list[Any]
    group: actorrt.PlacementGroup | None = None

    async def release(self) -> None:
        """Give the reservation back; returns once it is back."""
        if self.group is not None:
            await self.group.remove()


def callers_group() -> Any:
    """The calling actor's placement group (``PlacementInfo``), or ``None``."""
    context = actorrt.get_context()
    if context.actor_id is None:
        return None
    return getattr(context, "placement", None)


async def place_gang(scaling: ScalingConfig) -> GangPlacement:
    """Decide (and if needed reserve) where each worker goes; waits for the reservation.

    Raises:
        ValueError: the caller's group has worker bundles of another shape.
        actorrt.InfeasibleResourceError: the cluster can never hold the gang.
        actorrt.ResourceDeadlockError: the gang can only be granted once the caller ends.
    """
    worker = scaling.worker_bundle()
    n = scaling.num_workers
    group = callers_group()
    if group is not None and len(group.bundle_specs) > 1:
        declared = [_plain(b) for b in group.bundle_specs]
        if declared[1:] != [worker] * n:
            raise ValueError(
                "this trainer runs in an actor whose placement group is "
                f"{declared} (its own bundle, then {len(declared) - 1} more), but its "
                f"ScalingConfig needs {n} worker bundle(s) of {worker}: bundles 1..{n} "
                f"should be {[worker] * n}. Declare the trial with the trainer's own "
                "ScalingConfig (tune.with_resources(driver, scaling_config)), or declare "
                "only the driver's bundle and the trainer reserves its workers itself"
            )
        return GangPlacement([group.bundle(i + 1) for i in range(n)])
    pg = actorrt.placement_group([worker] * n, strategy=scaling.placement_strategy)
    try:
        await pg.ready()
    except BaseException:
        await pg.remove()
        raise
    return GangPlacement([pg.bundle(i) for i in range(n)], group=pg)


def _plain(bundle: dict[str, Any]) -> dict[str, float]:
    return {k: float(v) for k, v in bundle.items() if v}
