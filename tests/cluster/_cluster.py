"""A real actorrt cluster for tests: a head and nodes started with ``actorrt start --block``,
each in its own network namespace (``netns.py``), or all on loopback.

Each member gets its own cluster directory; nodes read the head's token from the head's
directory through ``ACTORRT_CLUSTER_TOKEN_FILE``, as a user would copy it. The driver is the
test process itself: ``cluster.driver_env()`` gives it the token file.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import actorrt

from .netns import Host, make_network, netns_skip_reason

START_TIMEOUT = 60.0


class Member:
    """One ``actorrt start --block`` process: a head or a node."""

    def __init__(self, proc: subprocess.Popen[Any], directory: Path, log: Path,
                 host: Host | None, ip: str) -> None:
        self.proc = proc
        self.directory = directory
        self.log = log
        self.host = host
        self.ip = ip
        self.info: dict[str, Any] = {}

    def wait_ready(self, name: str) -> dict[str, Any]:
        deadline = time.monotonic() + START_TIMEOUT
        path = self.directory / name
        while time.monotonic() < deadline:
            try:
                info: dict[str, Any] = json.loads(path.read_text())
                if info.get("pid") == self.proc.pid:
                    self.info = info
                    return info
            except (OSError, ValueError):
                pass
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        raise RuntimeError(f"{name} was not ready in time; its output:\n{self.log.read_text()}")

    def kill(self) -> None:
        """SIGKILL the member and everything it started (its host's processes)."""
        if self.host is not None:
            self.host.kill()
        else:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait()

    def stop(self) -> int:
        """SIGTERM, as `actorrt stop` does; returns its exit code."""
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=30)


class Cluster:
    """A head and nodes (see the module docstring). ``hosts``: one per member, or ``None``
    for loopback (127.0.0.1, one process group each)."""

    def __init__(self, tmp: Path, hosts: list[Host] | None = None) -> None:
        self.tmp = tmp
        self.hosts = hosts
        self.head: Member | None = None
        self.nodes: list[Member] = []
        self._started = 0  # members started: each gets a directory of its own

    @property
    def address(self) -> str:
        assert self.head is not None
        return str(self.head.info["address"])

    @property
    def token_file(self) -> str:
        assert self.head is not None
        return str(self.head.directory / "token")

    def _start(self, index: int, argv: list[str], env: dict[str, str]) -> Member:
        directory = self.tmp / f"member{self._started}"
        self._started += 1
        directory.mkdir(mode=0o700)
        log = directory / "output.log"
        host = self.hosts[index] if self.hosts is not None else None
        ip = host.ip if host is not None else "127.0.0.1"
        env = {**env, "ACTORRT_CLUSTER_DIR": str(directory), "PYTHONUNBUFFERED": "1"}
        command = [sys.executable, "-m", "actorrt", "start", *argv, "--block",
                   "--node-ip-address", ip]
        with open(log, "wb") as out:
            if host is not None:
                proc = host.popen(command, env=env, stdout=out, stderr=subprocess.STDOUT)
            else:
                proc = subprocess.Popen(
                    command, env={**os.environ, **env}, stdout=out, stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
        return Member(proc, directory, log, host, ip)

    def start_head(self, *args: str, port: int = 0) -> Member:
        self.head = self._start(0, ["--head", "--port", str(port), *args], {})
        self.head.wait_ready("head.json")
        return self.head

    def start_node(self, *args: str, host: int | None = None) -> Member:
        """Start a node on the next host, or on host ``host`` (again, once the node that ran
        there is gone: a fresh node where one was lost)."""
        index = len(self.nodes) + 1 if host is None else host
        if self.hosts is not None and not 0 <= index < len(self.hosts):
            raise ValueError(f"host must be within 0..{len(self.hosts) - 1}, not {index!r}")
        member = self._start(index, ["--address", self.address, *args],
                             {"ACTORRT_CLUSTER_TOKEN_FILE": self.token_file})
        member.wait_ready(f"node-{member.proc.pid}.json")
        self.nodes.append(member)
        return member

    def driver_env(self) -> dict[str, str]:
        return {"ACTORRT_CLUSTER_TOKEN_FILE": self.token_file}

    @contextlib.asynccontextmanager
    async def driver(
        self, monkeypatch: Any, resource: str, amount: float
    ) -> AsyncIterator[actorrt.Runtime]:
        """This test process as a driver of the cluster, once the head's view shows
        ``amount`` of ``resource`` (every node has joined)."""
        for key, value in self.driver_env().items():
            monkeypatch.setenv(key, value)
        async with actorrt.Runtime(address=self.address) as runtime:
            deadline = time.monotonic() + 15
            while runtime.cluster_resources().get(resource) != amount:
                assert time.monotonic() < deadline, runtime.cluster_resources()
                await asyncio.sleep(0.02)
            yield runtime

    def close(self) -> None:
        for member in [*self.nodes, *([self.head] if self.head else [])]:
            if member.proc.poll() is None:
                member.kill()


@contextlib.contextmanager
def cluster_on_hosts(
    tmp: Path, head: list[str], *nodes: list[str]
) -> Iterator[Cluster]:
    """A head (``actorrt start --head`` arguments ``head``) and one node per entry of
    ``nodes``, each on its own host of a new test network; skips the test, saying why, where
    namespaces cannot be made. Everything is stopped and removed afterwards."""
    import pytest

    reason = netns_skip_reason()
    if reason is not None:
        pytest.skip(reason)
    net = make_network(1 + len(nodes))
    made = Cluster(tmp, net.hosts)
    try:
        made.start_head(*head)
        for args in nodes:
            made.start_node(*args)
        yield made
    finally:
        made.close()
        net.close()
