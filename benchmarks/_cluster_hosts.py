"""The cluster the cluster benchmark runs on: three hosts in network namespaces, or loopback.

:class:`Hosts` builds it with the cluster tests' own harness (``tests/cluster``: the network
namespaces of ``netns.py``, the ``actorrt start --block`` members of ``_cluster.py``), so the
benchmark and the tests start clusters one way:

- host 0: the head and its node agent; host 1: a node, and the raw TCP echo servers (plain
  and TLS) that the cross-node asks are measured against; host 2: a node, replaced by a fresh
  one for each node-loss measurement. Each node offers ``CPUS_PER_NODE`` CPUs and a resource
  named after its host (``bench_host1``; ``bench_host2_<k>`` for the k-th node on host 2), which
  pins an actor there.
- The driver is the benchmark process, in the root namespace.

Where network namespaces cannot be made (not root, no iproute2), or with ``loopback=True``,
every member is a separate process on 127.0.0.1 instead, and a link cut, which needs a link
of its own, is stood in for by SIGSTOP of the node's processes (the agent, its fork server,
its workers): their sockets stay open and say nothing, as behind a cut link. :attr:`Hosts.mode`
says which ran.
"""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from types import TracebackType
from typing import Any

from tests.cluster._cluster import Cluster, Member
from tests.cluster.netns import TestNetwork, make_network, netns_skip_reason

from ._common import ROOT

CPUS_PER_NODE = 2
HOSTS = 3
ECHO_HOST = 1  # where the pinned echo actor and the raw echo servers run
LOSS_HOST = 2  # where the fresh nodes of the node-loss measurements run


def pin(host: int, k: int | None = None) -> str:
    """The custom resource that pins an actor to host ``host`` (its ``k``-th node there)."""
    return f"bench_host{host}" if k is None else f"bench_host{host}_{k}"


class Hosts:
    """The cluster of the module docstring; a context manager that removes all of it."""

    def __init__(self, tmp: Path, loopback: bool = False) -> None:
        self.loopback_reason = "asked for (--loopback)" if loopback else netns_skip_reason()
        self.net: TestNetwork | None = None
        if self.loopback_reason is None:
            self.net = make_network(HOSTS)
        self.cluster = Cluster(tmp, self.net.hosts if self.net is not None else None)
        self.echo_ports: dict[bool, int] = {}  # tls -> port
        self.echo_pids: dict[bool, int] = {}
        self._servers: list[subprocess.Popen[Any]] = []
        self._fresh = itertools.count()
        self.loss_node: Member | None = None
        self.loss_resource = ""

    @property
    def mode(self) -> str:
        if self.net is None:
            return ("loopback: every member a separate process on 127.0.0.1 (network namespaces "
                    f"not used: {self.loopback_reason}); a link cut is stood in for by SIGSTOP "
                    "of the node's processes")
        return (f"{HOSTS} hosts in network namespaces on a bridge ({self.net.subnet}): head + "
                f"node on host 0, nodes on hosts 1 and 2, {CPUS_PER_NODE} CPUs each; the driver "
                "in the root namespace")

    def ip(self, host: int) -> str:
        return self.net.hosts[host].ip if self.net is not None else "127.0.0.1"

    def __enter__(self) -> Hosts:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def start(self) -> None:
        """The head, the nodes on hosts 1 and 2, and the raw echo servers on host 1."""
        self.cluster.start_head(*self._node_args(pin(0)))
        self.cluster.start_node(*self._node_args(pin(ECHO_HOST)), host=ECHO_HOST)
        self.fresh_loss_node()
        for tls in (False, True):
            self._serve_echo(tls)

    def _node_args(self, resource: str) -> list[str]:
        return ["--num-cpus", str(CPUS_PER_NODE), "--resources", json.dumps({resource: 1})]

    def _serve_echo(self, tls: bool) -> None:
        argv = [sys.executable, "-m", "benchmarks._tcp_echo", "serve", "--host",
                self.ip(ECHO_HOST), "--port", "0", *(["--tls"] if tls else [])]
        if self.net is not None:
            proc = self.net.hosts[ECHO_HOST].popen(argv, stdout=subprocess.PIPE, cwd=ROOT)
        else:
            proc = subprocess.Popen(argv, stdout=subprocess.PIPE, cwd=ROOT,
                                    start_new_session=True)
        self._servers.append(proc)
        assert proc.stdout is not None
        line = proc.stdout.readline().split()
        if len(line) != 2 or line[0] != b"ready":
            raise RuntimeError(f"the raw TCP echo (tls={tls}) did not start: {line!r}")
        self.echo_ports[tls] = int(line[1])
        self.echo_pids[tls] = proc.pid  # `ip netns exec` execs: the same pid is the server

    def fresh_loss_node(self) -> str:
        """Kill the node on host 2 (if one runs) and start a fresh one; its pin resource."""
        if self.loss_node is not None:
            self.loss_node.kill()
        self.loss_resource = pin(LOSS_HOST, next(self._fresh))
        self.loss_node = self.cluster.start_node(*self._node_args(self.loss_resource),
                                                 host=LOSS_HOST)
        return self.loss_resource

    def kill_loss_node(self) -> None:
        """SIGKILL the node on host 2 and everything it started."""
        assert self.loss_node is not None
        self.loss_node.kill()

    def cut_loss_node(self) -> None:
        """Silence the node on host 2: its link cut (loopback: its processes stopped)."""
        assert self.loss_node is not None
        if self.net is not None:
            self.net.hosts[LOSS_HOST].cut()
        else:
            _stop_tree(self.loss_node.proc.pid)

    def end_cut(self) -> None:
        """After :meth:`cut_loss_node`: kill the silent node, then bring the link back."""
        assert self.loss_node is not None
        if self.net is not None:
            self.loss_node.kill()
            self.net.hosts[LOSS_HOST].restore()
        else:
            for pid in _tree(self.loss_node.proc.pid):
                _signal(pid, signal.SIGKILL)
            self.loss_node.proc.wait()

    def close(self) -> None:
        for proc in self._servers:
            proc.terminate()
            proc.wait(timeout=30)
            assert proc.stdout is not None
            proc.stdout.close()
        self._servers.clear()
        try:
            self.cluster.close()
        finally:
            if self.net is not None:
                self.net.close()


def _children() -> dict[int, list[int]]:
    """Every live process's children, from ``/proc/*/stat``."""
    children: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", encoding="ascii", errors="replace") as f:
                parent = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(parent, []).append(int(name))
    return children


def _tree(root: int) -> list[int]:
    """``root`` and its descendants, parents first."""
    children, found = _children(), [root]
    for pid in found:
        found.extend(children.get(pid, []))
    return found


def _stop_tree(root: int) -> None:
    """SIGSTOP ``root`` and its descendants, each before its children are looked up (a
    stopped process starts no new ones)."""
    stopped: set[int] = set()
    while missing := [p for p in _tree(root) if p not in stopped]:
        for pid in missing:
            _signal(pid, signal.SIGSTOP)
            stopped.add(pid)


def _signal(pid: int, signum: int) -> None:
    try:
        os.kill(pid, signum)
    except ProcessLookupError:
        pass
