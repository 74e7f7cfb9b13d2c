"""Experiment callbacks: ``tune.Callback``, ``CallbackList`` and the runner the controller calls.

Every hook runs in the driver process, on the runtime's event loop, in the controller's own
step: a slow hook slows the whole experiment (results wait for it), so hand long work to a
thread. Hooks are called with keyword arguments, as Ray calls them.

The controller works in steps, as Ray's does: each step calls ``on_step_begin``, starts
what can start, handles the events that come in (trial starts, results, checkpoints, ends)
for up to a tenth of a second, and calls ``on_step_end``; ``iteration`` is the step's
number, from 0.

A hook that raises ends the experiment, as in Ray: no more hooks are called (but
``on_experiment_end``), the running trials are stopped, the experiment stays restorable,
and ``fit()`` raises that exception. The one exception, also Ray's: an exception in
``on_checkpoint`` is logged and the experiment goes on.
"""

from __future__ import annotations

import asyncio
import importlib.util
import logging
import os
import pickle
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .experiment.trial import Trial

__all__ = [
    "DISABLE_AUTO_LOGGERS_ENV",
    "Callback",
    "CallbackList",
    "CallbackRunner",
    "check_callbacks",
    "importable",
    "warn_unsaved_callback_state",
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
    driver, on the event loop, in the controller's step: keep it quick. One that raises
    ends the experiment and ``fit()`` raises its exception (``on_checkpoint`` excepted:
    see the module docstring).

    Arguments common to the hooks:

    - ``iteration``: the number of the controller's step (from 0; a step lasts at most
      about a tenth of a second).
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

    def on_step_begin(self, iteration: int, trials: list[Trial], **info: Any) -> None:
        """Called at the start of each step of the controller."""

    def on_step_end(self, iteration: int, trials: list[Trial], **info: Any) -> None:
        """Called at the end of each step of the controller."""

    def on_trial_start(
        self, iteration: int, trials: list[Trial], trial: Trial, **info: Any
    ) -> None:
        """Called when a trial got its resources and starts running."""

    def on_trial_restore(
        self, iteration: int, trials: list[Trial], trial: Trial, **info: Any
    ) -> None:
        """Called when an attempt of a trial starts from a checkpoint (a retry, a resumed
        experiment, a PBT exploit)."""

    def on_trial_save(
        self, iteration: int, trials: list[Trial], trial: Trial, **info: Any
    ) -> None:
        """Called after a trial's checkpoint was saved and recorded (after
        ``on_checkpoint``)."""

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

    def on_checkpoint(
        self,
        iteration: int,
        trials: list[Trial],
        trial: Trial,
        checkpoint: Any,
        **info: Any,
    ) -> None:
        """Called when a trial reported (or, a class trainable, saved) a checkpoint, with
        that ``tune.Checkpoint`` (its ``path`` is in the trial's folder). An exception here
        is logged and the experiment goes on, as in Ray."""

    def on_experiment_end(self, trials: list[Trial], **info: Any) -> None:
        """Called once when the experiment ends: all trials have ended, or it was stopped,
        cancelled or failed (so files a callback holds open can be closed)."""

    def get_state(self) -> dict[str, Any] | None:
        """State to save with the experiment (Ray's hook); ``None``: nothing. Not saved
        here: callbacks start afresh when an experiment is restored."""
        return None

    def set_state(self, state: dict[str, Any]) -> None:
        """Restore what :meth:`get_state` returned (Ray's hook)."""


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


def warn_unsaved_callback_state(callbacks: Iterable[Callback]) -> None:
    """Say so when a restored experiment's callbacks keep state that Ray would restore
    (``get_state``) and actorrt does not save."""
    for callback in callbacks:
        if type(callback).get_state is not Callback.get_state:
            logger.warning(
                "tune: %s defines get_state(), but callback state is not saved with the "
                "experiment here (Ray restores it): it starts afresh in the restored run",
                type(callback).__name__,
            )


class CallbackList(Callback):
    """Several callbacks as one (Ray's ``ray.tune.callback.CallbackList``): each hook calls
    the same hook of every callback, in order, with the same arguments; an exception
    propagates at once (the later callbacks are not called).

    Args:
        callbacks: ``tune.Callback`` instances.

    Raises:
        ValueError: an element is not a ``tune.Callback``.
    """

    def __init__(self, callbacks: Iterable[Callback]) -> None:
        self._callbacks = list(callbacks)
        check_callbacks(self._callbacks)

    def __len__(self) -> int:
        return len(self._callbacks)

    def __getitem__(self, index: int) -> Callback:
        return self._callbacks[index]

    def _each(self, hook: str, **kwargs: Any) -> None:
        for callback in self._callbacks:
            getattr(callback, hook)(**kwargs)

    def setup(
        self,
        stop: Any = None,
        num_samples: int | None = None,
        total_num_samples: int | None = None,
        **info: Any,
    ) -> None:
        self._each(
            "setup", stop=stop, num_samples=num_samples, total_num_samples=total_num_samples,
            **info,
        )

    def on_step_begin(self, iteration: int, trials: list[Trial], **info: Any) -> None:
        self._each("on_step_begin", iteration=iteration, trials=trials, **info)

    def on_step_end(self, iteration: int, trials: list[Trial], **info: Any) -> None:
        self._each("on_step_end", iteration=iteration, trials=trials, **info)

    def on_trial_start(
        self, iteration: int, trials: list[Trial], trial: Trial, **info: Any
    ) -> None:
        self._each("on_trial_start", iteration=iteration, trials=trials, trial=trial, **info)

    def on_trial_restore(
        self, iteration: int, trials: list[Trial], trial: Trial, **info: Any
    ) -> None:
        self._each("on_trial_restore", iteration=iteration, trials=trials, trial=trial, **info)

    def on_trial_save(
        self, iteration: int, trials: list[Trial], trial: Trial, **info: Any
    ) -> None:
        self._each("on_trial_save", iteration=iteration, trials=trials, trial=trial, **info)

    def on_trial_result(
        self, iteration: int, trials: list[Trial], trial: Trial, result: dict[str, Any],
        **info: Any,
    ) -> None:
        self._each(
            "on_trial_result", iteration=iteration, trials=trials, trial=trial, result=result,
            **info,
        )

    def on_trial_complete(
        self, iteration: int, trials: list[Trial], trial: Trial, **info: Any
    ) -> None:
        self._each("on_trial_complete", iteration=iteration, trials=trials, trial=trial, **info)

    def on_trial_error(
        self, iteration: int, trials: list[Trial], trial: Trial, **info: Any
    ) -> None:
        self._each("on_trial_error", iteration=iteration, trials=trials, trial=trial, **info)

    def on_trial_recover(
        self, iteration: int, trials: list[Trial], trial: Trial, **info: Any
    ) -> None:
        self._each("on_trial_recover", iteration=iteration, trials=trials, trial=trial, **info)

    def on_checkpoint(
        self, iteration: int, trials: list[Trial], trial: Trial, checkpoint: Any, **info: Any
    ) -> None:
        self._each(
            "on_checkpoint", iteration=iteration, trials=trials, trial=trial,
            checkpoint=checkpoint, **info,
        )

    def on_experiment_end(self, trials: list[Trial], **info: Any) -> None:
        self._each("on_experiment_end", trials=trials, **info)

    # The file save_to_dir writes, "{}" being the session string (Ray's name and form).
    CKPT_FILE_TMPL = "callback-states-{}.pkl"

    def get_state(self) -> dict[str, Any] | None:
        """Every callback's state, in order: ``{"callback_states": [...]}``; ``None`` when
        no callback has any (as in Ray: then nothing is saved)."""
        states = [callback.get_state() for callback in self._callbacks]
        if not any(states):
            return None
        return {"callback_states": states}

    def save_to_dir(self, checkpoint_dir: str, session_str: str = "default") -> None:
        """Write :meth:`get_state` to ``checkpoint_dir`` as
        ``CKPT_FILE_TMPL.format(session_str)`` (pickled, replaced atomically); nothing
        when no callback has state. Tune does not call this itself (callback state is not
        saved with an experiment here); it is for driving callbacks by hand, as Ray's."""
        state = self.get_state()
        if state is None:
            return
        folder = Path(checkpoint_dir)
        target = folder / self.CKPT_FILE_TMPL.format(session_str)
        tmp = folder / f"tmp-{target.name}"
        with open(tmp, "wb") as f:
            pickle.dump(state, f)
        os.replace(tmp, target)

    def can_restore(self, checkpoint_dir: str) -> bool:
        """Whether ``checkpoint_dir`` holds a file :meth:`save_to_dir` wrote."""
        return bool(self._saved_files(checkpoint_dir))

    def restore_from_dir(self, checkpoint_dir: str) -> None:
        """Give the callbacks the state in the newest file :meth:`save_to_dir` wrote to
        ``checkpoint_dir``.

        Raises:
            RuntimeError: there is no such file there (Ray's error).
        """
        files = self._saved_files(checkpoint_dir)
        if not files:
            raise RuntimeError(
                f"Unable to find checkpoint in {checkpoint_dir}: no "
                f"{self.CKPT_FILE_TMPL.format('*')} file (save_to_dir writes one only when "
                "a callback has state)"
            )
        newest = max(files, key=lambda path: path.stat().st_mtime)
        with open(newest, "rb") as f:
            self.set_state(pickle.load(f))

    def _saved_files(self, checkpoint_dir: str) -> list[Path]:
        return sorted(Path(checkpoint_dir).glob(self.CKPT_FILE_TMPL.format("*")))

    def set_state(self, state: dict[str, Any]) -> None:
        """Give each callback its state from :meth:`get_state` (``None`` ones are skipped).

        Raises:
            ValueError: ``state`` holds a different number of callbacks.
        """
        states = state.get("callback_states") if isinstance(state, dict) else None
        if not isinstance(states, list) or len(states) != len(self._callbacks):
            raise ValueError(
                f"set_state() got {state!r}: expected the get_state() of a CallbackList of "
                f"{len(self._callbacks)} callbacks"
            )
        for callback, one in zip(self._callbacks, states, strict=True):
            if one is not None:
                callback.set_state(one)


class CallbackRunner:
    """Calls every callback's hook in turn for the controller (module docstring).

    Args:
        callbacks: the user's callbacks, then Tune's own.
        on_error: told of the first exception a hook raised (the controller then ends the
            experiment with it).
    """

    def __init__(
        self, callbacks: Iterable[Callback], on_error: Callable[[BaseException], None]
    ) -> None:
        self.callbacks = list(callbacks)
        self.on_error = on_error
        self.iteration = 0
        self.error: BaseException | None = None

    def _call(self, hook: str, **kwargs: Any) -> None:
        if self.error is not None:
            return  # the experiment is ending with the first error
        for callback in self.callbacks:
            try:
                getattr(callback, hook)(**kwargs)
            except Exception as exc:
                name = f"{type(callback).__name__}.{hook}"
                exc.add_note(f"raised by the tune callback {name}; the experiment stopped")
                self.error = exc
                self.on_error(exc)
                return

    def _event(self, hook: str, trials: list[Trial], trial: Trial, **kwargs: Any) -> None:
        self._call(hook, iteration=self.iteration, trials=trials, trial=trial, **kwargs)

    async def prepare(self) -> None:
        """Slow preparation of the callbacks that have some (the TensorBoard writer's imports:
        seconds), on a thread while the loop keeps serving, so that the experiment's time
        budget and the runtime's messaging go on meanwhile. Before ``setup``."""
        for callback in self.callbacks:
            prepare = getattr(callback, "_prepare_off_loop", None)
            if prepare is None or self.error is not None:
                continue
            try:
                await asyncio.to_thread(prepare)
            except Exception as exc:
                name = f"{type(callback).__name__}.setup"
                exc.add_note(f"raised by the tune callback {name}; the experiment stopped")
                self.error = exc
                self.on_error(exc)

    def setup(self, stop: Any, num_samples: int, searcher: Any) -> None:
        """Every callback's ``setup``; ``total_num_samples`` when ``searcher`` (or the one
        a ``ConcurrencyLimiter`` wraps) counts its trials itself."""
        inner = getattr(searcher, "searcher", searcher)
        total = getattr(inner, "total_trials", None)
        self._call("setup", stop=stop, num_samples=num_samples, total_num_samples=total)

    def step_begin(self, trials: list[Trial]) -> None:
        """Every callback's ``on_step_begin``."""
        self._call("on_step_begin", iteration=self.iteration, trials=trials)

    def step_end(self, trials: list[Trial]) -> None:
        """Every callback's ``on_step_end``; the next step has the next number."""
        self._call("on_step_end", iteration=self.iteration, trials=trials)
        self.iteration += 1

    def trial_start(self, trials: list[Trial], trial: Trial) -> None:
        """Every callback's ``on_trial_start``."""
        self._event("on_trial_start", trials, trial)

    def trial_restore(self, trials: list[Trial], trial: Trial) -> None:
        """Every callback's ``on_trial_restore``."""
        self._event("on_trial_restore", trials, trial)

    def trial_result(self, trials: list[Trial], trial: Trial, result: dict[str, Any]) -> None:
        """Every callback's ``on_trial_result``, each with its own copy of ``result``."""
        if self.error is not None:
            return
        for callback in self.callbacks:
            copy = {**result, "config": trial.config}
            try:
                callback.on_trial_result(
                    iteration=self.iteration, trials=trials, trial=trial, result=copy
                )
            except Exception as exc:
                name = f"{type(callback).__name__}.on_trial_result"
                exc.add_note(f"raised by the tune callback {name}; the experiment stopped")
                self.error = exc
                self.on_error(exc)
                return

    def checkpoint(self, trials: list[Trial], trial: Trial, checkpoint: Any) -> None:
        """Every callback's ``on_checkpoint`` (errors logged, as Ray does), then
        ``on_trial_save``."""
        if self.error is None:
            for callback in self.callbacks:
                try:
                    callback.on_checkpoint(
                        iteration=self.iteration, trials=trials, trial=trial,
                        checkpoint=checkpoint,
                    )
                except Exception:
                    logger.exception(
                        "tune: callback %s.on_checkpoint raised for trial %s; the "
                        "experiment goes on, as in Ray (unlike Ray, the checkpoint is kept)",
                        type(callback).__name__, trial.trial_name,
                    )
        self._event("on_trial_save", trials, trial)

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
        """Every callback's ``on_experiment_end``, also after a hook failed (so callbacks
        can close what they hold); an exception there is recorded like any other, unless
        the experiment already ends with one (then it is logged)."""
        for callback in self.callbacks:
            try:
                callback.on_experiment_end(trials=trials)
            except Exception as exc:
                if self.error is None:
                    exc.add_note(
                        f"raised by the tune callback {type(callback).__name__}"
                        ".on_experiment_end"
                    )
                    self.error = exc
                    self.on_error(exc)
                else:
                    logger.exception(
                        "tune: callback %s.on_experiment_end raised while the experiment "
                        "was ending with an earlier error", type(callback).__name__,
                    )
