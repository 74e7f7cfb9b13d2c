"""stop(), kill(), names, wait_stopped(), and nothing hanging on a dead actor."""

import asyncio
import gc
import weakref

import pytest
from conftest import eventually

import actorrt


@actorrt.actor
class Worker:
    def __init__(self, log: list[str]) -> None:
        self.log = log

    def note(self, item: str) -> str:
        self.log.append(item)
        return item

    async def block(self, started: asyncio.Event, gate: asyncio.Event) -> str:
        started.set()
        await gate.wait()
        return "unblocked"

    def on_stop(self) -> None:
        self.log.append("on_stop")


async def test_stop_drains_what_was_sent_before_it(actorrt_runtime: actorrt.Runtime) -> None:
    log: list[str] = []
    ref = await Worker.spawn(log)
    asks = [ref.note(str(i)) for i in range(5)]
    stopping = asyncio.ensure_future(ref.stop())
    await asyncio.sleep(0)
    late = ref.note("late")
    with pytest.raises(actorrt.ActorDiedError, match="was stopped"):
        ref.note.tell("late tell")
    reason = await stopping
    assert await asyncio.gather(*asks) == ["0", "1", "2", "3", "4"]
    with pytest.raises(actorrt.ActorDiedError, match="was stopped"):
        await late
    assert log == ["0", "1", "2", "3", "4", "on_stop"]
    assert reason.reason == "stopped"
    assert (await ref.wait_stopped()) is reason
    assert await ref.stop() is reason  # stopping twice is harmless


async def test_kill_cancels_the_current_message_and_fails_the_queue(
    actorrt_runtime: actorrt.Runtime,
) -> None:
    log: list[str] = []
    ref = await Worker.spawn(log)
    started, gate = asyncio.Event(), asyncio.Event()
    current = ref.block(started, gate)
    queued = [ref.note(str(i)) for i in range(3)]
    await started.wait()
    reason = await ref.kill()
    assert reason.reason == "killed"
    for handle in [current, *queued]:
        with pytest.raises(actorrt.ActorDiedError, match="was killed"):
            await handle
    assert log == []  # nothing queued ran and on_stop did not run


async def test_names_and_get_actor(actorrt_runtime: actorrt.Runtime) -> None:
    ref = await Worker.options(name="w0").spawn([])
    assert await actorrt.get_actor("w0") == ref
    with pytest.raises(ValueError, match="'w0' is taken"):
        await Worker.options(name="w0").spawn([])
    with pytest.raises(actorrt.ActorNotFoundError, match=r"no live actor is named 'nope'.*'w0'"):
        await actorrt.get_actor("nope")
    await ref.stop()
    with pytest.raises(actorrt.ActorNotFoundError):
        await actorrt.get_actor("w0")
    again = await Worker.options(name="w0").spawn([])  # the name is free again
    assert again != ref


async def test_watchers_learn_why_an_actor_died(actorrt_runtime: actorrt.Runtime) -> None:
    @actorrt.actor
    class Fragile:
        def explode(self) -> None:
            raise OSError("disk gone")

    ref = await Fragile.spawn()
    watcher = asyncio.ensure_future(ref.wait_stopped())
    ref.explode.tell()
    died = await watcher
    assert died.reason == "crashed"
    assert isinstance(died.cause, OSError)
    assert "crashed with OSError: disk gone" in str(died)
    with pytest.raises(actorrt.ActorDiedError, match="disk gone"):
        await ref.explode()


async def test_on_stop_error_is_reported_and_the_actor_still_ends(
    actorrt_runtime: actorrt.Runtime,
) -> None:
    @actorrt.actor
    class BadStop:
        def on_stop(self) -> None:
            raise RuntimeError("cleanup failed")

    ref = await BadStop.spawn()
    died = await ref.stop()
    assert died.reason == "stopped"
    assert isinstance(died.cause, RuntimeError)
    assert "cleanup failed" in str(died)


async def test_cancelling_a_spawn_ends_the_half_started_actor(
    actorrt_runtime: actorrt.Runtime,
) -> None:
    entered, gate = asyncio.Event(), asyncio.Event()

    @actorrt.actor(name="slow-start")
    class SlowStart:
        async def on_start(self) -> None:
            entered.set()
            await gate.wait()

    spawning = asyncio.ensure_future(SlowStart.spawn())
    await entered.wait()
    spawning.cancel()
    with pytest.raises(asyncio.CancelledError):
        await spawning
    assert actorrt_runtime.live_actors() == [] or await _ended(actorrt_runtime)
    with pytest.raises(actorrt.ActorNotFoundError):
        await actorrt.get_actor("slow-start")


async def _ended(runtime: actorrt.Runtime) -> bool:
    for ref in runtime.live_actors():
        await ref.wait_stopped()
    return runtime.live_actors() == []


@actorrt.actor
class Ender:
    def __init__(self) -> None:
        self.fail_on_stop = False

    def set_fail_on_stop(self) -> None:
        self.fail_on_stop = True

    def explode(self) -> None:
        raise ValueError("boom")

    def on_stop(self) -> None:
        if self.fail_on_stop:
            raise RuntimeError("cleanup failed")


@pytest.mark.parametrize("process", [False, True], ids=["inline", "worker-process"])
async def test_every_kind_of_actor_ends_in_the_same_words(
    actorrt_runtime: actorrt.Runtime, process: bool
) -> None:
    spawn = Ender.options(process=process, max_restarts=0).spawn

    stopped = await spawn()
    await stopped.set_fail_on_stop()
    died = await stopped.stop()
    assert (died.reason, str(died)) == (
        "stopped",
        f"actor {died.actor} was stopped (its on_stop raised RuntimeError: cleanup failed)",
    )
    assert isinstance(died.cause, RuntimeError)

    killed = await spawn()
    died = await killed.kill()
    assert (died.reason, str(died)) == ("killed", f"actor {died.actor} was killed")
    with pytest.raises(actorrt.ActorDiedError, match="was killed"):
        await killed.explode()

    crashed = await spawn()
    crashed.explode.tell()
    died = await crashed.wait_stopped()
    assert (died.reason, str(died)) == (
        "crashed",
        f"actor {died.actor} crashed with ValueError: boom (after 0 restart(s), max_restarts=0)",
    )
    assert isinstance(died.cause, ValueError)


def test_a_transition_outside_the_lifecycle_is_a_bug_naming_both_states() -> None:
    from actorrt._core._lifecycle import State, check_transition

    def actor() -> str:
        return "A(id=1)"

    check_transition(actor, State.RUNNING, State.STOPPING, None, actorrt.DeathReason.KILLED)
    bug = r"A\(id=1\): no lifecycle transition from dead to running"
    with pytest.raises(AssertionError, match=bug):
        check_transition(actor, State.DEAD, State.RUNNING, None, None)
    with pytest.raises(AssertionError, match="not a stop becoming a kill"):
        check_transition(
            actor, State.STOPPING, State.STOPPING,
            actorrt.DeathReason.KILLED, actorrt.DeathReason.STOPPED,
        )


async def test_an_ended_actor_is_freed_without_the_cyclic_collector(
    actorrt_runtime: actorrt.Runtime,
) -> None:
    # Reference counting alone frees an actor that ended: nothing of it waits in a cycle
    # for the cyclic collector (with many actors, its full collections cost the most).
    ref = await Worker.spawn([])
    assert await ref.note("x") == "x"
    cell = weakref.ref(ref._cell)
    gc.collect()
    gc.disable()
    try:
        await ref.stop()
        del ref
        assert await eventually(lambda: cell() is None), "the ended actor waits for gc"
    finally:
        gc.enable()
