"""Deadlock shapes that used to hang silently: ask cycles, synchronous waits, and an inline
helper inside a worker that spawns worker processes. Each is reported (an error to the waiter
that names who is involved, with class and name), or refused at once; and the report comes
while unrelated asks and grants keep running."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest

import actorrt
from benchmarks.deadlock import Peer

# A report arrives within about 150 ms on an idle machine (benchmarks/deadlock.py
# measures it); tests run on a shared, loaded machine, so they allow more.
REPORT_BOUND_S = 5.0


ProcessPeer = Peer.options(process=True)


@actorrt.actor
class Worker:
    def ping(self) -> str:
        return "pong"


@actorrt.actor
class Helper:
    """An inline actor (no resources) that starts workers: a trial's helper."""

    def __init__(self, placement: str = "auto") -> None:
        self.placement = placement
        self.workers: list[Any] = []

    async def start(self, n: int) -> list[str]:
        for _ in range(n):
            worker = await Worker.options(num_cpus=1, placement=self.placement).spawn()
            self.workers.append(worker)
        return [await w.ping() for w in self.workers]

    def refs(self) -> list[Any]:
        return list(self.workers)


@actorrt.actor(process=True)
class Trial:
    """A worker-process actor that drives an inline helper, asynchronously or not."""

    def __init__(self) -> None:
        self.helper: Any = None

    async def run_helper(self, n: int, placement: str = "auto") -> list[str]:
        self.helper = await Helper.options(name="the-helper").spawn(placement)
        return list(await self.helper.start(n))

    def run_helper_sync(self, n: int, placement: str = "auto") -> list[str]:
        self.helper = actorrt.get(Helper.options(name="the-helper").spawn(placement))
        return list(actorrt.get(self.helper.start(n)))

    async def workers(self) -> list[Any]:
        return list(await self.helper.refs())

    def ready_sync(self) -> str:
        pg = actorrt.placement_group([{"CPU": 1}])
        actorrt.get(pg.ready())
        return "ready"


@asynccontextmanager
async def unrelated_traffic() -> AsyncIterator[list[int]]:
    """A steady stream of asks and grants elsewhere while the test waits for its report."""
    counts = [0]
    echo = await Peer.spawn()
    done = asyncio.Event()

    async def churn() -> None:
        while not done.is_set():
            assert await echo.ping() == "pong"
            small = await Worker.options(resources={"token": 1}, process=False).spawn()
            await small.stop()
            counts[0] += 1
            await asyncio.sleep(0.005)

    task = asyncio.ensure_future(churn())
    try:
        yield counts
    finally:
        done.set()
        await task  # ends after a whole round: nothing of it is left running
        await echo.stop()


# -- ask cycles ----------------------------------------------------------------------------


async def test_an_inline_actor_awaiting_its_own_ask_is_refused_at_once(
    actorrt_runtime: actorrt.Runtime,
) -> None:
    me = await Peer.options(name="me").spawn()
    await me.meet(me)
    with pytest.raises(actorrt.DeadlockError, match=r"Peer\(id=.* name='me'\) awaits its own"):
        await asyncio.wait_for(me.ask_back(), 10)
    assert await me.ping() == "pong"  # it goes on
    await me.stop()


async def test_a_process_actor_asking_itself_is_refused_at_once(
    actorrt_runtime: actorrt.Runtime,
) -> None:
    me = await ProcessPeer.options(name="me").spawn()
    await me.meet(me)
    with pytest.raises(actorrt.DeadlockError, match="awaits its own answer to ping"):
        await asyncio.wait_for(me.ask_back(), 10)
    with pytest.raises(actorrt.DeadlockError, match="awaits its own answer to ping"):
        await asyncio.wait_for(me.ask_back_sync(), 10)  # actorrt.get from a sync method
    assert await me.ping() == "pong"
    await me.stop()


@actorrt.actor
class Gatherer:
    def __init__(self) -> None:
        self.other: Any = None

    def meet(self, other: Any) -> None:
        self.other = other

    def ping(self) -> str:
        return "pong"

    async def gather_other(self) -> list[str]:
        return list(await asyncio.gather(self.other.ping(), self.other.gather_other()))


async def test_asks_gathered_inside_actors_still_report_a_cycle(
    actorrt_runtime: actorrt.Runtime,
) -> None:
    # An inline handle is a future to asyncio outside actors; inside one, asyncio.gather
    # must still record the wait, or these shapes wait forever.
    alone = await Gatherer.options(name="alone").spawn()
    await alone.meet(alone)  # gathers an ask of itself
    with pytest.raises(actorrt.DeadlockError, match="awaits its own answer"):
        await asyncio.wait_for(alone.gather_other(), 30)
    a = await Gatherer.options(name="alpha").spawn()
    b = await Gatherer.options(name="beta").spawn()
    await a.meet(b)
    await b.meet(a)
    with pytest.raises(actorrt.DeadlockError, match="cycle"):
        await asyncio.wait_for(a.gather_other(), 30)
    await alone.stop()  # its queued self-ask fails too, as it runs


@pytest.mark.parametrize("kind", ["inline", "process", "process-sync"])
@pytest.mark.actorrt(resources={"token": 1})
async def test_an_ask_cycle_is_reported_to_the_asker_under_load(
    actorrt_runtime: actorrt.Runtime, kind: str
) -> None:
    cls = Peer if kind == "inline" else ProcessPeer
    a = await cls.options(name="alpha").spawn()
    b = await cls.options(name="beta").spawn()
    await a.meet(b)
    await b.meet(a)
    async with unrelated_traffic() as counts:
        start = time.monotonic()
        call = a.ask_other_sync() if kind == "process-sync" else a.ask_other()
        with pytest.raises(actorrt.DeadlockError) as caught:
            await asyncio.wait_for(call, 30)
        took = time.monotonic() - start
    text = str(caught.value)
    assert "ask deadlock" in text and "cycle" in text
    assert "Peer(id=" in text and "name='alpha'" in text and "name='beta'" in text
    assert took < REPORT_BOUND_S, f"reported after {took:.2f} s"
    assert counts[0] > 0, "the unrelated traffic must have kept running"
    # Both actors go on once the cycle is broken.
    assert await a.ping() == "pong" and await b.ping() == "pong"
    await a.stop()
    await b.stop()


async def test_a_cycle_through_an_actor_that_serves_concurrently_is_no_deadlock(
    actorrt_runtime: actorrt.Runtime,
) -> None:
    a = await Peer.spawn()
    b = await Peer.options(max_concurrency=4).spawn()
    await a.meet(b)
    await b.meet(a)
    # b answers a's ping while it waits: a -> b -> a -> b.ping() ends.
    assert await asyncio.wait_for(b.ask_other(), 10) == "pong"
    await a.stop()
    await b.stop()


@pytest.mark.parametrize("kind", ["inline", "process"])
@pytest.mark.parametrize("calls", [15, 16])
async def test_concurrent_ask_cycles_that_fill_every_slot_are_reported(
    actorrt_runtime: actorrt.Runtime, calls: int, kind: str
) -> None:
    # Each of `calls` asks to alpha takes one of its 16 slots and asks beta, whose message
    # asks alpha back. With 15, alpha has a slot left for the asks back: all answer. With 16,
    # alpha's every slot waits on beta and beta's every slot on alpha: none can ever end.
    cls = Peer if kind == "inline" else ProcessPeer
    a = await cls.options(max_concurrency=16, name="alpha").spawn()
    b = await cls.options(max_concurrency=16, name="beta").spawn()
    await a.meet(b)
    await b.meet(a)
    results = await asyncio.wait_for(
        asyncio.gather(*(a.ask_other() for _ in range(calls)), return_exceptions=True), 60
    )
    if calls < 16:
        assert results == ["pong"] * calls
    else:
        errors = [r for r in results if isinstance(r, actorrt.DeadlockError)]
        assert errors and all(r == "pong" or isinstance(r, actorrt.DeadlockError)
                              for r in results), results
        text = str(errors[0])
        assert "ask deadlock" in text and "name='alpha'" in text and "name='beta'" in text
    assert await a.ping() == "pong" and await b.ping() == "pong"
    await a.stop()
    await b.stop()


# -- synchronous waits ---------------------------------------------------------------------


@pytest.mark.actorrt(num_cpus=1, resources={"token": 1})
async def test_a_sync_wait_on_an_ask_is_a_wait_edge(actorrt_runtime: actorrt.Runtime) -> None:
    # The trial holds the only CPU and waits, from a sync method with actorrt.get, on its
    # helper, which waits for a CPU: only the synchronous wait's edge makes it a deadlock.
    trial = await Trial.options(num_cpus=1).spawn()
    async with unrelated_traffic():
        start = time.monotonic()
        with pytest.raises(actorrt.ResourceDeadlockError) as caught:
            await asyncio.wait_for(trial.run_helper_sync(1, "cluster"), 30)
        took = time.monotonic() - start
    text = str(caught.value)
    assert "Helper(id=" in text and "name='the-helper'" in text
    assert "Trial(id=" in text
    assert took < REPORT_BOUND_S, f"reported after {took:.2f} s"
    await trial.stop()
    assert actorrt.available_resources() == actorrt.cluster_resources()


@pytest.mark.actorrt(num_cpus=1, resources={"token": 1})
async def test_pg_ready_waited_synchronously_is_a_wait_edge(
    actorrt_runtime: actorrt.Runtime,
) -> None:
    trial = await Trial.options(num_cpus=1, name="sync-ready").spawn()
    async with unrelated_traffic():
        with pytest.raises(actorrt.ResourceDeadlockError, match="name='sync-ready'"):
            await asyncio.wait_for(trial.ready_sync(), 30)
    await trial.stop()
    assert actorrt.available_resources() == actorrt.cluster_resources()


# -- an inline helper inside a worker ------------------------------------------------------


@pytest.mark.actorrt(num_cpus=2)
async def test_a_helper_inside_a_trial_spawns_into_the_trials_group(
    actorrt_runtime: actorrt.Runtime,
) -> None:
    # Two CPUs, both reserved by the trial's group: the helper's worker fits only if it is
    # captured into the group (bundle 1), as a worker the trial spawned itself would be.
    trial = await Trial.options(placement_group=[{"CPU": 1}, {"CPU": 1}]).spawn()
    assert await asyncio.wait_for(trial.run_helper(1), 30) == ["pong"]
    (worker,) = await trial.workers()
    await trial.stop()
    # The helper's worker ended with the trial, and gave its CPU back.
    with pytest.raises(actorrt.ActorDiedError):
        await worker.ping()
    assert actorrt.available_resources() == actorrt.cluster_resources()


@pytest.mark.actorrt(num_cpus=2, resources={"token": 1})
async def test_a_helper_inside_a_trial_waiting_outside_the_group_is_a_deadlock(
    actorrt_runtime: actorrt.Runtime,
) -> None:
    trial = await Trial.options(placement_group=[{"CPU": 1}, {"CPU": 1}]).spawn()
    async with unrelated_traffic():
        start = time.monotonic()
        with pytest.raises(actorrt.ResourceDeadlockError) as caught:
            await asyncio.wait_for(trial.run_helper(1, "cluster"), 30)
        took = time.monotonic() - start
    text = str(caught.value)
    assert "Helper(id=" in text and "name='the-helper'" in text and "Trial(id=" in text
    assert took < REPORT_BOUND_S, f"reported after {took:.2f} s"
    await trial.stop()
    assert actorrt.available_resources() == actorrt.cluster_resources()


# -- through Tune ---------------------------------------------------------------------------


def helper_trainable(config: dict[str, Any]) -> None:
    """A function trainable that starts its workers through an inline helper."""
    from actorrt import tune

    helper = actorrt.get(Helper.spawn(config["placement"]))
    pongs = actorrt.get(helper.start(config["workers"]))
    tune.report({"pongs": len(pongs)})


@pytest.mark.actorrt(num_cpus=3)
async def test_tune_a_declared_gang_works_through_a_helper_and_ends_with_the_trial(
    actorrt_runtime: actorrt.Runtime, tmp_path: Any
) -> None:
    from actorrt import tune

    grid = await tune.Tuner(
        tune.with_resources(
            helper_trainable, tune.PlacementGroupFactory([{"CPU": 1}, {"CPU": 1}, {"CPU": 1}])
        ),
        param_space={"placement": "auto", "workers": 2},
        run_config=tune.RunConfig(storage_path=str(tmp_path), verbose=0),
    ).fit_async()
    assert not grid.errors, grid.errors
    assert grid[0].metrics["pongs"] == 2
    # No orphan worker keeps a CPU once fit() returns.
    assert actorrt.available_resources() == actorrt.cluster_resources()


@pytest.mark.actorrt(num_cpus=1)
async def test_tune_an_undeclared_worker_through_a_helper_is_a_deadlock_error(
    actorrt_runtime: actorrt.Runtime, tmp_path: Any
) -> None:
    from actorrt import tune

    grid = await asyncio.wait_for(
        tune.Tuner(
            tune.with_resources(helper_trainable, {"cpu": 1}),
            param_space={"placement": "cluster", "workers": 1},
            run_config=tune.RunConfig(storage_path=str(tmp_path), verbose=0),
        ).fit_async(),
        60,
    )
    (error,) = grid.errors
    assert isinstance(error, actorrt.ResourceDeadlockError)
    assert "Helper(id=" in str(error)
    assert actorrt.available_resources() == actorrt.cluster_resources()
