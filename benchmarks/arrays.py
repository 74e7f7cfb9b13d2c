"""Large numpy arrays between processes against a raw Unix-socket transfer of the same bytes.

- driver -> actor: ``await sink.take(array)`` to an ``@actorrt.actor(process=True)`` actor
  that answers with the array's size, with a writable array (what a user passes; an ask's
  arrays are sent from their own memory) and with a read-only one;
- actor -> driver: ``await sink.give()``, an array the actor keeps (writable: a reply's is
  copied when it is sent, so the actor may change it after);
- actor -> actor: a ``Pusher`` actor in a second worker process times ``await
  sink.take(array)`` itself, over the direct connection between the two workers (the
  runtime's relay count is checked to stay put);
- baseline: the same bytes over a ``socket.socketpair()`` between this process and a child
  process, which reads them into a preallocated numpy buffer and answers one byte; twice in
  each repetition, once with the kernel's default send buffer and once with the one actorrt
  gives a Unix socket that carries large frames (4 MiB, capped by ``net.core.wmem_max``),
  and the faster of the two is the floor (a small buffer keeps the copies in the CPU's
  cache; a large one wakes the two ends less often).

Beside the times, the CPU time of each transfer in the sending and the receiving process
(all threads, ``/proc/PID/task/*/schedstat``) for driver -> actor (writable) and the raw
transfer: a machine loaded by other work slows wall time through wake-up delays far more
than it changes the CPU a transfer costs.

Each figure is the best of ``--reps`` (a transfer this large is bound by memory bandwidth,
which other work on the machine only slows); the raw transfer runs in every repetition
beside them, and ratios are speed ratios against it. Targets (``--check``): driver -> actor
(writable) at least 0.7 of the raw transfer, actor -> actor at least 0.5.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import struct
import subprocess
import sys
import time
from typing import Any

import numpy as np
import uvloop

import actorrt
from actorrt._wire._writer import SEND_BUFFER

from ._common import Figure, exit_for, report

TARGET_TO_ACTOR = 0.7
TARGET_ACTOR_TO_ACTOR = 0.5
_LENGTH = struct.Struct("!Q")
KEYS = ("writable", "read-only", "back", "a2a", "raw")  # the figures' samples, floor last


@actorrt.actor(process=True)
class Sink:
    def __init__(self, nbytes: int) -> None:
        self.array = np.ones(nbytes, dtype=np.uint8)

    def take(self, array: np.ndarray) -> int:
        return int(array.nbytes)

    def give(self) -> np.ndarray:
        return self.array

    def pid(self) -> int:
        return os.getpid()


@actorrt.actor(process=True)
class Pusher:
    """Sends its own array to another worker's actor and times the ask."""

    def __init__(self, sink: Any, nbytes: int) -> None:
        self.sink = sink
        self.array = np.ones(nbytes, dtype=np.uint8)

    async def push(self) -> float:
        """Milliseconds of one ``await sink.take(array)`` from this worker."""
        start = time.perf_counter()
        await self.sink.take(self.array)
        return (time.perf_counter() - start) * 1000

    def pid(self) -> int:
        return os.getpid()


_CHILD = """
import socket, struct, sys
import numpy as np
sock = socket.socket(fileno=int(sys.argv[1]))
into = None
while True:
    head = sock.recv(8, socket.MSG_WAITALL)
    if len(head) < 8:
        break
    (n,) = struct.unpack("!Q", head)
    if into is None or len(into) < n:
        into = memoryview(np.ones(n, dtype=np.uint8))  # preallocated and faulted in
    got = 0
    while got < n:
        got += sock.recv_into(into[got:n])
    sock.send(b"!")
"""


class RawTransfer:
    """The floor: a child process that reads length-prefixed bytes from a socket pair into
    a preallocated buffer and answers each with one byte."""

    def __init__(self, send_buffer: int | None) -> None:
        self.ours, theirs = socket.socketpair()
        if send_buffer is not None:
            self.ours.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, send_buffer)
        self.child = subprocess.Popen(
            [sys.executable, "-c", _CHILD, str(theirs.fileno())], pass_fds=[theirs.fileno()]
        )
        theirs.close()

    def ms(self, data: np.ndarray) -> float:
        """Milliseconds to send ``data`` and get the child's answer."""
        start = time.perf_counter()
        self.ours.sendall(_LENGTH.pack(data.nbytes))
        self.ours.sendall(memoryview(data))
        if self.ours.recv(1) != b"!":
            raise RuntimeError("the raw transfer's child process went away")
        return (time.perf_counter() - start) * 1000

    def close(self) -> None:
        self.ours.close()
        self.child.wait(timeout=30)


def cpu_ms(pid: int) -> float:
    """CPU time of every thread of process ``pid`` so far, in milliseconds."""
    total = 0
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{task}/schedstat") as f:
                total += int(f.read().split()[0])
        except OSError:  # the thread ended meanwhile
            pass
    return total / 1e6


def with_cpu(run: Any, peer: int) -> tuple[float, float]:
    """``run()``'s CPU milliseconds here and in process ``peer``."""
    here, there = cpu_ms(os.getpid()), cpu_ms(peer)
    run()
    return cpu_ms(os.getpid()) - here, cpu_ms(peer) - there


async def measure(nbytes: int, reps: int) -> dict[str, Any]:
    got: dict[str, Any] = {
        key: [] for key in (*KEYS, "raw_default", "raw_wide", "cpu_writable", "cpu_raw")
    }
    writable = np.ones(nbytes, dtype=np.uint8)
    read_only = writable.copy()
    read_only.flags.writeable = False
    raws = [RawTransfer(None), RawTransfer(SEND_BUFFER)]
    try:
        async with actorrt.Runtime() as runtime:
            sink = await Sink.spawn(nbytes)
            pusher = await Pusher.spawn(sink, nbytes)
            if await sink.pid() == await pusher.pid():
                raise RuntimeError("the two actors share a worker process")
            for raw in raws:
                raw.ms(writable)  # the child's buffer: allocated and faulted in
            assert await sink.take(writable) == nbytes  # warm up
            await pusher.push()  # the pusher's first ask connects it to the sink's worker
            relayed = runtime.relayed()["calls"]
            sink_pid = await sink.pid()
            for _ in range(reps):
                here, there = cpu_ms(os.getpid()), cpu_ms(sink_pid)
                await sink.take(writable)
                got["cpu_writable"].append((cpu_ms(os.getpid()) - here, cpu_ms(sink_pid) - there))
                got["cpu_raw"].append(with_cpu(lambda: raws[0].ms(writable), raws[0].child.pid))
                for key, call in (
                    ("writable", lambda: sink.take(writable)),
                    ("read-only", lambda: sink.take(read_only)),
                    ("back", sink.give),
                ):
                    start = time.perf_counter()
                    await call()
                    got[key].append((time.perf_counter() - start) * 1000)
                got["a2a"].append(await pusher.push())
                default, wide = (raw.ms(writable) for raw in raws)
                got["raw_default"].append(default)
                got["raw_wide"].append(wide)
                got["raw"].append(min(default, wide))
            got["relayed"] = runtime.relayed()["calls"] - relayed
            await pusher.stop()
            await sink.stop()
    finally:
        for raw in raws:
            raw.close()
    return got


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if a target is missed")
    parser.add_argument("--mb", type=int, default=100, help="array size in MiB")
    parser.add_argument("--reps", type=int, default=10)
    args = parser.parse_args()
    nbytes = args.mb * 2**20
    got = uvloop.run(measure(nbytes, args.reps))  # the loop actorrt.run gives
    best = {key: [min(got[key])] for key in KEYS}
    label = f"{args.mb} MiB array"
    figures = [
        Figure(f"{label}, driver -> actor", "ms", best["writable"], best["raw"],
               target_ratio=TARGET_TO_ACTOR, lower_is_better=True),
        Figure(f"{label}, driver -> actor, read-only", "ms", best["read-only"], best["raw"],
               lower_is_better=True),
        Figure(f"{label}, actor -> driver (a copy of the actor's)", "ms", best["back"], best["raw"],
               lower_is_better=True),
        Figure(f"{label}, actor -> actor (direct)", "ms", best["a2a"], best["raw"],
               target_ratio=TARGET_ACTOR_TO_ACTOR, lower_is_better=True),
    ]
    direct = got["relayed"] == 0
    ok = report("benchmarks.arrays: large arrays between processes vs a raw socket transfer",
                figures, "arrays", {"loop": "uvloop", "reps": args.reps, "mib": args.mb,
                                    "samples_ms": {k: got[k] for k in (*KEYS, "raw_default",
                                                                       "raw_wide")},
                                    "actor_to_actor_relayed_calls": got["relayed"],
                                    "cpu_ms_sender_receiver": {
                                        "driver -> actor": got["cpu_writable"],
                                        "raw": got["cpu_raw"]}})
    for name, key in (("driver -> actor", "cpu_writable"), ("raw transfer", "cpu_raw")):
        sender, receiver = (statistics.median(side) for side in zip(*got[key], strict=True))
        print(f"CPU per transfer, {name}: sender {sender:.1f} ms, receiver {receiver:.1f} ms")
    if not direct:
        print(f"actor -> actor: {got['relayed']} calls went through the driver, not direct")
    exit_for(ok and direct, args.check)


if __name__ == "__main__":
    main()
