"""actorrt.wait, as ray.wait means it, and ask handles in asyncio.wait / as_completed."""

import asyncio

import pytest

import actorrt


@actorrt.actor(max_concurrency=8)
class Gates:
    """Answers ``hold(key)`` once ``release(key)`` has come: the test decides the order."""

    def __init__(self) -> None:
        self.events: dict[str, asyncio.Event] = {}

    def _event(self, key: str) -> asyncio.Event:
        return self.events.setdefault(key, asyncio.Event())

    async def hold(self, key: str) -> str:
        await self._event(key).wait()
        return key

    def release(self, key: str) -> None:
        self._event(key).set()

    def fail(self) -> None:
        raise KeyError("boom")

    def count(self, n: int):  # type: ignore[no-untyped-def]
        yield from range(n)


async def test_wait_returns_ready_and_not_ready_in_input_order(actorrt_runtime) -> None:
    gates = await Gates.options(process=True).spawn()
    a, b, c = gates.hold("a"), gates.hold("b"), gates.hold("c")
    assert await actorrt.wait([a, b, c], timeout=0) == ([], [a, b, c])
    await gates.release("b")
    assert await actorrt.wait([a, b, c]) == ([b], [a, c])
    # Two wanted, one ready: the timeout ends the wait with what there is.
    assert await actorrt.wait([a, b, c], num_returns=2, timeout=0.05) == ([b], [a, c])
    await gates.release("c")
    await gates.release("a")
    ready, rest = await actorrt.wait([c, a, b], num_returns=3)
    assert (ready, rest) == ([c, a, b], [])
    # More ready than asked for: at most num_returns, the first in input order.
    assert await actorrt.wait([c, a, b], num_returns=2) == ([c, a], [b])
    assert [await h for h in ready] == ["c", "a", "b"]
    assert await actorrt.wait([]) == ([], [])
    await gates.stop()


async def test_a_put_ref_is_ready_from_the_start(actorrt_runtime) -> None:
    gates = await Gates.options(process=True).spawn()
    held, ref = gates.hold("x"), actorrt.put({"big": list(range(10))})
    # As Ray's ray.put refs: ready at once, in input order with the handles.
    assert await actorrt.wait([held, ref], timeout=0) == ([ref], [held])
    assert await actorrt.wait([held, ref], num_returns=1) == ([ref], [held])
    with pytest.raises(TypeError, match="got a single one"):
        actorrt.wait(ref)
    await gates.release("x")
    assert await actorrt.wait([held, ref], num_returns=2) == ([held, ref], [])
    assert await held == "x" and await ref == {"big": list(range(10))}
    await gates.stop()


async def test_an_error_answer_is_ready(actorrt_runtime) -> None:
    gates = await Gates.spawn()
    failing, held = gates.fail(), gates.hold("x")
    assert await actorrt.wait([held, failing]) == ([failing], [held])
    with pytest.raises(KeyError):
        await failing
    await gates.release("x")
    await gates.stop()


async def test_asyncio_wait_and_as_completed_take_handles(actorrt_runtime) -> None:
    gates = await Gates.options(process=True).spawn()
    a, b = gates.hold("a"), gates.hold("b")
    done, pending = await asyncio.wait([a, b], timeout=0.02)
    assert done == set() and pending == {a, b}
    await gates.release("b")
    done, pending = await asyncio.wait([a, b], return_when=asyncio.FIRST_COMPLETED)
    assert done == {b} and pending == {a}
    assert b.exception() is None and b.result() == "b"
    await gates.release("a")
    order = [await next_one for next_one in asyncio.as_completed([a, b])]
    assert sorted(order) == ["a", "b"]
    await gates.stop()


def test_done_callbacks_follow_the_future_protocol(facade) -> None:
    gates = actorrt.get(Gates.spawn())
    handle = gates.hold("k")
    seen: list[object] = []
    handle.add_done_callback(seen.append)
    handle.add_done_callback(print)
    assert handle.remove_done_callback(print) == 1
    assert handle.remove_done_callback(print) == 0
    with pytest.raises(asyncio.InvalidStateError):
        handle.exception()
    actorrt.get(gates.release("k"))
    assert actorrt.get(handle) == "k"
    # Added from a thread with no loop: called on the thread that settled the answer.
    assert actorrt.wait([handle]) == ([handle], [])
    assert seen == [handle] and not handle.cancelled()


def test_wait_blocks_in_sync_code(facade) -> None:
    gates = actorrt.get(Gates.options(process=True).spawn())
    a, b = gates.hold("a"), gates.hold("b")
    assert actorrt.wait([a, b], timeout=0.05) == ([], [a, b])
    gates.release.tell("a")
    assert actorrt.wait([a, b]) == ([a], [b])
    gates.release.tell("b")
    assert actorrt.wait([a, b], num_returns=2, timeout=30) == ([a, b], [])
    assert actorrt.get([a, b]) == ["a", "b"]
    actorrt.get(gates.stop())


async def test_bad_inputs_name_the_value(actorrt_runtime) -> None:
    gates = await Gates.spawn()
    h = gates.hold("h")
    with pytest.raises(TypeError, match=r"got a single one .*actorrt.wait\(\[handle\]\)"):
        actorrt.wait(h)
    with pytest.raises(TypeError, match="got set"):
        actorrt.wait({h})
    with pytest.raises(TypeError, match="item 1 is int: 3"):
        actorrt.wait([h, 3])
    stream = gates.count(3)
    with pytest.raises(TypeError, match=r"item 0 is Stream.*read them with `for`"):
        actorrt.wait([stream])
    assert [x async for x in stream] == [0, 1, 2]
    with pytest.raises(ValueError, match="at most once"):
        actorrt.wait([h, h])
    with pytest.raises(ValueError, match=r"from 1 to the number of handles \(1\), got 2"):
        actorrt.wait([h], num_returns=2)
    with pytest.raises(ValueError, match="got 0"):
        actorrt.wait([h], num_returns=0)
    with pytest.raises(TypeError, match="num_returns must be an int, got 1.5"):
        actorrt.wait([h], num_returns=1.5)
    with pytest.raises(ValueError, match="got -1"):
        actorrt.wait([h], timeout=-1)
    with pytest.raises(TypeError, match="got '1'"):
        actorrt.wait([h], timeout="1")
    await gates.release("h")
    assert await actorrt.wait([h], timeout=5, fetch_local=False) == ([h], [])
    await gates.stop()


# -- a wait inside an actor is a wait edge -------------------------------------------------


@actorrt.actor
class Peer:
    """Waits with actorrt.wait on its peer's answer: one message at a time."""

    def __init__(self) -> None:
        self.other = None

    def meet(self, other) -> None:  # type: ignore[no-untyped-def]
        self.other = other

    async def ping(self) -> str:
        return "pong"

    async def ask_other(self, also: list) -> str:  # type: ignore[type-arg]
        # Waits for the answer of its peer and of every handle in `also`: all needed.
        handles = [self.other.ask_back(), *also]
        ready, _ = await actorrt.wait(handles, num_returns=len(handles))
        return str(ready[0].result())

    async def ask_back(self) -> str:
        ready, _ = await actorrt.wait([self.other.ping()])
        return str(ready[0].result())

    def ask_other_sync(self) -> str:
        ready, _ = actorrt.wait([self.other.ask_back_sync()])
        return str(ready[0].result())

    def ask_back_sync(self) -> str:
        ready, _ = actorrt.wait([self.other.ping()])
        return str(ready[0].result())

    async def wait_for_either(self, gates) -> str:  # type: ignore[no-untyped-def]
        # One of two: the gate may answer whatever the cycle does, so this is no edge.
        ready, _ = await actorrt.wait([self.other.ask_back(), gates.hold("either")])
        return str(ready[0].result())


@pytest.mark.parametrize("kind", ["inline", "process-sync"])
async def test_a_cycle_through_wait_is_reported_as_a_deadlock(actorrt_runtime, kind) -> None:
    cls = Peer if kind == "inline" else Peer.options(process=True)
    a = await cls.options(name="alpha").spawn()
    b = await cls.options(name="beta").spawn()
    await a.meet(b)
    await b.meet(a)
    call = a.ask_other_sync() if kind == "process-sync" else a.ask_other([])
    with pytest.raises(actorrt.DeadlockError) as caught:
        await asyncio.wait_for(call, 30)
    text = str(caught.value)
    assert "ask deadlock" in text and "name='alpha'" in text and "name='beta'" in text
    assert await a.ping() == "pong" and await b.ping() == "pong"  # both go on
    await a.stop()
    await b.stop()


async def test_a_wait_for_one_of_several_is_no_edge_until_all_left_are_needed(
    actorrt_runtime,
) -> None:
    gates = await Gates.spawn()
    a, b = await Peer.spawn(), await Peer.spawn()
    await a.meet(b)
    await b.meet(a)
    # Either of two: waiting on the cycle is not a deadlock, for the gate may answer it.
    either = a.wait_for_either(gates)
    done, _ = await asyncio.wait([either], timeout=1.0)  # longer than a report takes
    assert not done
    await gates.release("either")
    assert await asyncio.wait_for(either, 30) == "either"
    # All of two, the other answered: the cycle left is every handle needed, a deadlock.
    answered = gates.hold("either")
    with pytest.raises(actorrt.DeadlockError):
        await asyncio.wait_for(a.ask_other([answered]), 30)
    await a.stop()
    await b.stop()
