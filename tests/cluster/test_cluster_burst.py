"""A burst of process-actor spawns in flight at once, through the node agents of a cluster
of separate hosts (network namespaces): every one starts, on the node of its grant."""

from __future__ import annotations

import asyncio
import collections
import os
import time
from collections.abc import Iterator
from typing import Any

import pytest

import actorrt

from ._cluster import Cluster, cluster_on_hosts

BURST = int(os.environ.get("ACTORRT_TEST_CLUSTER_BURST", "200"))


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with cluster_on_hosts(
        tmp_path_factory.mktemp("cluster"),
        ["--num-cpus", "2"], ["--num-cpus", "2"], ["--num-cpus", "2"],
    ) as made:
        yield made


@actorrt.actor
class Member:
    def where(self) -> tuple[str | None, int]:
        return os.environ.get("ACTORRT_NODE_IP"), os.getpid()


@pytest.mark.timeout(300)
async def test_a_burst_of_spawns_through_node_agents_all_start(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    # 5 CPUs in all, of the 6 the three nodes have: no two nodes can hold the burst.
    share = 5.0 / BURST
    async with cluster.driver(monkeypatch, "CPU", 6.0):
        began = time.monotonic()
        results = await asyncio.wait_for(
            asyncio.gather(
                *(Member.options(num_cpus=share).spawn() for _ in range(BURST)),
                return_exceptions=True,
            ),
            240,
        )
        took = time.monotonic() - began
        failed = [r for r in results if isinstance(r, BaseException)]
        assert not failed, f"{len(failed)} of {BURST} spawns failed, e.g. {failed[0]!r}"
        refs: list[Any] = [r for r in results if not isinstance(r, BaseException)]
        places = await asyncio.gather(*(ref.where() for ref in refs))
        per_node = collections.Counter(ip for ip, _ in places)
        assert len(per_node) == 3, per_node
        assert len(set(places)) == BURST  # each in a worker process of its own
        await asyncio.gather(*(ref.stop() for ref in refs))
        print(f"{BURST} spawns through 3 node agents started in {took:.1f} s: {per_node}")
