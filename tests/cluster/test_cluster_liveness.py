"""Liveness across hosts: a driver whose event loop is blocked for seconds stays a member
(its heartbeats come from a thread), while a driver that is really gone (killed, cut off,
stopped) loses its grants within the documented time, and the head says why at WARNING.

The head runs on one host, a node with ``{"one": 1}`` on another; the driver under test is
this test process, or ``_driver.py`` on a third host.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import eventually

import actorrt
from actorrt import tune
from actorrt._cli._cluster import cluster_status

from ._cluster import Cluster
from .netns import make_network, netns_skip_reason

pytestmark = pytest.mark.timeout(120)

NOTICED_WITHIN = 8.0  # the documented 2-3 s, with room for a loaded machine
DRIVER = str(Path(__file__).with_name("_driver.py"))


@pytest.fixture
def cluster(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Cluster]:
    reason = netns_skip_reason()
    if reason is not None:
        pytest.skip(reason)
    net = make_network(3)
    made = Cluster(tmp_path, net.hosts)
    try:
        made.start_head("--num-cpus", "1")
        made.start_node("--num-cpus", "2", "--resources", '{"one": 1}')
        for key, value in made.driver_env().items():
            monkeypatch.setenv(key, value)
        yield made
    finally:
        made.close()
        net.close()


def head_log(cluster: Cluster) -> str:
    assert cluster.head is not None
    return cluster.head.log.read_text()


async def _full(rt: Any) -> None:
    assert await eventually(lambda: rt.cluster_resources().get("CPU") == 3.0, within=15)


def _one_free(rt: Any) -> bool:
    return bool(rt.available_resources().get("one") == 1.0)


class BlockOnce(tune.Callback):
    """Blocks the driver's event loop for 5 s at the first result, as a heavy import or a
    slow file write on the loop would."""

    def __init__(self) -> None:
        self.blocked_s = 0.0

    def on_trial_result(self, iteration: int, trials: Any, trial: Any, result: Any,
                        **info: Any) -> None:
        if not self.blocked_s:
            started = time.monotonic()
            time.sleep(5)
            self.blocked_s = time.monotonic() - started


def steady(config: dict[str, Any]) -> None:
    for i in range(5):
        time.sleep(0.1)
        tune.report({"i": i})


async def test_a_driver_whose_loop_is_blocked_for_5_s_keeps_its_grants_and_its_sweep_finishes(
    cluster: Cluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The loop blocked, not the GIL: importing tensorboardX (torch) on its thread holds the
    # GIL for up to 1.6 s at a time on a loaded machine, which test_tune_callbacks covers.
    monkeypatch.setenv("ACTORRT_TUNE_DISABLE_AUTO_CALLBACK_LOGGERS", "1")
    async with actorrt.Runtime(address=cluster.address) as rt:
        await _full(rt)
        held = actorrt.placement_group([{"one": 1}])
        await held.ready(timeout=30)
        blocker = BlockOnce()
        tuner = tune.Tuner(
            tune.with_resources(steady, {"CPU": 1}),
            param_space={"x": tune.grid_search(list(range(6)))},
            run_config=tune.RunConfig(
                storage_path=str(tmp_path), name="busy", verbose=0, callbacks=[blocker],
            ),
        )
        grid = await asyncio.wait_for(tuner.fit_async(), 90)
        assert blocker.blocked_s >= 5.0
        assert not grid.errors, grid.errors
        assert len(grid) == 6 and all(r.metrics["i"] == 4 for r in grid)
        # Still a member, still holding its group: nothing was released behind its back.
        assert rt.available_resources().get("one", 0.0) == 0.0
        log = head_log(cluster)
        assert "is lost" not in log, log
        assert "its event loop has not run for" in log, log
        await held.remove()
        assert await eventually(lambda: _one_free(rt))


class RemoteDriver:
    """``_driver.py`` on the cluster's third host, holding ``{"one": 1}``."""

    def __init__(self, cluster: Cluster) -> None:
        assert cluster.hosts is not None
        self.host = cluster.hosts[2]
        self.proc = self.host.popen(
            [sys.executable, DRIVER, cluster.address],
            env={**cluster.driver_env(), "PYTHONPATH": os.pathsep.join(sys.path)},
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )

    async def line(self) -> str:
        assert self.proc.stdout is not None
        return await asyncio.wait_for(asyncio.to_thread(self.proc.stdout.readline), 60)

    async def holding(self) -> None:
        line = await self.line()
        assert line == "held\n", line + self.rest()

    def rest(self) -> str:
        """Its remaining output, once it is killed."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        assert self.proc.stdout is not None
        return self.proc.stdout.read()


@contextlib.asynccontextmanager
async def _observed_driver(cluster: Cluster) -> AsyncIterator[tuple[Any, RemoteDriver]]:
    """This test process as a driver that watches a :class:`RemoteDriver` hold ``one``."""
    async with actorrt.Runtime(address=cluster.address) as rt:
        await _full(rt)
        driver = RemoteDriver(cluster)
        await driver.holding()
        assert await eventually(lambda: not _one_free(rt))
        yield rt, driver


async def _released_within(rt: Any, within: float) -> float:
    started = time.monotonic()
    assert await eventually(lambda: _one_free(rt), within=within, interval=0.01)
    return time.monotonic() - started


async def test_a_killed_driver_loses_its_grants_at_once(cluster: Cluster) -> None:
    async with _observed_driver(cluster) as (rt, driver):
        driver.host.kill()  # SIGKILL: its kernel closes the connection
        took = await _released_within(rt, NOTICED_WITHIN)
        print(f"a SIGKILLed driver's grant came back in {took:.3f} s")
        assert took < 1.5  # the closed connection says it, no heartbeat needed
        assert await eventually(lambda: "connection closed without a goodbye" in head_log(cluster))
        assert "WARNING" in head_log(cluster).split("without a goodbye")[0].splitlines()[-1]


async def test_a_driver_cut_off_loses_its_grants_after_its_silence(cluster: Cluster) -> None:
    async with _observed_driver(cluster) as (rt, driver):
        driver.host.cut()  # silence, not a reset: only the heartbeats can tell
        try:
            took = await _released_within(rt, NOTICED_WITHIN)
        finally:
            driver.host.restore()
            driver.host.kill()
        print(f"a driver cut off lost its grant {took:.3f} s after the cut")
        assert took >= 1.5  # 2 s of silence (LOST_AFTER), judged every 0.5 s
        log = head_log(cluster)
        lost = [line for line in log.splitlines() if "is lost: nothing heard from it" in line]
        assert lost and "WARNING" in lost[0] and "driver" in lost[0], log


async def test_a_driver_the_head_dropped_hears_exactly_that(cluster: Cluster) -> None:
    async with _observed_driver(cluster) as (rt, driver):
        log = ""
        os.killpg(driver.proc.pid, signal.SIGSTOP)  # every thread stops: silence
        try:
            took = await _released_within(rt, NOTICED_WITHIN)
        finally:
            os.killpg(driver.proc.pid, signal.SIGCONT)
        print(f"a stopped driver lost its grant {took:.3f} s after the SIGSTOP")
        assert took >= 1.5
        assert driver.proc.stdin is not None
        driver.proc.stdin.write("go\n")
        driver.proc.stdin.flush()
        line = await driver.line()
        while not line.startswith("result: ") and line:
            log = line  # the driver's own log says it at once, as ERROR
            line = await driver.line()
        assert "dropped this driver" in log, log
        assert line.startswith("result: DriverDroppedError: "), line + driver.rest()
        assert "dropped this driver" in line and "nothing heard from it for" in line, line
        assert "HeadLost" not in line
        assert driver.proc.wait(timeout=30) == 0


async def test_a_node_whose_loop_is_blocked_for_5_s_stays_a_member(
    cluster: Cluster, tmp_path: Path
) -> None:
    """The same rule for nodes: a node agent (here in this test process, so that its loop
    can be blocked) keeps its membership, and its id, through 5 s of a blocked loop."""
    from actorrt._cluster._agent import NodeAgent
    from actorrt._cluster._files import local_address_towards, parse_address, read_token
    from actorrt._wire import _tls
    from actorrt.resources import NodeInventory

    head = parse_address(cluster.address)
    ip = local_address_towards(*head)
    (tmp_path / "tls").mkdir(mode=0o700)
    files = _tls.generate_self_signed(str(tmp_path / "tls"), [ip])
    agent = NodeAgent(head, read_token(), NodeInventory("here", {"CPU": 1}), ip, files)
    await agent.start()
    runs = asyncio.ensure_future(agent.run())
    try:
        await asyncio.wait_for(agent.joined.wait(), 30)
        joined_as = agent.node_id
        time.sleep(5)  # noqa: ASYNC251 (the point: this loop, the agent's, is blocked)
        status = await asyncio.to_thread(cluster_status, cluster.address, 30.0)
        assert agent.node_id == joined_as  # never lost, so never joined again
        assert joined_as in [node["node_id"] for node in status["nodes"]], status
        log = head_log(cluster)
        assert "is lost" not in log, log
        assert f"node {joined_as} ({ip}) is alive, but its event loop has not run" in log, log
    finally:
        await agent.close()
        runs.cancel()
        await asyncio.gather(runs, return_exceptions=True)
