"""`actorrt start`, `actorrt status --address` and `actorrt stop` as a user runs them, on
loopback: a head and a node in the background, a program that uses them with
``address="auto"``, and nothing left running after `actorrt stop`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

import actorrt

pytestmark = pytest.mark.timeout(120)


def cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "actorrt", *args], env={**os.environ, **env},
        capture_output=True, text=True, timeout=90,
    )


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(") ", 1)[1][0] != "Z"
    except OSError:
        return False


@actorrt.actor
class Where:
    def pid(self) -> int:
        return os.getpid()


def test_start_status_use_and_stop_a_cluster(tmp_path: Path, monkeypatch: Any) -> None:
    env = {"ACTORRT_CLUSTER_DIR": str(tmp_path / "cluster")}
    head = cli("start", "--head", "--port", "0", "--node-ip-address", "127.0.0.1",
               "--num-cpus", "1", env=env)
    pids: list[int] = []
    try:
        assert head.returncode == 0, head.stderr
        assert "actorrt head ready at 127.0.0.1:" in head.stdout
        info = json.loads((tmp_path / "cluster" / "head.json").read_text())
        pids.append(info["pid"])
        token = tmp_path / "cluster" / "token"
        assert token.stat().st_mode & 0o777 == 0o600
        assert token.read_text().strip() not in head.stdout + head.stderr  # never shown

        node = cli("start", "--address", info["address"], "--node-ip-address", "127.0.0.1",
                   "--num-cpus", "2", "--resources", '{"far": 1}', env=env)
        assert node.returncode == 0, node.stderr
        pids += [json.loads(p.read_text())["pid"]
                 for p in (tmp_path / "cluster").glob("node-*.json")]

        status = cli("status", "--address", "auto", "--json", env=env)
        assert status.returncode == 0, status.stderr
        data = json.loads(status.stdout)
        assert len(data["nodes"]) == 2 and data["total"]["CPU"] == 3.0
        text = cli("status", "--address", "auto", env=env).stdout
        assert "2 node(s)" in text and "far 1/1" in text
        # No program runs here, but the head does: plain `actorrt status` shows the cluster.
        plain = cli("status", env={**env, "ACTORRT_DISCOVERY_DIR": str(tmp_path / "none")})
        assert "2 node(s)" in plain.stdout, plain.stderr

        monkeypatch.setenv("ACTORRT_CLUSTER_DIR", env["ACTORRT_CLUSTER_DIR"])
        actorrt.init()  # as ray.init(): the cluster whose head runs on this machine
        try:
            assert actorrt.cluster_resources()["CPU"] == 3.0  # at once, from the join
            far = actorrt.get(Where.options(num_cpus=1, resources={"far": 1}).spawn())
            assert actorrt.get(far.pid()) != os.getpid()
        finally:
            actorrt.shutdown()
    finally:
        stop = cli("stop", env=env)
    assert stop.returncode == 0, stop.stderr
    assert stop.stdout.count("stopped the") == 2, stop.stdout
    deadline = time.monotonic() + 10
    while any(alive(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(alive(pid) for pid in pids)
    assert "no actorrt head or node" in cli("stop", env=env).stdout


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--address", "no-port:x"], "HOST:PORT"),
        (["--head", "--resources", "[1]"], "--resources"),
        (["--head", "--num-cpus", "-1"], "--num-cpus"),
        (["--address", "127.0.0.1:9"], "no cluster token"),
        (["--head", "--address", "127.0.0.1:9"], "not allowed with"),
        (["--address", "127.0.0.1:9", "--tls-cert", "c.pem"], "are the head's"),
        (["--head", "--token-file", "/nonexistent"], "does not exist"),
    ],
)
def test_bad_start_arguments_are_named(tmp_path: Path, args: list[str], said: str) -> None:
    done = cli("start", *args, env={"ACTORRT_CLUSTER_DIR": str(tmp_path)})
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert said in done.stderr


def test_a_program_told_auto_without_a_head_says_so(tmp_path: Path, monkeypatch: Any) -> None:
    monkeypatch.setenv("ACTORRT_CLUSTER_DIR", str(tmp_path))
    monkeypatch.setenv("RAY_ADDRESS", "10.0.0.1:6379")  # a Ray cluster's: said, not used
    with pytest.warns(UserWarning, match="RAY_ADDRESS"):
        actorrt.init(num_cpus=1)
    actorrt.shutdown()
    monkeypatch.delenv("RAY_ADDRESS")
    monkeypatch.setenv("ACTORRT_ADDRESS", "127.0.0.1:9")  # init() goes there, as Ray would
    with pytest.raises(ValueError, match="no cluster token"):
        actorrt.init()
    monkeypatch.setenv("ACTORRT_CLUSTER_TOKEN", "ab" * 32)
    with pytest.raises(ConnectionError, match="127.0.0.1:9"):
        actorrt.init()
    monkeypatch.delenv("ACTORRT_ADDRESS")
    with pytest.raises(ValueError, match="actorrt start --head"):
        actorrt.Runtime(address="auto")
    with pytest.raises(ValueError, match="HOST:PORT"):
        actorrt.Runtime(address="10.0.0.1:99999")
    with pytest.raises(ValueError, match="from the cluster's nodes"):
        actorrt.Runtime(address="10.0.0.1:7000", num_cpus=2)


def test_a_head_uses_the_token_it_is_given(tmp_path: Path) -> None:
    given = tmp_path / "secret-token"
    given.write_text("cd" * 32 + "\n")
    env = {"ACTORRT_CLUSTER_DIR": str(tmp_path / "cluster")}
    head = cli("start", "--head", "--port", "0", "--node-ip-address", "127.0.0.1",
               "--num-cpus", "1", "--token-file", str(given), env=env)
    try:
        assert head.returncode == 0, head.stderr
        assert (tmp_path / "cluster" / "token").read_text().strip() == "cd" * 32
        assert "1 node(s)" in cli("status", "--address", "auto", env=env).stdout
    finally:
        cli("stop", env=env)
