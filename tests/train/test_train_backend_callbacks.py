"""A user's ``Backend`` / ``BackendConfig`` and Train V2's ``UserCallback``, as Ray Train
calls them: in the process that runs ``fit()``, with real worker processes.

A backend's ``on_start(worker_group, backend_config)`` runs once the workers are up,
``on_training_start`` next, ``on_shutdown`` before they end; ``worker_group.execute(fn)``
runs ``fn`` in every worker (rank order). A ``UserCallback``'s ``after_report`` gets every
rank's metrics and the stored checkpoint; ``after_exception`` the failed ranks.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import actorrt as ray
from actorrt import train
from actorrt.train import (
    Checkpoint,
    DataParallelTrainer,
    FailureConfig,
    RunConfig,
    ScalingConfig,
    UserCallback,
)
from actorrt.train.backend import Backend, BackendConfig

WORKER_ENV = {"OMP_NUM_THREADS": "1"}


@pytest.fixture
def cluster() -> Iterator[None]:
    ray.init(num_cpus=2, worker_env=WORKER_ENV)
    yield
    ray.shutdown()


def set_flag(value: str) -> int:
    os.environ["MY_BACKEND_FLAG"] = value
    return train.get_context().get_world_rank()


def pid() -> int:
    return os.getpid()


def read_env(name: str) -> str | None:
    return os.environ.get(name)


class RecordingBackend(Backend):
    def __init__(self) -> None:
        self.calls: list[Any] = []

    def on_start(self, worker_group: Any, backend_config: BackendConfig) -> None:
        assert isinstance(backend_config, MyConfig)
        ranks = worker_group.execute(set_flag, backend_config.flag)
        pids = [worker_group.execute_single(r, pid) for r in range(len(worker_group))]
        self.calls.append(("on_start", worker_group.num_workers, ranks, len(set(pids))))

    def on_training_start(self, worker_group: Any, backend_config: BackendConfig) -> None:
        self.calls.append(("on_training_start", len(worker_group)))

    def on_shutdown(self, worker_group: Any, backend_config: BackendConfig) -> None:
        pending = worker_group.execute_async(read_env, "MY_BACKEND_FLAG")
        self.calls.append(("on_shutdown", ray.get(pending)))
        record.append(self.calls)


record: list[list[Any]] = []  # what each fit()'s backend saw, in the driver


@dataclass
class MyConfig(BackendConfig):
    flag: str = "on"

    @property
    def backend_cls(self) -> type[Backend]:
        return RecordingBackend


def read_flag() -> None:
    train.report({"flag": os.environ.get("MY_BACKEND_FLAG")})


def test_a_custom_backends_hooks_run_around_the_training_function(
    cluster: None, tmp_path: Path
) -> None:
    record.clear()
    result = DataParallelTrainer(
        read_flag,
        backend_config=MyConfig(flag="set-by-on_start"),
        scaling_config=ScalingConfig(num_workers=2),
        run_config=RunConfig(storage_path=str(tmp_path)),
    ).fit()
    assert result.metrics["flag"] == "set-by-on_start"  # on_start ran before the function
    assert record == [[
        ("on_start", 2, [0, 1], 2),
        ("on_training_start", 2),
        ("on_shutdown", ["set-by-on_start", "set-by-on_start"]),
    ]]


def test_a_bad_backend_config_is_refused_where_it_is_given(cluster: None, tmp_path: Path) -> None:
    with pytest.raises(TypeError, match="backend_config must be a BackendConfig"):
        DataParallelTrainer(read_flag, backend_config={"backend": "gloo"})  # type: ignore[arg-type]

    class NotABackend(BackendConfig):
        @property
        def backend_cls(self) -> Any:
            return object

    trainer = DataParallelTrainer(read_flag, backend_config=NotABackend(),
                                  run_config=RunConfig(storage_path=str(tmp_path)))
    with pytest.raises(TypeError, match="backend_cls must be a subclass of"):
        trainer.fit()


class Recorded(UserCallback):
    def __init__(self) -> None:
        self.reports: list[tuple[list[dict[str, Any]], str | None]] = []
        self.failures: list[dict[int, str]] = []
        self.run_ids: set[str] = set()
        self.lifecycle: list[str] = []

    def before_run(self, run_context: Any) -> None:
        self.lifecycle.append("before_run")

    def after_run(self, run_context: Any, result: Any) -> None:
        self.lifecycle.append(f"after_run error={result.error}")

    def after_report(self, run_context: Any, metrics: list[dict[str, Any]],
                     checkpoint: Checkpoint | None) -> None:
        assert run_context.get_run_config().name == "with-callbacks"
        self.run_ids.add(run_context.run_id)
        files = None
        if checkpoint is not None:
            files = ",".join(sorted(os.listdir(checkpoint.path)))
        self.reports.append((metrics, files))

    def after_exception(self, run_context: Any, worker_exceptions: dict[int, Exception]) -> None:
        self.failures.append({r: type(e).__name__ for r, e in worker_exceptions.items()})


def report_twice_then_fail_once(config: dict[str, Any]) -> None:
    rank = train.get_context().get_world_rank()
    start = train.get_checkpoint()
    for step in range(2):
        with tempfile.TemporaryDirectory() as folder:
            Path(folder, f"rank{rank}.txt").write_text(str(step))
            train.report({"step": step, "rank": rank},
                         checkpoint=Checkpoint.from_directory(folder))
    if start is None and rank == 1:
        raise ValueError("fails once, on rank 1")


def test_user_callbacks_see_every_ranks_reports_and_the_failed_ranks(
    cluster: None, tmp_path: Path
) -> None:
    callback = Recorded()
    DataParallelTrainer(
        report_twice_then_fail_once,
        train_loop_config={},
        scaling_config=ScalingConfig(num_workers=2),
        run_config=RunConfig(name="with-callbacks", storage_path=str(tmp_path),
                             failure_config=FailureConfig(max_failures=1),
                             callbacks=[callback]),
    ).fit()
    per_attempt = [
        ([{"step": s, "rank": 0}, {"step": s, "rank": 1}], "rank0.txt,rank1.txt")
        for s in range(2)
    ]
    assert callback.reports == per_attempt * 2  # the first attempt, then the restart
    assert callback.failures == [{1: "ValueError"}]
    assert callback.lifecycle == ["before_run", "after_run error=None"]
    assert len(callback.run_ids) == 1


class Failing(UserCallback):
    def after_report(self, run_context: Any, metrics: Any, checkpoint: Any) -> None:
        raise KeyError("callback bug")


def test_a_failing_user_callback_ends_fit_with_a_controller_error(
    cluster: None, tmp_path: Path
) -> None:
    trainer = DataParallelTrainer(
        read_flag,
        run_config=RunConfig(storage_path=str(tmp_path), callbacks=[Failing()]),
    )
    with pytest.raises(train.ControllerError, match="callback bug"):
        trainer.fit()
