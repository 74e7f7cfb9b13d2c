"""Calls between actors on two nodes go straight from one node's worker to the other's, over
TLS with the cluster's token, not through the driver; a peer without the token is refused,
a peer that refuses the connection is called through the driver, and a peer killed mid-call
fails the call at once."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import Iterator
from typing import Any

import pytest
from conftest import until_direct as until_direct_calls

import actorrt
from actorrt import AuthenticationError
from actorrt._core._current import current_services
from actorrt._wire._auth import new_secret
from actorrt._wire._tls import client_context
from actorrt._wire._transport import connect_tcp

from ._cluster import Cluster, cluster_on_hosts

pytestmark = pytest.mark.timeout(180)


@pytest.fixture
def cluster(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[Cluster]:
    with cluster_on_hosts(
        tmp_path,
        ["--num-cpus", "0"],
        ["--num-cpus", "2", "--resources", '{"one": 2}'],
        ["--num-cpus", "2", "--resources", '{"two": 2}'],
    ) as made:
        for key, value in made.driver_env().items():
            monkeypatch.setenv(key, value)
        yield made


@actorrt.actor
class Target:
    async def echo(self, value: Any) -> Any:
        return value

    def pid(self) -> int:
        return os.getpid()

    def fail(self) -> None:
        raise LookupError("nothing here")

    def nap(self, seconds: float) -> None:
        time.sleep(seconds)

    def endpoint(self) -> list[Any]:
        routes = current_services().workers.direct  # type: ignore[attr-defined]
        return list(routes._server.address)

    def stop_listening(self) -> None:
        """Close this worker's direct listener and its connections: new ones are refused."""
        current_services().workers.direct._server.close()  # type: ignore[attr-defined]


@actorrt.actor
class Caller:
    def goes_direct(self, ref: Any) -> bool:
        """Whether this worker's calls to ``ref`` take a direct connection now."""
        return bool(ref._cell.direct())

    async def asks(self, ref: Any, n: int) -> int:
        for i in range(n):
            assert await ref.echo(i) == i
        return n

    async def failing(self, ref: Any) -> str:
        try:
            await ref.fail()
        except LookupError as exc:
            return f"LookupError {exc}"
        return "no error"

    async def nap_until_died(self, ref: Any, seconds: float) -> tuple[str, float]:
        start = time.monotonic()
        try:
            await ref.nap(seconds)
        except actorrt.ActorDiedError as exc:
            return str(exc), time.monotonic() - start
        return "answered", time.monotonic() - start


async def spawn_pair(rt: actorrt.Runtime) -> tuple[Any, Any]:
    deadline = time.monotonic() + 20
    while rt.cluster_resources().get("CPU") != 4.0:
        assert time.monotonic() < deadline, rt.cluster_resources()
        await asyncio.sleep(0.05)
    target = await Target.options(num_cpus=1, resources={"two": 1}).spawn()
    caller = await Caller.options(num_cpus=1, resources={"one": 1}).spawn()
    return target, caller


async def until_direct(rt: actorrt.Runtime, caller: Any, target: Any) -> None:
    await until_direct_calls(rt, lambda: caller.asks(target, 5))


async def until_closed_seen(caller: Any, target: Any, within: float = 10.0) -> None:
    """Until ``caller``'s worker has seen its direct connection to ``target`` close (a call
    already on its way when the peer closes is lost with it, as when the peer dies)."""
    deadline = time.monotonic() + within
    while await caller.goes_direct(target):
        assert time.monotonic() < deadline, "the caller never saw its direct connection close"
        await asyncio.sleep(0.02)


async def test_cross_node_calls_go_direct_and_a_wrong_token_is_refused(
    cluster: Cluster,
) -> None:
    async with actorrt.Runtime(address=cluster.address) as rt:
        target, caller = await spawn_pair(rt)
        await until_direct(rt, caller, target)
        before = rt.relayed()["calls"]
        assert await caller.asks(target, 300) == 300
        assert await caller.failing(target) == "LookupError nothing here"
        assert rt.relayed()["calls"] == before
        # The listener is on node two's address, over TLS: without the token, refused.
        host, port = await target.endpoint()
        assert host == cluster.nodes[1].host.ip  # type: ignore[union-attr]
        with pytest.raises(AuthenticationError):
            conn = await connect_tcp(host, port, new_secret(), tls=client_context())
            conn.close()


async def test_a_refused_peer_is_called_through_the_driver(cluster: Cluster) -> None:
    async with actorrt.Runtime(address=cluster.address) as rt:
        target, caller = await spawn_pair(rt)
        await until_direct(rt, caller, target)
        await target.stop_listening()  # the direct connection closes; a new one is refused
        await until_closed_seen(caller, target)
        before = rt.relayed()["calls"]
        assert await caller.asks(target, 50) == 50
        assert rt.relayed()["calls"] - before >= 50


async def test_a_peer_killed_mid_call_fails_the_call_at_once(cluster: Cluster) -> None:
    async with actorrt.Runtime(address=cluster.address) as rt:
        target, caller = await spawn_pair(rt)
        await until_direct(rt, caller, target)
        pid = await target.pid()
        napping = asyncio.ensure_future(caller.nap_until_died(target, 60))
        await asyncio.sleep(0.5)
        os.kill(pid, signal.SIGKILL)  # the namespaces share this machine's pids
        text, took = await asyncio.wait_for(napping, 20)
        assert "went away" in text and took < 5, (text, took)
