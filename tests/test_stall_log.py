"""A stalled request is a warning only when an actor is stuck on it; queued spawns of the
driver program (a sweep's waiting trials) are ordinary queueing, logged at info."""

import asyncio
import logging

import pytest
from conftest import eventually

import actorrt


@actorrt.actor
class Hog:
    def ping(self) -> str:
        return "held"


@actorrt.actor
class Spawner:
    async def spawn_hog(self) -> None:
        await Hog.options(num_cpus=1, process=False).spawn()


def stall_records(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if "is stalled" in r.getMessage()]


@pytest.mark.actorrt(num_cpus=1)
async def test_a_queued_spawn_of_the_driver_is_an_info_line(
    actorrt_runtime: actorrt.Runtime, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="actorrt")
    actorrt_runtime.grants.broker._stall_after = 0.2  # seconds instead of 10
    hog = await Hog.options(num_cpus=1, process=False).spawn()
    queued = asyncio.ensure_future(Hog.options(num_cpus=1, process=False).spawn())
    assert await eventually(lambda: len(stall_records(caplog)) >= 1, within=10)
    record = stall_records(caplog)[0]
    assert record.levelno == logging.INFO and "awaited by" not in record.getMessage()
    await hog.stop()  # the CPU frees: the queued spawn is served
    await (await queued).stop()


@pytest.mark.actorrt(num_cpus=1)
async def test_a_request_an_actor_is_stuck_on_is_a_warning_naming_it(
    actorrt_runtime: actorrt.Runtime, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="actorrt")
    actorrt_runtime.grants.broker._stall_after = 0.2
    hog = await Hog.options(num_cpus=1, process=False).spawn()
    spawner = await Spawner.options(name="spawner").spawn()
    inner = asyncio.ensure_future(spawner.spawn_hog())
    assert await eventually(lambda: len(stall_records(caplog)) >= 1, within=10)
    record = stall_records(caplog)[0]
    assert record.levelno == logging.WARNING
    assert "awaited by Spawner(" in record.getMessage() and "spawner" in record.getMessage()
    await hog.stop()
    await inner
    await spawner.stop()
