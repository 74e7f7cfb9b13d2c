"""Regression tests for faults found in review: each once went wrong."""

import asyncio
import os
import signal
import threading
import time

import pytest

import actorrt


@actorrt.actor(process=True, mailbox_size=4)
class Eater:
    def __init__(self) -> None:
        self.eaten = 0

    def eat(self, data: bytes) -> None:
        time.sleep(0.005)
        self.eaten += 1

    def count(self) -> int:
        return self.eaten

    def pid(self) -> int:
        return os.getpid()

    def nap(self, seconds: float) -> float:
        time.sleep(seconds)
        return seconds


@actorrt.actor(process=True)
class Feeder:
    async def flood(self, eater: actorrt.ActorRef[Eater], n: int) -> int:
        payload = b"x" * 200_000
        for _ in range(n):
            await eater.eat.tell_wait(payload)
        return n

    async def call_nap(
        self, eater: actorrt.ActorRef[Eater], entered: object
    ) -> tuple[object, ...]:
        try:
            return ("ok", await eater.nap(30))
        except actorrt.ActorDiedError as err:
            return (err.reason, err.signal)


async def test_tells_between_workers_keep_flow_control(actorrt_runtime: actorrt.Runtime) -> None:
    eater, feeder = await Eater.spawn(), await Feeder.spawn()
    assert await feeder.flood(eater, 60) == 60
    # Every tell arrives, none dropped on the way: a later ask queues behind them all.
    assert await eater.count() == 60


async def test_a_relayed_ask_says_how_the_far_process_died(
    actorrt_runtime: actorrt.Runtime,
) -> None:
    eater, feeder = await Eater.spawn(), await Feeder.spawn()
    pid = await eater.pid()
    answer = feeder.call_nap(eater, None)
    await asyncio.sleep(0.5)  # the nap is running (its process can only be killed from outside)
    os.kill(pid, signal.SIGKILL)
    assert await answer == ("process died", signal.SIGKILL)


async def test_every_ask_is_answered_when_a_concurrent_actor_crashes(
    actorrt_runtime: actorrt.Runtime,
) -> None:
    gate = asyncio.Event()

    @actorrt.actor(max_concurrency=2, max_restarts=2)
    class Busy:
        async def slow(self) -> str:
            await gate.wait()
            return "slow"

        def boom(self) -> None:
            raise ValueError("boom")

        def quick(self) -> str:
            return "quick"

    ref = await Busy.spawn()
    ref.boom.tell()
    cut_short, queued = ref.slow(), ref.quick()
    for handle in (cut_short, queued):
        with pytest.raises(actorrt.ActorDiedError, match="boom"):
            await asyncio.wait_for(handle, 5)
    assert await ref.quick() == "quick"  # restarted


async def test_stop_during_a_restart_runs_what_was_sent_first(
    actorrt_runtime: actorrt.Runtime,
) -> None:
    ref = await Eater.options(max_restarts=1).spawn()
    pid = await ref.pid()
    napping = ref.nap(30)
    os.kill(pid, signal.SIGKILL)
    with pytest.raises(actorrt.ActorDiedError):
        await napping  # the death is known: the actor is now restarting
    queued = ref.count()  # sent before the stop, held while the actor restarts
    died = await ref.stop()
    assert died.reason == "stopped"
    assert await queued == 0  # served by the new instance before it stopped


async def test_kill_ends_the_children_of_a_process_actor_at_once(
    actorrt_runtime: actorrt.Runtime,
) -> None:
    @actorrt.actor(process=True)
    class Parent:
        async def adopt(self) -> actorrt.ActorRef[Eater]:
            child = await Eater.spawn()
            child.nap.tell(4.0)
            return child

    parent = await Parent.spawn()
    child = await parent.adopt()
    started = time.monotonic()
    await parent.kill()
    assert (await child.wait_stopped()).reason == "parent ended"
    assert time.monotonic() - started < 3.0  # killed, not drained through the 4 s nap


def test_tell_wait_from_a_script_keeps_call_order() -> None:
    @actorrt.actor
    class Log:
        def __init__(self) -> None:
            self.items: list[int] = []

        def add(self, item: int) -> None:
            self.items.append(item)

        def all(self) -> list[int]:
            return self.items

    actorrt.init()
    try:
        log = actorrt.get(Log.spawn())
        waiting = log.add.tell_wait(1)  # sent now, though awaited later
        log.add.tell(2)
        actorrt.get(waiting)
        assert actorrt.get(log.all()) == [1, 2]
        assert threading.current_thread() is threading.main_thread()
    finally:
        actorrt.shutdown()
