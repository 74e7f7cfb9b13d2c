"""The cluster's token in a driver's environment does not reach its worker processes nor
what they run: forked by the fork server, started as fresh interpreters, or started by a
node agent that has the token in its own environment."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from cluster._cluster import Cluster

import actorrt

pytestmark = pytest.mark.timeout(120)

SECRET_NAMES = ("ACTORRT_CLUSTER_TOKEN", "ACTORRT_CLUSTER_TOKEN_FILE")


@actorrt.actor(num_cpus=1)
class Peek:
    def seen(self) -> dict[str, Any]:
        child = subprocess.run(
            [sys.executable, "-c", "import os, json; print(json.dumps(dict(os.environ)))"],
            capture_output=True, text=True, check=True,
        )
        return {
            "worker": {k: v for k, v in os.environ.items() if k in SECRET_NAMES},
            "child": {k: v for k, v in json.loads(child.stdout).items() if k in SECRET_NAMES},
            "marker": os.environ.get("ACTORRT_TEST_MARKER"),
        }


@pytest.mark.parametrize("fork_server", ["1", "0"])
async def test_the_token_does_not_reach_a_worker_or_its_children(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, fork_server: str
) -> None:
    monkeypatch.setenv("ACTORRT_FORKSERVER", fork_server)
    monkeypatch.setenv("ACTORRT_CLUSTER_TOKEN", "a" * 64)
    monkeypatch.setenv("ACTORRT_CLUSTER_TOKEN_FILE", str(tmp_path / "token"))
    monkeypatch.setenv("ACTORRT_TEST_MARKER", "inherited")  # other variables still do
    async with actorrt.Runtime(num_cpus=2):
        ref = await Peek.spawn()
        seen = await ref.seen()
    assert seen == {"worker": {}, "child": {}, "marker": "inherited"}


def start_members(cluster: Cluster, monkeypatch: pytest.MonkeyPatch) -> None:
    """A head, and a node given the token itself in its environment (and the file's path)."""
    cluster.start_head("--num-cpus", "0")
    monkeypatch.setenv("ACTORRT_CLUSTER_TOKEN", Path(cluster.token_file).read_text().strip())
    cluster.start_node("--num-cpus", "2", "--resources", '{"ON_NODE": 1}')


async def test_a_node_agents_token_does_not_reach_its_workers(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    cluster = Cluster(tmp_path)  # on loopback: one process group per member
    try:
        start_members(cluster, monkeypatch)
        async with cluster.driver(monkeypatch, "ON_NODE", 1.0):
            ref = await Peek.options(resources={"ON_NODE": 1}).spawn()
            seen = await ref.seen()
            await ref.stop()
    finally:
        cluster.close()
    assert seen["worker"] == {} and seen["child"] == {}, seen
