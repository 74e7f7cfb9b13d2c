"""Writing actors directly: ask and tell, supervision, and an actor in a worker process.

    python examples/actors.py

An actor is a class whose instance lives behind a mailbox: callers hold a ref, each call is
a message, and the actor handles its messages one at a time, in the order each sender sent
them, so its state needs no locks.
"""

from __future__ import annotations

import asyncio
import logging
import os

import actorrt


@actorrt.actor
class Counter:
    """Inline (it asks for no resources): a task on the event loop of the spawning process."""

    def __init__(self) -> None:
        self.n = 0

    def add(self, k: int) -> int:
        self.n += k
        return self.n

    async def slow_read(self, delay: float) -> int:
        await asyncio.sleep(delay)
        return self.n


@actorrt.actor(max_restarts=1)
class Fragile:
    """Crashes on a bad tell; its supervisor (the runtime) restarts it once, fresh."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    def note(self, word: str) -> None:
        if not word:
            raise ValueError("an empty word")
        self.seen.append(word)

    def words(self) -> list[str]:
        return self.seen


@actorrt.actor
class Parent:
    """Spawns a child; the child is supervised by it and ends when it ends."""

    async def on_start(self) -> None:
        self.child = await Counter.spawn()

    def get_child(self) -> actorrt.ActorRef[Counter]:
        return self.child


@actorrt.actor(num_cpus=1)
class Cruncher:
    """Asks for a CPU, so it runs in a worker process of its own, with its own GIL."""

    def crunch(self, n: int) -> tuple[int, int]:
        return os.getpid(), sum(i * i for i in range(n))  # blocking is fine in a process


async def main() -> None:
    counter = await Counter.spawn()

    # An ask: send now, await the reply.
    print("ask: add(1) ->", await counter.add(1))
    # A tell: send, no reply. Messages from one sender are handled in order, so the
    # ask after it sees its effect.
    counter.add.tell(10)
    print("after a tell of add(10), add(0) ->", await counter.add(0))
    # Pipelining: issue many asks, then await them all.
    replies = await asyncio.gather(*(counter.add(1) for _ in range(5)))
    print("five pipelined asks ->", replies)
    # A bounded ask: the caller stops waiting; the message still runs.
    try:
        await counter.slow_read.options(timeout=0.05)(0.3)
    except actorrt.AskTimeoutError:
        print("slow_read with timeout=0.05 -> AskTimeoutError")

    # Supervision: a failing tell crashes the actor (there is no caller to tell); the
    # runtime restarts it with fresh state, because max_restarts=1.
    fragile = await Fragile.spawn()
    fragile.note.tell("hello")
    fragile.note.tell("")  # raises ValueError inside the actor
    try:
        await fragile.words()
    except actorrt.ActorDiedError as err:
        print(f"an ask queued behind the crash -> ActorDiedError ({err.reason})")
    print("after the restart, words() ->", await fragile.words())

    # Children end with their parent.
    parent = await Parent.spawn()
    child = await parent.get_child()
    await parent.stop()
    print("child of a stopped parent ->", (await child.wait_stopped()).reason)

    # A worker-process actor: the same ref API, in another process.
    cruncher = await Cruncher.spawn()
    pid, total = await cruncher.crunch(1_000_000)
    print(f"worker-process actor: pid {pid} (this process is {os.getpid()}), "
          f"sum of squares {total}")
    print("while it is alive, available CPUs:", actorrt.available_resources()["CPU"],
          "of", actorrt.cluster_resources()["CPU"])
    await cruncher.stop()
    print("after stop, available CPUs:", actorrt.available_resources()["CPU"])


if __name__ == "__main__":
    logging.basicConfig(level=logging.CRITICAL)  # the crash above is logged; keep it quiet
    actorrt.run(main, num_cpus=2)
