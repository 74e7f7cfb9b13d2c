"""Parents and children, crashes, restarts with backoff."""

import asyncio
import itertools
import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest

import actorrt


@actorrt.actor
class Child:
    def __init__(self, log: list[str], label: str) -> None:
        self.log = log
        self.label = label

    def ping(self) -> str:
        return self.label

    def on_stop(self) -> None:
        self.log.append(f"stop {self.label}")


@actorrt.actor
class Parent:
    def __init__(self, log: list[str]) -> None:
        self.log = log
        self.children: list[actorrt.ActorRef[Child]] = []

    async def spawn_children(self, n: int) -> list[actorrt.ActorRef[Child]]:
        for i in range(n):
            self.children.append(await Child.spawn(self.log, f"c{i}"))
        return self.children

    def crash(self) -> None:
        raise RuntimeError("parent crashed")

    def on_stop(self) -> None:
        self.log.append("stop parent")


async def test_children_stop_before_their_parent(actorrt_runtime: actorrt.Runtime) -> None:
    log: list[str] = []
    parent = await Parent.spawn(log)
    children = await parent.spawn_children(2)
    assert [await c.ping() for c in children] == ["c0", "c1"]
    await parent.stop()
    assert sorted(log[:2]) == ["stop c0", "stop c1"] and log[2] == "stop parent"
    for child in children:
        died = await child.wait_stopped()
        assert died.reason == "parent ended"
        with pytest.raises(actorrt.ActorDiedError, match="parent ended"):
            await child.ping()


async def test_children_die_when_their_parent_is_killed(actorrt_runtime: actorrt.Runtime) -> None:
    log: list[str] = []
    parent = await Parent.spawn(log)
    children = await parent.spawn_children(3)
    await parent.kill()
    for child in children:
        assert (await child.wait_stopped()).reason == "parent ended"
    assert actorrt_runtime.live_actors() == []


async def test_children_die_when_their_parent_crashes(actorrt_runtime: actorrt.Runtime) -> None:
    log: list[str] = []
    parent = await Parent.spawn(log)
    children = await parent.spawn_children(2)
    parent.crash.tell()
    assert (await parent.wait_stopped()).reason == "crashed"
    for child in children:
        assert (await child.wait_stopped()).reason == "parent ended"


async def test_max_restarts_restarts_with_fresh_state(actorrt_runtime: actorrt.Runtime) -> None:
    constructed: list[int] = []

    @actorrt.actor(max_restarts=2)
    class Flaky:
        def __init__(self) -> None:
            self.n = 0
            constructed.append(actorrt.get_context().restart_count)

        def incr(self) -> int:
            self.n += 1
            return self.n

        def crash(self) -> None:
            raise ValueError("transient")

    ref = await Flaky.spawn()
    assert await ref.incr() == 1
    assert await ref.incr() == 2
    ref.crash.tell()
    # Queued behind the crash: dropped, with an error that says the actor restarts.
    with pytest.raises(actorrt.ActorDiedError, match="queued at the crash.*restarts"):
        await ref.incr()
    # Sent after the crash, while the restart backs off: the next incarnation serves it.
    assert await ref.incr() == 1  # fresh state
    ref.crash.tell()
    with pytest.raises(actorrt.ActorDiedError):
        await ref.incr()
    assert await ref.incr() == 1
    assert constructed == [0, 1, 2]
    ref.crash.tell()  # the third crash exceeds max_restarts=2
    died = await ref.wait_stopped()
    assert died.reason == "crashed" and isinstance(died.cause, ValueError)
    assert "after 2 restart(s), max_restarts=2" in str(died)


async def test_asks_queued_at_a_crash_fail(actorrt_runtime: actorrt.Runtime) -> None:
    gate = asyncio.Event()
    entered = asyncio.Event()

    @actorrt.actor(max_restarts=1)
    class Crashy:
        async def crash_later(self) -> None:
            entered.set()
            await gate.wait()
            raise RuntimeError("late crash")

        def ok(self) -> str:
            return "ok"

    ref = await Crashy.spawn()
    ref.crash_later.tell()
    await entered.wait()
    queued = [ref.ok() for _ in range(3)]
    gate.set()
    for handle in queued:
        with pytest.raises(actorrt.ActorDiedError, match="late crash"):
            await handle
    assert await ref.ok() == "ok"  # restarted


def bouncing(starts: list[float], **options: Any) -> Any:
    """An actor class that records when each incarnation starts, and crashes when told."""
    loop = asyncio.get_running_loop()

    @actorrt.actor(**options)
    class Bouncy:
        def __init__(self) -> None:
            starts.append(loop.time())

        def crash(self) -> None:
            raise RuntimeError("again")

        def ok(self) -> None:
            pass

    return Bouncy


async def test_restart_backoff_grows(actorrt_runtime: actorrt.Runtime) -> None:
    starts: list[float] = []
    ref = await bouncing(starts, max_restarts=3).spawn()
    for _ in range(3):
        ref.crash.tell()
        with pytest.raises(actorrt.ActorDiedError):
            await ref.ok()
        await ref.ok()
    gaps = [b - a for a, b in itertools.pairwise(starts)]
    assert len(gaps) == 3
    assert gaps[0] >= 0.04 and gaps[1] >= 0.09 and gaps[2] >= 0.19


async def test_restart_backoff_resets_after_a_healthy_period(
    actorrt_runtime: actorrt.Runtime,
) -> None:
    starts: list[float] = []
    bouncy = bouncing(starts, max_restarts=-1)

    async def crash_and_wait(ref: Any) -> float:
        ref.crash.tell()
        with pytest.raises(actorrt.ActorDiedError):
            await ref.ok()
        await ref.ok()  # waits for the restart
        return starts[-1] - starts[-2]

    ref = await bouncy.options(
        restart_backoff_s=0.05, restart_backoff_max_s=4.0, restart_backoff_reset_s=0.5
    ).spawn()
    gaps = [await crash_and_wait(ref) for _ in range(6)]  # 0.05, 0.1, ... 1.6 s
    assert gaps[5] >= 1.5
    # Incarnations that crash quickly keep doubling, up to the most it may wait.
    # One that ran longer than restart_backoff_reset_s was healthy: back to the first delay
    # (without the reset this one would wait 3.2 s).
    await asyncio.sleep(0.6)  # the healthy period itself is what is tested
    assert await crash_and_wait(ref) < 1.0
    await ref.stop()


@pytest.mark.parametrize(
    ("options", "error", "words"),
    [
        ({"restart_backoff_s": -1}, ValueError, "restart_backoff_s must be a finite number"),
        ({"restart_backoff_s": "1"}, TypeError, "restart_backoff_s must be a number"),
        ({"restart_backoff_max_s": float("inf")}, ValueError, "restart_backoff_max_s must"),
        ({"restart_backoff_reset_s": 0}, ValueError, "above 0; got 0"),
        ({"restart_backoff_reset_s": True}, TypeError, "got True (bool)"),
        (
            {"restart_backoff_s": 2.0, "restart_backoff_max_s": 1.0},
            ValueError,
            "restart_backoff_max_s (1.0) must be at least restart_backoff_s (2.0)",
        ),
    ],
)
def test_restart_backoff_options_are_checked_where_given(
    options: dict[str, object], error: type[Exception], words: str
) -> None:
    @actorrt.actor
    class Any_:
        pass

    with pytest.raises(error) as raised:
        Any_.options(**options)
    assert words in str(raised.value)
    with pytest.raises(error):
        actorrt.actor(**options)(Any_.cls)  # type: ignore[arg-type]


async def test_failing_constructor_at_restart_counts_as_a_crash(
    actorrt_runtime: actorrt.Runtime,
) -> None:
    attempts: list[int] = []

    @actorrt.actor(max_restarts=2)
    class Doomed:
        def __init__(self) -> None:
            attempts.append(1)
            if len(attempts) > 1:
                raise OSError("cannot reopen")

        def crash(self) -> None:
            raise RuntimeError("first")

    ref = await Doomed.spawn()
    ref.crash.tell()
    died = await ref.wait_stopped()
    assert len(attempts) == 3
    assert isinstance(died.cause, OSError)


@actorrt.actor(process=True, max_restarts=1)
class Gated:
    """Its restarted constructor waits until the test creates ``folder/gate``."""

    def __init__(self, folder: str) -> None:
        started = Path(folder, "started")
        if started.exists():
            while not Path(folder, "gate").exists():
                time.sleep(0.01)
        started.touch()
        self.seen: list[int] = []

    def pid(self) -> int:
        return os.getpid()

    def nap(self, seconds: float) -> None:
        time.sleep(seconds)

    def note(self, item: int) -> list[int]:
        self.seen.append(item)
        return list(self.seen)


async def test_a_stop_during_a_process_restart_runs_what_was_sent_before_it(
    actorrt_runtime: actorrt.Runtime, tmp_path: Path
) -> None:
    ref = await Gated.spawn(str(tmp_path))
    pid = await ref.pid()
    pending = ref.nap(30)
    await asyncio.sleep(0)
    os.kill(pid, signal.SIGKILL)
    with pytest.raises(actorrt.ActorDiedError, match="died"):
        await pending  # the owner has seen the process die: it restarts
    held = [ref.note(i) for i in range(3)]  # held for the new process
    stopping = asyncio.ensure_future(ref.stop())
    await asyncio.sleep(0)
    late = ref.note(99)
    await asyncio.to_thread(Path(tmp_path, "gate").touch)
    assert await held[-1] == [0, 1, 2]
    with pytest.raises(actorrt.ActorDiedError, match="was stopped"):
        await late  # sent after the stop, as for an inline actor
    assert (await stopping).reason == "stopped"


@actorrt.actor(
    num_cpus=1, max_restarts=-1,
    restart_backoff_s=0.05, restart_backoff_max_s=4.0, restart_backoff_reset_s=0.5,
)
class CrashesInItsProcess:
    def crash(self) -> None:
        raise RuntimeError("again")

    def ok(self) -> int:
        return os.getpid()


@pytest.mark.actorrt(num_cpus=1)
async def test_a_process_actor_backs_off_and_resets_the_same_way(
    actorrt_runtime: actorrt.Runtime,
) -> None:
    # The options travel with the class: the worker restarts the actor after the same delays.
    ref = await CrashesInItsProcess.spawn()
    loop = asyncio.get_running_loop()

    async def crash_and_wait() -> float:
        ref.crash.tell()
        with pytest.raises(actorrt.ActorDiedError):
            await ref.ok()
        began = loop.time()
        await ref.ok()  # served by the next incarnation
        return loop.time() - began

    gaps = [await crash_and_wait() for _ in range(6)]  # about 0.05, 0.1, ... 1.6 s
    assert gaps[5] >= 1.0
    await asyncio.sleep(0.6)  # a healthy period: the backoff starts again
    assert await crash_and_wait() < 1.0
    await ref.stop()
