"""``tune.with_parameters``: large objects sent to each worker process once, not per trial.

The keyword arguments are pickled once, when ``with_parameters`` is called, into a file of
a folder this process owns (removed at exit). The wrapped trainable carries only the
file's id and path, so a trial's spawn message stays small. A worker process loads the
file the first time one of its trials needs the arguments and keeps them by id, so a
process that runs many trials (workers are reused) deserialises them once. This is Ray's
object-store behaviour on one machine, with the page cache as the store.
"""

from __future__ import annotations

import atexit
import functools
import inspect
import os
import shutil
import tempfile
import threading
import uuid
from typing import Any

import cloudpickle

from ._resources import is_function_trainable
from .trainable import Trainable

__all__ = ["with_parameters"]

_lock = threading.Lock()
_loaded: dict[str, dict[str, Any]] = {}  # by id: the arguments this process has
_folder: str | None = None


def _store_folder() -> str:
    global _folder
    if _folder is None:
        _folder = tempfile.mkdtemp(prefix=f"actorrt-params-{os.getpid()}-")
        owner = os.getpid()

        def remove() -> None:
            if os.getpid() == owner:  # not in a forked child
                shutil.rmtree(_folder or "", ignore_errors=True)

        atexit.register(remove)
    return _folder


class StoredParameters:
    """Keyword arguments kept in a file, pickled as their id and path only."""

    def __init__(self, kwargs: dict[str, Any]) -> None:
        self.key = uuid.uuid4().hex
        self.path = os.path.join(_store_folder(), f"{self.key}.pkl")
        blob = cloudpickle.dumps(kwargs)
        with open(self.path, "wb") as f:
            f.write(blob)
        with _lock:
            _loaded[self.key] = kwargs  # the driver has them already
        self.names = sorted(kwargs)

    def __getstate__(self) -> dict[str, Any]:
        return {"key": self.key, "path": self.path, "names": self.names}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)

    def get(self) -> dict[str, Any]:
        """The arguments: loaded from the file on this process's first call."""
        with _lock:
            found = _loaded.get(self.key)
            if found is None:
                try:
                    with open(self.path, "rb") as f:
                        found = cloudpickle.load(f)
                except FileNotFoundError:
                    raise RuntimeError(
                        f"tune.with_parameters: the stored arguments {self.names} are gone "
                        f"({self.path}); the process that called with_parameters has ended"
                    ) from None
                _loaded[self.key] = found
            return dict(found)


def _check_names(trainable: Any, names: list[str]) -> None:
    try:
        signature = inspect.signature(trainable)
    except (TypeError, ValueError):
        return
    params = signature.parameters
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return
    missing = [n for n in names if n not in params]
    if missing:
        raise ValueError(
            f"tune.with_parameters: {getattr(trainable, '__name__', trainable)!r} takes no "
            f"parameter named {missing}; its parameters: {list(params)}"
        )


def with_parameters(trainable: Any, **kwargs: Any) -> Any:
    """``trainable`` with extra arguments that every trial receives (Ray Tune's
    ``tune.with_parameters``): a function trainable is called as
    ``trainable(config, **kwargs)``, a ``Trainable`` subclass's ``setup`` as
    ``setup(config, **kwargs)``.

    The arguments are serialised once, here, and each worker process deserialises them
    once, however many trials it runs: use it for a dataset or a model too large to put in
    the config.

    Raises:
        ValueError: ``trainable`` is neither kind, or does not take one of the names.
    """
    if inspect.isclass(trainable) and issubclass(trainable, Trainable):
        _check_names(trainable.setup, list(kwargs))
        stored = StoredParameters(kwargs)
        base = trainable

        def setup(self: Trainable, config: dict[str, Any]) -> None:
            base.setup(self, config, **stored.get())

        return type(
            trainable.__name__,
            (trainable,),
            {"setup": setup, "__module__": trainable.__module__, "__doc__": trainable.__doc__},
        )
    if is_function_trainable(trainable):
        _check_names(trainable, list(kwargs))
        stored = StoredParameters(kwargs)
        inner = trainable

        @functools.wraps(inner)
        def with_params(config: dict[str, Any]) -> Any:
            return inner(config, **stored.get())

        del with_params.__wrapped__  # its signature is (config), not the inner one's
        return with_params
    raise ValueError(
        "with_parameters() takes a function trainable or a tune.Trainable subclass, got "
        f"{type(trainable).__name__}: {trainable!r}"
    )
