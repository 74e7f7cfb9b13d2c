"""Flow control across processes: a fast sender cannot grow any buffer without bound."""

import asyncio
import os
import time

import pytest

import actorrt


def rss_mib(pid: int | None = None) -> float:
    with open(f"/proc/{pid or os.getpid()}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


@actorrt.actor(process=True, mailbox_size=100)
class Slow:
    def __init__(self) -> None:
        self.count = 0

    def put(self, item: object) -> None:
        self.count += 1
        deadline = time.perf_counter() + 0.00002  # slower than the sender
        while time.perf_counter() < deadline:
            pass

    def nap(self, seconds: float) -> None:
        time.sleep(seconds)

    def total(self) -> int:
        return self.count

    def rss(self) -> float:
        return rss_mib()


async def test_pipelined_tells_wait_instead_of_piling_up(
    actorrt_runtime: actorrt.Runtime,
) -> None:
    ref = await Slow.spawn()
    await ref.total()
    driver_before, worker_before = rss_mib(), await ref.rss()
    n = 300_000
    for i in range(n):
        await ref.put.tell_wait(i)  # waits whenever the connection is backed up
    assert await ref.total() == n
    # A third of a million queued messages would be tens of MiB; flow control keeps it flat.
    assert rss_mib() - driver_before < 30
    assert await ref.rss() - worker_before < 30


async def test_a_plain_tell_on_a_backed_up_connection_raises(
    actorrt_runtime: actorrt.Runtime,
) -> None:
    ref = await Slow.spawn()
    ref.nap.tell(2.0)  # the actor is busy: its mailbox fills, then the socket, then the buffer
    blob = b"x" * 4096
    with pytest.raises(actorrt.MailboxFullError, match="tell_wait"):
        for _ in range(100_000):
            ref.put.tell(blob)
            await asyncio.sleep(0)
    await ref.kill()
