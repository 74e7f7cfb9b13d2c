"""Waits that belong to an actor's background tasks do not block the actor.

An actor whose method starts a task (``asyncio.create_task``) goes on serving its mailbox
while that task awaits an ask. The task's wait is not the actor's: when the actor it asks
calls back, the actor answers, so this is no deadlock, and nothing may report one. The same
actor awaiting that ask in the method itself is a real cycle, and is still reported.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import actorrt


@actorrt.actor
class Starter:
    """Starts its work in a background task and keeps serving."""

    def __init__(self, done: asyncio.Future[str]) -> None:
        self.done = done
        self.tasks: set[asyncio.Task[None]] = set()

    async def start(self, peer: Any) -> None:
        task = asyncio.create_task(self._work(peer))
        self.tasks.add(task)  # owned: awaited by stop()

    async def _work(self, peer: Any) -> None:
        try:
            self.done.set_result(await peer.call_back())
        except BaseException as exc:
            self.done.set_exception(exc)

    async def ask_in_method(self, peer: Any) -> str:
        result: str = await peer.call_back()
        return result

    async def ping(self, hold: asyncio.Event) -> str:
        await hold.wait()  # answers only once the background task's ask is surely pending
        return "pong"

    async def on_stop(self) -> None:
        await asyncio.gather(*self.tasks, return_exceptions=True)


@actorrt.actor
class Peer:
    """Asks back the actor that asked it."""

    def __init__(self, hold: asyncio.Event) -> None:
        self.caller: Any = None
        self.hold = hold

    def set_caller(self, caller: Any) -> None:
        self.caller = caller

    async def call_back(self) -> str:
        answer = self.caller.ping(self.hold)
        asyncio.get_running_loop().call_later(0.5, self.hold.set)
        result: str = await answer
        return result


@pytest.mark.asyncio
async def test_a_background_task_waiting_on_an_ask_does_not_block_its_actor() -> None:
    async with actorrt.Runtime(num_cpus=2):
        done: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        hold = asyncio.Event()
        starter = await Starter.spawn(done)
        peer = await Peer.spawn(hold)
        await peer.set_caller(starter)
        await starter.start(peer)
        # The deadlock check runs 150 ms after a new wait edge; hold keeps both asks
        # pending for 500 ms, past it.
        assert await asyncio.wait_for(done, 30) == "pong"


@pytest.mark.asyncio
async def test_the_same_wait_in_the_method_itself_is_still_a_cycle() -> None:
    async with actorrt.Runtime(num_cpus=2):
        done: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        hold = asyncio.Event()
        starter = await Starter.spawn(done)
        peer = await Peer.spawn(hold)
        await peer.set_caller(starter)
        with pytest.raises(actorrt.DeadlockError, match="cycle"):
            await asyncio.wait_for(starter.ask_in_method(peer), 30)
