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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if a target is missed")
    parser.add_argument("--n", type=int, default=200_000, help="messages per sample")
    parser.add_argument("--reps", type=int, default=5, help="samples per figure")
    args = parser.parse_args()

    async def measure() -> list[list[float]]:
        out: list[list[float]] = [[], [], [], []]
        for _ in range(args.reps):
            out[0].append(await raw_tell(args.n))
            out[1].append(await actor_tell(args.n))
            out[2].append(await raw_ask(args.n // 2))
            out[3].append(await actor_ask(args.n // 2))
        return out

    rt, at, ra, aa = actorrt.run(measure)
    figures = [
        Figure("inline tell", "msgs/s", at, rt, target_ratio=0.5),
        Figure("inline ask", "round trips/s", aa, ra, target_ratio=0.6),
    ]
    ok = report("benchmarks.core: inline actors vs raw asyncio", figures, "core",
                {"loop": "uvloop", "n": args.n, "reps": args.reps})
    exit_for(ok, args.check)


if __name__ == "__main__":
    main()
