"""Pipelined asks to a worker-process actor: the sync messages handed to its thread together
are answered in one frame, and each caller still gets its own answer: a value, a tuple, its
own exception, or, for a value that cannot be sent, its own TypeError."""

import asyncio
import threading

import numpy as np
import pytest

import actorrt


@actorrt.actor(process=True)
class Mixed:
    def answer(self, i: int) -> object:
        if i % 7 == 3:
            raise KeyError(f"no {i}")
        if i == 50:
            return threading.Lock()  # cannot be sent back
        if i == 60:
            return np.arange(20_000, dtype=np.float64)  # 160 KB: a frame of its own
        if i % 2:
            return (i, "odd", {"k": (i,)})
        return {"i": i, 1: [i]}



async def test_each_pipelined_caller_gets_its_own_answer(
    actorrt_runtime: actorrt.Runtime,
) -> None:
    ref = await Mixed.spawn()
    handles = [ref.answer(i) for i in range(200)]
    for i, handle in enumerate(handles):
        if i % 7 == 3:
            with pytest.raises(KeyError, match=f"no {i}"):
                await handle
        elif i == 50:
            with pytest.raises(TypeError, match="cannot be serialized"):
                await handle
        elif i == 60:
            assert (await handle).tolist() == list(range(20_000))
        elif i % 2:
            assert await handle == (i, "odd", {"k": (i,)})
        else:
            assert await handle == {"i": i, 1: [i]}
    assert await ref.answer(2) == {"i": 2, 1: [2]}  # still serving



@actorrt.actor(process=True)
class Growing:
    def __init__(self) -> None:
        self.items: list[int] = []

    def add(self, i: int) -> list[int]:
        self.items.append(i)
        return self.items  # the same list each time; later messages grow it


async def test_an_answer_is_sent_as_it_was_when_its_method_returned(
    actorrt_runtime: actorrt.Runtime,
) -> None:
    # Pipelined, these run on the actor's thread together; each answer must still be the
    # list as its own call left it, not as the last call of the run did.
    ref = await Growing.spawn()
    handles = [ref.add(i) for i in range(300)]
    for i, handle in enumerate(handles):
        assert await handle == list(range(i + 1))


async def test_a_process_actors_methods_are_method_refs_in_every_way(
    actorrt_runtime: actorrt.Runtime,
) -> None:
    # Its methods send their own calls (a call less per ask); options, tell, a thread's ask
    # and a broken argument behave as on any MethodRef.
    ref = await Growing.spawn()
    add = ref.add
    assert isinstance(add, actorrt.MethodRef) and ref.add is add
    assert await add.options(timeout=30)(1) == [1]
    assert isinstance(add.options(timeout=30), actorrt.MethodRef)
    add.tell(2)
    with pytest.raises(TypeError, match=r"cannot send the arguments of Growing.add\(\)"):
        add(threading.Lock())
    on_thread = await asyncio.to_thread(lambda: actorrt.get(add(3)))
    assert on_thread == [1, 2, 3]
    assert "Growing" in repr(add)
