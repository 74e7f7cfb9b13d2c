"""Remote functions (@actorrt.task): calls in worker processes, with resources, retries,
capture by the caller's placement group, and the deadlock rule, through real processes."""

from __future__ import annotations

import asyncio
import fcntl
import json
import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import eventually, wait_until

import actorrt
from actorrt import tune


def all_given_back() -> bool:
    """Whether every grant is back (a finished call's runner stays warm, idle, for a moment
    after its answer: its grant comes back when that passes)."""
    return wait_until(lambda: actorrt.available_resources() == actorrt.cluster_resources())


@actorrt.task
def square(x: int) -> int:
    return x * x


@actorrt.task(num_cpus=0.5)
async def pid_of_worker() -> int:
    await asyncio.sleep(0)
    return os.getpid()


@actorrt.task
def grant() -> dict[str, float]:
    return actorrt.get_context().assigned_resources


@actorrt.task
def fails(x: int) -> int:
    raise KeyError(f"no {x}")


@actorrt.task
def sum_of_squares(n: int) -> int:
    """A task that submits tasks and waits for them (from a worker's thread)."""
    return sum(actorrt.get([square(i) for i in range(n)]))


@actorrt.task(max_retries=2)
def dies_first(marker: str) -> str:
    """SIGKILLs its own worker on the first run; the retry finds the marker and answers."""
    path = Path(marker)
    if not path.exists():
        path.write_text(str(os.getpid()))
        os.kill(os.getpid(), signal.SIGKILL)
    return f"second run, first was {path.read_text()}"


def test_calls_send_at_once_and_run_in_worker_processes(facade) -> None:
    handles = [square(i) for i in range(10)]
    assert all(isinstance(h, actorrt.AskHandle) for h in handles)
    assert actorrt.get(handles) == [i * i for i in range(10)]
    assert actorrt.get(square.remote(7)) == 49  # Ray's spelling
    ready, rest = actorrt.wait([square(2), square(3)], num_returns=2, timeout=60)
    assert len(ready) == 2 and rest == []
    assert actorrt.get(pid_of_worker()) != os.getpid()
    assert actorrt.get(grant()) == {"CPU": 1.0}
    assert actorrt.get(grant.options(num_cpus=2)()) == {"CPU": 2.0}
    with pytest.raises(KeyError, match="no 3"):
        actorrt.get(fails(3))
    assert all_given_back()


@actorrt.task
def runner_id(_: int) -> str:
    return actorrt.get_context().get_actor_id()


def test_calls_in_flight_share_their_runners(facade) -> None:
    # 4 CPUs: four runners at most; each takes the next waiting call when it is done.
    ids = actorrt.get([runner_id(i) for i in range(60)])
    assert 1 <= len(set(ids)) <= 4
    assert all_given_back()
    # Alone, one after the other: the runner of a call is kept warm for the next.
    first, second = actorrt.get(runner_id(0)), actorrt.get(runner_id(1))
    assert first == second
    assert all_given_back()  # and stopped once idle for a moment
    assert actorrt.get(runner_id(2)) != second


def test_an_idle_runner_gives_its_grant_back_to_a_waiting_request(
    facade, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Runners stay warm for a minute here, so only a request's wait can make them go sooner.
    monkeypatch.setattr("actorrt._runtime._task_lanes.IDLE_SECONDS", 60.0)
    # 4 CPUs, two of them held by two warm runners (two calls at once: two runners).
    assert len(set(actorrt.get([runner_id(0), runner_id(1)]))) == 2
    # A call needing 3 CPUs waits: the idle runners give theirs back at once.
    started = time.monotonic()
    assert actorrt.get(grant.options(num_cpus=3)(), timeout=30) == {"CPU": 3.0}
    # An actor's spawn that waits for what idle runners hold gets it at once too.
    hog = actorrt.get(Hog.options(num_cpus=4).spawn(), timeout=30)
    assert time.monotonic() - started < 10
    assert actorrt.get(hog.ping()) == "pong"
    actorrt.get(hog.stop())
    assert actorrt.available_resources() == actorrt.cluster_resources()


@actorrt.actor
class Hog:
    def ping(self) -> str:
        return "pong"


def test_tasks_submit_tasks(facade) -> None:
    assert actorrt.get(sum_of_squares(6)) == sum(i * i for i in range(6))


def test_a_task_is_run_again_after_its_worker_is_sigkilled(facade, tmp_path: Path) -> None:
    marker = tmp_path / "first-run"
    answer = actorrt.get(dies_first(str(marker)), timeout=120)
    assert answer == f"second run, first was {marker.read_text()}"
    marker.unlink()
    with pytest.raises(actorrt.ActorDiedError) as died:
        actorrt.get(dies_first.options(max_retries=0)(str(marker)), timeout=120)
    assert died.value.reason == "process died"
    assert all_given_back()


async def test_async_calls_and_cancel(actorrt_runtime) -> None:
    assert await square(5) == 25
    done, _ = await asyncio.wait([square(1), square(2)])
    assert sorted(h.result() for h in done) == [1, 4]
    # Asks for more than the cluster has free for now: cancelling withdraws the request.
    held = [grant.options(num_cpus=1)() for _ in range(40)]
    for handle in held:
        handle.cancel()
    for handle in held:
        with pytest.raises(asyncio.CancelledError):
            await handle


def test_bad_options_fail_at_the_call() -> None:
    with pytest.raises(TypeError, match="unknown task option.*num_returns.*allowed: num_cpus"):
        square.options(num_returns=2)
    with pytest.raises(ValueError, match="max_retries must be -1 .* got -2"):
        actorrt.task(max_retries=-2)
    with pytest.raises(TypeError, match="classes are actors"):
        actorrt.task(type("Cls", (), {}))
    with pytest.raises(TypeError, match="takes a function"):
        actorrt.task(print)
    with pytest.raises(ValueError, match="num_cpus"):
        square.options(num_cpus=-1)
    with pytest.raises(actorrt.NoRuntimeError):
        square(1)


# A trial fanning out inside its gang, next to another trial doing the same.

@actorrt.task
def counted(path: str, x: int) -> int:
    """Counts the calls of one trial running at once in ``path`` (a file lock)."""
    _bump(path, +1)
    deadline = time.perf_counter() + 0.005
    while time.perf_counter() < deadline:  # some CPU work
        pass
    _bump(path, -1)
    return x


def _bump(path: str, step: int) -> None:
    with open(path, "a+") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        f.seek(0)
        state = json.loads(f.read() or '{"now": 0, "most": 0}')
        state["now"] += step
        state["most"] = max(state["most"], state["now"])
        f.seek(0)
        f.truncate()
        f.write(json.dumps(state))


def fan_out(config: dict[str, Any]) -> None:
    path = os.path.join(config["dir"], f"trial-{config['i']}.json")
    results = actorrt.get([counted(path, x) for x in range(100)])
    tune.report({"ok": results == list(range(100)), "path": path})


@pytest.mark.actorrt(num_cpus=6)
async def test_a_trial_fans_out_100_tasks_inside_its_declared_gang(
    actorrt_runtime: actorrt.Runtime, tmp_path: Path
) -> None:
    gang = tune.PlacementGroupFactory([{"CPU": 1}, {"CPU": 1}, {"CPU": 1}])
    grid = await tune.Tuner(
        tune.with_resources(fan_out, gang),
        param_space={"dir": str(tmp_path), "i": tune.grid_search([0, 1])},
        run_config=tune.RunConfig(storage_path=str(tmp_path / "runs"), verbose=0),
    ).fit_async()
    assert not grid.errors, grid.errors
    for result in grid:
        assert result.metrics["ok"]
        state = json.loads(Path(result.metrics["path"]).read_text())  # noqa: ASYNC240 - tiny
        assert state["now"] == 0 and 1 <= state["most"] <= 2  # the two worker bundles
    assert await eventually(
        lambda: actorrt.available_resources() == actorrt.cluster_resources()
    )


def fan_out_undeclared(config: dict[str, Any]) -> None:
    tune.report({"sum": sum(actorrt.get([square(i) for i in range(4)]))})


def fan_out_outside(config: dict[str, Any]) -> None:
    gate = config["gate"]
    actorrt.get(gate.meet.options(timeout=30)())
    started = time.monotonic()
    try:
        actorrt.get(square.options(placement="cluster")(3))
    except actorrt.ResourceDeadlockError:
        tune.report({"deadlock_after": time.monotonic() - started})
        raise
    tune.report({"sum": 9})


@actorrt.actor(max_concurrency=10)
class Gate:
    def __init__(self, n: int) -> None:
        self.n, self.arrivals, self.opened = n, 0, asyncio.Event()

    async def meet(self) -> None:
        self.arrivals += 1
        if self.arrivals == self.n:
            self.opened.set()
        await self.opened.wait()


@pytest.mark.actorrt(num_cpus=2)
async def test_an_undeclared_fan_out_fails_instead_of_hanging(
    actorrt_runtime: actorrt.Runtime, tmp_path: Path
) -> None:
    # Inside the trial's one-bundle group the tasks can never fit: at once, saying so.
    grid = await tune.Tuner(
        fan_out_undeclared,
        run_config=tune.RunConfig(storage_path=str(tmp_path / "a"), verbose=0),
    ).fit_async()
    [error] = grid.errors
    assert isinstance(error, actorrt.InfeasibleResourceError)
    # Outside it, two trials each holding one of the two CPUs: the deadlock is reported.
    gate = await Gate.spawn(2)
    grid = await tune.Tuner(
        fan_out_outside,
        param_space={"gate": gate, "i": tune.grid_search([0, 1])},
        run_config=tune.RunConfig(storage_path=str(tmp_path / "b"), verbose=0),
    ).fit_async()
    assert len(grid.errors) == 1 and grid.num_terminated == 1
    assert isinstance(grid.errors[0], actorrt.ResourceDeadlockError)
    failed = next(r for r in grid if r.error is not None)
    assert failed.metrics["deadlock_after"] < 1.0
    assert await eventually(
        lambda: actorrt.available_resources() == actorrt.cluster_resources()
    )
