"""Waits from the threads of an actor, and an actor's wait on its own ask.

A thread that a worker-process actor's code starts carries no context, yet what it asks for
belongs to that actor: the wait is the actor's wait edge (a deadlock is reported), and a
spawn it left waiting is withdrawn when the actor ends. An actor that serves several
messages at once may await its own ask: that is no wait on another holder, and nothing
internal is logged about it.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from typing import Any

import pytest
from conftest import eventually

import actorrt
from benchmarks.deadlock import Gate


@actorrt.actor
class Worker:
    def ping(self) -> str:
        return "pong"


def in_a_thread(body: Any) -> Any:
    """Run ``body`` on a new ``threading.Thread`` (no context of its starter) and return
    what it returned or raised."""
    out: dict[str, Any] = {}

    def run() -> None:
        try:
            out["value"] = body()
        except BaseException as exc:  # handed back to the caller
            out["value"] = exc

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    return out["value"]


@actorrt.actor(num_cpus=1)
class Starter:
    """A worker-process actor whose code starts a thread that spawns a worker."""

    def __init__(self) -> None:
        self.started = threading.Event()

    def spawn_in_thread(self) -> str:
        def body() -> Any:
            self.started.set()
            return actorrt.get(Worker.options(num_cpus=1, placement="cluster").spawn())

        value = in_a_thread(body)
        if isinstance(value, BaseException):
            raise value
        return "spawned"

    def context_in_thread(self) -> str | None:
        return str(in_a_thread(lambda: actorrt.get_context().actor_id))

    def has_started(self) -> bool:
        return self.started.is_set()


@pytest.mark.actorrt(num_cpus=1)
async def test_a_spawn_from_a_process_actors_own_thread_is_its_wait(
    actorrt_runtime: actorrt.Runtime,
) -> None:
    starter = await Starter.options(name="starter").spawn()
    assert await starter.context_in_thread() == starter.actor_id
    # It holds the only CPU and its thread waits for another: the actor's deadlock.
    with pytest.raises(actorrt.ResourceDeadlockError, match=r"Starter\(id=.*name='starter'"):
        await asyncio.wait_for(starter.spawn_in_thread(), 30)
    await starter.stop()
    assert actorrt.available_resources() == actorrt.cluster_resources()


@pytest.mark.actorrt(num_cpus=2)
async def test_a_spawn_from_a_killed_actors_thread_is_withdrawn(
    actorrt_runtime: actorrt.Runtime,
) -> None:
    hog = await Worker.options(num_cpus=1, process=False).spawn()  # not blocked: no deadlock
    starter = await Starter.options(max_concurrency=2).spawn()
    call = asyncio.ensure_future(starter.spawn_in_thread())
    assert await eventually(lambda: len(actorrt.pending_requests()) == 1, within=30)
    assert await starter.has_started()
    await starter.kill()
    with pytest.raises(actorrt.ActorDiedError):
        await call
    # The thread's spawn went with its actor: the CPU the hog gives back stays free.
    assert await eventually(lambda: not actorrt.pending_requests(), within=30)
    await hog.stop()
    assert actorrt.available_resources() == actorrt.cluster_resources()


@actorrt.actor(max_concurrency=2)
class SelfAsker:
    """Serves two messages at once, so it may await its own ask."""

    def __init__(self) -> None:
        self.me: Any = None

    def meet(self, me: Any) -> None:
        self.me = me

    async def slow(self) -> str:
        await asyncio.sleep(0.2)  # lasts past the moment a wait becomes a wait edge
        return "slow"

    async def ask_self(self) -> str:
        return str(await self.me.slow())

    def ask_self_sync(self) -> str:
        return str(actorrt.get(self.me.slow()))


@pytest.mark.parametrize("kind", ["inline", "process", "process-sync"])
async def test_an_actor_awaiting_its_own_ask_logs_no_internal_error(
    actorrt_runtime: actorrt.Runtime, caplog: pytest.LogCaptureFixture, kind: str
) -> None:
    caplog.set_level(logging.WARNING)
    cls = SelfAsker if kind == "inline" else SelfAsker.options(process=True)
    me = await cls.spawn()
    await me.meet(me)
    call = me.ask_self_sync() if kind == "process-sync" else me.ask_self()
    assert await asyncio.wait_for(call, 30) == "slow"
    await me.stop()
    errors = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert not errors, [r.getMessage() for r in errors]


def modin_style(config: dict[str, Any]) -> None:
    """A trial that starts two undeclared workers from a thread of its own, as a library's
    worker pool does, and needs both; the second once every trial has its first (so the
    gang is started piecemeal, whatever the order the trials run in)."""
    from actorrt import tune

    def body() -> Any:
        first = actorrt.get(Worker.options(num_cpus=1, placement="cluster").spawn())
        actorrt.get(config["gate"].meet.options(timeout=120)())
        return [first, actorrt.get(Worker.options(num_cpus=1, placement="cluster").spawn())]

    workers = in_a_thread(body)
    tune.report({"workers": len(workers)})


@pytest.mark.timeout(240)
@pytest.mark.actorrt(num_cpus=4)
async def test_tune_workers_started_piecemeal_from_a_thread_are_warned_about(
    actorrt_runtime: actorrt.Runtime, caplog: pytest.LogCaptureFixture, tmp_path: Any
) -> None:
    # Two trials hold a CPU each; each started one of its two workers, which took the last
    # two CPUs: the second workers can never start. No proven deadlock (the started workers
    # are not blocked), but each trial's wait is warned about, naming the trial and the
    # worker it started.
    from actorrt import tune

    caplog.set_level(logging.INFO, logger="actorrt")
    actorrt_runtime.grants.broker._stall_after = 1.0  # seconds instead of 10
    gate = await Gate.spawn(2)

    def warnings() -> list[str]:
        return [r.getMessage() for r in caplog.records
                if r.levelno == logging.WARNING and "is stalled" in r.getMessage()]

    fit = asyncio.ensure_future(tune.Tuner(
        tune.with_resources(modin_style, {"cpu": 1}),
        param_space={"gate": gate, "i": tune.grid_search([0, 1])},
        run_config=tune.RunConfig(storage_path=str(tmp_path), verbose=0),
    ).fit_async())
    try:
        # Generous: on a loaded machine two trial processes may take long to start.
        assert await eventually(lambda: len(warnings()) >= 2, within=180), caplog.text[-2000:]
    finally:
        fit.cancel()
        await asyncio.gather(fit, return_exceptions=True)
    await gate.stop()
    for text in warnings()[:2]:
        assert "awaited by TrialDriver(" in text, text
        assert "of the actors it started, Worker(" in text, text
        assert "To fix:" in text, text
