"""What the user is told: a trial whose undeclared workers started piecemeal gets a warning
that names it, what it holds, what it waits for and the fix (even while unrelated requests are
granted in the same queue); fix texts fit the shape (Tune's words only for Tune's trials); a
CPU-only request never gets a GPU hint."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

import pytest
from conftest import eventually

import actorrt


@actorrt.actor
class Worker:
    def ping(self) -> str:
        return "pong"


@actorrt.actor(process=True)
class Trial:
    """Starts its workers one at a time from the cluster queue, as a gang would need them."""

    def __init__(self) -> None:
        self.workers: list[Any] = []

    async def start_workers(self, n: int) -> int:
        for _ in range(n):
            worker = await Worker.options(num_cpus=1, placement="cluster").spawn()
            self.workers.append(worker)
        return len(self.workers)


def stalled(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [
        r for r in caplog.records if "is stalled" in r.getMessage() and r.levelno >= logging.WARNING
    ]


@pytest.mark.actorrt(num_cpus=3, resources={"token": 1})
async def test_workers_started_piecemeal_get_a_warning_naming_the_trial_and_the_fix(
    actorrt_runtime: actorrt.Runtime, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="actorrt")
    actorrt_runtime.grants.broker._stall_after = 0.5  # the 10 s default, shortened
    # Two trials hold a CPU each; the third CPU goes to one trial's first worker, which
    # then sits idle while its sibling waits: not a proven deadlock (the started worker is
    # not blocked), but it never ends.
    a = await Trial.options(num_cpus=1, name="trial-a").spawn()
    b = await Trial.options(num_cpus=1, name="trial-b").spawn()
    first = asyncio.ensure_future(a.start_workers(2))
    assert await eventually(lambda: len(actorrt.pending_requests()) == 1, within=20)
    second = asyncio.ensure_future(b.start_workers(1))
    done = asyncio.Event()

    async def churn() -> None:  # grants in the same cluster queue, all along
        while not done.is_set():
            small = await Worker.options(resources={"token": 1}, process=False).spawn()
            await small.stop()
            await asyncio.sleep(0.01)

    traffic = asyncio.ensure_future(churn())
    start = time.monotonic()
    try:
        assert await eventually(lambda: len(stalled(caplog)) >= 2, within=15)
        took = time.monotonic() - start
    finally:
        done.set()
        await traffic
    assert took < 0.5 + 5.0, f"warned after {took:.2f} s"
    text = next(r.getMessage() for r in stalled(caplog) if "name='trial-a'" in r.getMessage())
    assert "Trial(id=" in text and "holds {CPU: 1}" in text
    assert "of the actors it started, Worker(id=" in text  # the idle, started worker
    assert "waits for request" in text and "To fix:" in text
    assert "placement_group=" in text and "PlacementGroupFactory" not in text  # not a trial
    await a.kill()  # its method waits for a CPU: a stop would wait for it to return
    await b.kill()
    for task in (first, second):
        with pytest.raises(actorrt.ActorDiedError):
            await task
    assert await eventually(
        lambda: actorrt.available_resources() == actorrt.cluster_resources(), within=10
    )


@pytest.mark.actorrt(num_cpus=2, num_gpus=0)
async def test_a_cpu_only_request_gets_no_gpu_hint(actorrt_runtime: actorrt.Runtime) -> None:
    with pytest.raises(actorrt.InfeasibleResourceError) as caught:
        await Worker.options(num_cpus=64).spawn()
    assert "GPU" not in str(caught.value).split("Ask for less")[1]
    with pytest.raises(actorrt.InfeasibleResourceError, match="a fractional GPU must fit"):
        await Worker.options(num_gpus=0.5).spawn()
