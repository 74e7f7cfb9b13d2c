"""Checks for a trainable before a run: ``validate_save_restore`` and
``diagnose_serialization`` (Ray Tune's ``tune.utils``)."""

from __future__ import annotations

import inspect
import numbers
import tempfile
import warnings
from collections.abc import Callable
from typing import Any

import cloudpickle

from ..trainable.trainable import Trainable

__all__ = ["diagnose_serialization", "validate_save_restore"]


def validate_save_restore(
    trainable_cls: type[Trainable], config: dict[str, Any] | None = None, num_gpus: float = 0
) -> bool:
    """Check that a class trainable saves and restores its state: one instance trains three
    iterations and saves; a second restores that checkpoint and must then report
    ``training_iteration`` 4 and 5. Returns ``True``; raises ``AssertionError`` saying what
    went wrong otherwise, as Ray does.

    Both instances are built in this process (Ray builds them as actors); ``num_gpus`` > 0
    is accepted with a warning that no GPU is reserved for them.
    """
    if not (isinstance(trainable_cls, type) and issubclass(trainable_cls, Trainable)):
        raise TypeError(
            f"validate_save_restore() takes a tune.Trainable subclass, got {trainable_cls!r}"
        )
    if isinstance(num_gpus, bool) or not isinstance(num_gpus, numbers.Real) or num_gpus < 0:
        raise ValueError(f"num_gpus must be a number >= 0, got {num_gpus!r}")
    if num_gpus > 0:
        warnings.warn(
            f"validate_save_restore(num_gpus={num_gpus}): the trainables are built in this "
            "process and no GPU is reserved for them (Ray reserves them for its actors)",
            UserWarning,
            stacklevel=2,
        )
    first = trainable_cls(config=dict(config or {}))
    second = trainable_cls(config=dict(config or {}))
    try:
        result: dict[str, Any] = {}
        for _ in range(3):
            result = first.train()
        assert result.get("training_iteration"), (
            "validate_save_restore needs `training_iteration` in the trainable's results"
        )
        with tempfile.TemporaryDirectory(prefix="validate_save_restore_") as folder:
            second.restore(first.save(folder))
        for expected in (4, 5):
            result = second.train()
            assert result["training_iteration"] == expected, (
                f"after restoring a checkpoint taken at iteration 3, {trainable_cls.__name__} "
                f"reported training_iteration {result['training_iteration']}, expected "
                f"{expected}: does save_checkpoint/load_checkpoint keep the iteration?"
            )
    finally:
        first.stop()
        second.stop()
    return True


def _check_each(variables: dict[str, Any], failed: set[str]) -> None:
    for name, value in variables.items():
        try:
            cloudpickle.dumps(value)
        except Exception as exc:
            failed.add(name)
            print(f"    {name!r} ({value!r})... FAILED: {type(exc).__name__}: {exc}")
        else:
            print(f"    {name!r} ({value!r})... PASSED")


def diagnose_serialization(trainable: Callable[..., Any]) -> bool | set[str]:
    """Say why a trainable cannot be sent to its trial's process. Returns ``True`` when it
    serialises; otherwise prints which of the globals and closure variables it uses fail
    and returns their names (an empty set when none of them is to blame), as Ray does."""
    print(f"Trying to serialize {trainable}...")
    try:
        cloudpickle.dumps(trainable)
    except Exception as exc:
        print(f"Serialization failed: {type(exc).__name__}: {exc}")
    else:
        print("Serialization succeeded!")
        return True
    failed: set[str] = set()
    if not (inspect.isfunction(trainable) or inspect.ismethod(trainable)):
        print(f"{trainable!r} is not a function: its variables cannot be inspected")
        return failed
    print("Inspecting the variables the trainable uses (inspect.getclosurevars)...")
    closure = inspect.getclosurevars(trainable)
    for kind, variables in (("global", closure.globals), ("nonlocal", closure.nonlocals)):
        if variables:
            print(f"Detected {len(variables)} {kind} variable(s). Checking serializability...")
            _check_each(dict(variables), failed)
    if failed:
        print(
            f"Variable(s) {failed} cannot be serialized: create them inside the trainable, "
            "or pass them with tune.with_parameters"
        )
    else:
        print("None of the variables failed, though the trainable did not serialize.")
    return failed
