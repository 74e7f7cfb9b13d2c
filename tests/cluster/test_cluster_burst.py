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
from conftest import eventually

import actorrt

from ._burst_member import Member
from ._cluster import Cluster, cluster_on_hosts

BURST = int(os.environ.get("ACTORRT_TEST_CLUSTER_BURST", "500"))


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with cluster_on_hosts(
        tmp_path_factory.mktemp("cluster"),
        ["--num-cpus", "2"], ["--num-cpus", "2"], ["--num-cpus", "2"],
    ) as made:
        yield made


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


@pytest.mark.timeout(180)
async def test_spawns_in_flight_when_the_head_drops_the_driver_each_end_saying_so(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The head drops this driver in the middle of a burst: no spawn may hang."""
    count = 200
    share = 5.0 / count
    async with cluster.driver(monkeypatch, "CPU", 6.0) as rt:
        link = rt._role_.link
        spawns = [asyncio.ensure_future(Member.options(num_cpus=share).spawn())
                  for _ in range(count)]
        done = await eventually(lambda: sum(s.done() for s in spawns) >= 10, within=60)
        assert done, "no spawn started within 60 s"
        link._udp.close()  # no beats from its thread either: the head hears nothing
        time.sleep(4)  # noqa: ASYNC251 (the point: the loop is blocked past LOST_AFTER)
        results = await asyncio.wait_for(
            asyncio.gather(*spawns, return_exceptions=True), 60
        )
        failed = [r for r in results if isinstance(r, BaseException)]
        assert failed, "the head did not drop the driver"
        unsaid = [r for r in failed if "dropped this driver" not in str(r)]
        assert not unsaid, f"{len(unsaid)} of {len(failed)} failed otherwise: {unsaid[:3]!r}"
        # a start cut short fails with a ConnectionError, an actor already up ends
        assert all(isinstance(r, ConnectionError | actorrt.ActorDiedError)
                   for r in failed), {type(r) for r in failed}
