"""Defining, spawning and calling inline actors."""

import asyncio
from typing import Any

import pytest

import actorrt


@actorrt.actor
class Counter:
    """Counts."""

    def __init__(self, start: int = 0) -> None:
        self.n = start
        self.seen: list[object] = []

    def incr(self, by: int = 1) -> int:
        self.n += by
        return self.n

    def record(self, item: object) -> None:
        self.seen.append(item)

    def history(self) -> list[object]:
        return list(self.seen)

    async def slow_get(self, gate: asyncio.Event) -> int:
        await gate.wait()
        return self.n

    def fail(self, message: str) -> None:
        raise KeyError(message)

    @staticmethod
    def twice(x: int) -> int:
        return 2 * x


async def test_spawn_and_ask(actorrt_runtime: actorrt.Runtime) -> None:
    counter = await Counter.spawn(10)
    assert await counter.incr() == 11
    assert await counter.incr(by=5) == 16
    assert await counter.twice(4) == 8
    assert isinstance(counter, actorrt.ActorRef)
    assert "Counter" in repr(counter)


async def test_a_call_sends_at_once_and_many_calls_pipeline(
    actorrt_runtime: actorrt.Runtime,
) -> None:
    counter = await Counter.spawn()
    handles = [counter.incr() for _ in range(100)]
    # Sent at call time: the actor processes them without anyone awaiting.
    last = handles[-1]
    while not last.done():
        await asyncio.sleep(0)
    assert [h.result() for h in handles] == list(range(1, 101))
    assert await asyncio.gather(*handles) == list(range(1, 101))


async def test_tell_and_per_sender_order(actorrt_runtime: actorrt.Runtime) -> None:
    counter = await Counter.spawn()
    for i in range(1000):
        counter.record.tell(i)
    assert await counter.history() == list(range(1000))


async def test_order_is_kept_between_tells_and_asks(actorrt_runtime: actorrt.Runtime) -> None:
    counter = await Counter.spawn()
    counter.record.tell("a")
    first = counter.history()
    counter.record.tell("b")
    assert await first == ["a"]
    assert await counter.history() == ["a", "b"]


async def test_exception_goes_to_the_caller_and_the_actor_goes_on(
    actorrt_runtime: actorrt.Runtime,
) -> None:
    counter = await Counter.spawn()
    with pytest.raises(KeyError, match="boom"):
        await counter.fail("boom")
    assert await counter.incr() == 1


async def test_async_methods_and_handles_awaited_twice(actorrt_runtime: actorrt.Runtime) -> None:
    counter = await Counter.spawn(3)
    gate = asyncio.Event()
    handle = counter.slow_get(gate)
    assert not handle.done()
    gate.set()
    assert await handle == 3
    assert await handle == 3


async def test_spawn_undecorated_class_with_actorrt_spawn(
    actorrt_runtime: actorrt.Runtime,
) -> None:
    class Plain:
        def hello(self, name: str) -> str:
            return f"hello {name}"

    ref = await actorrt.spawn(Plain)
    assert await ref.hello("you") == "hello you"
    decorated = await actorrt.spawn(Counter, 1)
    assert await decorated.incr() == 2


async def test_calling_a_missing_method_names_the_class_and_its_methods(
    actorrt_runtime: actorrt.Runtime,
) -> None:
    counter = await Counter.spawn()
    with pytest.raises(AttributeError, match=r"Counter has no public method 'incrr'.*incr"):
        counter.incrr()
    with pytest.raises(AttributeError, match="no public method '_private'"):
        counter._private  # noqa: B018
    with pytest.raises(AttributeError, match="on_start"):
        counter.on_start  # noqa: B018


def test_misuse_of_classes_is_a_clear_error() -> None:
    with pytest.raises(TypeError, match="actors are made from classes"):
        actorrt.actor(lambda: None)  # type: ignore[call-overload]
    with pytest.raises(TypeError, match=r"await Counter.spawn\(...\)"):
        Counter()
    with pytest.raises(TypeError, match="already an actor class"):
        actorrt.actor(Counter)  # type: ignore[call-overload]

    class Stopper:
        def stop(self) -> None: ...

    with pytest.raises(TypeError, match="defines 'stop'"):
        actorrt.actor(Stopper)


async def test_spawn_of_a_non_class_fails(actorrt_runtime: actorrt.Runtime) -> None:
    with pytest.raises(TypeError, match="actors are made from classes; got 42"):
        await actorrt.spawn(42)  # type: ignore[call-overload]


def test_options_are_validated_where_given() -> None:
    with pytest.raises(TypeError, match="unknown actor option.*num_cpu"):
        Counter.options(num_cpu=1)
    with pytest.raises(ValueError, match="max_concurrency must be at least 1, got 0"):
        Counter.options(max_concurrency=0)
    with pytest.raises(TypeError, match="mailbox_size must be an int, got True"):
        Counter.options(mailbox_size=True)
    with pytest.raises(ValueError, match="max_restarts must be at least -1"):
        actorrt.actor(max_restarts=-2)
    with pytest.raises(TypeError, match="name must be a non-empty string"):
        Counter.options(name="")
    assert Counter.cls.__name__ == "Counter"  # the raw class stays reachable
    with pytest.raises(ValueError, match="timeout must be a positive finite number"):
        actorrt.MethodRef.options(None, timeout=-1)  # type: ignore[arg-type]


async def test_constructor_error_is_raised_by_spawn(actorrt_runtime: actorrt.Runtime) -> None:
    @actorrt.actor(name="broken")
    class Broken:
        def __init__(self) -> None:
            raise ValueError("bad config")

    with pytest.raises(ValueError, match="bad config"):
        await Broken.spawn()
    # The failed actor released its name.
    with pytest.raises(actorrt.ActorNotFoundError):
        await actorrt.get_actor("broken")


async def test_hooks_run_in_order_sync_and_async(actorrt_runtime: actorrt.Runtime) -> None:
    events: list[str] = []

    @actorrt.actor
    class Hooked:
        def __init__(self) -> None:
            events.append("init")

        async def on_start(self) -> None:
            await asyncio.sleep(0)
            events.append("start")

        def work(self) -> None:
            events.append("work")

        def on_stop(self) -> None:
            events.append("stop")

    ref = await Hooked.spawn()
    assert events == ["init", "start"]
    ref.work.tell()
    await ref.stop()
    assert events == ["init", "start", "work", "stop"]


async def test_get_context_inside_and_outside_actors(actorrt_runtime: actorrt.Runtime) -> None:
    @actorrt.actor(name="ctx")
    class Ctx:
        def where(self) -> tuple[str | None, str | None, str | None]:
            ctx = actorrt.get_context()
            return ctx.get_actor_id(), ctx.actor_name, ctx.actor_class

    ref = await Ctx.spawn()
    assert await ref.where() == (ref.actor_id, "ctx", "Ctx")
    assert actorrt.get_context().actor_id is None


async def test_refs_are_values(actorrt_runtime: actorrt.Runtime) -> None:
    @actorrt.actor
    class Forwarder:
        async def forward(self, target: actorrt.ActorRef[Counter], by: int) -> int:
            return int(await target.incr(by))

    counter = await Counter.spawn()
    forwarder = await Forwarder.spawn()
    assert await forwarder.forward(counter, 7) == 7
    again = await actorrt.spawn(Counter)
    assert counter == counter and counter != again
    assert len({counter, again, counter}) == 2
    with pytest.raises(AttributeError, match="immutable"):
        counter.incr = None  # type: ignore[method-assign]


async def test_a_method_raising_cancelled_error_is_not_the_callers_cancellation(
    actorrt_runtime: actorrt.Runtime,
) -> None:
    @actorrt.actor
    class Odd:
        def weird(self) -> None:
            raise asyncio.CancelledError()

        def fine(self) -> str:
            return "fine"

    ref = await Odd.spawn()
    with pytest.raises(RuntimeError, match=r"weird\(\) raised CancelledError"):
        await ref.weird()
    assert await ref.fine() == "fine"


@actorrt.actor
class HandsOutStreams:
    """Plain methods that return generators: refused at the call, never run."""

    def __init__(self) -> None:
        self.ran: list[int] = []

    def items(self, n: int) -> Any:
        return (self.ran.append(i) for i in range(n))

    async def async_items(self, n: int) -> Any:
        async def stream() -> Any:
            for i in range(n):
                self.ran.append(i)
                yield i

        return stream()

    def ran_so_far(self) -> list[int]:
        return self.ran


@pytest.mark.parametrize("process", [False, True], ids=["inline", "process"])
async def test_a_returned_generator_is_refused_at_the_call_alike_inline_and_in_a_process(
    actorrt_runtime: actorrt.Runtime, process: bool
) -> None:
    ref = await HandsOutStreams.options(process=process).spawn()
    with pytest.raises(TypeError, match=r"items\(\) returned a generator, which an actor"):
        await ref.items(3)
    with pytest.raises(TypeError, match=r"async_items\(\) returned an async generator"):
        await ref.async_items(3)
    assert await ref.ran_so_far() == []  # none of the generators' code ran, anywhere
    await ref.stop()
