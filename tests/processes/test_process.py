"""Actors in worker processes, used exactly like inline ones."""

import asyncio
import os
import sys
import threading

import numpy as np
import pytest

import actorrt


@actorrt.actor(process=True)
class Remote:
    def __init__(self, base: int = 0) -> None:
        self.base = base
        self.seen: list[object] = []

    def add(self, x: int) -> int:
        return self.base + x

    def record(self, item: object) -> None:
        self.seen.append(item)

    def history(self) -> list[object]:
        return list(self.seen)

    def facts(self) -> dict[str, object]:
        return {
            "pid": os.getpid(),
            "ppid": os.getppid(),
            "pgid": os.getpgid(0),
            "main": sys.modules["__main__"].__spec__.name,  # type: ignore[union-attr]
            "thread": threading.current_thread().name,
            "cuda": os.environ.get("CUDA_VISIBLE_DEVICES"),
            "env": os.environ.get("ACTORRT_TEST_VAR"),
        }

    async def loop_kind(self) -> str:
        return type(asyncio.get_running_loop()).__module__

    def fail(self) -> None:
        raise KeyError("missing")

    def echo(self, value: object) -> object:
        return value


async def test_ask_tell_and_order_across_processes(actorrt_runtime: actorrt.Runtime) -> None:
    ref = await Remote.spawn(10)
    assert await ref.add(5) == 15
    for i in range(500):
        ref.record.tell(i)
    handles = [ref.add(i) for i in range(100)]
    assert [await h for h in handles] == [10 + i for i in range(100)]
    assert await ref.history() == list(range(500))
    await ref.record.tell_wait("last")
    assert (await ref.history())[-1] == "last"


def parent_of(pid: object) -> int:
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rsplit(") ", 1)[1].split()[1])


async def test_a_worker_is_a_worker_main_in_its_own_group(
    actorrt_runtime: actorrt.Runtime,
) -> None:
    ref = await Remote.spawn()
    facts = await ref.facts()
    # Forked by the runtime's fork server, itself a child of this process.
    assert parent_of(facts["ppid"]) == os.getpid()
    assert facts["pid"] != os.getpid()
    assert facts["pgid"] == facts["pid"]  # its own process group
    assert facts["main"] == "actorrt._processes._worker_main"  # the worker's main, as __main__
    assert facts["thread"] != "MainThread"  # sync methods run off the worker's loop
    assert facts["cuda"] == ""  # no GPU granted, none visible
    assert (await ref.loop_kind()).startswith("uvloop")


async def test_errors_keep_their_type_and_the_remote_traceback(
    actorrt_runtime: actorrt.Runtime,
) -> None:
    ref = await Remote.spawn()
    with pytest.raises(KeyError, match="missing") as err:
        await ref.fail()
    text = "".join(getattr(err.value, "__notes__", []))
    assert "in fail" in text and "raise KeyError" in text
    assert await ref.add(1) == 1  # the actor goes on


class Point:
    """Defined in the test module: travels by cloudpickle."""

    def __init__(self, x: int, y: int) -> None:
        self.x, self.y = x, y

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Point) and (other.x, other.y) == (self.x, self.y)


async def test_values_of_every_kind_cross(actorrt_runtime: actorrt.Runtime) -> None:
    ref = await Remote.spawn()
    array = np.arange(1_000_000, dtype=np.float32).reshape(1000, 1000)
    back = await ref.echo(array)
    assert back.dtype == np.float32 and np.array_equal(back, array)
    blob = os.urandom(5 << 20)
    assert await ref.echo(blob) == blob
    nested = {"a": (1, 2), "b": [None, 1.5, "x"]}
    assert await ref.echo(nested) == nested
    assert await ref.echo(Point(1, 2)) == Point(1, 2)
    square = await ref.echo(lambda v: v * v)
    assert square(7) == 49


async def test_unsendable_values_fail_at_the_sender(actorrt_runtime: actorrt.Runtime) -> None:
    ref = await Remote.spawn()
    with pytest.raises(TypeError, match=r"Remote\.echo\(\).*_thread.lock"):
        ref.echo(threading.Lock())
    with pytest.raises(TypeError, match="generator"):
        ref.record.tell(x for x in range(3))
    assert await ref.add(2) == 2


async def test_timeouts_names_stop_and_kill(actorrt_runtime: actorrt.Runtime) -> None:
    @actorrt.actor(process=True, name="sleepy")
    class Sleepy:
        def nap(self, seconds: float) -> str:
            import time

            time.sleep(seconds)
            return "rested"

        def ping(self) -> str:
            return "pong"

    ref = await Sleepy.spawn()
    assert await actorrt.get_actor("sleepy") == ref
    with pytest.raises(actorrt.AskTimeoutError):
        await ref.nap.options(timeout=0.05)(0.3)
    assert await ref.ping() == "pong"  # the nap finished first: order is kept
    queued = [ref.ping() for _ in range(3)]
    died = await ref.stop()
    assert died.reason == "stopped"
    assert [await h for h in queued] == ["pong"] * 3
    with pytest.raises(actorrt.ActorDiedError):
        await ref.ping()

    again = await Sleepy.spawn()
    stuck = again.nap(30)  # sync code the kill cannot interrupt: the process goes
    pending = again.ping()
    died = await again.kill()
    assert died.reason == "killed"
    for handle in (stuck, pending):
        with pytest.raises(actorrt.ActorDiedError):
            await handle


async def test_a_crash_restarts_the_actor_in_its_worker(actorrt_runtime: actorrt.Runtime) -> None:
    @actorrt.actor
    class Peer:
        def ping(self) -> None:
            pass

    @actorrt.actor(process=True, max_restarts=1)
    class Flaky:
        def __init__(self) -> None:
            self.calls = 0

        def incr(self) -> int:
            self.calls += 1
            return self.calls

        async def crash_after(self, peer: actorrt.ActorRef[Peer]) -> None:
            await peer.ping()
            raise RuntimeError("boom")

        def crash(self) -> None:
            raise RuntimeError("boom")

        def pid(self) -> int:
            return os.getpid()

    ref = await Flaky.spawn()
    peer = await Peer.spawn()
    pid = await ref.pid()
    assert await ref.incr() == 1
    ref.crash_after.tell(peer)
    # Sent before the peer can answer the crashing method, on the same connection: the
    # worker has it queued when the crash comes, and it fails with the crash.
    queued = ref.incr()
    with pytest.raises(actorrt.ActorDiedError) as died:
        await queued
    assert died.value.reason == "crashed"
    assert await ref.incr() == 1  # sent after the crash: a fresh instance answers
    assert await ref.pid() == pid  # in the same, healthy process
    ref.crash.tell()
    final = await ref.wait_stopped()
    assert final.reason == "crashed" and isinstance(final.cause, RuntimeError)


async def test_refs_travel_between_processes(actorrt_runtime: actorrt.Runtime) -> None:
    @actorrt.actor
    class Ledger:
        def __init__(self) -> None:
            self.lines: list[str] = []

        def write(self, line: str) -> int:
            self.lines.append(line)
            return len(self.lines)

    @actorrt.actor(process=True)
    class Clerk:
        async def log(self, ledger: actorrt.ActorRef[Ledger], text: str) -> int:
            return int(await ledger.write(f"{os.getpid()}:{text}"))

        async def relay(self, other: actorrt.ActorRef["Clerk"], ledger: object, text: str) -> int:
            return int(await other.log(ledger, text))

    ledger = await Ledger.spawn()
    a, b = await Clerk.spawn(), await Clerk.spawn()
    assert await a.log(ledger, "one") == 1
    assert await a.relay(b, ledger, "two") == 2
    lines = await ledger.write("three")
    assert lines == 3


async def test_worker_actors_spawn_actors(actorrt_runtime: actorrt.Runtime) -> None:
    @actorrt.actor
    class Helper:
        def where(self) -> int:
            return os.getpid()

    @actorrt.actor(process=True)
    class Boss:
        async def hire(self) -> tuple[int, int, int]:
            inline = await Helper.spawn()
            remote = await Helper.options(process=True).spawn()
            return os.getpid(), await inline.where(), await remote.where()

    boss = await Boss.spawn()
    me, inline_pid, remote_pid = await boss.hire()
    assert inline_pid == me  # an inline child runs in its spawner's process
    assert remote_pid not in (me, os.getpid())
    await boss.stop()
    assert all(actor.actor_id != boss.actor_id for actor in actorrt_runtime.live_actors())
    assert actorrt_runtime.live_actors() == []  # the remote child ended with its parent
