"""Large numpy arrays between processes against a raw Unix-socket transfer of the same bytes.

- driver -> actor: ``await sink.take(array)`` to an ``@actorrt.actor(process=True)`` actor
  that answers with the array's size, once with a writable array (sent as a snapshot: one
  copy on the way out, so that changing it after the call is safe) and once with a
  read-only one (sent from its own memory, no copy);
- actor -> driver: ``await sink.give()``, a fresh array from the actor;
- baseline: the same bytes over a ``socket.socketpair()`` between this process and a thread,
  read into a preallocated numpy buffer, then a one-byte answer.

Each figure is the best of ``--reps`` (a transfer this large is bound by memory bandwidth,
which other work on the machine only slows); ratios are speed ratios against the raw
transfer of the same size. Target (``--check``): driver -> actor, read-only, at least 0.7
of the raw transfer.
"""

from __future__ import annotations

import argparse
import socket
import threading
import time

import numpy as np
import uvloop

import actorrt

from ._common import Figure, exit_for, report

TARGET_READ_ONLY = 0.7


@actorrt.actor(process=True)
class Sink:
    def __init__(self, nbytes: int) -> None:
        self.nbytes = nbytes

    def take(self, array: np.ndarray) -> int:
        return int(array.nbytes)

    def give(self) -> np.ndarray:
        return np.ones(self.nbytes, dtype=np.uint8)


def raw_transfer(nbytes: int) -> float:
    """Seconds for ``nbytes`` over a socket pair into a preallocated buffer, answered."""
    ours, theirs = socket.socketpair()
    data = np.ones(nbytes, dtype=np.uint8)
    into = memoryview(np.empty(nbytes, dtype=np.uint8))

    def read() -> None:
        got = 0
        while got < nbytes:
            got += theirs.recv_into(into[got:])
        theirs.send(b"!")

    try:
        reader = threading.Thread(target=read)
        reader.start()
        start = time.perf_counter()
        ours.sendall(memoryview(data))
        ours.recv(1)
        took = time.perf_counter() - start
        reader.join()
    finally:
        ours.close()
        theirs.close()
    return took


async def measure(nbytes: int, reps: int) -> dict[str, list[float]]:
    got: dict[str, list[float]] = {"writable": [], "read-only": [], "back": [], "raw": []}
    writable = np.ones(nbytes, dtype=np.uint8)
    read_only = writable.copy()
    read_only.flags.writeable = False
    async with actorrt.Runtime():
        sink = await Sink.spawn(nbytes)
        assert await sink.take(writable) == nbytes  # the worker's first array: warm up
        for _ in range(reps):
            for key, call in (
                ("writable", lambda: sink.take(writable)),
                ("read-only", lambda: sink.take(read_only)),
                ("back", sink.give),
            ):
                start = time.perf_counter()
                await call()
                got[key].append((time.perf_counter() - start) * 1000)
            got["raw"].append(raw_transfer(nbytes) * 1000)
        await sink.stop()
    return got


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if a target is missed")
    parser.add_argument("--mb", type=int, default=100, help="array size in MiB")
    parser.add_argument("--reps", type=int, default=5)
    args = parser.parse_args()
    nbytes = args.mb * 2**20
    got = uvloop.run(measure(nbytes, args.reps))  # the loop actorrt.run gives
    best = {key: [min(values)] for key, values in got.items()}
    label = f"{args.mb} MiB array"
    figures = [
        Figure(f"{label}, driver -> actor, read-only", "ms", best["read-only"], best["raw"],
               target_ratio=TARGET_READ_ONLY, lower_is_better=True),
        Figure(f"{label}, driver -> actor, writable (snapshot)", "ms", best["writable"],
               best["raw"], lower_is_better=True),
        Figure(f"{label}, actor -> driver", "ms", best["back"], best["raw"],
               lower_is_better=True),
    ]
    ok = report("benchmarks.arrays: large arrays between processes vs a raw socket transfer",
                figures, "arrays", {"loop": "uvloop", "reps": args.reps, "mib": args.mb})
    exit_for(ok, args.check)


if __name__ == "__main__":
    main()
