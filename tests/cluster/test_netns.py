"""Separate hosts on one machine (tests/cluster/netns.py): real namespaces, processes, TCP."""

import os
import shutil
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import proc_state, wait_until

from benchmarks._tcp_echo import echo_pipelined, echo_sequential

from . import _iproute, netns
from .netns import Host, TestNetwork

MakeNetwork = Callable[[int], TestNetwork]
ROOT = Path(__file__).resolve().parents[2]

ECHO_SERVER = """
import socket, sys, threading
def echo(conn):
    with conn:
        while data := conn.recv(65536):
            conn.sendall(data)
srv = socket.create_server((sys.argv[1], 0))
print(srv.getsockname()[1], flush=True)
while True:
    threading.Thread(target=echo, args=(srv.accept()[0],), daemon=True).start()
"""

CLIENT = """
import socket, sys
with socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=10) as s:
    s.sendall(sys.argv[3].encode())
    print(s.recv(100).decode())
"""


def start_echo(host: Host) -> int:
    """Start the echo server on ``host``; its port once it listens."""
    proc = host.popen([sys.executable, "-c", ECHO_SERVER, host.ip], stdout=subprocess.PIPE)
    assert proc.stdout is not None
    return int(proc.stdout.readline())


def run_in(host: Host, *argv: str) -> subprocess.CompletedProcess[str]:
    proc = host.popen(list(argv), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out, err = proc.communicate(timeout=30)
    return subprocess.CompletedProcess(argv, proc.returncode, out, err)


def round_trip(sock: socket.socket, data: bytes) -> bytes:
    sock.sendall(data)
    return sock.recv(100)


def namespaces_and_links() -> str:
    ip = shutil.which("ip") or "/usr/sbin/ip"
    listed = subprocess.run([ip, "netns", "list"], capture_output=True, text=True, check=True)
    links = subprocess.run([ip, "-o", "link", "show"], capture_output=True, text=True, check=True)
    return listed.stdout + links.stdout


def test_hosts_and_the_root_reach_each_other_over_tcp(make_test_network: MakeNetwork) -> None:
    net = make_test_network(2)
    h0, h1 = net.hosts
    assert (h0.index, h1.index) == (0, 1) and len({net.root_ip, h0.ip, h1.ip}) == 3
    port = start_echo(h0)

    with socket.create_connection((h0.ip, port), timeout=10) as sock:  # root -> host
        assert round_trip(sock, b"from root") == b"from root"

    done = run_in(h1, sys.executable, "-c", CLIENT, h0.ip, str(port), "from h1")  # host -> host
    assert (done.returncode, done.stdout) == (0, "from h1\n"), done.stderr

    with socket.create_server((net.root_ip, 0)) as server:  # host -> root
        server.settimeout(10)
        root_port = server.getsockname()[1]
        proc = h1.popen(
            [sys.executable, "-c", CLIENT, net.root_ip, str(root_port), "to root"],
            stdout=subprocess.PIPE,
            text=True,
        )
        conn, (peer_ip, _) = server.accept()
        with conn:
            assert peer_ip == h1.ip  # the root sees the host's own address
            conn.sendall(conn.recv(100))
        assert proc.communicate(timeout=30)[0] == "to root\n"

    # A separate host: its address is not this namespace's, and it routes only the test /24.
    with socket.socket() as sock, pytest.raises(OSError, match="assign requested address"):
        sock.bind((h0.ip, 0))
    routes = run_in(h0, shutil.which("ip") or "/usr/sbin/ip", "-4", "route").stdout.splitlines()
    assert len(routes) == 1 and routes[0].startswith(f"{net.subnet} dev eth0"), routes


def test_cut_gives_silence_and_restore_brings_the_host_back(make_test_network: MakeNetwork) -> None:
    h0 = make_test_network(1).hosts[0]
    port = start_echo(h0)
    with socket.create_connection((h0.ip, port), timeout=10) as sock:
        assert round_trip(sock, b"before") == b"before"
        h0.cut()
        try:
            sock.settimeout(1.0)
            sock.sendall(b"during")  # sits in the send buffer, retransmitted into the void
            with pytest.raises(TimeoutError):  # silence, not ConnectionResetError
                sock.recv(100)
            with pytest.raises(TimeoutError):  # not ConnectionRefusedError
                socket.create_connection((h0.ip, port), timeout=1.0)
        finally:
            h0.restore()
        sock.settimeout(30)  # the next retransmission gets through
        assert sock.recv(100) == b"during"
    with socket.create_connection((h0.ip, port), timeout=10) as sock:
        assert round_trip(sock, b"after") == b"after"


def median_round_trip_s(ip: str, port: int, n: int = 7) -> float:
    with socket.create_connection((ip, port), timeout=10) as sock:
        times = []
        for i in range(n):
            start = time.perf_counter()
            assert round_trip(sock, b"%d" % i) == b"%d" % i
            times.append(time.perf_counter() - start)
    return statistics.median(times)


def test_netem_delay_lengthens_the_round_trip(make_test_network: MakeNetwork) -> None:
    reason = netns.netem_skip_reason()
    if reason is not None:
        pytest.skip(reason)
    h0 = make_test_network(1).hosts[0]
    port = start_echo(h0)
    assert median_round_trip_s(h0.ip, port) < 0.05
    h0.netem(delay_ms=50)
    assert median_round_trip_s(h0.ip, port) >= 0.05
    h0.clear_netem()
    assert median_round_trip_s(h0.ip, port) < 0.05


def test_netem_says_so_where_the_kernel_has_none(make_test_network: MakeNetwork) -> None:
    if netns.netem_skip_reason() is None:
        pytest.skip("this kernel has netem: test_netem_delay_lengthens_the_round_trip runs")
    h0 = make_test_network(1).hosts[0]
    with pytest.raises(netns.NetnsUnavailable, match="this kernel has no netem qdisc"):
        h0.netem(delay_ms=50)
    h0.clear_netem()  # nothing was set


def test_netem_rejects_bad_values_naming_them(make_test_network: MakeNetwork) -> None:
    h0 = make_test_network(1).hosts[0]
    with pytest.raises(ValueError, match=r"delay_ms must be a finite number >= 0 .*-1"):
        h0.netem(delay_ms=-1)
    with pytest.raises(ValueError, match=r"jitter_ms must be a finite number >= 0 .*inf"):
        h0.netem(delay_ms=5, jitter_ms=float("inf"))
    with pytest.raises(ValueError, match=r"loss_pct must be within 0..100 .*101"):
        h0.netem(loss_pct=101)
    with pytest.raises(ValueError, match="jitter_ms=5 needs a delay_ms"):
        h0.netem(jitter_ms=5)
    h0.netem()  # all zero: nothing to set, nothing to clear
    h0.clear_netem()


STUBBORN = """
import os, signal, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
if os.fork() == 0:
    os.setsid()  # out of the host's process group: only the namespace scan finds it
    print(os.getpid(), flush=True)
while True:
    time.sleep(60)
"""


def test_close_leaves_no_namespace_link_or_process(make_test_network: MakeNetwork) -> None:
    net = make_test_network(2)
    h0, h1 = net.hosts
    stubborn = h0.popen([sys.executable, "-c", STUBBORN], stdout=subprocess.PIPE, text=True)
    assert stubborn.stdout is not None
    escaped = int(stubborn.stdout.readline())
    sleeper = h1.popen(["sleep", "600"])
    assert {stubborn.pid, escaped} <= set(h0.pids())
    assert wait_until(lambda: h1.pids() == [sleeper.pid])  # once `ip netns exec` entered it
    names = [net.bridge] + [h.name for h in net.hosts] + [h.veth for h in net.hosts]
    assert all(name in namespaces_and_links() for name in names)

    net.close()

    assert stubborn.returncode == -9 and sleeper.returncode == -9
    assert wait_until(lambda: proc_state(escaped) in ("gone", "Z")), proc_state(escaped)
    left = namespaces_and_links()
    assert [name for name in names if name in left] == []
    net.close()  # idempotent


def test_kill_stops_a_host_that_can_then_run_again(make_test_network: MakeNetwork) -> None:
    h0 = make_test_network(1).hosts[0]
    stubborn = h0.popen([sys.executable, "-c", STUBBORN], stdout=subprocess.PIPE, text=True)
    assert stubborn.stdout is not None
    escaped = int(stubborn.stdout.readline())
    h0.kill()
    assert stubborn.returncode == -9 and h0.pids() == []
    assert wait_until(lambda: proc_state(escaped) in ("gone", "Z"))
    port = start_echo(h0)  # a node restarted on the same host
    with socket.create_connection((h0.ip, port), timeout=10) as sock:
        assert round_trip(sock, b"again") == b"again"


def test_leftovers_of_a_dead_run_are_removed(make_test_network: MakeNetwork) -> None:
    dead = subprocess.Popen(["true"])
    dead.wait()
    stem = _iproute.stem(dead.pid, 5)  # names as a run with that (now dead) pid made them
    ip = shutil.which("ip") or "/usr/sbin/ip"
    with _iproute.creation_lock():  # no other test run removes them before they are in place
        subprocess.run([ip, "netns", "add", f"{stem}.h0"], check=True)
        subprocess.run([ip, "link", "add", stem, "type", "bridge"], check=True)
        left_running = subprocess.Popen([ip, "netns", "exec", f"{stem}.h0", "sleep", "600"])
        assert wait_until(lambda: left_running.pid in _iproute.pids_in(f"{stem}.h0"))

    make_test_network(1)

    assert left_running.wait(timeout=10) == -9
    left = namespaces_and_links()
    assert f"{stem}.h0" not in left and f"{stem}:" not in left and f"{stem}@" not in left


INNER_TEST = """
import os, time

def test_fails(make_test_network):
    net = make_test_network(2)
    sleeper = net.hosts[0].popen(["sleep", "600"])
    names = [net.bridge] + [h.name for h in net.hosts] + [h.veth for h in net.hosts]
    with open(os.environ["NETNS_REPORT"], "w") as f:
        f.write(" ".join([str(sleeper.pid), *names]))
    if os.environ.get("NETNS_HANG"):
        time.sleep(600)
    assert False, "fails on purpose"
"""


def inner_pytest(tmp_path: Path, hang: bool) -> tuple[subprocess.Popen[str], Path]:
    """A pytest run of ``INNER_TEST`` with the cluster fixtures, in a process of its own."""
    (tmp_path / "test_inner.py").write_text(INNER_TEST)
    report = tmp_path / "report"
    pythonpath = os.pathsep.join([str(ROOT / "tests"), str(ROOT)])
    env = dict(os.environ, PYTHONPATH=pythonpath, NETNS_REPORT=str(report))
    if hang:
        env["NETNS_HANG"] = "1"
    argv = [sys.executable, "-m", "pytest", "-q", "-p", "cluster.conftest", "-c", os.devnull]
    argv += ["--rootdir", str(tmp_path), str(tmp_path / "test_inner.py")]
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, text=True, cwd=tmp_path)
    return proc, report


def test_a_failed_test_leaves_nothing_behind(tmp_path: Path) -> None:
    if (reason := netns.netns_skip_reason()) is not None:
        pytest.skip(reason)
    proc, report = inner_pytest(tmp_path, hang=False)
    out = proc.communicate(timeout=60)[0]
    assert proc.returncode == 1 and "fails on purpose" in out, out
    sleeper, *names = report.read_text().split()
    assert wait_until(lambda: proc_state(int(sleeper)) in ("gone", "Z"))
    left = namespaces_and_links()
    assert [name for name in names if name in left] == []


def test_the_leftovers_of_a_killed_run_go_with_the_next_network(
    tmp_path: Path, make_test_network: MakeNetwork
) -> None:
    proc, report = inner_pytest(tmp_path, hang=True)
    made = wait_until(lambda: report.exists() and report.stat().st_size > 0, timeout=30)
    with _iproute.creation_lock():  # no other test run removes the leftovers meanwhile
        proc.kill()  # as a crash or an OOM kill would: no teardown runs
        out = proc.communicate(timeout=30)[0]
        assert made, out
        sleeper, *names = report.read_text().split()
        assert all(name in namespaces_and_links() for name in names)
        assert proc_state(int(sleeper)) not in ("gone", "Z")

    make_test_network(1)

    assert wait_until(lambda: proc_state(int(sleeper)) in ("gone", "Z"))
    left = namespaces_and_links()
    assert [name for name in names if name in left] == []


def test_networks_get_their_own_subnets_and_cannot_reach_each_other(
    make_test_network: MakeNetwork,
) -> None:
    a, b = make_test_network(1), make_test_network(1)
    assert not a.subnet.overlaps(b.subnet) and a.bridge != b.bridge
    assert a.hosts[0].name != b.hosts[0].name and a.hosts[0].veth != b.hosts[0].veth
    assert all(len(name) <= 15 for name in (a.bridge, b.bridge, a.hosts[0].veth))
    port = start_echo(b.hosts[0])
    done = run_in(a.hosts[0], sys.executable, "-c", CLIENT, b.hosts[0].ip, str(port), "x")
    assert done.returncode != 0 and "Network is unreachable" in done.stderr


def test_three_hosts_are_made_in_well_under_a_second(make_test_network: MakeNetwork) -> None:
    start = time.perf_counter()
    net = make_test_network(3)
    elapsed = time.perf_counter() - start
    assert len(net.hosts) == 3 and elapsed < 1.0, f"{elapsed:.3f} s"


def test_the_test_network_fixture_has_three_hosts(test_network: TestNetwork) -> None:
    assert [h.index for h in test_network.hosts] == [0, 1, 2]
    assert str(test_network.subnet[1]) == test_network.root_ip


async def test_tcp_echo_baseline_runs_between_root_and_hosts(
    make_test_network: MakeNetwork,
) -> None:
    h0, h1 = make_test_network(2).hosts
    serve = [sys.executable, "-m", "benchmarks._tcp_echo", "serve", "--host", h0.ip]
    pythonpath = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    server = h0.popen(
        [*serve, "--port", "0"], stdout=subprocess.PIPE, env={"PYTHONPATH": pythonpath}, cwd=ROOT
    )
    assert server.stdout is not None
    ready, port = server.stdout.readline().split()
    assert ready == b"ready"
    assert await echo_sequential(h0.ip, int(port), 300) > 0  # root -> host
    assert await echo_pipelined(h0.ip, int(port), 3000, 100) > 0
    client = [sys.executable, "-m", "benchmarks._tcp_echo", "client", "--host", h0.ip]
    args = ["--port", port.decode(), "--n-seq", "300", "--n-pipe", "3000", "--window", "100"]
    done = h1.popen(  # host -> host
        [*client, *args], stdout=subprocess.PIPE, env={"PYTHONPATH": pythonpath}, cwd=ROOT
    )
    out, _ = done.communicate(timeout=30)
    assert done.returncode == 0 and b'"pipelined_per_s"' in out


def test_skips_saying_why_when_not_root(
    monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> None:
    monkeypatch.setattr(netns, "_skip_reason", netns._UNCHECKED)
    monkeypatch.setattr(netns.os, "geteuid", lambda: 1000)
    reason = netns.netns_skip_reason()
    assert reason is not None and "need root" in reason and "uid 1000" in reason
    with pytest.raises(pytest.skip.Exception, match="need root"):
        request.getfixturevalue("test_network")


def test_skips_saying_why_without_iproute2(
    monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> None:
    monkeypatch.setattr(netns, "_skip_reason", netns._UNCHECKED)
    monkeypatch.setattr(netns.os, "geteuid", lambda: 0)
    monkeypatch.setattr(_iproute, "tool", lambda name: None)
    with pytest.raises(pytest.skip.Exception, match="`ip` is not installed"):
        request.getfixturevalue("make_test_network")


def test_bad_arguments_name_the_value() -> None:
    with pytest.raises(ValueError, match="n_hosts must be an int within 1..200, not 0"):
        netns.make_network(0)
    host = Host("unused", "10.231.0.11", 0, "unused")
    with pytest.raises(ValueError, match="non-empty list of strings, not"):
        host.popen([])
    with pytest.raises(ValueError, match="always starts a new session"):
        host.popen(["true"], start_new_session=False)
