"""Bounded waits are no wait edges, however they are bounded (a timeout option, spawn_timeout,
asyncio.wait_for): they end with their own timeout, never with a deadlock error first. And a
spawn still waiting for resources when its parent ends never starts."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from conftest import eventually

import actorrt


@actorrt.actor
class Worker:
    def ping(self) -> str:
        return "pong"


@actorrt.actor
class Holder:
    """Holds the only CPU (spawned with num_cpus=1) and then wants more, boundedly."""

    def __init__(self) -> None:
        self.pending: Any = None

    async def spawn_bounded(self, how: str) -> str:
        more = Worker.options(num_cpus=1)
        try:
            if how == "spawn_timeout":
                await more.options(spawn_timeout=1.0).spawn()
            else:
                await asyncio.wait_for(more.spawn(), 1.0)
        except TimeoutError as exc:
            return f"timeout: {exc}"
        return "started"

    async def spawn_in_background(self) -> None:
        self.pending = asyncio.ensure_future(Worker.options(num_cpus=1).spawn())

    async def spawn_first(self) -> None:
        self.first = await Worker.options(num_cpus=1).spawn()


@actorrt.actor
class Peer:
    def __init__(self) -> None:
        self.other: Any = None

    def meet(self, other: Any) -> None:
        self.other = other

    async def ping(self) -> str:
        return "pong"

    async def ask_other(self, how: str) -> str:
        try:
            if how == "option":
                return str(await self.other.ask_back.options(timeout=1.0)())
            return str(await asyncio.wait_for(self.other.ask_back(), 1.0))
        except TimeoutError as exc:
            return f"timeout: {type(exc).__name__}"

    async def ask_back(self) -> str:
        return str(await self.other.ping())


@pytest.mark.parametrize("how", ["spawn_timeout", "wait_for"])
@pytest.mark.parametrize("process", [False, True])
@pytest.mark.actorrt(num_cpus=1)
async def test_a_bounded_spawn_ends_with_its_own_timeout_not_a_deadlock_error(
    actorrt_runtime: actorrt.Runtime, how: str, process: bool
) -> None:
    # The holder has the only CPU and waits, boundedly, for another: unbounded, that would
    # be a deadlock reported after 150 ms; bounded, it is the caller's timeout, at 1 s.
    holder = await Holder.options(num_cpus=1, process=process).spawn()
    start = time.monotonic()
    outcome = await asyncio.wait_for(holder.spawn_bounded(how), 30)
    took = time.monotonic() - start
    assert outcome.startswith("timeout"), outcome
    assert took >= 0.9
    if how == "spawn_timeout":
        assert "spawn_timeout=1.0 s" in outcome and "withdrawn" in outcome
    assert actorrt.pending_requests() == []  # the request was withdrawn
    await holder.stop()
    assert actorrt.available_resources() == actorrt.cluster_resources()


@pytest.mark.parametrize("how", ["option", "wait_for"])
async def test_a_bounded_ask_in_a_cycle_ends_with_its_own_timeout(
    actorrt_runtime: actorrt.Runtime, how: str
) -> None:
    a = await Peer.spawn()
    b = await Peer.spawn()
    await a.meet(b)
    await b.meet(a)
    start = time.monotonic()
    assert (await asyncio.wait_for(a.ask_other(how), 30)).startswith("timeout")
    assert time.monotonic() - start >= 0.9
    # b's own ask to a was answered once a's bounded wait ended.
    await a.stop()
    await b.stop()


@pytest.mark.parametrize("bad", [0, -1, float("nan"), float("inf"), "1", True])
def test_spawn_timeout_refuses_bad_values(bad: object) -> None:
    with pytest.raises((TypeError, ValueError), match="spawn_timeout"):
        Worker.options(spawn_timeout=bad)


async def test_a_spawn_timeout_that_is_met_starts_the_actor(
    actorrt_runtime: actorrt.Runtime,
) -> None:
    ref = await Worker.options(spawn_timeout=30, num_cpus=1).spawn()
    assert await ref.ping() == "pong"
    await ref.stop()


@pytest.mark.parametrize("process", [False, True])
@pytest.mark.actorrt(num_cpus=1, resources={"token": 1})
async def test_a_waiting_child_never_starts_after_its_parent_is_killed(
    actorrt_runtime: actorrt.Runtime, process: bool
) -> None:
    # The parent's first child holds the only CPU; its second waits for it. Killing the
    # parent ends the first child, freeing the CPU: the second must not take it and start.
    parent = await Holder.options(process=process).spawn()
    await parent.spawn_first()
    await parent.spawn_in_background()
    assert await eventually(lambda: len(actorrt.pending_requests()) == 1, within=20)
    done = asyncio.Event()

    async def churn() -> None:  # unrelated grants and asks go on meanwhile
        while not done.is_set():
            small = await Worker.options(resources={"token": 1}, process=False).spawn()
            assert await small.ping() == "pong"
            await small.stop()

    task = asyncio.ensure_future(churn())
    try:
        start = time.monotonic()
        await parent.kill()
        assert await eventually(lambda: actorrt.pending_requests() == [], within=10)
        took = time.monotonic() - start
    finally:
        done.set()
        await task
    assert took < 5.0, f"the waiting spawn was withdrawn after {took:.2f} s"
    # Nothing started, nothing is held.
    assert await eventually(
        lambda: actorrt.available_resources() == actorrt.cluster_resources(), within=10
    )
    assert actorrt_runtime.live_actors() == []  # neither the parent nor either child
