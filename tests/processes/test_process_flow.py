"""Flow control across processes: a fast sender cannot grow any buffer without bound."""

import asyncio
import time
from pathlib import Path

import pytest
from conftest import rss_mib

import actorrt


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


@actorrt.actor(process=True)
class Sink:
    def __init__(self) -> None:
        self.sums: list[int] = []

    def hold(self, started: str, gate: str) -> None:
        from pathlib import Path

        Path(started).touch()
        deadline = time.monotonic() + 30
        while not Path(gate).exists():  # OS state, polled with a bound
            assert time.monotonic() < deadline, f"{gate} never appeared"
            time.sleep(0.01)

    def take(self, data: object, index: int = 0) -> int:
        import numpy as np

        assert isinstance(data, np.ndarray)
        return index * 1000 + int(data[0]) + len(data)


BOUND = 8 << 20
CHUNK = 2 << 20


async def test_bytes_in_flight_stay_under_the_bound_plus_one_message(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import numpy as np

    monkeypatch.setenv("ACTORRT_MAX_BYTES_IN_FLIGHT", str(BOUND))
    async with actorrt.Runtime(num_cpus=1):
        sink = await Sink.spawn()
        conn = sink._cell.conn
        started, gate = tmp_path / "started", tmp_path / "gate"
        held = sink.hold(str(started), str(gate))
        deadline = time.monotonic() + 30
        while not started.exists():
            assert time.monotonic() < deadline, "hold() never began"
            await asyncio.sleep(0.01)
        # One writable array, sent 80 times from its own memory: each call's 2 MiB (160 MiB
        # in all) are counted in flight; only what fits the bound leaves before answers come.
        data = np.full(CHUNK, 5, dtype=np.uint8)
        before = rss_mib()
        peak_in_flight = 0
        handles = []
        for i in range(80):
            handles.append(sink.take(data, i))
            peak_in_flight = max(peak_in_flight, conn.bytes_in_flight)
        grown = rss_mib() - before
        assert peak_in_flight <= BOUND + CHUNK + 4096, peak_in_flight
        assert grown < 60, f"the driver grew by {grown:.0f} MiB holding 160 MiB of calls"
        # The worker is held up: nothing is answered, the rest wait in line, in order.
        assert not any(h.done() for h in handles)
        gate.touch()
        await held
        results = [await h for h in handles]
        assert results == [i * 1000 + 5 + CHUNK for i in range(80)]
        assert conn.bytes_in_flight == 0

        # A message larger than the bound still goes, alone.
        big = np.full(3 * BOUND, 7, dtype=np.uint8)
        assert await sink.take(big) == 7 + 3 * BOUND


def test_a_bad_bound_on_bytes_in_flight_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    from actorrt._wire._connection import max_in_flight_bytes

    monkeypatch.setenv("ACTORRT_MAX_BYTES_IN_FLIGHT", "64M")
    with pytest.raises(ValueError, match=r"ACTORRT_MAX_BYTES_IN_FLIGHT.*'64M'"):
        max_in_flight_bytes()
    with pytest.raises(ValueError, match="positive"):
        max_in_flight_bytes(0)
    with pytest.raises(TypeError, match="whole number"):
        max_in_flight_bytes(1.5)  # type: ignore[arg-type]
