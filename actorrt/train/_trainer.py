"""``DataParallelTrainer``: run one training function on a gang of workers.

The coordinator is the code that calls ``fit()``: the driver program (through the sync
facade, which ``fit()`` starts if no runtime runs), a coroutine (``await fit_async()``),
or a Tune trial's driver actor. It places the gang (``_placement``), runs attempts until
one succeeds or ``FailureConfig`` gives up, keeps rank 0's reports and checkpoints, and
gives everything back before returning: the workers end (their processes go back to the
pool) and a group it reserved is removed.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import logging
import secrets
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import IO, Any

import actorrt

from ._backend import Backend, WorkerSetup
from ._checkpoint import Checkpoint
from ._checkpoint_book import CheckpointBook
from ._gang import Gang, GangFailed
from ._placement import place_gang
from ._result import Result, TrainingFailedError
from ._run_config import RunConfig
from ._scaling import ScalingConfig
from ._worker import RunSpec

logger = logging.getLogger("actorrt.train")


class DataParallelTrainer:
    """Runs ``train_loop_per_worker`` on ``scaling_config.num_workers`` workers at once.

    Each worker is a worker-process actor placed in its own bundle of one gang reserved
    atomically; the variables ``RANK``, ``LOCAL_RANK``, ``WORLD_SIZE``,
    ``LOCAL_WORLD_SIZE``, ``NODE_RANK``, ``MASTER_ADDR`` and ``MASTER_PORT`` are set while
    the function runs. Inside it, ``train.report``, ``train.get_checkpoint`` and
    ``train.get_context`` work. This base trainer sets up no framework;
    ``actorrt.train.torch.TorchTrainer`` also starts ``torch.distributed``.

    Args:
        train_loop_per_worker: the training function; it takes ``train_loop_config`` if it
            has a parameter, else nothing. It and its config must pickle.
        train_loop_config: the dict passed to it (default ``{}``).
        scaling_config: workers and their resources (default: one CPU worker).
        run_config: name, storage, failure and checkpoint policies.

    Raises:
        TypeError: a training function that is not callable, or bad configs.
        ValueError: a function that takes more than one argument, or none while a config
            is given.
    """

    def __init__(
        self,
        train_loop_per_worker: Callable[..., Any],
        *,
        train_loop_config: Mapping[str, Any] | None = None,
        scaling_config: ScalingConfig | None = None,
        run_config: RunConfig | None = None,
    ) -> None:
        if not callable(train_loop_per_worker):
            raise TypeError(
                f"train_loop_per_worker must be a function, got {train_loop_per_worker!r}"
            )
        if train_loop_config is not None and not isinstance(train_loop_config, Mapping):
            raise TypeError(f"train_loop_config must be a dict, got {train_loop_config!r}")
        scaling_config = scaling_config if scaling_config is not None else ScalingConfig()
        if not isinstance(scaling_config, ScalingConfig):
            raise TypeError(f"scaling_config must be a ScalingConfig, got {scaling_config!r}")
        run_config = run_config if run_config is not None else RunConfig()
        if not isinstance(run_config, RunConfig):
            raise TypeError(f"run_config must be a train.RunConfig, got {run_config!r}")
        self.train_loop_per_worker = train_loop_per_worker
        self.train_loop_config = dict(train_loop_config or {})
        self.scaling_config = scaling_config
        self.run_config = run_config
        self._pass_config = _takes_config(train_loop_per_worker, train_loop_config is not None)

    def _backend(self) -> Backend:
        """The hooks each worker runs around the function (none here)."""
        return Backend()

    def fit(self) -> Result:
        """Run to the end from synchronous code and return the ``Result``.

        Starts a runtime with ``actorrt.init()`` if none runs in this process (it stays up
        afterwards, as ``ray.init`` does). A run that fails beyond ``FailureConfig``
        returns a ``Result`` whose ``error`` says why; configuration errors raise.

        Raises:
            RuntimeError: called on a thread whose event loop runs (use ``fit_async``).
            ValueError, actorrt.InfeasibleResourceError, actorrt.ResourceDeadlockError:
                the gang can never be placed.
        """
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            pass
        else:
            raise RuntimeError(
                "fit() blocks until training ends; on a thread whose event loop runs, use "
                "`await trainer.fit_async()`"
            )
        try:
            actorrt.get(_nothing())
        except actorrt.NoRuntimeError:
            actorrt.init()
        result: Result = actorrt.get(self.fit_async())
        return result

    async def fit_async(self) -> Result:
        """``fit()`` for async code running a runtime (``async with actorrt.Runtime()``)."""
        name = f"{type(self).__name__}_{time.strftime('%Y-%m-%d_%H-%M-%S')}_{secrets.token_hex(2)}"
        run_dir = self.run_config.run_dir(name)
        run_dir.mkdir(parents=True, exist_ok=True)
        placement = await place_gang(self.scaling_config)
        try:
            return await self._attempts(placement.placements, run_dir)
        finally:
            await placement.release()

    async def _attempts(self, placements: list[Any], run_dir: Path) -> Result:
        failure = self.run_config.failure_config
        book = CheckpointBook(self.run_config.checkpoint_config)
        history: list[dict[str, Any]] = []
        failures: list[str] = []
        error: BaseException | None = None
        bundle = self.scaling_config.worker_bundle()
        # Appending a line per report is microseconds of local I/O; a log kept as it goes
        # survives a crash of the coordinator, which buffering to the end would not.
        with open(run_dir / "result.json", "a", buffering=1) as results:  # noqa: ASYNC230
            on_report = _recorder(history, book, results)
            while True:
                gang = Gang(placements, bundle)
                try:
                    await gang.start()
                    await gang.run(self._spec(run_dir, book), on_report)
                except GangFailed as failed:
                    failures.append(f"attempt {len(failures) + 1}: {failed}")
                    allowed = failure.max_failures
                    if allowed != -1 and len(failures) > allowed:
                        error = TrainingFailedError(
                            f"training failed {len(failures)} time(s), more than "
                            f"FailureConfig(max_failures={allowed}) allows; last: {failed}"
                        )
                        error.__cause__ = failed.error
                        break
                    logger.warning(
                        "%s; restarting the gang (%d of %s) from %s", failed, len(failures),
                        "unlimited" if allowed == -1 else allowed, book.latest or "the start",
                    )
                except BaseException:
                    await asyncio.shield(gang.kill())
                    raise
                else:
                    await gang.stop()
                    break
        return Result(
            metrics=dict(history[-1]) if history else {},
            checkpoint=book.latest,
            path=run_dir,
            error=error,
            metrics_history=history,
            best_checkpoints=book.best(),
            num_failures=len(failures),
            failures=failures,
        )

    def _spec(self, run_dir: Path, book: CheckpointBook) -> RunSpec:
        latest = book.latest
        return RunSpec(
            train_fn=self.train_loop_per_worker,
            pass_config=self._pass_config,
            config=self.train_loop_config,
            setup=WorkerSetup(0, 0, 1, 1, 0, "", 0, None),  # each worker gets its own
            env={},
            backend=self._backend(),
            run_dir=str(run_dir),
            experiment_name=run_dir.name,
            restore=latest.path if latest is not None else None,
            next_index=book.next_index,
            score_attribute=self.run_config.checkpoint_config.checkpoint_score_attribute,
        )

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}({getattr(self.train_loop_per_worker, '__name__', '?')}, "
            f"scaling_config={self.scaling_config!r})"
        )


def _recorder(
    history: list[dict[str, Any]], book: CheckpointBook, results: IO[str]
) -> Callable[[dict[str, Any], str | None], None]:
    """What the coordinator does with each of rank 0's reports, in order."""

    def on_report(metrics: dict[str, Any], checkpoint: str | None) -> None:
        history.append(metrics)
        if checkpoint is not None:
            book.add(Checkpoint(checkpoint), metrics)
        results.write(json.dumps(metrics, default=repr) + "\n")

    return on_report


def _takes_config(func: Callable[..., Any], config_given: bool) -> bool:
    try:
        params = list(inspect.signature(func).parameters.values())
    except (TypeError, ValueError):
        return config_given
    positional = [
        p for p in params
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.VAR_POSITIONAL)
    ]
    required = [p for p in positional if p.default is p.empty and p.kind != p.VAR_POSITIONAL]
    if len(required) > 1:
        raise ValueError(
            f"train_loop_per_worker takes one argument (the config) or none; "
            f"{getattr(func, '__name__', func)!r} requires {len(required)}"
        )
    if not positional:
        if config_given:
            raise ValueError(
                f"train_loop_config was given but {getattr(func, '__name__', func)!r} takes "
                "no argument to receive it; add a `config` parameter"
            )
        return False
    return True


async def _nothing() -> None:
    return None
