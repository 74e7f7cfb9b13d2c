"""A loss always leaves its reason in a log, at both ends. A driver the head drops for silence
(here: its process stopped for longer than the heartbeats allow) is named in the head's log
with why, and the driver, once it runs again, says that the head is lost and why, and fails
what it asks for from then on instead of waiting."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ._cluster import Cluster

pytestmark = pytest.mark.timeout(120)

DRIVER = """
import asyncio
import sys

import actorrt


@actorrt.actor
class Holder:
    def ping(self):
        return "pong"


async def main():
    async with actorrt.Runtime(address=sys.argv[1]) as rt:
        holder = await Holder.options(num_cpus=1).spawn()
        print("ready", await holder.ping(), flush=True)
        await asyncio.to_thread(sys.stdin.readline)  # the test stops this process meanwhile
        try:
            await Holder.options(num_cpus=1).spawn()
            print("spawned", flush=True)
        except Exception as exc:
            print("failed:", type(exc).__name__, exc, flush=True)

asyncio.run(main())
"""


def _wait_for(what: str, check: object, within: float = 30.0) -> None:
    deadline = time.monotonic() + within
    while not check():  # type: ignore[operator]
        if time.monotonic() > deadline:
            pytest.fail(f"{what} within {within} s")
        time.sleep(0.05)


def test_a_driver_dropped_for_silence_is_logged_at_both_ends(tmp_path: Path) -> None:
    cluster = Cluster(tmp_path)
    try:
        head = cluster.start_head("--num-cpus", "2")
        driver = subprocess.Popen(
            [sys.executable, "-c", DRIVER, cluster.address],
            env={**os.environ, **cluster.driver_env()}, stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        try:
            assert driver.stdout is not None and driver.stdin is not None
            first = driver.stdout.readline()
            if first.split() != ["ready", "pong"]:
                driver.kill()
                pytest.fail(f"the driver did not start: {first}{driver.communicate()}")
            driver.send_signal(signal.SIGSTOP)
            try:
                _wait_for("the head did not log the silent driver",
                          lambda: "nothing heard from it" in head.log.read_text())
            finally:
                driver.send_signal(signal.SIGCONT)
            line = next(x for x in head.log.read_text().splitlines()
                        if f"pid {driver.pid}) is lost" in x)
            assert "WARNING" in line and "is lost: nothing heard from it for" in line, line
            driver.stdin.write("go\n")
            driver.stdin.flush()
            out, err = driver.communicate(timeout=60)
        finally:
            if driver.poll() is None:
                driver.kill()
                driver.communicate()
        # The head is fine: the driver hears that the head dropped it, not that it is lost.
        assert "failed: DriverDroppedError" in out and "dropped this driver" in out, (out, err)
        assert "actorrt cluster's head at" in err and "dropped this driver" in err, err
    finally:
        cluster.close()
