"""Experiment callbacks: ``tune.Callback`` and the list the controller calls.

Every hook runs in the driver process, on the runtime's event loop, in the controller's own
step: a slow hook slows the whole experiment (results wait for it), so hand long work to a
thread. Hooks are called with keyword arguments, as Ray calls them.

A hook that raises does not end the experiment: a callback is an observer (a logger, a
notifier), and a sweep of many hours should not be lost to a full disk or a dropped network
connection in one. The first failure of each hook of each callback is shown in the progress
output and logged on the ``actorrt.tune`` logger with its traceback; later failures of the
same hook are counted, and the count is reported when the experiment ends.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import traceback
from collections import Counter
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._trial import Trial

__all__ = [
    "DISABLE_AUTO_LOGGERS_ENV",
    "Callback",
    "CallbackList",
    "check_callbacks",
    "default_callbacks",
    "importable",
]

logger = logging.getLogger("actorrt.tune")

# Either name turns the default TensorBoard logger off (Ray's name, so Ray set-ups carry over).
DISABLE_AUTO_LOGGERS_ENV = (
    "ACTORRT_TUNE_DISABLE_AUTO_CALLBACK_LOGGERS",
    "TUNE_DISABLE_AUTO_CALLBACK_LOGGERS",
)


class Callback:
    """The base of experiment callbacks (Ray Tune's ``Callback``); pass instances in
    ``RunConfig(callbacks=[...])``.

    Override the hooks you need; each does nothing by default. Every hook runs in the
    driver, on the event loop, between the controller's steps: keep it quick. One that
    raises is reported and the experiment goes on (see the module docstring).

    Arguments common to the hooks:

    - ``iteration``: how many events (trial starts, results, ends) the controller has
      handled so far; it grows by one with each event.
    - ``trials``: every trial of the experiment so far, in creation order (read them;
      do not change them).
    - ``trial``: the trial the event is about: ``trial_id``, ``trial_name``, ``config``,
      ``status``, ``last_result``, ``path`` (its folder), ``error``.
    - ``**info``: room for arguments added later; accept and ignore it.
    """

    def setup(
        self,
        stop: Any = None,
        num_samples: int | None = None,
        total_num_samples: int | None = None,
        **info: Any,
    ) -> None:
        """Called once, before the first trial starts.

        Args:
            stop: the experiment's stop criterion (a ``tune.stopper.Stopper``).
            num_samples: ``TuneConfig.num_samples``.
            total_num_samples: how many trials the default search will make (samples
                times grid points), or ``None`` when the search algorithm decides.
            **info: room for later arguments.
        """

    def on_trial_start(
        self, iteration: int, trials: list[Trial], trial: Trial, **info: Any
    ) -> None:
        """Called when a trial got its resources and starts running."""

    def on_trial_result(
        self,
        iteration: int,
        trials: list[Trial],
        trial: Trial,
        result: dict[str, Any],
        **info: Any,
    ) -> None:
        """Called for each result a trial reports, after it is written to the trial's
        folder and after the searcher and the scheduler have seen it.

        ``result`` is a copy: the reported metrics, Tune's automatic fields
        (``training_iteration``, ``time_total_s``, ...) and ``config``.
        """

    def on_trial_complete(
        self, iteration: int, trials: list[Trial], trial: Trial, **info: Any
    ) -> None:
        """Called when a trial ends without error (finished, or stopped)."""

    def on_trial_error(
        self, iteration: int, trials: list[Trial], trial: Trial, **info: Any
    ) -> None:
        """Called when a trial ends with an error (``trial.error``), retries spent."""

    def on_trial_recover(
        self, iteration: int, trials: list[Trial], trial: Trial, **info: Any
    ) -> None:
        """Called when an attempt of a trial failed and the trial is retried
        (``FailureConfig(max_failures)``)."""

    def on_experiment_end(self, trials: list[Trial], **info: Any) -> None:
        """Called once when the experiment ends: all trials have ended, or it was stopped
        or cancelled (so files a callback holds open can be closed)."""


def check_callbacks(callbacks: object) -> None:
    """Refuse ``RunConfig(callbacks=...)`` that is not a list of ``tune.Callback``."""
    if callbacks is None:
        return
    if not isinstance(callbacks, list | tuple):
        raise ValueError(f"callbacks must be a list of tune.Callback, got {callbacks!r}")
    for callback in callbacks:
        if not isinstance(callback, Callback):
            raise ValueError(
                f"callbacks must be tune.Callback instances, got {callback!r} "
                f"({type(callback).__name__}); subclass tune.Callback and pass an instance"
            )


def importable(module: str) -> bool:
    """Whether ``module`` can be imported here (without importing it)."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def default_callbacks(given: Iterable[Callback]) -> list[Callback]:
    """The callbacks Tune adds on its own: the TensorBoard logger when ``tensorboardX`` is
    installed, unless one was given or an environment variable turns it off."""
    from ._loggers import TBXLoggerCallback

    if any(os.environ.get(name, "") not in ("", "0") for name in DISABLE_AUTO_LOGGERS_ENV):
        return []
    if any(isinstance(cb, TBXLoggerCallback) for cb in given) or not importable("tensorboardX"):
        return []
    return [TBXLoggerCallback()]


class CallbackList:
    """Calls every callback's hook in turn, isolating their failures (module docstring).

    Args:
        callbacks: the user's callbacks, then Tune's own.
        note: shows a line in the progress output.
    """

    def __init__(self, callbacks: Iterable[Callback], note: Callable[[str], None]) -> None:
        self.callbacks = list(callbacks)
        self.note = note
        self.iteration = 0
        self._failures: Counter[tuple[str, str]] = Counter()

    def _call(self, hook: str, **kwargs: Any) -> None:
        for callback in self.callbacks:
            try:
                getattr(callback, hook)(**kwargs)
            except Exception as exc:
                self._failed(callback, hook, exc)

    def _failed(self, callback: Callback, hook: str, exc: Exception) -> None:
        key = (type(callback).__name__, hook)
        self._failures[key] += 1
        if self._failures[key] > 1:
            logger.debug("tune: callback %s.%s raised again: %r", *key, exc)
            return
        logger.error("tune: callback %s.%s raised; the experiment goes on", *key, exc_info=exc)
        text = "".join(traceback.format_exception(exc)).rstrip()
        self.note(
            f"callback {key[0]}.{hook} raised {type(exc).__name__}: {exc}\n{text}\n"
            f"[tune] the experiment goes on; fix the callback (later failures of "
            f"{key[0]}.{hook} are counted, not shown)"
        )

    def _event(self, hook: str, trials: list[Trial], trial: Trial, **kwargs: Any) -> None:
        self.iteration += 1
        self._call(hook, iteration=self.iteration, trials=trials, trial=trial, **kwargs)

    def setup(self, stop: Any, num_samples: int, searcher: Any) -> None:
        """Every callback's ``setup``; ``total_num_samples`` when ``searcher`` (or the one
        a ``ConcurrencyLimiter`` wraps) counts its trials itself."""
        inner = getattr(searcher, "searcher", searcher)
        total = getattr(inner, "total_trials", None)
        self._call("setup", stop=stop, num_samples=num_samples, total_num_samples=total)

    def trial_start(self, trials: list[Trial], trial: Trial) -> None:
        """Every callback's ``on_trial_start``."""
        self._event("on_trial_start", trials, trial)

    def trial_result(self, trials: list[Trial], trial: Trial, result: dict[str, Any]) -> None:
        """Every callback's ``on_trial_result``, each with its own copy of ``result``."""
        self.iteration += 1
        for callback in self.callbacks:
            try:
                callback.on_trial_result(
                    iteration=self.iteration, trials=trials, trial=trial,
                    result={**result, "config": trial.config},
                )
            except Exception as exc:
                self._failed(callback, "on_trial_result", exc)

    def trial_complete(self, trials: list[Trial], trial: Trial) -> None:
        """Every callback's ``on_trial_complete``."""
        self._event("on_trial_complete", trials, trial)

    def trial_error(self, trials: list[Trial], trial: Trial) -> None:
        """Every callback's ``on_trial_error``."""
        self._event("on_trial_error", trials, trial)

    def trial_recover(self, trials: list[Trial], trial: Trial) -> None:
        """Every callback's ``on_trial_recover``."""
        self._event("on_trial_recover", trials, trial)

    def experiment_end(self, trials: list[Trial]) -> None:
        """Every callback's ``on_experiment_end``; then a word on repeated failures."""
        self._call("on_experiment_end", trials=trials)
        repeated = {key: n for key, n in self._failures.items() if n > 1}
        for (name, hook), count in sorted(repeated.items()):
            self.note(f"callback {name}.{hook} raised {count} times in this experiment")
