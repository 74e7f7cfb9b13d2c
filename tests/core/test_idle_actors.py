"""An idle inline actor holds no task: the next message, stop or kill starts one again."""

import asyncio
import gc

import pytest

import actorrt


@actorrt.actor
class Echo:
    def echo(self, item: object) -> object:
        return item


@actorrt.actor(max_restarts=1)
class Counter:
    def __init__(self, log: list[str]) -> None:
        self.log = log
        self.count = 0

    def add(self, item: str) -> int:
        self.log.append(item)
        self.count += 1
        return self.count

    async def add_later(self, item: str) -> int:
        await asyncio.sleep(0)
        return self.add(item)

    def crash(self) -> None:
        raise ValueError("boom")

    def whoami(self) -> str | None:
        return actorrt.get_context().get_actor_id()

    async def spawn_child(self) -> actorrt.ActorRef["Counter"]:
        return await Counter.spawn(self.log)

    def on_stop(self) -> None:
        self.log.append("on_stop")


async def settled() -> None:
    """A few loop turns: enough for an actor with an empty mailbox to let its task end."""
    for _ in range(5):
        await asyncio.sleep(0)


def tasks_of(refs: list[actorrt.ActorRef[object]]) -> list[object]:
    return [ref._cell.task for ref in refs if ref._cell.task is not None]


async def test_idle_actors_cost_the_cyclic_collector_few_objects(
    actorrt_runtime: actorrt.Runtime,
) -> None:
    # Every object an idle actor keeps is walked by each full collection: with many actors
    # alive, that cost is paid per actor on every one of them.
    await settled()
    gc.collect()
    before = len(gc.get_objects())
    refs = [await Echo.spawn() for _ in range(1_000)]
    assert await asyncio.gather(*(ref.echo(i) for i, ref in enumerate(refs))) == list(range(1_000))
    await settled()
    gc.collect()
    per_actor = (len(gc.get_objects()) - before) / len(refs)
    assert per_actor <= 14, f"{per_actor:.1f} gc-tracked objects per idle actor"
    assert tasks_of(refs) == []


async def test_asks_in_flight_to_idle_actors_cost_the_collector_few_objects(
    actorrt_runtime: actorrt.Runtime,
) -> None:
    # 100,000 asks in flight at once are 100,000 times these: each full collection they
    # bring about walks all of them.
    refs = [await Echo.spawn() for _ in range(1_000)]
    assert await asyncio.gather(*(ref.echo(i) for i, ref in enumerate(refs))) == list(range(1_000))
    await settled()
    gc.collect()
    before = len(gc.get_objects())
    gathered = asyncio.gather(*(ref.echo(i) for i, ref in enumerate(refs)))
    per_ask = (len(gc.get_objects()) - before) / len(refs)
    assert await gathered == list(range(1_000))
    assert per_ask <= 6, f"{per_ask:.1f} gc-tracked objects per ask in flight"


def count_serving_tasks() -> list[int]:
    """Count, in the list returned, the actors' serving tasks made from now on."""
    loop = asyncio.get_running_loop()
    made = [0]
    previous = loop.get_task_factory()

    def factory(loop: asyncio.AbstractEventLoop, coro: object, **kwargs: object) -> object:
        task = (
            previous(loop, coro, **kwargs) if previous is not None
            else asyncio.Task(coro, loop=loop, **kwargs)  # type: ignore[arg-type]
        )
        if getattr(coro, "__qualname__", "") == "Supervised._supervise":
            made[0] += 1
        return task

    loop.set_task_factory(factory)  # type: ignore[arg-type]
    return made


async def test_sequential_asks_of_sync_methods_start_no_task(
    actorrt_runtime: actorrt.Runtime,
) -> None:
    loop = asyncio.get_running_loop()
    ref = await Counter.spawn([])
    await ref.add("first")
    made = count_serving_tasks()
    try:
        for i in range(100):
            assert await ref.add(str(i)) == i + 2
        await settled()
        assert made == [0]  # each ran in a loop callback: no task, coroutine or step each
        assert await ref.add_later("async") == 102  # an async method needs a task
        assert made == [1]
    finally:
        loop.set_task_factory(None)


async def test_a_gathered_ask_of_many_idle_actors_makes_no_task_per_actor(
    actorrt_runtime: actorrt.Runtime,
) -> None:
    loop = asyncio.get_running_loop()
    refs = [await Counter.spawn([]) for _ in range(50)]
    await settled()
    made = count_serving_tasks()
    try:
        assert await asyncio.gather(*(ref.add("x") for ref in refs)) == [1] * 50
        assert made == [0]
    finally:
        loop.set_task_factory(None)


async def test_messages_to_an_idle_actor_run_in_order(actorrt_runtime: actorrt.Runtime) -> None:
    log: list[str] = []
    ref = await Counter.spawn(log)
    await settled()
    assert ref._cell.task is None
    ref.add.tell("a")
    answers = [ref.add_later("b"), ref.add("c")]
    ref.add.tell("d")
    assert await asyncio.gather(*answers) == [2, 3]
    assert await ref.add("e") == 5
    assert log == ["a", "b", "c", "d", "e"]
    assert await ref.whoami() == ref.actor_id  # its code still runs as the actor


async def test_stopping_an_idle_actor_runs_on_stop(actorrt_runtime: actorrt.Runtime) -> None:
    log: list[str] = []
    ref = await Counter.spawn(log)
    await ref.add("x")
    await settled()
    assert ref._cell.task is None
    died = await ref.stop()
    assert died.reason == "stopped"
    assert log == ["x", "on_stop"]


async def test_killing_an_idle_actor_kills_its_idle_children(
    actorrt_runtime: actorrt.Runtime,
) -> None:
    log: list[str] = []
    parent = await Counter.spawn(log)
    child = await parent.spawn_child()
    await settled()
    assert tasks_of([parent, child]) == []
    died = await parent.kill()
    assert died.reason == "killed"
    assert (await child.wait_stopped()).reason == "parent ended"
    assert log == []  # a kill runs no on_stop
    with pytest.raises(actorrt.ActorDiedError, match="was killed"):
        await parent.add("late")


async def test_a_kill_just_after_a_message_to_an_idle_actor_fails_it(
    actorrt_runtime: actorrt.Runtime,
) -> None:
    log: list[str] = []
    ref = await Counter.spawn(log)
    await settled()
    asked = ref.add("never")  # starts a task that has not begun when the kill comes
    ref._cell.kill_nowait()  # as a parent's end or a shutdown kills it: at once
    with pytest.raises(actorrt.ActorDiedError, match="was killed"):
        await asked
    assert (await ref.wait_stopped()).reason == "killed"
    assert log == []


async def test_a_stop_then_a_kill_of_an_idle_actor_ends_it_killed(
    actorrt_runtime: actorrt.Runtime,
) -> None:
    ref = await Counter.spawn([])
    await settled()
    stopping = asyncio.ensure_future(ref.stop())
    await asyncio.sleep(0)  # the stop is queued; the task it started has not run yet
    assert ref._cell.state == "stopping"
    ref._cell.kill_nowait()
    assert (await ref.wait_stopped()).reason == "killed"
    assert (await stopping).reason == "killed"


async def test_an_actor_restarted_after_a_crash_serves_again_once_idle(
    actorrt_runtime: actorrt.Runtime,
) -> None:
    log: list[str] = []
    ref = await Counter.spawn(log)
    assert await ref.add("before") == 1
    await settled()
    ref.crash.tell()  # reaches the idle actor, crashes it; it restarts after its backoff
    while ref._cell.restart_count == 0 or ref._cell.state != "running":
        await asyncio.sleep(0.01)
    await settled()
    assert ref._cell.task is None
    assert await ref.add("after") == 1  # a fresh instance
    assert log == ["before", "on_stop", "after"]


async def test_a_shutdown_ends_idle_actors() -> None:
    log: list[str] = []
    async with actorrt.Runtime():
        refs = [await Counter.spawn(log) for _ in range(3)]
        await settled()
        assert tasks_of(refs) == []
    reasons = {(await ref.wait_stopped()).reason for ref in refs}
    assert reasons == {"runtime shut down"}
    assert log == ["on_stop"] * 3


async def test_a_turn_that_fails_hands_the_actor_to_a_serving_task(
    actorrt_runtime: actorrt.Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A defect in the callback serving must not leave the actor deaf: a task takes over.
    log: list[str] = []
    ref = await Counter.spawn(log)
    await ref.add("a")
    await settled()
    reported: list[dict[str, object]] = []
    loop = asyncio.get_running_loop()
    loop.set_exception_handler(lambda _loop, context: reported.append(context))
    try:
        def broken() -> None:
            raise RuntimeError("a defect in serving")

        monkeypatch.setattr(ref._cell, "_take_turn", broken)
        assert await asyncio.wait_for(ref.add("b"), 10) == 2
        assert [str(c["exception"]) for c in reported] == ["a defect in serving"]
        died = await asyncio.wait_for(ref.kill(), 10)
        assert died.reason == "killed"
    finally:
        loop.set_exception_handler(None)
