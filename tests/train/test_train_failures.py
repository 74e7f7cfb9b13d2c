"""FailureConfig: a worker SIGKILLed mid-training, survivors killed, the gang restarted."""

import asyncio
import logging
import os
import signal
import tempfile
import threading
from pathlib import Path
from typing import Any

import pytest
from conftest import eventually

import actorrt
from actorrt import train
from actorrt.train.torch import TorchConfig, TorchTrainer

WORKER_ENV = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


@actorrt.actor(max_concurrency=8)
class Gate:
    """The first worker to ``arrive`` is held until ``release``; later arrivals pass.

    The test learns the held worker's pid from ``first_pid`` and kills it from outside.
    """

    def __init__(self) -> None:
        self._first: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self._release = asyncio.Event()
        self.pids: list[tuple[int, int]] = []

    async def arrive(self, pid: int) -> None:
        if self._first.done():
            return
        self._first.set_result(pid)
        await self._release.wait()

    async def first_pid(self) -> int:
        return await self._first

    def release(self) -> None:
        self._release.set()

    def started(self, rank: int, pid: int) -> None:
        self.pids.append((rank, pid))

    def workers(self) -> list[tuple[int, int]]:
        return list(self.pids)


def train_with_collectives(config: dict[str, Any]) -> None:
    import torch
    import torch.distributed as dist

    rank = train.get_context().get_world_rank()
    checkpoint = train.get_checkpoint()
    start = 0
    if checkpoint is not None:
        start = step_of(checkpoint) + 1
    gate = config["gate"]
    actorrt.get(gate.started(rank, os.getpid()))
    for step in range(start, config["steps"]):
        total = torch.ones(1)
        dist.all_reduce(total)  # every step: a dead peer leaves the others stuck here
        if rank == 1 and step == config["kill_at"]:
            actorrt.get(gate.arrive(os.getpid()))  # held; the test SIGKILLs this process
        with tempfile.TemporaryDirectory() as d:
            Path(d, "step").write_text(str(step))
            train.report(
                {"step": step, "start": start, "world": total.item()},
                checkpoint=train.Checkpoint.from_directory(d),
            )


async def kill_held_worker(gate: Any) -> int:
    pid: int = await gate.first_pid()
    os.kill(pid, signal.SIGKILL)
    await gate.release()
    return pid


def step_of(checkpoint: train.Checkpoint) -> int:
    """The step a checkpoint was written at (read synchronously: tiny, local)."""
    return int(Path(checkpoint.path, "step").read_text())


def gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def trainer(gate: Any, tmp_path: Path, max_failures: int) -> TorchTrainer:
    return TorchTrainer(
        train_with_collectives,
        train_loop_config={"gate": gate, "steps": 8, "kill_at": 3},
        torch_config=TorchConfig(timeout_s=60),
        scaling_config=train.ScalingConfig(num_workers=2),
        run_config=train.RunConfig(
            name="faults",
            storage_path=str(tmp_path),
            failure_config=train.FailureConfig(max_failures=max_failures),
            checkpoint_config=train.CheckpointConfig(num_to_keep=2),
        ),
    )


@pytest.mark.timeout(120)
@pytest.mark.actorrt(num_cpus=2, worker_env=WORKER_ENV)
async def test_sigkilled_worker_restarts_the_gang_from_the_last_checkpoint(
    actorrt_runtime: actorrt.Runtime, tmp_path: Path
) -> None:
    gate = await Gate.spawn()
    fit = asyncio.ensure_future(trainer(gate, tmp_path, max_failures=1).fit_async())
    killed = await kill_held_worker(gate)
    result = await fit

    assert result.error is None, result.failures
    assert result.num_failures == 1
    assert "worker 1 failed: ActorDiedError" in result.failures[0]
    # Every step once, in order: the second attempt resumed right after the checkpoint
    # the first attempt reported last.
    steps = [m["step"] for m in result.metrics_history]
    assert steps == list(range(8))
    resumed = next(m for m in result.metrics_history if m["start"] > 0)
    assert resumed["step"] == resumed["start"]
    assert {m["world"] for m in result.metrics_history} == {2.0}
    assert result.checkpoint is not None and step_of(result.checkpoint) == 7
    assert sorted(p.name for p in Path(result.path).glob("checkpoint_*")) == [  # noqa: ASYNC240
        "checkpoint_000006", "checkpoint_000007",
    ]

    # Two gangs of two started; the killed one and its survivor are gone, and every grant
    # is back, right after fit() and without shutting down.
    workers = await gate.workers()
    assert len(workers) == 4 and killed in {pid for _, pid in workers[:2]}
    first_gang = {pid for _, pid in workers[:2]}
    assert await eventually(lambda: all(gone(pid) for pid in first_gang))
    assert actorrt.available_resources() == actorrt.cluster_resources()


@pytest.mark.timeout(120)
@pytest.mark.actorrt(num_cpus=2, worker_env=WORKER_ENV)
async def test_beyond_max_failures_fit_raises_a_worker_group_error(
    actorrt_runtime: actorrt.Runtime, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    gate = await Gate.spawn()
    fit = asyncio.ensure_future(trainer(gate, tmp_path, max_failures=0).fit_async())
    killed = await kill_held_worker(gate)
    with (
        caplog.at_level(logging.ERROR, logger="actorrt.train"),
        pytest.raises(train.WorkerGroupError) as raised,
    ):
        await fit

    error = raised.value
    assert isinstance(error, train.TrainingFailedError)
    assert "more than FailureConfig(max_failures=0) allows" in str(error)
    died = error.worker_failures[1]  # the held worker is rank 1
    assert isinstance(died, actorrt.ActorDiedError) and died.signal == signal.SIGKILL
    assert "[Rank 1" in str(error) and "ActorDiedError" in str(error)
    # Each failed rank's traceback was logged once, each line prefixed with its rank.
    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert logged.count("[Rank 1] actorrt.ActorDiedError") == 1, logged

    # The run's folder still has what was reported before the failure.
    partial = train.Result.from_path(tmp_path / "faults")
    assert [m["step"] for m in partial.metrics_history][:3] == [0, 1, 2]
    assert partial.checkpoint is not None
    assert actorrt.available_resources() == actorrt.cluster_resources()
    workers = await gate.workers()
    assert killed in {pid for _, pid in workers}
    assert await eventually(lambda: all(gone(pid) for _, pid in workers))


def break_the_run_folder(config: dict[str, Any]) -> None:
    """Rank 0 puts a folder where the coordinator keeps its list of checkpoints, so the
    coordinator (not a worker) fails when it records the next checkpoint."""
    run_dir = Path(config["storage"], train.get_context().get_experiment_name())
    (run_dir / "checkpoints.json").mkdir()
    with tempfile.TemporaryDirectory() as d:
        Path(d, "x").write_text("1")
        train.report({"step": 0}, checkpoint=train.Checkpoint.from_directory(d))
    threading.Event().wait()  # never returns: the coordinator must end the gang


@pytest.mark.timeout(60)
@pytest.mark.actorrt(num_cpus=2, worker_env=WORKER_ENV)
async def test_a_failure_of_the_coordinator_is_a_controller_error(
    actorrt_runtime: actorrt.Runtime, tmp_path: Path
) -> None:
    with pytest.raises(train.ControllerError) as raised:
        await train.DataParallelTrainer(
            break_the_run_folder,
            train_loop_config={"storage": str(tmp_path)},
            run_config=train.RunConfig(name="broken", storage_path=str(tmp_path)),
        ).fit_async()
    error = raised.value
    assert isinstance(error, train.TrainingFailedError)
    assert isinstance(error.controller_failure, IsADirectoryError)
    assert str(error).startswith("Training failed due to controller error:\nIsADirectoryError")
    # The worker, stuck in its loop, was ended with the run, and its grant is back.
    assert actorrt.available_resources() == actorrt.cluster_resources()


class Fatal(BaseException):
    """Not an ``Exception``: as pytest's ``Failed`` or ``SystemExit`` are not."""


def exits_on_rank_1(config: dict[str, Any]) -> None:
    if train.get_context().get_world_rank() == 1:
        raise Fatal("rank 1 gave up")
    train.report({"step": 0})


@pytest.mark.timeout(120)
@pytest.mark.actorrt(num_cpus=2, worker_env=WORKER_ENV)
async def test_a_training_function_ending_in_a_base_exception_is_that_ranks_error(
    actorrt_runtime: actorrt.Runtime, tmp_path: Path
) -> None:
    run = TorchTrainer(
        exits_on_rank_1,
        scaling_config=train.ScalingConfig(num_workers=2),
        run_config=train.RunConfig(storage_path=str(tmp_path), name="fatal"),
    )
    with pytest.raises(train.WorkerGroupError) as raised:
        await run.fit_async()
    failure = raised.value.worker_failures[1]
    assert "the training function raised Fatal: rank 1 gave up" in str(failure)
    assert "Fatal: rank 1 gave up" in str(raised.value)
    assert actorrt.available_resources() == actorrt.cluster_resources()
