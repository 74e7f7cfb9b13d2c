"""``tune.with_parameters``: large objects stored once, read by each worker process once.

The keyword arguments are stored with ``actorrt.put`` when ``with_parameters`` is called: one
shared-memory object on this machine, which lives while the wrapped trainable does. The
trainable carries only its ref, so a trial's spawn message stays small; numpy arrays and
other large buffers among the arguments are read by every worker process from that memory,
without a copy per process (read-only, as Ray's object store gives them). A worker process
reads the arguments the first time one of its trials needs them and keeps them by id, so a
process that runs many trials (workers are reused) deserialises them once.
"""

from __future__ import annotations

import functools
import inspect
import threading
import uuid
from typing import Any

import actorrt

from ._resources import is_function_trainable
from .trainable import Trainable

__all__ = ["with_parameters"]

_lock = threading.Lock()
_loaded: dict[str, dict[str, Any]] = {}  # by id: the arguments this process has


class StoredParameters:
    """Keyword arguments kept in shared memory, pickled as their id and ref only."""

    def __init__(self, kwargs: dict[str, Any]) -> None:
        self.key = uuid.uuid4().hex
        try:
            self.ref = actorrt.put(kwargs)
        except TypeError as exc:
            raise TypeError(f"tune.with_parameters: {exc}") from exc
        with _lock:
            _loaded[self.key] = kwargs  # the driver has them already
        self.names = sorted(kwargs)

    def __getstate__(self) -> dict[str, Any]:
        return {"key": self.key, "ref": self.ref, "names": self.names}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)

    def get(self) -> dict[str, Any]:
        """The arguments: read from shared memory on this process's first call."""
        with _lock:
            found = _loaded.get(self.key)
            if found is None:
                try:
                    found = self.ref.value()
                except LookupError:
                    raise RuntimeError(
                        f"tune.with_parameters: the stored arguments {self.names} are gone "
                        f"({self.ref!r}); no process holds the trainable that stored them"
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

    The arguments are stored once, here, in shared memory (``actorrt.put``), and each worker
    process deserialises them once, however many trials it runs: use it for a dataset or a
    model too large to put in the config. Their numpy arrays are read from that memory
    without a copy per process, and are read-only there, as Ray's are.

    Raises:
        ValueError: ``trainable`` is neither kind, or does not take one of the names.
        TypeError: an argument cannot be pickled.
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
