"""Ray's trainable registry: ``tune.register_trainable(name, trainable)``, after which the
name stands for the trainable wherever Tune takes one (``Tuner("name")``,
``tune.run("name")``).

The registry is this process's: the driver resolves a name before the experiment starts and
sends each trial the trainable itself, so worker processes never look a name up (Ray keeps
its registry in the cluster for the same purpose).
"""

from __future__ import annotations

import inspect
from typing import Any

__all__ = ["get_trainable_cls", "is_registered", "register_env", "register_trainable", "resolve"]

_TRAINABLES: dict[str, Any] = {}


def register_trainable(name: str, trainable: Any, warn: bool = True) -> None:
    """Register ``trainable`` (a function or a ``Trainable`` subclass) under ``name``; a
    name registered again refers to the new trainable, as in Ray. ``warn`` is Ray's and
    has no effect."""
    if not isinstance(name, str) or not name:
        raise TypeError(f"register_trainable() takes a non-empty str name, got {name!r}")
    if not (callable(trainable) or inspect.isclass(trainable)):
        raise TypeError(
            f"register_trainable({name!r}, ...) takes a function or a Trainable subclass, "
            f"got {type(trainable).__name__}: {trainable!r}"
        )
    _TRAINABLES[name] = trainable


def is_registered(name: str) -> bool:
    return name in _TRAINABLES


def get_trainable_cls(name: str) -> Any:
    """The trainable registered under ``name``."""
    try:
        return _TRAINABLES[name]
    except KeyError:
        known = ", ".join(sorted(_TRAINABLES)) or "none"
        raise ValueError(
            f"no trainable is registered as {name!r} (registered: {known}); call "
            "tune.register_trainable(name, trainable) first, or pass the trainable itself"
        ) from None


def resolve(trainable: Any) -> Any:
    """``trainable`` itself, or the one registered under it when it is a name."""
    return get_trainable_cls(trainable) if isinstance(trainable, str) else trainable


def register_env(name: str, env_creator: Any) -> None:
    """Ray's environment registry is RLlib's, which actorrt does not provide."""
    raise NotImplementedError(
        f"register_env({name!r}, ...): there is no environment registry in actorrt (RLlib is "
        "not provided); create the environment inside the trainable"
    )
