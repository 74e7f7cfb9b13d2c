"""How many training workers, what each needs, and the bundles that describe them.

``ScalingConfig`` is Ray Train's: ``num_workers`` workers of ``resources_per_worker`` each,
placed with ``placement_strategy``; as in Ray Train V2, the driver (the trainer's
coordinator) reserves nothing unless ``trainer_resources`` says so.
``as_placement_group_factory()`` gives the bundles
``[trainer bundle, worker bundle x num_workers]`` (docs/train.md) as a small object of this
package's own (``train`` does not import ``tune``); Tune accepts it by its shape
(``bundles``, ``strategy``, ``required_resources``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .._shared._deprecation import warn_deprecated
from ._unsupported import reject

STRATEGIES = ("PACK", "SPREAD", "STRICT_PACK", "STRICT_SPREAD")

# Tune-style lower-case spellings of the two well-known resources.
_ALIASES = {"cpu": "CPU", "gpu": "GPU"}


def normalize_resources(value: Mapping[str, Any] | None, what: str) -> dict[str, float]:
    """A resource dict with ``cpu``/``gpu`` spelled ``CPU``/``GPU`` and zero amounts dropped.

    Args:
        value: the dict the user gave (``None``: empty).
        what: the argument's name, for error messages.

    Raises:
        TypeError: not a mapping of strings to numbers.
        ValueError: a negative, infinite or NaN amount, or both spellings disagreeing.
    """
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise TypeError(
            f"{what} must be a dict of resource name to amount, got {value!r} "
            f"({type(value).__name__})"
        )
    out: dict[str, float] = {}
    for key, amount in value.items():
        if not isinstance(key, str) or not key:
            raise TypeError(f"{what}: resource names are non-empty strings, got {key!r}")
        if isinstance(amount, bool) or not isinstance(amount, int | float):
            raise TypeError(
                f"{what}[{key!r}] must be a number, got {amount!r} ({type(amount).__name__})"
            )
        if not math.isfinite(amount) or amount < 0:
            raise ValueError(f"{what}[{key!r}] must be finite and >= 0, got {amount!r}")
        name = _ALIASES.get(key, key)
        if name in out and out[name] != float(amount):
            raise ValueError(
                f"{what} gives {name} twice with different amounts ({out[name]} and "
                f"{amount}); use one spelling"
            )
        out[name] = float(amount)
    return {k: v for k, v in out.items() if v != 0}


class PlacementGroupSpec:
    """The bundles a Train run needs: the trainer's, then one per worker.

    The shape Tune's ``PlacementGroupFactory`` has, so ``tune.with_resources`` accepts a
    ``ScalingConfig``: ``bundles``, ``group_bundles``, ``strategy`` and
    ``required_resources`` (their sum). The head bundle may be empty
    (``trainer_resources={}``, the default): as in Ray, ``bundles`` then leaves it out.

    Attributes:
        group_bundles: ``[trainer bundle, worker bundle, ...]``, fresh dicts (the
            trainer's first, also when empty).
        strategy: ``PACK``, ``SPREAD``, ``STRICT_PACK`` or ``STRICT_SPREAD``.
    """

    __slots__ = ("group_bundles", "strategy")

    def __init__(self, bundles: list[dict[str, float]], strategy: str) -> None:
        self.group_bundles = [dict(b) for b in bundles]
        self.strategy = strategy

    @property
    def bundles(self) -> list[dict[str, float]]:
        """The bundles as Ray's ``PlacementGroupFactory.bundles``: an empty trainer bundle
        is left out (they are then the workers')."""
        kept = self.group_bundles[1:] if self.head_bundle_is_empty else self.group_bundles
        return [dict(b) for b in kept]

    @property
    def head_bundle_is_empty(self) -> bool:
        """Whether the trainer's own bundle reserves nothing."""
        return not self.group_bundles[0]

    @property
    def required_resources(self) -> dict[str, float]:
        """Everything the bundles hold together."""
        total: dict[str, float] = {}
        for bundle in self.group_bundles:
            for key, amount in bundle.items():
                total[key] = total.get(key, 0.0) + amount
        return total

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, PlacementGroupSpec):
            return NotImplemented
        return self.group_bundles == other.group_bundles and self.strategy == other.strategy

    def __hash__(self) -> int:
        return hash((repr(self.group_bundles), self.strategy))

    def __repr__(self) -> str:
        return (
            f"PlacementGroupSpec(bundles={self.group_bundles!r}, strategy={self.strategy!r})"
        )


def _refuse_tpu(use_tpu: Any, use_gpu: Any) -> None:
    """``use_tpu=True`` is refused, naming what workers can have instead."""
    if use_tpu is False:
        return
    if not isinstance(use_tpu, bool):
        raise TypeError(f"use_tpu must be True or False, got {use_tpu!r}")
    both = "Cannot specify both `use_gpu=True` and `use_tpu=True`. " if use_gpu is True else ""
    raise ValueError(
        f"{both}ScalingConfig(use_tpu=True) is not supported: there is no TPU training "
        "here. Workers run on CPUs (use_gpu=False, the default) or CUDA GPUs "
        "(use_gpu=True), with resources_per_worker for CPU, GPU, memory and custom "
        "resources (see docs/porting.md, 'Ray Train arguments actorrt does not take')"
    )


@dataclass(frozen=True)
class ScalingConfig:
    """How a data-parallel run scales: its workers and what each one needs.

    Args:
        num_workers: training workers (one process each), at least 1.
        use_gpu: give each worker a GPU (``{"GPU": 1}`` unless ``resources_per_worker``
            says otherwise) and use NCCL.
        resources_per_worker: one worker's bundle, e.g. ``{"CPU": 2, "GPU": 1}``. Default
            ``{"CPU": 1}``, or ``{"GPU": 1}`` with ``use_gpu``. ``cpu``/``gpu`` are accepted
            for ``CPU``/``GPU``; other keys are custom resources.
        placement_strategy: how the worker bundles are spread over nodes (``PACK``,
            ``SPREAD``, ``STRICT_PACK``, ``STRICT_SPREAD``).
        trainer_resources: the driver's bundle when the run is a Tune trial (the head of
            ``as_placement_group_factory()``). Default: nothing, as in Ray Train V2,
            whose controller takes no resources; so ``Tuner(trainer)`` reserves exactly
            the workers' bundles per trial. Ray Train V2 rejects this argument; actorrt
            keeps it for a driver that needs its own share (e.g. a custom resource that
            caps how many drivers run), and warns that a Ray script cannot use it. A
            standalone ``fit()`` never reserves it.

    Raises:
        ValueError: ``num_workers < 1``; ``use_gpu`` disagreeing with
            ``resources_per_worker["GPU"]``; an unknown strategy; a bad amount.
        TypeError: a value of the wrong type.

    Example::

        ScalingConfig(num_workers=4, use_gpu=True)
        ScalingConfig(num_workers=2, resources_per_worker={"CPU": 2})
    """

    num_workers: int = 1
    use_gpu: bool = False
    resources_per_worker: Mapping[str, float] | None = None
    placement_strategy: str = "PACK"
    trainer_resources: Mapping[str, float] | None = None
    # Ray's; refused with a pointer to docs/porting.md (no accelerator types, no TPUs).
    accelerator_type: str | None = field(default=None, repr=False, compare=False, kw_only=True)
    use_tpu: bool = field(default=False, repr=False, compare=False, kw_only=True)
    topology: str | None = field(default=None, repr=False, compare=False, kw_only=True)
    label_selector: Any = field(default=None, repr=False, compare=False, kw_only=True)

    def __post_init__(self) -> None:
        if self.search_values():
            return  # checked once Tune has resolved them, per trial
        _refuse_tpu(self.use_tpu, self.use_gpu)
        reject("ScalingConfig", {"accelerator_type": self.accelerator_type,
                                 "topology": self.topology,
                                 "label_selector": self.label_selector})
        n = self.num_workers
        if isinstance(n, bool) or not isinstance(n, int):
            raise TypeError(f"num_workers must be an int, got {n!r} ({type(n).__name__})")
        if n == 0:
            raise ValueError(
                "num_workers must be at least 1, got 0: Ray Train V2's local mode (the "
                "function run in the driver's process) is not supported; num_workers=1 "
                "runs it in one worker process, with the same train.* calls (see "
                "docs/porting.md, 'Ray Train arguments actorrt does not take')"
            )
        if n < 1:
            raise ValueError(f"num_workers must be at least 1, got {n}")
        if not isinstance(self.use_gpu, bool):
            raise TypeError(f"use_gpu must be True or False, got {self.use_gpu!r}")
        if self.placement_strategy not in STRATEGIES:
            raise ValueError(
                f"placement_strategy must be one of {', '.join(STRATEGIES)}, "
                f"got {self.placement_strategy!r}"
            )
        per_worker = normalize_resources(self.resources_per_worker, "resources_per_worker")
        normalize_resources(self.trainer_resources, "trainer_resources")
        if self.trainer_resources is not None:
            warn_deprecated(
                f"ScalingConfig(trainer_resources={dict(self.trainer_resources)!r}): Ray "
                "Train V2 rejects trainer_resources (it raises DeprecationWarning there: its "
                "controller takes no resources); actorrt reserves it for the Tune trial's "
                "driver. Use resources_per_worker only for a Ray script; see docs/porting.md",
                stacklevel=3,
            )
        given = self.resources_per_worker is not None
        gpus = per_worker.get("GPU", 0.0)
        if self.use_gpu and given and _mentions_gpu(self.resources_per_worker) and gpus == 0:
            raise ValueError(
                "use_gpu=True but resources_per_worker sets GPU to 0 "
                f"({dict(self.resources_per_worker or {})!r}); give each worker a GPU amount "
                "above 0, or set use_gpu=False"
            )
        if not self.use_gpu and gpus > 0:
            raise ValueError(
                "`use_gpu` is False but `GPU` was found in `resources_per_worker` "
                f"({dict(self.resources_per_worker or {})!r} asks for {gpus:g} GPU per "
                "worker). Either set `use_gpu` to True or remove `GPU` from "
                "`resources_per_worker`"
            )
        if given and not per_worker and not self.use_gpu:
            raise ValueError(
                f"resources_per_worker={dict(self.resources_per_worker or {})!r} reserves "
                "nothing for a worker; give it at least one positive amount, or leave it "
                "None for {'CPU': 1}"
            )

    def search_values(self) -> list[str]:
        """The fields that hold Tune search values (``tune.grid_search([1, 2])``,
        ``tune.choice(...)``): such a config is only a template, for a Tuner's
        ``param_space["scaling_config"]``, where each trial resolves them."""
        found = []
        for name in ("num_workers", "use_gpu", "resources_per_worker",
                     "placement_strategy", "trainer_resources"):
            value = getattr(self, name)
            inner = list(value.values()) if isinstance(value, Mapping) else []
            if _is_search_value(value) or any(_is_search_value(v) for v in inner):
                found.append(name)
        return found

    def _check_resolved(self) -> None:
        unresolved = self.search_values()
        if unresolved:
            raise ValueError(
                f"this ScalingConfig holds Tune search values in {unresolved}; pass it as "
                "Tuner(trainer, param_space={'scaling_config': ScalingConfig(...)}) so "
                "each trial resolves them"
            )

    def worker_bundle(self) -> dict[str, float]:
        """One worker's bundle, normalised (what each worker actor is spawned with)."""
        if self.resources_per_worker is None:
            return {"GPU": 1.0} if self.use_gpu else {"CPU": 1.0}
        bundle = normalize_resources(self.resources_per_worker, "resources_per_worker")
        if self.use_gpu:
            bundle.setdefault("GPU", 1.0)
        return bundle

    def trainer_bundle(self) -> dict[str, float]:
        """The trainer's (driver's) bundle, normalised; may be empty."""
        if self.trainer_resources is None:
            return {}  # Ray Train V2: the controller takes no resources
        return normalize_resources(self.trainer_resources, "trainer_resources")

    @property
    def num_cpus_per_worker(self) -> float:
        return self.worker_bundle().get("CPU", 0.0)

    @property
    def num_gpus_per_worker(self) -> float:
        return self.worker_bundle().get("GPU", 0.0)

    @property
    def total_resources(self) -> dict[str, float]:
        """Everything the run reserves: ``num_workers`` worker bundles (plus
        ``trainer_resources`` when given), e.g. ``{"CPU": 4.0}`` for 4 default workers."""
        return self.as_placement_group_factory().required_resources

    def as_placement_group_factory(self) -> PlacementGroupSpec:
        """``[trainer bundle, worker bundle x num_workers]`` with ``placement_strategy``."""
        self._check_resolved()
        worker = self.worker_bundle()
        return PlacementGroupSpec(
            [self.trainer_bundle()] + [worker] * self.num_workers, self.placement_strategy
        )


def _is_search_value(value: Any) -> bool:
    """A Tune search value, known by its shape (train does not import tune): the
    ``{"grid_search": [...]}`` marker, or a domain (``sample`` and ``is_grid`` methods)."""
    if isinstance(value, Mapping):
        return list(value) == ["grid_search"]
    return callable(getattr(value, "sample", None)) and callable(getattr(value, "is_grid", None))


def _mentions_gpu(resources: Mapping[str, Any] | None) -> bool:
    return resources is not None and any(k in ("GPU", "gpu") for k in resources)
