"""SIGTERM (how containers, Slurm and Kubernetes stop a program) is an orderly stop with a
bounded grace under ``actorrt.run`` and ``actorrt.init``; an embedded runtime leaves the
signal to its host. Real programs in child processes, real signals."""

import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from conftest import wait_until

import actorrt

pytestmark = pytest.mark.timeout(120)

ACTORS = """
import asyncio, sys, time
from pathlib import Path
import actorrt

marks = Path(sys.argv[1])
hang = sys.argv[2] == "hang"

@actorrt.actor
class Inline:
    async def on_stop(self) -> None:
        (marks / "inline-stopping").touch()
        if hang:
            await asyncio.Event().wait()
        (marks / "inline-stopped").touch()

    def ping(self) -> str:
        return "pong"

@actorrt.actor(process=True)
class Remote:
    def on_stop(self) -> None:
        (marks / "remote-stopped").touch()

    def ping(self) -> str:
        return "pong"
"""

RUN = ACTORS + """
async def main() -> None:
    inline, remote = await Inline.spawn(), await Remote.spawn()
    assert await inline.ping() == await remote.ping() == "pong"
    (marks / "ready").touch()
    try:
        await asyncio.Event().wait()
    finally:
        (marks / "main-finally").touch()

actorrt.run(main, sigterm_grace=float(sys.argv[3]), shutdown_timeout=60)
"""

INIT = ACTORS + """
actorrt.init(sigterm_grace=float(sys.argv[3]), shutdown_timeout=60)
inline, remote = actorrt.get(Inline.spawn()), actorrt.get(Remote.spawn())
assert actorrt.get([inline.ping(), remote.ping()]) == ["pong", "pong"]
(marks / "ready").touch()
try:
    while True:
        time.sleep(1)
finally:
    (marks / "main-finally").touch()
"""


def start(tmp_path: Path, script: str, hang: bool, grace: float) -> subprocess.Popen[bytes]:
    path = tmp_path / "prog.py"
    path.write_text(textwrap.dedent(script))
    log = open(tmp_path / "prog.log", "wb")  # noqa: SIM115 (the child writes it; closed below)
    try:
        child = subprocess.Popen(
            [sys.executable, str(path), str(tmp_path), "hang" if hang else "no", str(grace)],
            stdout=log, stderr=subprocess.STDOUT,
        )
    finally:
        log.close()
    if not wait_until(lambda: (tmp_path / "ready").exists() or child.poll() is not None, 60):
        child.kill()
    assert (tmp_path / "ready").exists(), (tmp_path / "prog.log").read_text()[-3000:]
    return child


def ended(child: subprocess.Popen[bytes], within: float) -> int:
    try:
        return child.wait(timeout=within)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()


@pytest.mark.parametrize("script", [RUN, INIT], ids=["run", "init"])
def test_sigterm_stops_every_actor_in_order_and_exits_143(tmp_path: Path, script: str) -> None:
    child = start(tmp_path, script, hang=False, grace=30)
    child.send_signal(signal.SIGTERM)
    status = ended(child, 60)
    log = (tmp_path / "prog.log").read_text()
    assert status == 128 + signal.SIGTERM, log[-3000:]
    for mark in ("main-finally", "inline-stopped", "remote-stopped"):
        assert (tmp_path / mark).exists(), (mark, log[-3000:])
    assert "SIGTERM" in log and "stops in order" in log


@pytest.mark.parametrize("script", [RUN, INIT], ids=["run", "init"])
def test_a_second_sigterm_ends_the_program_at_once(tmp_path: Path, script: str) -> None:
    child = start(tmp_path, script, hang=True, grace=60)
    child.send_signal(signal.SIGTERM)
    assert wait_until(lambda: (tmp_path / "inline-stopping").exists(), 30), (
        (tmp_path / "prog.log").read_text()[-3000:]
    )
    began = time.monotonic()
    child.send_signal(signal.SIGTERM)
    status = ended(child, 30)
    assert status == -signal.SIGTERM, (tmp_path / "prog.log").read_text()[-3000:]
    assert time.monotonic() - began < 20  # not the grace of 60 s


def test_a_stop_longer_than_the_grace_ends_the_program_by_sigterm(tmp_path: Path) -> None:
    child = start(tmp_path, RUN, hang=True, grace=1)
    began = time.monotonic()
    child.send_signal(signal.SIGTERM)
    status = ended(child, 60)
    log = (tmp_path / "prog.log").read_text()
    assert status == -signal.SIGTERM, log[-3000:]
    assert (tmp_path / "inline-stopping").exists() and not (tmp_path / "inline-stopped").exists()
    assert "did not stop within 1 s" in log, log[-3000:]
    assert time.monotonic() - began < 40  # the grace, not the runtime's shutdown_timeout


async def test_an_embedded_runtime_leaves_sigterm_to_its_host() -> None:
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
    async with actorrt.Runtime():
        assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL


@pytest.mark.parametrize("grace", [0, -1, float("inf"), "10", True])
def test_a_bad_sigterm_grace_is_refused_at_the_call(grace: object) -> None:
    async def main() -> None:
        raise AssertionError("never runs")

    error = TypeError if isinstance(grace, str | bool) else ValueError
    with pytest.raises(error, match="sigterm_grace"):
        actorrt.run(main, sigterm_grace=grace)  # type: ignore[arg-type]
    with pytest.raises(error, match="sigterm_grace"):
        actorrt.init(sigterm_grace=grace)  # type: ignore[arg-type]
    assert not actorrt.is_initialized()
