"""How a trainer finds the sweep trial it runs in: a protocol and a registry of providers.

``actorrt.train`` does not import ``actorrt.tune``, and ``tune`` does not import ``train``.
They meet here. A sweep library (``actorrt.tune``, or any other) registers a *trial
provider* with :func:`set_trial_provider`: a function that returns the trial running in
this process right now, or ``None``. When a trainer's ``fit()`` starts, and when
``train.report`` / ``get_checkpoint`` / ``get_context`` are called outside a trainer, train
asks :func:`enclosing_trial`; if a provider answers with a trial, rank 0's reports become
that trial's results, and the trial's "stop" ends the whole gang.

``actorrt.tune`` registers its provider when its trial side is imported (``tune.report``'s
module); a process that never imported a sweep library has no provider, and the lookup
costs a tuple read.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from ._checkpoint import Checkpoint

__all__ = ["EnclosingTrial", "TrialProvider", "enclosing_trial", "set_trial_provider"]


class EnclosingTrial(Protocol):
    """What a trainer uses of the sweep trial its ``fit()`` runs in.

    Implement these seven members on your trial object and register a provider that
    returns it (:func:`set_trial_provider`). ``actorrt.tune``'s trial session is one.
    """

    @property
    def trial_dir(self) -> str:
        """The trial's folder: the trainer's run folder goes inside it when its
        ``RunConfig`` has no ``storage_path``."""
        ...

    @property
    def restore_checkpoint(self) -> str | None:
        """The checkpoint folder this attempt of the trial starts from (a retry's), or
        ``None``: the trainer's workers resume from it."""
        ...

    async def report_async(self, metrics: dict[str, Any], checkpoint_dir: str | None) -> bool:
        """Take one of rank 0's reports as the trial's result, and return whether the
        trial goes on (``False``: stop).

        Runs on the event loop of the process that called ``fit()``, once per report, in
        order; it must not block that loop. ``checkpoint_dir`` is the report's
        checkpoint folder in the trainer's run folder (or ``None``), which the trainer may
        delete later per its ``CheckpointConfig``: copy or link the files to keep them. If
        it raises, the gang is killed and ``fit()`` raises a ``ControllerError`` whose
        cause is that exception (a ``ValueError`` or ``TypeError`` is raised as it is).
        """
        ...

    def report(self, metrics: Mapping[str, Any], checkpoint: Checkpoint | None) -> None:
        """``train.report`` called in the trial's own code, outside any trainer (Ray
        2.7-2.40's spelling of ``tune.report``). Runs on the caller's thread; what it
        raises reaches the caller."""
        ...

    @property
    def checkpoint(self) -> Checkpoint | None:
        """The trial's latest checkpoint: what ``train.get_checkpoint()`` returns outside
        a trainer."""
        ...

    @property
    def context(self) -> Any:
        """What ``train.get_context()`` returns outside a trainer."""
        ...

    def stop_signal(self) -> BaseException:
        """What ``fit()`` raises, after ending the gang and giving back its reservation,
        once ``report_async`` said stop."""
        ...


TrialProvider = Callable[[], EnclosingTrial | None]

_lock = threading.Lock()
# (name, provider) pairs in registration order; replaced whole under the lock, so that
# readers iterate a snapshot without locking.
_providers: tuple[tuple[str, TrialProvider], ...] = ()


def set_trial_provider(
    name: str, provider: Callable[[], EnclosingTrial | None] | None
) -> None:
    """Register (or, with ``None``, remove) the trial provider of the sweep library
    ``name``.

    A provider is called with no arguments whenever a trainer looks for its enclosing
    trial (each ``fit()``, and ``train.report`` and its getters outside a trainer), on
    whatever thread that happens; it returns the trial running in this process now, or
    ``None``, and must be quick (what it raises reaches the caller of ``fit()`` or of
    ``train.report``). Providers are asked in the order they were registered,
    and the first trial returned is the enclosing one. Registering again under the same
    ``name`` replaces that library's provider in its place. Registration is per process: register in
    the process that runs the trial (at import of your library's trial side, say).

    Args:
        name: your library's name, e.g. ``"mysweep"`` (``actorrt.tune`` uses
            ``"actorrt.tune"``).
        provider: a function returning an :class:`EnclosingTrial` or ``None``; ``None``
            removes ``name``'s provider.

    Raises:
        TypeError: ``name`` is not a non-empty string, or ``provider`` is neither callable
            nor ``None``.
    """
    global _providers
    if not isinstance(name, str) or not name:
        raise TypeError(f"set_trial_provider: name must be a non-empty string, got {name!r}")
    if provider is not None and not callable(provider):
        raise TypeError(
            f"set_trial_provider: provider must be a function returning the running trial "
            f"(or None) or None to remove {name!r}'s, got {provider!r}"
        )
    with _lock:
        if provider is None:
            _providers = tuple((n, p) for n, p in _providers if n != name)
        elif any(n == name for n, _ in _providers):
            _providers = tuple((n, provider if n == name else p) for n, p in _providers)
        else:
            _providers = (*_providers, (name, provider))


def enclosing_trial() -> EnclosingTrial | None:
    """The sweep trial running in this process now, or ``None`` (no provider has one)."""
    for _, provider in _providers:
        trial = provider()
        if trial is not None:
            return trial
    return None


# The public home of the hook is actorrt.train, where it is exported.
EnclosingTrial.__module__ = "actorrt.train"
set_trial_provider.__module__ = "actorrt.train"
