"""``FunctionStopper``: a function of (trial id, result) that says when a trial stops."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from .stopper import Stopper

__all__ = ["FunctionStopper"]


class FunctionStopper(Stopper):
    """Stop a trial when ``function(trial_id, result)`` is true."""

    def __init__(self, function: Callable[[str, dict[str, Any]], bool]) -> None:
        if not self.is_valid_function(function) or not _takes_two(function):
            raise ValueError(
                f"FunctionStopper takes a function (trial_id, result) -> bool, got {function!r}"
            )
        self.function = function

    @classmethod
    def is_valid_function(cls, fn: Any) -> bool:
        """Whether ``fn`` is a stop function rather than a ``Stopper`` (as Ray decides it).

        Raises:
            ValueError: ``fn`` has a ``stop_all`` method but is not a ``Stopper``.
        """
        is_function = callable(fn) and not isinstance(fn, Stopper)
        if is_function and hasattr(fn, "stop_all"):
            raise ValueError(
                f"{fn!r} has stop_all() but is not a tune.Stopper: subclass tune.Stopper "
                "so it is used as one"
            )
        return is_function

    def __call__(self, trial_id: str, result: dict[str, Any]) -> bool:
        return bool(self.function(trial_id, result))


def _takes_two(fn: Any) -> bool:
    try:
        inspect.signature(fn).bind("trial", {})
    except TypeError:
        return False
    except ValueError:  # no signature to read (a builtin): take it on trust
        return True
    return True
