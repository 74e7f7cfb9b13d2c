"""A traced worker process is left alone while it answers (``strace -f``, a sampling
profiler); one a debugger holds is reported stopped, and answers once let go."""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import subprocess
import time

import pytest
from conftest import eventually, proc_state

import actorrt
from actorrt._processes import _liveness

needs = pytest.mark.skipif(
    shutil.which("strace") is None or shutil.which("gdb") is None,
    reason="strace and gdb are not installed: `make test` installs them as root, "
    "or run `apt-get install strace gdb`",
)


@actorrt.actor(process=True, num_cpus=0.01)
class Busy:
    def pid(self) -> int:
        return os.getpid()

    async def churn(self, seconds: float) -> int:
        # System calls on the event loop's own thread: under strace, each one stops it.
        calls = 0
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            os.stat("/")
            calls += 1
            if calls % 50 == 0:
                await asyncio.sleep(0)
        return calls


def tracer_of(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        line = next(line for line in f if line.startswith("TracerPid:"))
    return int(line.split()[1])


@needs
async def test_a_worker_under_strace_is_not_taken_for_a_stopped_one(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(_liveness, "CHECK_INTERVAL", 0.05)  # many looks while traced
    caplog.set_level(logging.INFO, logger="actorrt")
    async with actorrt.Runtime(num_cpus=2):
        ref = await Busy.spawn()
        pid = await ref.pid()
        strace = await asyncio.create_subprocess_exec(
            "strace", "-f", "-qq", "-o", os.devnull, "-p", str(pid),
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        try:
            assert await eventually(lambda: tracer_of(pid) == strace.pid, 10)
            churning = asyncio.ensure_future(ref.churn(3.0))
            seen: set[str] = set()
            while not churning.done():
                seen.add(proc_state(pid))
                await asyncio.sleep(0.01)
            assert await churning > 0
            assert "t" in seen, seen  # /proc showed it stopped by its tracer, often
            died = await asyncio.wait_for(ref.stop(), 30)  # a graceful stop, still traced
            assert died.reason == "stopped", died
        finally:
            strace.terminate()
            await asyncio.wait_for(strace.wait(), 10)
    assert "is stopped by" not in caplog.text
    assert "killing it" not in caplog.text


@needs
async def test_a_worker_a_debugger_holds_is_stopped_and_answers_once_let_go(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(_liveness, "CHECK_INTERVAL", 0.05)
    caplog.set_level(logging.INFO, logger="actorrt")
    async with actorrt.Runtime(num_cpus=2):
        ref = await Busy.spawn()
        pid = await ref.pid()
        # gdb attaches (every thread stops), holds it 4 s, then detaches.
        gdb = await asyncio.create_subprocess_exec(
            "gdb", "-p", str(pid), "-batch", "-nx", "-ex", "shell sleep 4",
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        try:
            held = f"(pid {pid}) is stopped by a debugger"
            assert await eventually(lambda: held in caplog.text, 30), caplog.text
            assert proc_state(pid) == "t"
            answer = asyncio.ensure_future(ref.pid())  # waits while it is held
            await asyncio.wait_for(gdb.wait(), 60)
            assert await asyncio.wait_for(answer, 30) == pid
            assert await eventually(lambda: f"(pid {pid}) is responsive again" in caplog.text)
        finally:
            if gdb.returncode is None:
                gdb.kill()
                await asyncio.wait_for(gdb.wait(), 10)
        died = await asyncio.wait_for(ref.stop(), 30)
        assert died.reason == "stopped", died
