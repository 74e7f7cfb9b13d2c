"""A cluster driver's dashboard: the head it joined, and the cluster's token on a
non-loopback bind (a head and a node on loopback, started with ``actorrt start``)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cluster._cluster import Cluster
from dashboard_helpers import get, non_loopback_address

import actorrt
from actorrt._wire._auth import secret_from_text, secret_to_text

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    made = Cluster(tmp_path)
    try:
        made.start_head("--num-cpus", "1")
        made.start_node("--num-cpus", "2")
        yield made
    finally:
        made.close()


async def test_a_cluster_driver_shows_its_head_and_wants_the_cluster_token(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    ip = non_loopback_address()
    if ip is None:
        pytest.skip("this machine has no non-loopback IPv4 address to connect through")
    monkeypatch.setenv("ACTORRT_CLUSTER_TOKEN_FILE", cluster.token_file)
    text = await asyncio.to_thread(Path(cluster.token_file).read_text)
    token = secret_to_text(secret_from_text(text))
    dashboard = {"host": "0.0.0.0", "port": 0}
    async with actorrt.Runtime(address=cluster.address, dashboard=dashboard) as rt:
        deadline = time.monotonic() + 15
        while rt.cluster_resources().get("CPU") != 3.0:
            assert time.monotonic() < deadline, rt.cluster_resources()
            await asyncio.sleep(0.02)
        url = rt.dashboard_url
        assert url is not None and url.endswith(f"?token={token}"), "the cluster's token"
        base = url.split("?")[0].replace("127.0.0.1", ip)
        status, _ = await get(base + "api/nodes")
        assert status == 401
        status, nodes = await get(base + "api/nodes", headers={"Authorization": f"Bearer {token}"})
        assert status == 200
        head: dict[str, Any] = nodes["head"]
        assert head["address"] == cluster.address and head["head_id"]
        assert head["heard_s_ago"] is not None and head["heard_s_ago"] < 5
        status, summary = await get(base + f"api/summary?token={token}")
        assert summary["runtime"]["cluster"] is True
