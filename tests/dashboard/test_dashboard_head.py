"""The cluster's dashboard, served by its head (``actorrt start --head
--include-dashboard=true``): every node with its resources and heartbeat, a node lost,
the drivers, the gangs with the node of each bundle, a deadlock between actors of a driver
with its graph, and the cluster's token on a non-loopback bind. A head and a node on
loopback, started as a user starts them."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cluster._cluster import Cluster
from dashboard_helpers import get, non_loopback_address

import actorrt
from actorrt import ResourceDeadlockError
from actorrt._wire._auth import secret_from_text, secret_to_text

pytestmark = pytest.mark.timeout(120)


@actorrt.actor
class Holder:
    """Holds every ``slot`` there is, then asks for one more: a deadlock the head's
    broker finds."""

    async def one_more(self) -> None:
        await Holder.options(num_cpus=0, resources={"slot": 1}).spawn()


def _start(
    tmp_path: Path, *dashboard: str, resources: dict[str, float] | None = None
) -> Cluster:
    made = Cluster(tmp_path)
    head = ["--num-cpus", "1", "--include-dashboard=true", *dashboard]
    if resources:
        head += ["--resources", json.dumps(resources)]
    made.start_head(*head)
    made.start_node("--num-cpus", "2")
    return made


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    made = _start(tmp_path, "--dashboard-port", "0", resources={"slot": 2})
    try:
        yield made
    finally:
        made.close()


def _url(cluster: Cluster) -> str:
    assert cluster.head is not None
    url = cluster.head.info.get("dashboard")
    assert isinstance(url, str) and url.startswith("http://127.0.0.1:"), cluster.head.info
    return url


async def test_the_head_shows_every_node_with_its_resources_and_heartbeat(
    cluster: Cluster,
) -> None:
    url = _url(cluster)
    assert cluster.head is not None
    log = cluster.head.log
    for _ in range(100):  # printed when it starts, after head.json is written
        if f"dashboard:     {url}" in log.read_text():
            break
        await asyncio.sleep(0.05)
    assert f"dashboard:     {url}" in log.read_text()

    async def nodes() -> dict[str, Any]:
        status, data = await get(url + "api/nodes")
        assert status == 200, data
        return data

    data = await nodes()
    assert data["cluster"]["address"] == cluster.address
    alive = [n for n in data["nodes"] if n["state"] == "alive"]
    assert len(alive) == 2, data  # the head's own machine and the node
    assert sorted(n["total"]["CPU"] for n in alive) == [1.0, 2.0]
    assert all(n["host"] == "127.0.0.1" and n["heard_s_ago"] < 3 for n in alive), alive
    assert all(n["free"] == n["total"] for n in alive)
    _, summary = await get(url + "api/summary")
    assert summary["runtime"]["role"] == "head" and summary["runtime"]["nodes"] == 2

    node = cluster.nodes[0]
    await asyncio.to_thread(node.kill)  # SIGKILL: the node's machine goes away
    started = time.monotonic()
    while not [n for n in (await nodes())["nodes"] if n["state"] in ("lost", "left")]:
        assert time.monotonic() - started < 10, "the killed node never showed as gone"
        await asyncio.sleep(0.1)
    data = await nodes()
    gone = [n for n in data["nodes"] if n["lost"]]
    assert len(gone) == 1 and gone[0]["total"] == {}, data
    assert "connection closed" in gone[0]["lost"] or "nothing heard" in gone[0]["lost"]
    assert len([n for n in data["nodes"] if n["state"] == "alive"]) == 1


async def test_the_head_shows_drivers_gangs_and_a_deadlock_between_their_actors(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = _url(cluster)
    async with cluster.driver(monkeypatch, "CPU", 3.0) as rt:
        _status, data = await get(url + "api/nodes")
        drivers = data["cluster"]["drivers"]
        assert [d["runtime_id"] for d in drivers] == [rt.runtime_id], drivers
        assert drivers[0]["heard_s_ago"] < 3

        pg = actorrt.placement_group([{"CPU": 1}] * 2, strategy="STRICT_SPREAD")
        await pg.ready()
        _, res = await get(url + "api/resources")
        [gang] = res["groups"]
        assert gang["bundles"] == [{"CPU": 1.0}, {"CPU": 1.0}]
        assert len(set(gang["nodes"])) == 2  # one bundle on each node
        assert rt.runtime_id in gang["holder_name"]
        assert res["totals"]["used"]["CPU"] == 2.0
        await pg.remove()

        holder = await Holder.options(num_cpus=0, resources={"slot": 2}).spawn()
        with pytest.raises(ResourceDeadlockError):
            await asyncio.wait_for(holder.one_more(), 30)
        _, waits = await get(url + "api/waits")
        [report] = waits["deadlocks"]
        assert report["kind"] == "resources" and "slot" in report["message"]
        assert report["graph"], report  # the wait-for graph, as the page draws it
        assert all(rt.runtime_id in e["from"] for e in report["graph"])
        await holder.stop()

    async def no_driver() -> bool:
        _, data = await get(url + "api/nodes")
        return data["cluster"]["drivers"] == []

    for _ in range(100):  # the driver left: the head lists it no more
        if await no_driver():
            break
        await asyncio.sleep(0.05)
    assert await no_driver()


async def test_the_heads_dashboard_on_another_address_wants_the_cluster_token(
    tmp_path: Path,
) -> None:
    ip = non_loopback_address()
    if ip is None:
        pytest.skip("this machine has no non-loopback IPv4 address to connect through")
    made = _start(tmp_path, "--dashboard-host", "0.0.0.0", "--dashboard-port", "0")
    try:
        assert made.head is not None
        text = await asyncio.to_thread(Path(made.token_file).read_text)
        token = secret_to_text(secret_from_text(text))
        url = made.head.info["dashboard"]
        assert url.endswith(f"?token={token}")
        for _ in range(100):
            if "dashboard:" in made.head.log.read_text():
                break
            await asyncio.sleep(0.05)
        shown = made.head.log.read_text()
        assert "?token=<the cluster token>" in shown and token not in shown
        base = url.split("?")[0].replace("127.0.0.1", ip)
        status, body = await get(base + "api/nodes")
        assert status == 401 and "token" in body["error"]
        status, _ = await get(base + "api/nodes", headers={"Authorization": "Bearer wrong!!!"})
        assert status == 403
        status, data = await get(base + "api/nodes", headers={"Authorization": f"Bearer {token}"})
        assert status == 200 and len(data["nodes"]) == 2
    finally:
        made.close()


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--address", "127.0.0.1:1", "--include-dashboard=true"], "the head's (--head)"),
        (["--head", "--dashboard-port", "0"], "need --include-dashboard=true"),
        (["--head", "--include-dashboard=maybe"], "expected true or false, got 'maybe'"),
        (["--head", "--include-dashboard", "--dashboard-port", "70000"], "0 to 65535"),
    ],
)
def test_dashboard_options_that_cannot_work_are_refused_at_once(
    args: list[str], says: str
) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "actorrt", "start", *args, "--block"],
        capture_output=True, text=True, timeout=60,
    )
    assert done.returncode == 2 and says in done.stderr, done.stderr
