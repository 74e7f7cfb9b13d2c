"""What a trial reserves: ``PlacementGroupFactory`` and ``with_resources``.

Every trial is one placement group (docs/tune.md): bundle 0 is the trial driver's own share
(it may be empty: the driver then reserves nothing), bundles 1..n are for the workers the
trial starts, which land there by capture. Normalisation follows Ray Tune: a missing or empty
spec is ``{"CPU": 1}``; otherwise only what is given (``{"gpu": 1}`` is one GPU and no CPU);
``cpu``/``CPU`` and ``gpu``/``GPU`` are the same resource (both, disagreeing: ``ValueError``);
``memory`` is bytes; every other key is a custom resource.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from actorrt.resources import parse_bundles, parse_resources, parse_strategy

from ._trainable import Trainable

__all__ = ["PlacementGroupFactory", "resolve_resources", "with_resources"]

RESOURCES_ATTR = "__actorrt_tune_resources__"
DEFAULT_BUNDLE = {"CPU": 1.0}


class PlacementGroupFactory:
    """The bundles (and strategy) one trial reserves, atomically.

    Args:
        bundles: resource dicts; bundle 0 is the trial driver's, and may be empty.
        strategy: ``PACK`` (default), ``SPREAD``, ``STRICT_PACK`` or ``STRICT_SPREAD``.

    Raises:
        ValueError: no bundles, a bad amount, an all-zero bundle after the first, or an
            unknown strategy.
        TypeError: bundles that are not dicts of numbers.
    """

    def __init__(self, bundles: Sequence[Mapping[str, float]], strategy: str = "PACK") -> None:
        if isinstance(bundles, Mapping):
            raise TypeError(
                f"PlacementGroupFactory takes a list of bundles (dicts), got one dict {bundles!r};"
                " wrap it in a list"
            )
        parsed = parse_bundles(list(bundles), allow_empty_head=True)
        self._bundles = [b.to_dict() for b in parsed]
        self._strategy = str(parse_strategy(strategy))

    @property
    def bundles(self) -> list[dict[str, float]]:
        """The bundles, with canonical names (``CPU``, ``GPU``, ``memory``, custom)."""
        return [dict(b) for b in self._bundles]

    @property
    def strategy(self) -> str:
        """The placement strategy."""
        return self._strategy

    @property
    def head_bundle_is_empty(self) -> bool:
        """Whether the trial driver's own bundle reserves nothing."""
        return not self._bundles[0]

    @property
    def required_resources(self) -> dict[str, float]:
        """The total over every bundle."""
        total: dict[str, float] = {}
        for bundle in self._bundles:
            for key, value in bundle.items():
                total[key] = total.get(key, 0.0) + value
        return {k: round(v, 4) for k, v in total.items()}

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, PlacementGroupFactory):
            return NotImplemented
        return self._bundles == other._bundles and self._strategy == other._strategy

    def __hash__(self) -> int:
        return hash((tuple(tuple(sorted(b.items())) for b in self._bundles), self._strategy))

    def __repr__(self) -> str:
        return f"PlacementGroupFactory({self._bundles!r}, strategy={self._strategy!r})"


def _dict_to_factory(spec: Mapping[str, Any]) -> PlacementGroupFactory:
    if not spec:
        return PlacementGroupFactory([DEFAULT_BUNDLE])
    bundle = parse_resources(dict(spec)).to_dict()  # checks names, amounts, cpu vs CPU
    return PlacementGroupFactory([bundle])


def to_factory(spec: Any, *, where: str = "resources") -> PlacementGroupFactory:
    """Normalise a dict, a factory, or an object with ``as_placement_group_factory()``."""
    if spec is None:
        return PlacementGroupFactory([DEFAULT_BUNDLE])
    if isinstance(spec, PlacementGroupFactory):
        return spec
    if isinstance(spec, Mapping):
        return _dict_to_factory(spec)
    if hasattr(spec, "as_placement_group_factory"):
        made = spec.as_placement_group_factory()
        if isinstance(made, PlacementGroupFactory):
            return made
        bundles = getattr(made, "bundles", made)
        return PlacementGroupFactory(bundles, getattr(made, "strategy", "PACK"))
    raise ValueError(
        f"{where} must be a dict, a PlacementGroupFactory, an object with "
        f"as_placement_group_factory() (a ScalingConfig), or a callable config -> one of "
        f"those; got {type(spec).__name__}: {spec!r}"
    )


def _is_trainable_class(trainable: Any) -> bool:
    return inspect.isclass(trainable) and issubclass(trainable, Trainable)


def is_function_trainable(trainable: Any) -> bool:
    """A plain function (or a ``functools.partial`` of one) that takes the config."""
    return inspect.isfunction(trainable) or (
        isinstance(trainable, functools.partial) and inspect.isfunction(trainable.func)
    )


def with_resources(trainable: Any, resources: Any) -> Any:
    """Attach the resources each trial of ``trainable`` reserves.

    Args:
        trainable: a function trainable or a :class:`Trainable` subclass.
        resources: a dict (``{"cpu": 2, "gpu": 1, "memory": 2**30, "custom": 1}``), a
            :class:`PlacementGroupFactory`, an object with ``as_placement_group_factory()``
            (a Train ``ScalingConfig``), or a callable ``config -> one of those`` decided
            per sampled config.

    Returns:
        For a function, a wrapper that calls it and carries the resources; for a class, a
        subclass whose ``default_resource_request(config)`` returns the factory.

    Raises:
        ValueError: ``trainable`` is neither, or ``resources`` is not one of the above, or a
            dict is invalid (a bad amount, ``cpu`` and ``CPU`` disagreeing).
    """
    if callable(resources) and not isinstance(resources, PlacementGroupFactory) and not hasattr(
        resources, "as_placement_group_factory"
    ):
        spec: Any = resources
    else:
        spec = to_factory(resources)
    if _is_trainable_class(trainable):
        def default_resource_request(
            cls: type[Trainable], config: dict[str, Any]
        ) -> PlacementGroupFactory:
            return to_factory(spec(config) if callable(spec) else spec)

        return type(
            trainable.__name__,
            (trainable,),
            {
                "default_resource_request": classmethod(default_resource_request),
                "__module__": trainable.__module__,
                "__doc__": trainable.__doc__,
            },
        )
    if is_function_trainable(trainable):
        inner = trainable

        @functools.wraps(inner)
        def wrapped(*args: Any, **kwargs: Any) -> Any:
            return inner(*args, **kwargs)

        setattr(wrapped, RESOURCES_ATTR, spec)
        return wrapped
    raise ValueError(
        "with_resources() takes a function trainable or a tune.Trainable subclass, got "
        f"{type(trainable).__name__}: {trainable!r}"
    )


def resolve_resources(trainable: Any, config: dict[str, Any]) -> PlacementGroupFactory:
    """The factory of one trial of ``trainable`` with ``config``."""
    if _is_trainable_class(trainable):
        made = trainable.default_resource_request(config)
        return to_factory(made)
    spec: Callable[[dict[str, Any]], Any] | Any = getattr(trainable, RESOURCES_ATTR, None)
    if callable(spec) and not isinstance(spec, PlacementGroupFactory):
        return to_factory(spec(config), where="the resources callable's result")
    return to_factory(spec)


FROM_TRAINER_ATTR = "__actorrt_from_trainer__"


def describe_request(trainable: Any, config: dict[str, Any]) -> str:
    """Where a trial's resources came from, for an error about them: what the user wrote
    that made the request that size."""
    if _is_trainable_class(trainable):
        return f"{trainable.__name__}.default_resource_request(config)"
    spec = getattr(trainable, RESOURCES_ATTR, None)
    if spec is None:
        return "no with_resources(): a function trainable's default {'CPU': 1}"
    try:
        made = spec(config) if callable(spec) and not isinstance(
            spec, PlacementGroupFactory
        ) else spec
    except Exception as exc:  # already reported where it was first called
        return f"the resources callable, which raised {exc!r}"
    if getattr(trainable, FROM_TRAINER_ATTR, False):
        source = "tune.Tuner(trainer): the scaling config of the trial (the trainer's own, " \
            "or param_space['scaling_config'])"
    else:
        source = "tune.with_resources()"
    if hasattr(made, "as_placement_group_factory"):
        bundles = to_factory(made).bundles
        driver = bundles[0] or "nothing"
        workers = f"{len(bundles) - 1} worker bundle(s) of {bundles[1]}" if len(bundles) > 1 else (
            "no worker bundle"
        )
        return f"{source}: {made!r}, that is {workers} and {driver} for the trial's driver"
    return f"{source}: {made!r}"
