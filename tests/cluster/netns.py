"""Separate hosts on one machine for cluster tests: Linux network namespaces on a bridge.

``make_network(n)`` builds, in the root namespace (where pytest and the driver run), a bridge
that holds ``root_ip`` and one end of a veth pair per host; the other end sits in the host's
own namespace as ``eth0`` with the host's address, beside ``lo``. Every network gets its own
/24 inside 10.231.0.0/16 (one not routed here already, picked under a file lock so that two
pytest processes never take the same one) and its own names, which encode the creating pid::

    bridge     art<pid36>.<k36>          e.g. art2n9c.0
    veth       art<pid36>.<k36>.<i36>    (the root-side end, <= 15 characters as interface
                                          names must be; the host-side end is its eth0)
    namespace  art<pid36>.<k36>.h<i>     e.g. art2n9c.0.h1

where ``pid36`` is the pid and ``k36`` a per-process counter, both in base 36. Leftovers whose
pid is dead (a run killed before it could clean up) are removed when the next network is made.

Nothing leaves the machine: a host has no route but its /24, and nothing here sets up
forwarding or NAT. Hosts reach the root and each other through the bridge only.

Only the network is separate: hosts share the file system, pids and users with the root, so
a Unix socket in a shared directory still joins two "hosts". Give each host's processes their
own directories (``TMPDIR``, session dirs) where the code under test keeps files or sockets.

A test uses it through the fixtures of ``conftest.py``::

    def test_two_nodes(make_test_network):
        net = make_test_network(2)
        head = net.hosts[0].popen([sys.executable, "-m", "...", "--bind", net.hosts[0].ip])
        net.hosts[1].cut()       # the head sees silence from node 1
        net.hosts[1].restore()

Needs root (``ip netns add`` mounts) and iproute2 (``ip``, ``tc``); ``netns_skip_reason()``
says why not where that is missing. ``netem`` needs the kernel's ``sch_netem`` qdisc, which
not every kernel has: ``netem_skip_reason()``.
"""

from __future__ import annotations

import ipaddress
import itertools
import math
import os
import signal
import subprocess
from typing import Any

from . import _iproute
from ._iproute import NetnsUnavailable

__all__ = [
    "Host",
    "NetnsUnavailable",
    "TestNetwork",
    "make_network",
    "netem_skip_reason",
    "netns_skip_reason",
]

HOST_IF = "eth0"
MAX_HOSTS = 200  # addresses .11 to .210 of the /24
_counter = itertools.count()
NetnsUnavailable.__module__ = __name__  # raised to tests as netns.NetnsUnavailable


class Host:
    """One namespace on the test network: a separate "machine" with its own address."""

    def __init__(self, name: str, ip: str, index: int, veth: str) -> None:
        self.name = name
        self.ip = ip
        self.index = index
        self.veth = veth  # the root-side end of its link, on the bridge
        self._procs: list[subprocess.Popen[Any]] = []
        self._netem = False

    def __repr__(self) -> str:
        return f"Host({self.name!r}, ip={self.ip!r}, index={self.index})"

    def popen(
        self, argv: list[str], *, env: dict[str, str] | None = None, **kw: Any
    ) -> subprocess.Popen[Any]:
        """Start ``argv`` inside the namespace, in a new session (its own process group).

        ``env`` adds to (and overrides) this process's environment; ``kw`` go to
        :class:`subprocess.Popen` as they are (``stdout=subprocess.PIPE``, ``cwd=...``).
        """
        if not argv or not all(isinstance(a, str) for a in argv):
            raise ValueError(f"argv must be a non-empty list of strings, not {argv!r}")
        if kw.get("start_new_session") is False or "process_group" in kw:
            raise ValueError("Host.popen always starts a new session, so kill() reaches it")
        kw["start_new_session"] = True
        full_env = None if env is None else {**os.environ, **env}
        proc = subprocess.Popen(
            [_iproute.ip(), "netns", "exec", self.name, *argv], env=full_env, **kw
        )
        self._procs.append(proc)
        return proc

    def pids(self) -> list[int]:
        """The live processes in this host's namespace, started by ``popen`` or not."""
        return _iproute.pids_in(self.name)

    def kill(self) -> None:
        """SIGKILL every process ``popen`` started (with its process group) and every other
        process in the namespace, then reap the ones ``popen`` started."""
        for proc in self._procs:
            try:
                os.killpg(proc.pid, signal.SIGKILL)  # start_new_session: pgid == pid
            except ProcessLookupError:
                pass
            proc.kill()
        _iproute.kill_all_in(self.name)
        for proc in self._procs:
            proc.wait(timeout=_iproute.KILL_WAIT_S)
            for stream in (proc.stdin, proc.stdout, proc.stderr):
                if stream is not None:
                    stream.close()
        self._procs.clear()

    def cut(self) -> None:
        """Drop every packet to and from the host: its TCP peers see silence (timeouts),
        never a reset.

        A ``blackhole`` qdisc on both ends of its link does it without a change of link
        state (where the kernel lacks that qdisc, the link goes down instead). Taking a
        link down and up is not a short outage: the kernel applies a carrier that comes
        back up to its queues up to a second later, so a link flapping faster than that
        would be down all the time.
        """
        if self._blackhole(True):
            return
        _iproute.run([_iproute.ip(), "link", "set", self.veth, "down"])

    def restore(self) -> None:
        """Let packets through again after :meth:`cut`."""
        if self._blackhole(False):
            return
        _iproute.run([_iproute.ip(), "link", "set", self.veth, "up"])

    def _blackhole(self, on: bool) -> bool:
        """Put a blackhole qdisc on (or take it off) both ends; whether the kernel has it."""
        tc = _iproute.tool("tc")
        if tc is None or self._netem:
            return False
        verb = "replace" if on else "del"
        ends = ([tc, "qdisc", verb, "dev", self.veth, "root"],
                [tc, "-n", self.name, "qdisc", verb, "dev", HOST_IF, "root"])
        for argv in ends:
            done = subprocess.run([*argv, *(["blackhole"] if on else [])],
                                  capture_output=True, text=True, timeout=30)
            if done.returncode != 0 and on:
                return False
        return True

    def netem(self, delay_ms: float = 0, loss_pct: float = 0, jitter_ms: float = 0) -> None:
        """Delay (± jitter) and drop the packets this host sends, with ``tc netem`` on its
        ``eth0``: each round trip with it gains ``delay_ms``. All zero clears it.

        Raises ``NetnsUnavailable`` where the kernel has no netem qdisc.
        """
        for what, value in (("delay_ms", delay_ms), ("jitter_ms", jitter_ms)):
            if not 0 <= value < math.inf:
                raise ValueError(f"{what} must be a finite number >= 0 (ms), not {value!r}")
        if not 0 <= loss_pct <= 100:
            raise ValueError(f"loss_pct must be within 0..100 (percent), not {loss_pct!r}")
        if jitter_ms and not delay_ms:
            raise ValueError(f"jitter_ms={jitter_ms!r} needs a delay_ms above 0 to vary")
        if not (delay_ms or loss_pct):
            self.clear_netem()
            return
        spec = ["delay", f"{delay_ms:.3f}ms", f"{jitter_ms:.3f}ms", "loss", f"{loss_pct:.4f}%"]
        tc = _iproute.tool("tc")
        if tc is None:
            raise NetnsUnavailable("iproute2's `tc` is not installed (apt-get install iproute2)")
        try:
            _iproute.run(
                [tc, "-n", self.name, "qdisc", "replace", "dev", HOST_IF, "root", "netem", *spec]
            )
        except NetnsUnavailable as exc:
            if "unknown" in str(exc):
                raise NetnsUnavailable(
                    "this kernel has no netem qdisc (CONFIG_NET_SCH_NETEM, module sch_netem): "
                    f"{exc}"
                ) from None
            raise
        self._netem = True

    def clear_netem(self) -> None:
        """Remove what :meth:`netem` set; nothing to do when it set nothing."""
        if self._netem:
            tc = _iproute.tool("tc") or "tc"
            _iproute.run([tc, "-n", self.name, "qdisc", "del", "dev", HOST_IF, "root"])
            self._netem = False


class TestNetwork:
    """A bridge in the root namespace and ``hosts`` on it; ``close()`` removes all of it."""

    __test__ = False  # a helper, not a test class pytest should collect

    def __init__(self, stem: str, subnet: ipaddress.IPv4Network) -> None:
        self.stem = stem
        self.subnet = subnet
        self.bridge = stem
        self.root_ip = str(subnet[1])
        self.hosts: list[Host] = []
        self._closed = False

    def __repr__(self) -> str:
        return f"TestNetwork({self.subnet}, root_ip={self.root_ip!r}, hosts={self.hosts!r})"

    def __enter__(self) -> TestNetwork:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        """Kill every host's processes, delete the namespaces, veths and bridge. Idempotent;
        raises ``RuntimeError`` (after trying everything) if anything was left."""
        if self._closed:
            return
        self._closed = True
        errors: list[str] = []
        for host in self.hosts:
            try:
                host.kill()
            except (RuntimeError, subprocess.TimeoutExpired) as exc:
                errors.append(f"{host.name}: {exc}")
        # Deleting the root-side veth removes both ends at once; deleting only the namespace
        # would leave the pair to the kernel's asynchronous namespace cleanup.
        lines = [f"link del {h.veth}" for h in self.hosts] + [f"link del {self.bridge}"]
        _iproute.batch(lines + [f"netns del {h.name}" for h in self.hosts], force=True)
        namespaces, links = _iproute.existing(self.stem)
        if namespaces or links or errors:
            raise RuntimeError(
                f"closing test network {self.stem} left namespaces {sorted(namespaces)} and "
                f"links {sorted(links)} behind; {errors}"
            )


def make_network(n_hosts: int) -> TestNetwork:
    """Make a bridge in the root namespace and ``n_hosts`` host namespaces on it.

    Raises ``NetnsUnavailable`` (with the reason) when it cannot be made, and ``ValueError``
    for a host count outside 1..200.
    """
    if isinstance(n_hosts, bool) or not isinstance(n_hosts, int) or not 1 <= n_hosts <= MAX_HOSTS:
        raise ValueError(f"n_hosts must be an int within 1..{MAX_HOSTS}, not {n_hosts!r}")
    pid, k = os.getpid(), next(_counter)
    stem = _iproute.stem(pid, k)
    with _iproute.creation_lock():
        _iproute.remove_stale()
        net = TestNetwork(stem, _iproute.pick_subnet(pid * 7 + k))
        net.hosts = [
            Host(f"{stem}.h{i}", str(net.subnet[11 + i]), i, f"{stem}.{_iproute.base36(i)}")
            for i in range(n_hosts)
        ]
        lines = [
            f"link add {net.bridge} type bridge forward_delay 0 stp_state 0",
            f"addr add {net.root_ip}/24 dev {net.bridge}",
            f"link set {net.bridge} up",
        ]
        for host in net.hosts:
            lines += [
                f"netns add {host.name}",
                f"link add {host.veth} type veth peer name {HOST_IF} netns {host.name}",
                f"link set {host.veth} master {net.bridge} up",
            ]
        try:
            _iproute.batch(lines)  # the bridge's address is in place before the lock is released
        except NetnsUnavailable as exc:
            _close_after(net, exc)
            raise
    try:
        _configure_hosts(net)
    except BaseException as exc:
        _close_after(net, exc)
        raise
    return net


def _close_after(net: TestNetwork, exc: BaseException) -> None:
    """Remove what a failed ``make_network`` made, keeping its first error the one raised."""
    try:
        net.close()
    except (RuntimeError, NetnsUnavailable) as cleanup:
        exc.add_note(f"and removing what was made failed too: {cleanup}")


def _configure_hosts(net: TestNetwork) -> None:
    """Address and bring up each host's interfaces, one ``ip -n NAME -batch`` each, at once."""
    procs = []
    for host in net.hosts:
        argv = [_iproute.ip(), "-n", host.name, "-batch", "-"]
        procs.append(
            subprocess.Popen(argv, stdin=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        )
    failures = []
    for host, proc in zip(net.hosts, procs, strict=True):
        lines = [f"addr add {host.ip}/24 dev {HOST_IF}", f"link set {HOST_IF} up", "link set lo up"]
        _, err = proc.communicate("\n".join(lines) + "\n", timeout=30)
        if proc.returncode:
            failures.append(f"{host.name}: {err.strip()}")
    if failures:
        raise NetnsUnavailable(f"configuring the hosts failed: {failures}")


_UNCHECKED: Any = object()
_skip_reason: Any = _UNCHECKED
_netem_reason: Any = _UNCHECKED


def _probe() -> str | None:
    if os.geteuid() != 0:
        return f"network namespaces need root (`ip netns add`); running as uid {os.geteuid()}"
    for tool in ("ip", "tc"):
        if _iproute.tool(tool) is None:
            return f"iproute2's `{tool}` is not installed (apt-get install iproute2)"
    try:
        with make_network(1) as net:
            proc = net.hosts[0].popen(["true"], stderr=subprocess.PIPE)
            _, err = proc.communicate(timeout=30)
            if proc.returncode:
                return f"`ip netns exec` does not work here: {err.decode().strip()}"
    except NetnsUnavailable as exc:
        return f"network namespaces cannot be made here: {exc}"
    return None


def netns_skip_reason() -> str | None:
    """None where test networks can be made here; else why not. Checked once, then cached."""
    global _skip_reason
    if _skip_reason is _UNCHECKED:
        _skip_reason = _probe()
    reason: str | None = _skip_reason
    return reason


def netem_skip_reason() -> str | None:
    """None where :meth:`Host.netem` works here; else why not. Checked once, then cached."""
    global _netem_reason
    if _netem_reason is _UNCHECKED:
        _netem_reason = netns_skip_reason()
        if _netem_reason is None:
            with make_network(1) as net:
                try:
                    net.hosts[0].netem(delay_ms=1)
                except NetnsUnavailable as exc:
                    _netem_reason = str(exc)
    reason: str | None = _netem_reason
    return reason
