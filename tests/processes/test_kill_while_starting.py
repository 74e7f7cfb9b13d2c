"""A worker-process actor killed while it starts ends, whatever its start was doing.

A spawner that gives up (a cancelled spawn: a sweep withdrawing a waiting trial, a spawn
timeout) kills the half-started actor, and the kill cancels the task that starts it. On
Python 3.11 ``asyncio.wait_for`` returns a result that arrives together with a cancellation
and drops the cancellation (here: the new worker's connection), so the start can go on to
run the constructor. The actor must still end, and give back its grant, rather than wait for
an end nobody sends.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

import pytest

import actorrt
from actorrt._processes._process_actor import ProcessActor


@actorrt.actor(process=True, num_cpus=1)
class Slot:
    def pid(self) -> int:
        return os.getpid()


@pytest.mark.actorrt(num_cpus=2)
async def test_a_kill_whose_cancellation_the_start_lost_still_ends_the_actor(
    actorrt_runtime: actorrt.Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    started = ProcessActor._incarnate
    killed: list[Any] = []

    async def incarnate(self: ProcessActor) -> None:
        if not killed:
            killed.append(self)
            self.kill_nowait()  # the spawner gave up while the worker started...
            try:
                await asyncio.sleep(0.2)  # ...and the kill cancels this start's task,
            except asyncio.CancelledError:
                pass  # which the start lost, as wait_for on Python 3.11 can
        await started(self)

    monkeypatch.setattr(ProcessActor, "_incarnate", incarnate)
    try:
        await asyncio.wait_for(Slot.spawn(), 30)
    except actorrt.ActorDiedError:
        pass  # either is right: what matters is that the actor ends
    (cell,) = killed
    await asyncio.wait_for(asyncio.shield(cell.died), 10)
    # Its grant came back: both CPUs can be held again, by new actors.
    refs = await asyncio.wait_for(asyncio.gather(Slot.spawn(), Slot.spawn()), 30)
    assert len({await r.pid() for r in refs}) == 2
