"""Inline actor messaging against raw asyncio, in one run (docs/benchmarks.md).

    python -m benchmarks.core [--check] [--n N] [--reps R]

Baselines, shaped as docs/benchmarks.md fixes them, on the same loop type (uvloop):
- raw tell: a producer ``put_nowait``s N small tuples into an ``asyncio.Queue``, yielding to
  the loop every 1,000; one consumer task ``get()``s them; rate = N / time until the
  consumer has all.
- raw ask: a server task ``get()``s ``(future, payload)`` pairs and sets each result; the
  client puts one and awaits its future, N times in turn.
actorrt: the same shapes through an inline actor: N ``ref.m.tell((i, "x"))`` with a yield
every 1,000, timed until the actor has processed all; N ``await ref.m((i, "x"))`` in turn.

Scale: ``--scale`` inline echo actors (100,000) against 1,000 in the same run, with the
process's garbage collector as it is (its default settings): spawns per second, spawning
them one after another, and asks per second, asking every one of them at once (one
``asyncio.gather``). The baseline is the same shape at 1,000 actors: an actor's cost should
not grow with the number of actors alive.

``--check`` exits 1 when inline tell is under 50% of raw tell, inline ask under 60% of raw
ask, or either scale figure under 1/1.5 of its figure at 1,000 actors.
"""

from __future__ import annotations

import argparse
import asyncio
import time

import actorrt

from ._common import Figure, exit_for, report


async def raw_tell(n: int) -> float:
    queue: asyncio.Queue[tuple[int, str]] = asyncio.Queue()

    async def consumer() -> None:
        for _ in range(n):
            await queue.get()

    task = asyncio.create_task(consumer())
    await asyncio.sleep(0)
    start = time.perf_counter()
    for i in range(n):
        queue.put_nowait((i, "x"))
        if i % 1000 == 999:
            await asyncio.sleep(0)
    await task
    return n / (time.perf_counter() - start)


async def raw_ask(n: int) -> float:
    queue: asyncio.Queue[tuple[asyncio.Future[object], object]] = asyncio.Queue()

    async def server() -> None:
        while True:
            fut, payload = await queue.get()
            fut.set_result(payload)

    task = asyncio.create_task(server())
    loop = asyncio.get_running_loop()
    start = time.perf_counter()
    for i in range(n):
        fut = loop.create_future()
        queue.put_nowait((fut, (i, "x")))
        await fut
    rate = n / (time.perf_counter() - start)
    task.cancel()
    return rate


@actorrt.actor
class Sink:
    def __init__(self, n: int, done: asyncio.Future[None]) -> None:
        self.left = n
        self.done = done

    def put(self, item: object) -> None:
        self.left -= 1
        if self.left == 0:
            self.done.set_result(None)


@actorrt.actor
class Echo:
    def echo(self, item: object) -> object:
        return item


async def actor_tell(n: int) -> float:
    done = asyncio.get_running_loop().create_future()
    sink = await Sink.spawn(n, done)
    put = sink.put.tell
    start = time.perf_counter()
    for i in range(n):
        put((i, "x"))
        if i % 1000 == 999:
            await asyncio.sleep(0)
    await done
    rate = n / (time.perf_counter() - start)
    await sink.stop()
    return rate


async def actor_ask(n: int) -> float:
    ref = await Echo.spawn()
    echo = ref.echo
    start = time.perf_counter()
    for i in range(n):
        await echo((i, "x"))
    rate = n / (time.perf_counter() - start)
    await ref.stop()
    return rate


async def spawn_and_ask_all(n: int) -> tuple[float, float]:
    """``(spawns/s, asks/s)`` of ``n`` inline echo actors: spawned in turn, asked at once."""
    start = time.perf_counter()
    refs = [await Echo.spawn() for _ in range(n)]
    spawned = time.perf_counter()
    await asyncio.gather(*(ref.echo(i) for i, ref in enumerate(refs)))
    asked = time.perf_counter()
    await asyncio.gather(*(ref.stop() for ref in refs))
    return n / (spawned - start), n / (asked - spawned)


SCALE_BASE = 1_000
SCALE_RATIO = 1 / 1.5  # at --scale actors, each figure within 1.5x of that at SCALE_BASE


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if a target is missed")
    parser.add_argument("--n", type=int, default=200_000, help="messages per sample")
    parser.add_argument("--reps", type=int, default=5, help="samples per figure")
    parser.add_argument("--scale", type=int, default=100_000, help="inline actors at scale")
    parser.add_argument("--scale-reps", type=int, default=3, help="samples per scale figure")
    args = parser.parse_args()

    async def measure() -> list[list[float]]:
        out: list[list[float]] = [[], [], [], []]
        for _ in range(args.reps):
            out[0].append(await raw_tell(args.n))
            out[1].append(await actor_tell(args.n))
            out[2].append(await raw_ask(args.n // 2))
            out[3].append(await actor_ask(args.n // 2))
        return out

    async def scale() -> list[list[float]]:
        out: list[list[float]] = [[], [], [], []]
        for _ in range(args.scale_reps):
            # The ended actors of a large run leave work behind (asyncio's set of all tasks
            # drops their dead entries at the next task made): a run of the small size,
            # not counted, takes it, so the small figure is not flattered by the large.
            await spawn_and_ask_all(SCALE_BASE)
            for at, n in ((0, SCALE_BASE), (2, args.scale)):
                spawns, asks = await spawn_and_ask_all(n)
                out[at].append(spawns)
                out[at + 1].append(asks)
        return out

    rt, at, ra, aa = actorrt.run(measure)
    base_spawn, base_ask, big_spawn, big_ask = actorrt.run(scale)
    figures = [
        Figure("inline tell", "msgs/s", at, rt, target_ratio=0.5),
        Figure("inline ask", "round trips/s", aa, ra, target_ratio=0.6),
        Figure(f"spawn, {args.scale:,} inline actors (vs {SCALE_BASE:,})", "spawns/s",
               big_spawn, base_spawn, target_ratio=SCALE_RATIO),
        Figure(f"ask all, {args.scale:,} inline actors (vs {SCALE_BASE:,})", "asks/s",
               big_ask, base_ask, target_ratio=SCALE_RATIO),
    ]
    ok = report("benchmarks.core: inline actors vs raw asyncio", figures, "core",
                {"loop": "uvloop", "n": args.n, "reps": args.reps, "scale": args.scale,
                 "scale_base": SCALE_BASE, "scale_reps": args.scale_reps})
    exit_for(ok, args.check)


if __name__ == "__main__":
    main()
