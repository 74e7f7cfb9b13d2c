"""``Tuner``: the entry point, from a plain script (``fit``) or async code (``fit_async``)."""

from __future__ import annotations

import asyncio
import inspect
from typing import Any

import actorrt

from ._config import RunConfig, TuneConfig
from ._controller import TuneController
from ._resources import is_function_trainable
from ._result import ResultGrid
from ._trainable import Trainable

__all__ = ["Tuner"]


def _check_trainable(trainable: Any) -> None:
    if inspect.isclass(trainable) and issubclass(trainable, Trainable):
        return
    if is_function_trainable(trainable):
        return
    raise ValueError(
        "Tuner takes a function trainable (def train(config): ... tune.report(...)) or a "
        f"tune.Trainable subclass, got {type(trainable).__name__}: {trainable!r}"
    )


class Tuner:
    """Runs a hyperparameter sweep (Ray Tune's ``Tuner``).

    Args:
        trainable: a function ``train(config)`` that calls ``tune.report``, or a
            :class:`Trainable` subclass; optionally wrapped by ``tune.with_resources``.
        param_space: the search space: a dict of values, domains (``tune.uniform``...) and
            ``tune.grid_search`` markers, nested as you like.
        tune_config: how to search: see :class:`TuneConfig`.
        run_config: where and how long: see :class:`RunConfig`.

    Raises:
        ValueError: ``trainable`` is neither kind, or ``param_space`` is not a dict.
    """

    def __init__(
        self,
        trainable: Any,
        *,
        param_space: dict[str, Any] | None = None,
        tune_config: TuneConfig | None = None,
        run_config: RunConfig | None = None,
    ) -> None:
        _check_trainable(trainable)
        if param_space is not None and not isinstance(param_space, dict):
            raise ValueError(f"param_space must be a dict, got {param_space!r}")
        self.trainable = trainable
        self.param_space = dict(param_space or {})
        self.tune_config = tune_config or TuneConfig()
        self.run_config = run_config or RunConfig()
        self._task: asyncio.Task[ResultGrid] | None = None

    async def fit_async(self) -> ResultGrid:
        """Run the sweep inside a running runtime (``async with actorrt.Runtime()``)."""
        controller = TuneController(
            self.trainable, self.param_space, self.tune_config, self.run_config
        )
        return await controller.run()

    def fit(self) -> ResultGrid:
        """Run the sweep from synchronous code and return its results.

        Uses the runtime that ``actorrt.init(...)`` started; with none, starts one with
        the machine's resources and shuts it down afterwards. Ctrl-C stops every trial
        and re-raises ``KeyboardInterrupt``.

        Raises:
            RuntimeError: called on a thread whose event loop runs (use ``fit_async``).
        """
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            pass
        else:
            raise RuntimeError(
                "Tuner.fit() was called from a running event loop; use "
                "`await tuner.fit_async()` there (inside `async with actorrt.Runtime()`)"
            )
        started = False
        if not actorrt.is_initialized():
            try:
                actorrt.init()
                started = True
            except actorrt.RuntimeAlreadyRunningError:
                pass  # a runtime runs on another thread of this process: use it
        try:
            try:
                grid: ResultGrid = actorrt.get(self._run())
            except KeyboardInterrupt:
                if self._task is not None:
                    actorrt.get(self._interrupt(), timeout=30)
                raise
            return grid
        finally:
            if started:
                actorrt.shutdown()

    async def _run(self) -> ResultGrid:
        self._task = asyncio.ensure_future(self.fit_async())
        return await self._task

    async def _interrupt(self) -> None:
        task = self._task
        if task is not None and not task.done():
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
