"""What each trial of a trainable reserves: ``with_resources`` attaches it, and
:func:`resolve_resources` turns it into the trial's :class:`PlacementGroupFactory` (defined,
with how a spec is normalised, in :mod:`._placement_group_factory`)."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any

from ..execution.placement_groups import PlacementGroupFactory, to_factory
from .trainable import Trainable

__all__ = [
    "PlacementGroupFactory",
    "describe_request",
    "is_function_trainable",
    "resolve_resources",
    "to_factory",
    "with_resources",
]

RESOURCES_ATTR = "__actorrt_tune_resources__"


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
        bundles = to_factory(made).group_bundles
        driver = bundles[0] or "nothing"
        workers = f"{len(bundles) - 1} worker bundle(s) of {bundles[1]}" if len(bundles) > 1 else (
            "no worker bundle"
        )
        return f"{source}: {made!r}, that is {workers} and {driver} for the trial's driver"
    return f"{source}: {made!r}"
