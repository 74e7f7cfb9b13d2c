"""The head under load, from outside: 1,000 placement groups reserved and released at once
by a driver on another host, while ``actorrt status --address`` keeps asking the head.
Every group is granted, everything comes back, and the status answers promptly."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import eventually

import actorrt
from actorrt._cli._cluster import cluster_status

from ._cluster import Cluster, cluster_on_hosts

pytestmark = pytest.mark.timeout(180)

GROUPS = 1000
STATUS_WITHIN = 2.0  # seconds for the head to answer one status request under the burst


@pytest.fixture
def cluster(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Cluster]:
    with cluster_on_hosts(
        tmp_path, ["--num-cpus", "1"],
        ["--num-cpus", "2", "--resources", json.dumps({"slot": GROUPS})],
    ) as made:
        for key, value in made.driver_env().items():
            monkeypatch.setenv(key, value)
        yield made


class StatusPoller:
    """Asks the head for its status over and over on a thread (what ``actorrt status
    --address`` does, without the interpreter's start-up), timing each answer."""

    def __init__(self, address: str) -> None:
        self.address = address
        self.times: list[float] = []
        self.pending: list[int] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            started = time.monotonic()
            data = cluster_status(self.address, 30.0)
            self.times.append(time.monotonic() - started)
            self.pending.append(int(data["pending"]))

    def __enter__(self) -> StatusPoller:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(60)


def _cli_status(address: str) -> tuple[float, dict[str, Any]]:
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "actorrt", "status", "--address", address, "--json"],
        capture_output=True, text=True, timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return time.monotonic() - started, json.loads(done.stdout)


async def test_a_thousand_groups_at_once_and_status_answers_promptly(cluster: Cluster) -> None:
    idle_cli, _ = await asyncio.to_thread(_cli_status, cluster.address)
    async with actorrt.Runtime(address=cluster.address) as rt:
        assert await eventually(lambda: rt.cluster_resources().get("slot") == GROUPS, within=15)
        with StatusPoller(cluster.address) as poller:
            started = time.monotonic()
            groups = [actorrt.placement_group([{"slot": 1}]) for _ in range(GROUPS)]
            cli = asyncio.ensure_future(asyncio.to_thread(_cli_status, cluster.address))
            await asyncio.wait_for(asyncio.gather(*(g.ready() for g in groups)), 120)
            reserved = time.monotonic() - started
            assert rt.available_resources().get("slot", 0.0) == 0.0
            await asyncio.wait_for(asyncio.gather(*(g.remove() for g in groups)), 120)
            burst = time.monotonic() - started
            assert await eventually(
                lambda: rt.available_resources() == rt.cluster_resources(), within=30
            )
            busy_cli, data = await cli
        assert data["nodes"] and data["drivers"]
        assert poller.times, "no status answer during the burst"
        slowest = max(poller.times)
        print(f"\n{GROUPS} groups: reserved in {reserved:.2f} s, reserved and released in "
              f"{burst:.2f} s; {len(poller.times)} status answers, slowest {slowest:.3f} s, "
              f"median {sorted(poller.times)[len(poller.times) // 2]:.3f} s; `actorrt "
              f"status` {busy_cli:.2f} s under load, {idle_cli:.2f} s idle")
        assert slowest < STATUS_WITHIN, sorted(poller.times)[-5:]
        _, final = await asyncio.to_thread(_cli_status, cluster.address)
        assert final["pending"] == 0 and final["available"] == final["total"]


@actorrt.actor
class Idle:
    def pid(self) -> int:
        import os

        return os.getpid()


BURST = 16


async def test_status_answers_promptly_during_a_spawn_burst_on_the_heads_machine(
    cluster: Cluster,
) -> None:
    """The head's own machine runs a node agent in the head's process: the workers it starts
    for a burst of spawns must not hold up the head's answers."""
    async with actorrt.Runtime(address=cluster.address) as rt:
        assert await eventually(lambda: rt.cluster_resources().get("slot") == GROUPS, within=15)
        with StatusPoller(cluster.address) as poller:
            spawns = [Idle.options(num_cpus=0.05, process=True).spawn() for _ in range(BURST)]
            actors = await asyncio.wait_for(asyncio.gather(*spawns), 120)
            assert len({await a.pid() for a in actors}) == BURST
            await asyncio.gather(*(a.stop() for a in actors))
        slowest = max(poller.times)
        print(f"\nspawn burst of {BURST}: {len(poller.times)} status answers, slowest "
              f"{slowest:.3f} s")
        assert slowest < STATUS_WITHIN, sorted(poller.times)[-5:]
