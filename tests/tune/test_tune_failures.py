"""Failing trials: errors with their tracebacks, and retries from the last checkpoint."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import tempfile
import time
from typing import Any

import pytest

import actorrt
from actorrt import tune


def read(path: str) -> str:
    with open(path) as f:
        return f.read()


def raises(config: dict[str, Any]) -> None:
    tune.report({"step": 1})
    if config["fail"]:
        raise ValueError(f"bad lr {config['lr']}")
    tune.report({"step": 2})


@pytest.mark.actorrt(num_cpus=2)
async def test_a_trial_that_raises_is_errored_with_its_traceback(
    actorrt_runtime: actorrt.Runtime, tmp_path: Any
) -> None:
    grid = await tune.Tuner(
        raises,
        param_space={"fail": tune.grid_search([False, True]), "lr": 0.5},
        run_config=tune.RunConfig(storage_path=str(tmp_path), verbose=0),
    ).fit_async()
    ok, bad = grid[0], grid[1]
    assert ok.error is None and ok.metrics["step"] == 2 and ok.status == "TERMINATED"
    assert isinstance(bad.error, ValueError) and str(bad.error) == "bad lr 0.5"
    assert bad.status == "ERROR" and bad.metrics["step"] == 1  # its last report is kept
    notes = "\n".join(getattr(bad.error, "__notes__", []))
    assert "in raises" in notes and "ValueError: bad lr 0.5" in notes
    assert grid.errors == [bad.error] and grid.num_errors == 1
    assert "bad lr 0.5" in read(os.path.join(bad.path, "error.txt"))
    frame = grid.get_dataframe()
    assert frame["error"].isna().tolist() == [True, False]


class Fatal(BaseException):
    """Not an ``Exception``: as pytest's ``Failed`` or ``SystemExit`` are not."""


def ends_badly(config: dict[str, Any]) -> None:
    tune.report({"step": 1})
    if config["how"] == "exit":
        sys.exit(3)
    raise Fatal("gave up")


@pytest.mark.actorrt(num_cpus=2)
async def test_a_trainable_ending_in_a_base_exception_is_an_error_carrying_it(
    actorrt_runtime: actorrt.Runtime, tmp_path: Any
) -> None:
    grid = await tune.Tuner(
        ends_badly,
        param_space={"how": tune.grid_search(["exit", "fatal"])},
        run_config=tune.RunConfig(storage_path=str(tmp_path), verbose=0),
    ).fit_async()
    by_how = {result.config["how"]: result for result in grid}
    assert isinstance(by_how["exit"].error, SystemExit) and by_how["exit"].error.code == 3
    assert type(by_how["fatal"].error).__name__ == "Fatal"
    assert "gave up" in read(os.path.join(by_how["fatal"].path, "error.txt"))
    assert all(result.metrics["step"] == 1 for result in grid)


@actorrt.actor
class Killer:
    """SIGKILLs the process that asks, once: a crash the trial cannot see coming."""

    def __init__(self) -> None:
        self.killed: list[int] = []

    def kill_me(self, pid: int) -> None:
        if not self.killed:
            self.killed.append(pid)
            os.kill(pid, signal.SIGKILL)

    def victims(self) -> list[int]:
        return self.killed


def resumable(config: dict[str, Any]) -> None:
    start = 0
    checkpoint = tune.get_checkpoint()
    if checkpoint is not None:
        with open(os.path.join(checkpoint.path, "state.json")) as f:
            start = json.load(f)["i"] + 1
    for i in range(start, 4):
        with tempfile.TemporaryDirectory() as d:
            with open(os.path.join(d, "state.json"), "w") as f:
                json.dump({"i": i}, f)
            tune.report(
                {"i": i, "start": start, "pid": os.getpid()},
                checkpoint=tune.Checkpoint.from_directory(d),
            )
        if i == 1:
            actorrt.get(config["killer"].kill_me(os.getpid()))


@pytest.mark.actorrt(num_cpus=2)
async def test_a_killed_trial_is_retried_from_its_last_checkpoint(
    actorrt_runtime: actorrt.Runtime, tmp_path: Any
) -> None:
    killer = await Killer.spawn()
    grid = await tune.Tuner(
        resumable,
        param_space={"killer": killer},
        run_config=tune.RunConfig(
            storage_path=str(tmp_path),
            verbose=0,
            failure_config=tune.FailureConfig(max_failures=1),
            checkpoint_config=tune.CheckpointConfig(num_to_keep=2),
        ),
    ).fit_async()
    [result] = grid
    assert result.error is None, result.error
    [victim] = await killer.victims()
    # Restarted in a new process, from the checkpoint of i=1 (the 2nd report): i=2, 3 ran
    # again as reports 3 and 4.
    assert result.metrics["pid"] != victim
    assert result.metrics["start"] == 2 and result.metrics["i"] == 3
    assert result.metrics["training_iteration"] == 4
    assert result.checkpoint is not None
    assert json.loads(read(os.path.join(result.checkpoint.path, "state.json"))) == {"i": 3}
    kept = sorted(p for p in os.listdir(result.path) if p.startswith("checkpoint_"))
    assert kept == ["checkpoint_000002", "checkpoint_000003"]  # num_to_keep=2
    text = read(os.path.join(result.path, "result.json"))
    lines = [json.loads(line) for line in text.splitlines()]
    assert [line["i"] for line in lines] == [0, 1, 2, 3]
    assert actorrt.available_resources()["CPU"] == 2


@pytest.mark.actorrt(num_cpus=2)
async def test_without_retries_a_killed_trial_is_an_error(
    actorrt_runtime: actorrt.Runtime, tmp_path: Any
) -> None:
    killer = await Killer.spawn()
    grid = await tune.Tuner(
        resumable,
        param_space={"killer": killer},
        run_config=tune.RunConfig(storage_path=str(tmp_path), verbose=0),
    ).fit_async()
    [error] = grid.errors
    assert isinstance(error, actorrt.ActorDiedError)
    assert error.signal == signal.SIGKILL
    assert grid[0].metrics["i"] == 1


def killed_once(config: dict[str, Any]) -> None:
    """Reports twice; on its first attempt it then waits to be killed from outside."""
    checkpoint = tune.get_checkpoint()
    start = 0 if checkpoint is None else 2
    for i in range(start, 4):
        with tempfile.TemporaryDirectory() as d:
            tune.report({"i": i, "pid": os.getpid()}, checkpoint=tune.Checkpoint.from_directory(d))
        if i == 1 and checkpoint is None:
            time.sleep(60)  # the callback kills this actor meanwhile
            raise AssertionError("the trial's actor was not killed")


class KillsTheFirstAttempt(tune.Callback):
    """Kills a trial's actor (as ``ray.kill`` would) at its second report."""

    def __init__(self) -> None:
        self.kills: list[asyncio.Task[Any]] = []

    def on_trial_result(self, iteration: int, trials: Any, trial: Any, result: Any,
                        **info: Any) -> None:
        if result["i"] == 1 and not self.kills:
            name = f"killed_once_{trial.trial_id}"  # the trial's actor, by its default name
            self.kills.append(asyncio.ensure_future(self._kill(name)))

    async def _kill(self, name: str) -> Any:
        return await (await actorrt.get_actor(name)).kill()


@pytest.mark.actorrt(num_cpus=2)
async def test_a_trial_whose_actor_was_killed_is_retried_by_a_new_actor(
    actorrt_runtime: actorrt.Runtime, tmp_path: Any
) -> None:
    """A killed actor fails every later call: the retry must not go to it again."""
    killer = KillsTheFirstAttempt()
    grid = await tune.Tuner(
        killed_once,
        run_config=tune.RunConfig(
            storage_path=str(tmp_path), verbose=0, callbacks=[killer],
            failure_config=tune.FailureConfig(max_failures=2),
        ),
    ).fit_async()
    [result] = grid
    assert result.error is None, result.error
    [kill] = killer.kills
    assert (await kill).reason == actorrt.DeathReason.KILLED
    assert result.metrics["i"] == 3
    text = read(os.path.join(result.path, "result.json"))
    lines = [json.loads(line) for line in text.splitlines()]
    assert [line["i"] for line in lines] == [0, 1, 2, 3]
    assert lines[1]["pid"] != lines[2]["pid"]  # the retry ran in another process
    assert actorrt.available_resources()["CPU"] == 2


class Counter(tune.Trainable):
    """Counts; checkpoints every 2 steps; fails once at step 3 (marked by a file)."""

    def setup(self, config: dict[str, Any]) -> None:
        self.total = 0
        self.restored_from: Any = None

    def step(self) -> dict[str, Any]:
        self.total += 1
        marker = os.path.join(self.trial_dir, "failed-once")
        if self.total == 3 and not os.path.exists(marker):
            open(marker, "w").close()
            raise RuntimeError("flaky step")
        return {"total": self.total, "restored": self.restored_from is not None}

    def save_checkpoint(self, checkpoint_dir: str) -> dict[str, Any]:
        return {"total": self.total}

    def load_checkpoint(self, checkpoint: dict[str, Any] | str) -> None:
        assert isinstance(checkpoint, dict)
        self.total = checkpoint["total"]
        self.restored_from = checkpoint


@pytest.mark.actorrt(num_cpus=2)
async def test_a_class_trainable_checkpoints_and_resumes(
    actorrt_runtime: actorrt.Runtime, tmp_path: Any
) -> None:
    grid = await tune.Tuner(
        Counter,
        run_config=tune.RunConfig(
            storage_path=str(tmp_path),
            verbose=0,
            stop={"training_iteration": 5},
            failure_config=tune.FailureConfig(max_failures=1),
            checkpoint_config=tune.CheckpointConfig(checkpoint_frequency=2),
        ),
    ).fit_async()
    [result] = grid
    assert result.error is None, result.error
    assert result.metrics["training_iteration"] == 5
    assert result.metrics["total"] == 5 and result.metrics["restored"] is True
    assert result.checkpoint is not None
