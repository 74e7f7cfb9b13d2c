"""A cluster of separate hosts (network namespaces): a head on a CPU node that offers
``TRAIN_DRIVER_RESOURCE``, and two nodes with two (fake) GPUs each; the driver is this test
process, in the root namespace. Placement, GPUs, direct calls, refs across nodes, nested
spawns and the deadlock rule, all through the head's one broker."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import eventually

import actorrt
from actorrt import ResourceDeadlockError

from ._cluster import Cluster, cluster_on_hosts

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with cluster_on_hosts(
        tmp_path_factory.mktemp("cluster"),
        ["--num-cpus", "2", "--resources", '{"TRAIN_DRIVER_RESOURCE": 2}'],
        ["--num-cpus", "2", "--num-gpus", "2"],
        ["--num-cpus", "2", "--num-gpus", "2"],
    ) as made:
        yield made


@pytest.fixture
async def rt(cluster: Cluster, monkeypatch: pytest.MonkeyPatch) -> Any:
    async with cluster.driver(monkeypatch, "CPU", 6.0) as runtime:
        yield runtime
    # Nothing leaks: once the driver is gone, the head gives everything back.


@actorrt.actor
class Where:
    def __init__(self, peer: Any = None) -> None:
        self.peer = peer

    def node(self) -> dict[str, Any]:
        return {
            "ip": os.environ.get("ACTORRT_NODE_IP"),
            "node": os.environ.get("ACTORRT_NODE_ID"),
            "gpus": os.environ.get("CUDA_VISIBLE_DEVICES"),
            "pid": os.getpid(),
        }

    async def ask_peer(self) -> Any:
        return await self.peer.node()

    async def spawn_child(self) -> Any:
        child = await Where.options(num_cpus=1).spawn()
        return await child.node()


@actorrt.actor
class Greedy:
    """Holds all of TRAIN_DRIVER_RESOURCE, then waits for one more unit of it."""

    async def spawn_more(self) -> None:
        await Where.options(num_cpus=0, resources={"TRAIN_DRIVER_RESOURCE": 1}).spawn()


async def test_the_cluster_sums_its_nodes(rt: Any, cluster: Cluster) -> None:
    total = rt.cluster_resources()
    assert total["CPU"] == 6.0 and total["GPU"] == 4.0
    assert total["TRAIN_DRIVER_RESOURCE"] == 2.0


async def test_strict_spread_puts_each_bundle_on_its_own_node(rt: Any, cluster: Cluster) -> None:
    pg = actorrt.placement_group([{"CPU": 1}] * 3, strategy="STRICT_SPREAD")
    await pg.ready()
    actors = [
        await Where.options(num_cpus=1, placement=pg.bundle(i)).spawn() for i in range(3)
    ]
    ips = {(await a.node())["ip"] for a in actors}
    assert ips == {h.ip for h in cluster.hosts or []}
    await pg.remove()


@pytest.mark.parametrize(("strategy", "nodes"), [("PACK", 1), ("SPREAD", 2)])
async def test_pack_and_spread_choose_nodes_as_their_names_say(
    rt: Any, strategy: str, nodes: int
) -> None:
    pg = actorrt.placement_group([{"CPU": 1}] * 2, strategy=strategy)
    await pg.ready()
    actors = [
        await Where.options(num_cpus=1, placement=pg.bundle(i)).spawn() for i in range(2)
    ]
    assert len({(await a.node())["ip"] for a in actors}) == nodes
    await pg.remove()


async def test_strict_pack_gpus_share_a_node_with_their_own_devices(rt: Any) -> None:
    pg = actorrt.placement_group([{"CPU": 1, "GPU": 1}] * 2, strategy="STRICT_PACK")
    await pg.ready()
    a = await Where.options(num_cpus=1, num_gpus=1, placement=pg.bundle(0)).spawn()
    b = await Where.options(num_cpus=1, num_gpus=1, placement=pg.bundle(1)).spawn()
    where_a, where_b = await a.node(), await b.node()
    assert where_a["node"] == where_b["node"]
    assert {where_a["gpus"], where_b["gpus"]} == {"0", "1"}
    await pg.remove()


async def test_a_custom_resource_pins_an_actor_to_the_node_that_has_it(
    rt: Any, cluster: Cluster
) -> None:
    assert cluster.head is not None
    driver = await Where.options(num_cpus=1, resources={"TRAIN_DRIVER_RESOURCE": 1}).spawn()
    assert (await driver.node())["ip"] == cluster.head.ip
    await driver.stop()


async def test_refs_and_nested_spawns_work_across_nodes(rt: Any, cluster: Cluster) -> None:
    pg = actorrt.placement_group([{"CPU": 1}] * 2, strategy="STRICT_SPREAD")
    await pg.ready()
    b = await Where.options(num_cpus=1, placement=pg.bundle(1)).spawn()
    a = await Where.options(num_cpus=1, placement=pg.bundle(0)).spawn(b)
    assert (await a.ask_peer())["ip"] == (await b.node())["ip"] != (await a.node())["ip"]
    await pg.remove()
    parent = await Where.options(num_gpus=1).spawn()
    child = await parent.spawn_child()
    assert child["ip"] in {h.ip for h in cluster.hosts or []}
    await parent.stop()


async def test_the_deadlock_rule_holds_across_the_cluster(rt: Any) -> None:
    greedy = await Greedy.options(num_cpus=0, resources={"TRAIN_DRIVER_RESOURCE": 2}).spawn()
    started = time.monotonic()
    with pytest.raises(ResourceDeadlockError, match="TRAIN_DRIVER_RESOURCE"):
        await asyncio.wait_for(greedy.spawn_more(), 30)
    assert time.monotonic() - started < 10
    await greedy.stop()


async def test_what_a_driver_held_comes_back_when_it_ends(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    for key, value in cluster.driver_env().items():
        monkeypatch.setenv(key, value)
    async with actorrt.Runtime(address=cluster.address) as runtime:
        assert await eventually(lambda: runtime.cluster_resources().get("CPU") == 6.0)
        held = [await Where.options(num_cpus=1, num_gpus=1).spawn() for _ in range(3)]
        assert await eventually(lambda: runtime.available_resources().get("GPU") == 1.0)
        del held
    async with actorrt.Runtime(address=cluster.address) as runtime:
        assert await eventually(
            lambda: runtime.available_resources() == runtime.cluster_resources() != {}
        )


def test_an_unknown_token_is_refused_before_anything_else(
    cluster: Cluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    wrong = tmp_path / "token"
    wrong.write_text("ab" * 32)
    monkeypatch.setenv("ACTORRT_CLUSTER_TOKEN_FILE", str(wrong))

    async def main() -> None:
        async with actorrt.Runtime(address=cluster.address):
            pass

    with pytest.raises(actorrt.AuthenticationError):
        asyncio.run(main())


def test_a_node_with_a_wrong_token_is_refused_at_once_and_exits_1(
    cluster: Cluster, tmp_path: Path
) -> None:
    wrong = tmp_path / "token"
    wrong.write_text("cd" * 32)
    wrong.chmod(0o600)
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "actorrt", "start", "--address", cluster.address,
         "--token-file", str(wrong), "--node-ip-address", "127.0.0.1", "--block"],
        env={**os.environ, "ACTORRT_CLUSTER_DIR": str(tmp_path / "node")},
        capture_output=True, text=True, timeout=60,
    )
    took = time.monotonic() - started
    assert done.returncode == 1, (done.returncode, done.stdout, done.stderr)
    assert "the cluster token is wrong" in done.stderr
    assert "trying again" not in done.stdout + done.stderr
    assert took < 30  # no retries: Python's start-up and one handshake


async def test_a_waiting_spawn_is_listed_with_its_reason(rt: Any) -> None:
    holder = await Where.options(num_cpus=0, resources={"TRAIN_DRIVER_RESOURCE": 2}).spawn()
    waiting = asyncio.ensure_future(
        Where.options(num_cpus=0, resources={"TRAIN_DRIVER_RESOURCE": 1}).spawn()
    )
    try:
        assert await eventually(lambda: len(rt.pending_requests()) == 1)
        [pending] = rt.pending_requests()
        assert pending.bundles == ({"TRAIN_DRIVER_RESOURCE": 1.0},)
        assert "/" not in str(pending.holder)  # this program's own ids, as it knows them
        assert "TRAIN_DRIVER_RESOURCE" in pending.reason
        # The head writes ids; this program names its own actors in the reason.
        assert f"held by Where(id={holder.actor_id})" in pending.reason
        assert rt.available_resources().get("TRAIN_DRIVER_RESOURCE", 0.0) == 0.0
        await holder.stop()
        second = await asyncio.wait_for(waiting, 30)  # granted once the holder ended
        await second.stop()
    finally:
        waiting.cancel()
    assert await eventually(lambda: rt.pending_requests() == [])


async def test_process_false_with_a_grant_runs_on_its_node_and_says_so(
    rt: Any, caplog: pytest.LogCaptureFixture
) -> None:
    inline = await Where.options(process=False, num_cpus=1).spawn()
    assert (await inline.node())["pid"] != os.getpid()
    assert "runs in a worker process on the node of its grant" in caplog.text
    await inline.stop()
