"""max_concurrency, ask timeouts, and the record of who awaits whom."""

import asyncio
import time

import pytest

import actorrt
from actorrt._core._handle import EDGE_DELAY


async def test_one_message_at_a_time_also_across_awaits(actorrt_runtime: actorrt.Runtime) -> None:
    @actorrt.actor
    class Serial:
        def __init__(self) -> None:
            self.active = 0
            self.peak = 0

        async def work(self) -> None:
            self.active += 1
            self.peak = max(self.peak, self.active)
            for _ in range(3):
                await asyncio.sleep(0)
            self.active -= 1

        def get_peak(self) -> int:
            return self.peak

    ref = await Serial.spawn()
    await asyncio.gather(*(ref.work() for _ in range(20)))
    assert await ref.get_peak() == 1


async def test_max_concurrency_runs_messages_together(actorrt_runtime: actorrt.Runtime) -> None:
    @actorrt.actor(max_concurrency=3)
    class Parallel:
        def __init__(self) -> None:
            self.arrived = 0
            self.all_in = asyncio.Event()
            self.active = 0
            self.peak = 0

        async def meet(self) -> int:
            self.active += 1
            self.peak = max(self.peak, self.active)
            self.arrived += 1
            if self.arrived % 3 == 0:
                self.all_in.set()
            await self.all_in.wait()
            self.active -= 1
            return self.peak

    ref = await Parallel.spawn()
    # Three calls can only finish if all three run at once (a barrier).
    assert max(await asyncio.gather(*(ref.meet() for _ in range(3)))) == 3


async def test_a_crash_under_concurrency_fails_the_rest(actorrt_runtime: actorrt.Runtime) -> None:
    gate = asyncio.Event()

    @actorrt.actor(max_concurrency=4)
    class Mixed:
        async def wait(self) -> None:
            await gate.wait()

        def crash(self) -> None:
            raise RuntimeError("tell failed")

    ref = await Mixed.spawn()
    waiting = [ref.wait() for _ in range(2)]
    ref.crash.tell()
    died = await ref.wait_stopped()
    assert died.reason == "crashed"
    for handle in waiting:
        with pytest.raises(actorrt.ActorDiedError):
            await handle


async def test_a_kill_fails_the_message_waiting_for_a_free_slot(
    actorrt_runtime: actorrt.Runtime,
) -> None:
    both_running = asyncio.Event()
    running = 0

    @actorrt.actor(max_concurrency=2)
    class Full:
        async def wait(self) -> None:
            nonlocal running
            running += 1
            if running == 2:
                both_running.set()
            await asyncio.Event().wait()

        def quick(self) -> int:
            return 1

    ref = await Full.spawn()
    busy = [ref.wait(), ref.wait()]
    # Taken from the mailbox before the second call starts, it waits for one of the slots.
    waiting = ref.quick()
    await both_running.wait()
    await ref.kill()
    for handle in [*busy, waiting]:
        assert handle.done()  # answered by the time the kill returns
        with pytest.raises(actorrt.ActorDiedError, match="was killed"):
            await handle


async def test_ask_timeout_stops_the_wait_not_the_message(
    actorrt_runtime: actorrt.Runtime,
) -> None:
    gate = asyncio.Event()

    @actorrt.actor
    class Slow:
        def __init__(self) -> None:
            self.finished = False

        async def slow(self) -> str:
            await gate.wait()
            self.finished = True
            return "late"

        def is_finished(self) -> bool:
            return self.finished

    ref = await Slow.spawn()
    handle = ref.slow.options(timeout=0.05)()
    with pytest.raises(actorrt.AskTimeoutError, match=r"Slow.*slow\(\) did not answer") as err:
        await handle
    assert isinstance(err.value, TimeoutError)
    gate.set()
    assert await ref.is_finished() is True
    with pytest.raises(TypeError, match="timeout must be a number"):
        ref.slow.options(timeout="1")  # type: ignore[arg-type]


async def test_waits_are_recorded_while_an_actor_awaits_an_ask(
    actorrt_runtime: actorrt.Runtime,
) -> None:
    gate, entered = asyncio.Event(), asyncio.Event()

    @actorrt.actor
    class Callee:
        async def hold(self) -> None:
            entered.set()
            await gate.wait()

    @actorrt.actor
    class Caller:
        async def call(self, callee: actorrt.ActorRef[Callee]) -> None:
            await callee.hold()

        async def call_with_timeout(self, callee: actorrt.ActorRef[Callee]) -> None:
            await callee.hold.options(timeout=30)()

    callee = await Callee.spawn()
    caller = await Caller.spawn()
    pending = caller.call(callee)
    await entered.wait()
    # A wait becomes an edge once it has lasted EDGE_DELAY (most asks are answered sooner).
    deadline = time.monotonic() + 10
    while not actorrt_runtime.waits.waiting_on(caller.actor_id) and time.monotonic() < deadline:
        await asyncio.sleep(EDGE_DELAY)
    assert actorrt_runtime.waits.waiting_on(caller.actor_id) == {callee.actor_id}
    gate.set()
    await pending
    assert actorrt_runtime.waits.edges() == []
    # An ask with a timeout is not a blocking wait: it ends by itself.
    gate.clear()
    entered.clear()
    pending = caller.call_with_timeout(callee)
    await entered.wait()
    await asyncio.sleep(5 * EDGE_DELAY)  # past the time an unbounded wait would be recorded
    assert actorrt_runtime.waits.edges() == []
    gate.set()
    await pending
