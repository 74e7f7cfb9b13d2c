"""A cluster over a bad network: latency and loss (``tc netem``, where the kernel has it) and
a link that drops out for short bursts. Calls complete, nothing hangs, and a node that is
only slow or briefly silent is not declared lost."""

from __future__ import annotations

import asyncio
import os
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from conftest import eventually

import actorrt

from ._cluster import Cluster, cluster_on_hosts
from .netns import netem_skip_reason

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def cluster(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[Cluster]:
    with cluster_on_hosts(
        tmp_path, ["--num-cpus", "1"], ["--num-cpus", "2", "--resources", '{"far": 1}']
    ) as made:
        for key, value in made.driver_env().items():
            monkeypatch.setenv(key, value)
        yield made


@actorrt.actor
class Echo:
    def echo(self, value: Any) -> Any:
        return value

    def pid(self) -> int:
        return os.getpid()


async def _far_echo(rt: Any) -> Any:
    assert await eventually(lambda: rt.cluster_resources().get("CPU") == 3.0, within=15)
    return await Echo.options(num_cpus=1, resources={"far": 1}).spawn()


async def test_latency_and_loss_slow_calls_down_but_lose_none(cluster: Cluster) -> None:
    reason = netem_skip_reason()
    if reason is not None:
        pytest.skip(reason)
    host = cluster.nodes[0].host
    assert host is not None
    async with actorrt.Runtime(address=cluster.address) as rt:
        echo = await _far_echo(rt)
        pid = await echo.pid()
        host.netem(delay_ms=40, jitter_ms=10, loss_pct=3)
        try:
            started = time.monotonic()
            values = await asyncio.wait_for(asyncio.gather(*(echo.echo(i) for i in range(200))), 60)
            assert values == list(range(200))
            for i in range(20):
                assert await echo.echo(i) == i
            assert time.monotonic() - started > 20 * 0.04  # the delay was there
            await asyncio.sleep(3)  # longer than a node may stay silent
            assert await echo.pid() == pid  # the same worker: the node was never lost
        finally:
            host.clear_netem()


async def test_a_link_that_drops_out_briefly_loses_nothing(cluster: Cluster) -> None:
    host = cluster.nodes[0].host
    assert host is not None
    async with actorrt.Runtime(address=cluster.address) as rt:
        echo = await _far_echo(rt)
        pid = await echo.pid()
        stop = threading.Event()
        deadline = time.monotonic() + 4

        def flap() -> None:  # 0.4 s of silence every 0.8 s: well under the 2 s that lose it
            while not stop.is_set() and time.monotonic() < deadline:
                host.cut()
                stop.wait(0.4)
                host.restore()
                stop.wait(0.4)

        flapper = threading.Thread(target=flap)
        flapper.start()
        try:
            sent = 0
            while time.monotonic() < deadline:
                # The flapping ends at the deadline by itself: a TCP retransmission whose
                # backoff keeps landing in the silences (the doubling timeouts can fall in
                # step with the flapping) gets through once the link is steady, within
                # TCP's next backoff, not only when this loop ends.
                assert await asyncio.wait_for(echo.echo(sent), 60) == sent
                sent += 1
        finally:
            stop.set()
            flapper.join()
            host.restore()
        # How many got through depends on where TCP's retransmission backoff fell in the
        # flapping (one call may wait out most of it); each answered, none was lost.
        assert sent >= 1
        assert await echo.pid() == pid  # never declared lost, never restarted
        assert rt.cluster_resources()["CPU"] == 3.0
