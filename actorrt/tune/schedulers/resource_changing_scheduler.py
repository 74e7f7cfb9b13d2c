"""ResourceChangingScheduler: a running trial's resources change between its results.

It wraps another scheduler. At each result the wrapped scheduler decides first; when it says
``CONTINUE``, the allocation function (``DistributeResources`` by default, Ray's signature
``(tune_controller, trial, result, scheduler) -> PlacementGroupFactory | None``) may return a
new factory for the trial. The controller then asks the broker for the new group without
waiting (:meth:`TuneController.resize_trial`): granted, the trial's attempt ends at this
result with its checkpoint and it restarts from it inside the new group; not granted, the
trial keeps running with what it has, and the function is asked again at its next result.
Ray instead pauses the trial and queues it with the new request, so it may lose its place.
"""

from __future__ import annotations

import logging
import math
import warnings
from collections.abc import Callable, Mapping
from typing import Any

from ..execution.placement_groups import PlacementGroupFactory, to_factory
from .trial_scheduler import FIFOScheduler, TrialScheduler

__all__ = ["DistributeResources", "DistributeResourcesToTopJob", "ResourceChangingScheduler"]

logger = logging.getLogger("actorrt.tune")

class _Default:
    """The default allocation function: a fresh ``DistributeResources()``."""

    def __repr__(self) -> str:
        return "DistributeResources()"


_DEFAULT = _Default()
AllocationFunction = Callable[[Any, Any, dict[str, Any], Any], Any]
_EPS = 1e-9


def _amounts(bundle: Mapping[str, float]) -> tuple[float, float]:
    return float(bundle.get("CPU", 0.0)), float(bundle.get("GPU", 0.0))


def _check_resources(name: str, value: Any) -> dict[str, float]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ValueError(f"{name} must be a dict of resource amounts or None, got {value!r}")
    out: dict[str, float] = {}
    for key, amount in value.items():
        canonical = {"cpu": "CPU", "gpu": "GPU"}.get(str(key), str(key))
        if isinstance(amount, bool) or not isinstance(amount, int | float) or not (
            math.isfinite(amount) and amount >= 0
        ):
            raise ValueError(f"{name}[{key!r}] must be a number >= 0, got {amount!r}")
        out[canonical] = float(amount)
    return out


class DistributeResources:
    """Ray Tune's default allocation function: CPUs and GPUs shared evenly between the live
    trials, in units of ``increase_by``, never below the trials' base resources.

    Args:
        add_bundles: grow by adding ``increase_by`` bundles (for a trial's workers) rather
            than by enlarging its single bundle.
        increase_by: the unit of growth (default: the base's last bundle with
            ``add_bundles``, else one GPU when the base has a GPU, else one CPU).
        increase_by_times: at most this many units added (``-1``: no limit).
        reserve_resources: CPUs/GPUs never handed out to growing trials.
    """

    def __init__(
        self,
        add_bundles: bool = False,
        increase_by: dict[str, float] | None = None,
        increase_by_times: int = -1,
        reserve_resources: dict[str, float] | None = None,
    ) -> None:
        if not isinstance(add_bundles, bool):
            raise ValueError(f"add_bundles must be True or False, got {add_bundles!r}")
        self.add_bundles = add_bundles
        self.increase_by = _check_resources("increase_by", increase_by)
        if increase_by is not None and not (
            self.increase_by.get("CPU") or self.increase_by.get("GPU")
        ):
            raise ValueError(
                f"increase_by must add some CPU or GPU, got {increase_by!r}"
            )
        if isinstance(increase_by_times, bool) or not isinstance(increase_by_times, int):
            raise ValueError(f"increase_by_times must be an int, got {increase_by_times!r}")
        self.increase_by_times = increase_by_times
        self.reserve_resources = _check_resources("reserve_resources", reserve_resources)
        self.metric: str | None = None
        self.mode: str | None = None

    # -------------------------------------------------------------- the units

    def _unit(self, base: PlacementGroupFactory) -> dict[str, float]:
        if self.increase_by:
            return dict(self.increase_by)
        if self.add_bundles:
            return base.group_bundles[-1]
        return {"GPU": 1.0} if base.group_bundles[0].get("GPU") else {"CPU": 1.0}

    @staticmethod
    def _units_in(unit: Mapping[str, float], cpus: float, gpus: float) -> int:
        """How many whole units fit ``cpus`` and ``gpus`` (negative for a deficit)."""
        per_cpu, per_gpu = _amounts(unit)
        counts = []
        if per_cpu:
            counts.append(math.floor(cpus / per_cpu + _EPS))
        if per_gpu:
            counts.append(math.floor(gpus / per_gpu + _EPS))
        return min(counts)

    def _added(
        self, factory: PlacementGroupFactory, base: PlacementGroupFactory, unit: dict[str, float]
    ) -> int:
        """How many units ``factory`` has on top of ``base``."""
        if self.add_bundles:
            return max(0, len(factory.group_bundles) - len(base.group_bundles))
        cpus, gpus = _amounts(factory.group_bundles[0])
        base_cpus, base_gpus = _amounts(base.group_bundles[0])
        return max(0, self._units_in(unit, cpus - base_cpus, gpus - base_gpus))

    def _factory(
        self, base: PlacementGroupFactory, unit: dict[str, float], count: int
    ) -> PlacementGroupFactory:
        if self.add_bundles:
            return PlacementGroupFactory(
                [*base.group_bundles, *[dict(unit)] * count], base.strategy
            )
        head = base.group_bundles[0]
        per_cpu, per_gpu = _amounts(unit)
        cpus, gpus = _amounts(head)
        head["CPU"], head["GPU"] = cpus + per_cpu * count, gpus + per_gpu * count
        return PlacementGroupFactory(
            [{k: v for k, v in head.items() if v}, *base.group_bundles[1:]], base.strategy
        )

    def _limit(self, count: int) -> int:
        return min(count, self.increase_by_times) if self.increase_by_times > 0 else count

    def _even_share(
        self, n_live: int, base: PlacementGroupFactory, unit: dict[str, float],
        total_cpus: float, total_gpus: float,
    ) -> int:
        """The units each of ``n_live`` trials gets when the cluster is shared evenly
        (the first trials take the remainder, one unit each)."""
        base_cpus = base.required_resources.get("CPU", 0.0)
        base_gpus = base.required_resources.get("GPU", 0.0)
        spare = self._units_in(
            unit, total_cpus - base_cpus * n_live, total_gpus - base_gpus * n_live
        )
        return self._limit(max(0, math.ceil(spare / max(n_live, 1))))

    # -------------------------------------------------------------- the decision

    def _new_count(
        self, trial: Any, live: list[Any], added: int, free_units: int, share: int
    ) -> int:
        if free_units > 0:
            return min(added + free_units, share)
        return max(0, added + free_units)

    def __call__(
        self, tune_controller: Any, trial: Any, result: dict[str, Any], scheduler: Any
    ) -> PlacementGroupFactory | None:
        base = scheduler.base_trial_resources or PlacementGroupFactory([{"CPU": 1.0}])
        if not isinstance(base, PlacementGroupFactory):
            raise ValueError(
                f"{type(self).__name__} works on PlacementGroupFactory resources, got {base!r}"
            )
        if not self.add_bundles and len(base.group_bundles) > 1:
            raise ValueError(
                f"{type(self).__name__}(add_bundles=False) grows a trial's single bundle, but "
                f"the trials reserve {len(base.group_bundles)} bundles "
                f"({base.group_bundles}); pass "
                "add_bundles=True"
            )
        if int(result.get("training_iteration", 0)) < 1:
            return None
        unit = self._unit(base)
        totals = tune_controller.cluster_resources()
        total_cpus = float(totals.get("CPU", 0.0)) - self.reserve_resources.get("CPU", 0.0)
        total_gpus = float(totals.get("GPU", 0.0)) - self.reserve_resources.get("GPU", 0.0)
        live = list(tune_controller.get_live_trials())
        used = [t.placement_group_factory.required_resources for t in live]
        free_cpus = total_cpus - sum(u.get("CPU", 0.0) for u in used)
        free_gpus = total_gpus - sum(u.get("GPU", 0.0) for u in used)
        added = self._added(trial.placement_group_factory, base, unit)
        free_units = self._units_in(unit, free_cpus, free_gpus)
        share = self._even_share(len(live), base, unit, total_cpus, total_gpus)
        count = self._new_count(trial, live, added, free_units, share)
        return self._factory(base, unit, count)


class DistributeResourcesToTopJob(DistributeResources):
    """Ray Tune's allocation function that gives every free CPU/GPU to the best live trial
    (by ``metric``/``mode``, taken from the scheduler when not given); others keep what
    they have unless resources are short. Arguments as :class:`DistributeResources`."""

    def __init__(
        self,
        add_bundles: bool = False,
        increase_by: dict[str, float] | None = None,
        increase_by_times: int = -1,
        reserve_resources: dict[str, float] | None = None,
        metric: str | None = None,
        mode: str | None = None,
    ) -> None:
        super().__init__(add_bundles, increase_by, increase_by_times, reserve_resources)
        if mode not in (None, "min", "max"):
            raise ValueError(f"mode must be 'min' or 'max', got {mode!r}")
        self.metric = metric
        self.mode = mode

    def _score(self, trial: Any) -> float:
        value = trial.last_result.get(self.metric)
        if not isinstance(value, int | float) or isinstance(value, bool) or math.isnan(value):
            return -math.inf
        return float(value) if self.mode == "max" else -float(value)

    def _new_count(
        self, trial: Any, live: list[Any], added: int, free_units: int, share: int
    ) -> int:
        if self.metric is None or self.mode not in ("min", "max"):
            raise ValueError(
                "DistributeResourcesToTopJob needs a metric and a mode: give them to it, to "
                f"the wrapped scheduler, or to TuneConfig (got metric={self.metric!r}, "
                f"mode={self.mode!r})"
            )
        ranked = sorted(live, key=self._score, reverse=True)
        best = ranked[0] if ranked else trial
        if self.increase_by_times > 0:
            below = [t for t in ranked if self._below_limit(t)]
            best = below[0] if below else best
        if trial is not best and free_units >= 0:
            return added
        return max(0, self._limit(added + free_units) if free_units > 0 else added + free_units)

    def _below_limit(self, trial: Any) -> bool:
        base = self._base
        return self._added(trial.placement_group_factory, base, self._unit(base)) < (
            self.increase_by_times
        )

    def __call__(
        self, tune_controller: Any, trial: Any, result: dict[str, Any], scheduler: Any
    ) -> PlacementGroupFactory | None:
        self._base = scheduler.base_trial_resources or PlacementGroupFactory([{"CPU": 1.0}])
        return super().__call__(tune_controller, trial, result, scheduler)


class ResourceChangingScheduler(TrialScheduler):
    """Changes live trials' resources with ``resources_allocation_function``, around the
    decisions of ``base_scheduler`` (FIFO when ``None``); see the module docstring.

    A function trainable reads its resources with ``tune.get_context().get_trial_resources()``,
    a class trainable with ``self.trial_resources`` (and ``update_resources(new)``). Both
    restart from a checkpoint when their resources change: a class trainable is saved at
    that result; a function trainable should report a checkpoint with every result.
    """

    def __init__(
        self,
        base_scheduler: TrialScheduler | None = None,
        resources_allocation_function: AllocationFunction | _Default | None = _DEFAULT,
    ) -> None:
        super().__init__()
        if base_scheduler is not None and not isinstance(base_scheduler, TrialScheduler):
            raise ValueError(
                f"base_scheduler must be a TrialScheduler or None, got {base_scheduler!r}"
            )
        if isinstance(resources_allocation_function, _Default):
            resources_allocation_function = DistributeResources()
        elif resources_allocation_function is None:
            warnings.warn(
                "ResourceChangingScheduler(resources_allocation_function=None): no trial's "
                "resources will ever change; pass an allocation function (the default is "
                "DistributeResources())",
                UserWarning,
                stacklevel=2,
            )
        if resources_allocation_function is not None and not callable(
            resources_allocation_function
        ):
            raise ValueError(
                "resources_allocation_function must be callable as (tune_controller, trial, "
                f"result, scheduler), got {resources_allocation_function!r}"
            )
        self._allocate: AllocationFunction | None = resources_allocation_function
        self._base_scheduler = base_scheduler or FIFOScheduler()
        self._base_trial_resources: PlacementGroupFactory | None = None
        self._reallocated_trial_ids: set[str] = set()

    @property
    def metric(self) -> str | None:
        return self._base_scheduler.metric or self._metric

    @property
    def mode(self) -> str | None:
        return self._base_scheduler.mode or self._mode

    @property
    def base_trial_resources(self) -> PlacementGroupFactory | None:
        """The first trial's resources: every trial starts from them."""
        return self._base_trial_resources

    def set_search_properties(self, metric: str | None, mode: str | None, **spec: Any) -> bool:
        super().set_search_properties(metric, mode)
        return self._base_scheduler.set_search_properties(metric, mode, **spec)

    def on_trial_add(self, controller: Any, trial: Any) -> None:
        resources = getattr(trial, "placement_group_factory", None)
        if resources is not None:
            if self._base_trial_resources is None:
                self._base_trial_resources = resources
            elif (
                resources != self._base_trial_resources
                and trial.trial_id not in self._reallocated_trial_ids
            ):
                raise RuntimeError(
                    "ResourceChangingScheduler needs every trial to start with the same "
                    f"resources: the first trial has {self._base_trial_resources}, trial "
                    f"{trial.trial_id} has {resources}"
                )
        self._base_scheduler.on_trial_add(controller, trial)

    def on_trial_result(self, controller: Any, trial: Any, result: dict[str, Any]) -> str:
        decision = self._base_scheduler.on_trial_result(controller, trial, result)
        if decision != self.CONTINUE:
            return decision
        new = self.reallocate_trial_resources_if_needed(controller, trial, result)
        if new is not None and controller.resize_trial(trial, new):
            self._reallocated_trial_ids.add(trial.trial_id)
        return decision

    def reallocate_trial_resources_if_needed(
        self, controller: Any, trial: Any, result: dict[str, Any]
    ) -> PlacementGroupFactory | None:
        """What the allocation function returns for ``trial``, when it differs from what
        the trial has (``None`` otherwise)."""
        fn = self._allocate
        if fn is None:
            return None
        if getattr(fn, "metric", 0) is None:
            fn.metric = self.metric  # type: ignore[attr-defined]
        if getattr(fn, "mode", 0) is None:
            fn.mode = self.mode  # type: ignore[attr-defined]
        made = fn(controller, trial, result, self)
        if not made:
            return None
        new = to_factory(made, where="the resources allocation function's result")
        return None if new == trial.placement_group_factory else new

    def on_trial_complete(self, controller: Any, trial: Any, result: dict[str, Any]) -> None:
        self._base_scheduler.on_trial_complete(controller, trial, result)

    def on_trial_error(self, controller: Any, trial: Any) -> None:
        self._base_scheduler.on_trial_error(controller, trial)

    def on_trial_remove(self, controller: Any, trial: Any) -> None:
        self._base_scheduler.on_trial_remove(controller, trial)

    def on_no_running_trials(self, controller: Any) -> None:
        decide = getattr(self._base_scheduler, "on_no_running_trials", None)
        if decide is not None:
            decide(controller)

    def debug_string(self) -> str:
        return f"(ResourceChangingScheduler) {self._base_scheduler.debug_string()}"

