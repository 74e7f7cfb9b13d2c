"""The synchronous facade: init()/get()/shutdown() from plain code and other threads."""

import asyncio
import threading
from collections.abc import Iterator

import pytest

import actorrt


@actorrt.actor
class Counter:
    def __init__(self) -> None:
        self.n = 0

    def incr(self) -> int:
        self.n += 1
        return self.n

    async def slow(self, gate: threading.Event) -> str:
        await asyncio.to_thread(gate.wait)
        return "done"

    def loop_kind(self) -> str:
        return type(asyncio.get_running_loop()).__module__

    def thread(self) -> str:
        return threading.current_thread().name


@pytest.fixture
def facade() -> Iterator[actorrt.Runtime]:
    runtime = actorrt.init()
    try:
        yield runtime
    finally:
        actorrt.shutdown()
    assert not actorrt.is_initialized()


def test_a_plain_script_drives_actors(facade: actorrt.Runtime) -> None:
    counter = actorrt.get(Counter.spawn())
    assert actorrt.get(counter.incr()) == 1
    counter.incr.tell()
    assert actorrt.get([counter.incr(), counter.incr()]) == [3, 4]
    assert actorrt.get(counter.loop_kind()).startswith("uvloop")
    assert actorrt.get(counter.thread()) != threading.current_thread().name
    named = actorrt.get(Counter.options(name="c").spawn())
    assert actorrt.get(actorrt.get_actor("c")) == named
    assert actorrt.get(counter.stop()).reason == "stopped"
    with pytest.raises(actorrt.ActorDiedError):
        actorrt.get(counter.incr())


def test_get_timeout_and_bad_input(facade: actorrt.Runtime) -> None:
    counter = actorrt.get(Counter.spawn())
    gate = threading.Event()
    with pytest.raises(TimeoutError, match="timed out"):
        actorrt.get(counter.slow(gate), timeout=0.05)
    gate.set()
    late = threading.Event()
    with pytest.raises(actorrt.AskTimeoutError):
        actorrt.get(counter.slow.options(timeout=0.05)(late))
    late.set()
    with pytest.raises(TypeError, match="takes an awaitable.*got int"):
        actorrt.get(42)


def test_get_on_a_loop_thread_says_to_await(facade: actorrt.Runtime) -> None:
    counter = actorrt.get(Counter.spawn())

    async def misuse() -> None:
        actorrt.get(counter.incr())

    with pytest.raises(RuntimeError, match="use `await` instead"):
        asyncio.run(misuse())


def test_another_threads_loop_can_await_refs(facade: actorrt.Runtime) -> None:
    async def elsewhere() -> list[int]:
        counter = await Counter.spawn()
        first = await counter.incr()
        await counter.incr.tell_wait()
        await counter.stop()
        return [first]

    assert asyncio.run(elsewhere()) == [1]


def test_init_twice_and_refs_after_shutdown() -> None:
    actorrt.init()
    try:
        with pytest.raises(actorrt.RuntimeAlreadyRunningError, match="shutdown"):
            actorrt.init()
        counter = actorrt.get(Counter.spawn())
    finally:
        actorrt.shutdown()
    actorrt.shutdown()  # a second shutdown does nothing
    with pytest.raises(actorrt.RuntimeClosedError):
        counter.incr()
    with pytest.raises(actorrt.NoRuntimeError):
        actorrt.get(Counter.spawn())
