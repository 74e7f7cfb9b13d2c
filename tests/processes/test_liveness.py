"""Liveness: a worker process that is stopped (SIGSTOP) or never answers is noticed,
reported, shown by ``actorrt status``, and a stop escalates to a kill."""

from __future__ import annotations

import asyncio
import json
import logging
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import eventually, proc_state

import actorrt
from actorrt._control._server import _discovery
from actorrt._processes import _liveness

CLI = os.path.join(os.path.dirname(sys.executable), "actorrt")


def state(pid: int) -> str:
    return proc_state(pid)


@actorrt.actor(process=True, num_cpus=0.01)
class Sleeper:
    def pid(self) -> int:
        return os.getpid()

    def nap(self, seconds: float) -> str:
        time.sleep(seconds)
        return "rested"

    async def linger(self, seconds: float) -> str:
        await asyncio.sleep(seconds)
        return "lingered"

    def hog(self) -> None:
        sum(range(10**14))  # one C call that never lets the GIL go


def status(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([CLI, "status", *args], capture_output=True, text=True, timeout=30)


async def test_a_stopped_worker_is_reported_shown_and_a_stop_kills_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv(_discovery.DIR_ENV, str(tmp_path / "discovery"))
    monkeypatch.delenv(_discovery.ENABLE_ENV, raising=False)
    caplog.set_level(logging.INFO, logger="actorrt")
    async with actorrt.Runtime(num_cpus=2):
        ref = await Sleeper.options(name="frozen").spawn()
        pid = await ref.pid()
        os.kill(pid, signal.SIGSTOP)
        waiting = asyncio.ensure_future(ref.nap(0))
        assert await eventually(lambda: f"(pid {pid}) is stopped by a signal" in caplog.text)
        assert "Sleeper(" in caplog.text and "name='frozen'" in caplog.text

        shown = await asyncio.to_thread(status, "--json")
        assert shown.returncode == 0, shown.stderr
        [actor] = [a for a in json.loads(shown.stdout)["actors"] if a["name"] == "frozen"]
        assert actor["state"] == "unresponsive" and actor["pid"] == pid
        assert actor["unresponsive"].startswith("stopped by a signal")
        text = (await asyncio.to_thread(status)).stdout
        row = next(line for line in text.splitlines() if line.strip().startswith("frozen"))
        assert "unresponsive" in row and "stopped by a signal" in row, text

        os.kill(pid, signal.SIGCONT)  # continued: the held ask is answered, nothing killed
        assert await asyncio.wait_for(waiting, 30) == "rested"
        assert await eventually(lambda: f"(pid {pid}) is responsive again" in caplog.text)

        os.kill(pid, signal.SIGSTOP)
        assert await eventually(lambda: state(pid) == "T")
        pending = asyncio.ensure_future(ref.nap(0))
        started = time.monotonic()
        died = await asyncio.wait_for(ref.stop(), 30)  # no grace given: it can never stop
        assert died.reason == "killed", died
        assert time.monotonic() - started < 15
        with pytest.raises(actorrt.ActorDiedError):
            await pending
        assert await eventually(lambda: state(pid) == "gone")
        assert "killing it" in caplog.text


async def test_a_worker_holding_the_gil_is_unresponsive_and_can_be_killed(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(_liveness, "UNRESPONSIVE_AFTER", 1.0)
    async with actorrt.Runtime(num_cpus=2):
        ref = await Sleeper.spawn()
        pid = await ref.pid()
        ref.hog.tell()
        pending = asyncio.ensure_future(ref.pid())
        assert await eventually(lambda: f"(pid {pid}) is not answering" in caplog.text, 30)
        died = await asyncio.wait_for(ref.kill(), 10)  # no polite kill request: SIGKILL
        assert died.reason == "killed"
        with pytest.raises(actorrt.ActorDiedError):
            await pending


@pytest.mark.parametrize("process", [True, False])
async def test_stop_with_grace_kills_an_actor_that_does_not_stop_in_time(
    actorrt_runtime: actorrt.Runtime, process: bool, caplog: pytest.LogCaptureFixture
) -> None:
    ref = await Sleeper.options(process=process).spawn()
    busy = asyncio.ensure_future(ref.linger(60))
    await asyncio.sleep(0)
    started = time.monotonic()
    died = await ref.stop(grace=0.5)
    assert died.reason == "killed" and time.monotonic() - started < 10
    assert "did not stop within its grace of 0.5 s: killing it" in caplog.text
    with pytest.raises(actorrt.ActorDiedError):
        await busy


async def test_stop_grace_must_be_a_finite_number(actorrt_runtime: actorrt.Runtime) -> None:
    ref = await Sleeper.options(process=False).spawn()
    for bad in (-1, math.nan, math.inf):
        with pytest.raises(ValueError, match=f"got {bad!r}"):
            await ref.stop(grace=bad)
    with pytest.raises(TypeError, match="got '1'"):
        await ref.stop(grace="1")  # type: ignore[arg-type]
    assert (await ref.stop(grace=5)).reason == "stopped"
