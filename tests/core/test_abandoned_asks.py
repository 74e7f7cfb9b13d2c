"""An ask whose caller gave up before the actor began it is dropped: a timeout, a cancelled
awaiting task, ``handle.cancel()``; inline and in a worker process."""

import asyncio
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import actorrt
from actorrt._wire._messages import Ping


@actorrt.actor
class Inline:
    def __init__(self, gate: asyncio.Event, started: asyncio.Event) -> None:
        self.gate = gate
        self.started = started
        self.ran: list[str] = []

    async def hold(self) -> None:
        self.started.set()
        await self.gate.wait()

    def record(self, item: str) -> str:
        self.ran.append(item)
        return item

    def history(self) -> list[str]:
        return list(self.ran)


@actorrt.actor(process=True)
class Remote:
    def __init__(self) -> None:
        self.ran: list[str] = []

    def hold(self, started: str, gate: str) -> None:
        Path(started).touch()
        deadline = time.monotonic() + 30
        while not Path(gate).exists():  # OS state, polled with a bound
            if time.monotonic() > deadline:
                raise TimeoutError(f"{gate} never appeared")
            time.sleep(0.01)

    def record(self, item: str) -> str:
        self.ran.append(item)
        return item

    def history(self) -> list[str]:
        return list(self.ran)


async def _give_up_three_ways(ref: actorrt.ActorRef) -> None:  # type: ignore[type-arg]
    """Queue three asks behind a held message and give each up in another way."""
    with pytest.raises(actorrt.AskTimeoutError):
        await ref.record.options(timeout=0.05)("timed out")

    async def waits() -> None:
        await ref.record("task cancelled")

    task = asyncio.ensure_future(waits())
    await asyncio.sleep(0)  # let it send its ask and start waiting
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task

    handle = ref.record("handle cancelled")
    assert handle.cancel() is True
    with pytest.raises(asyncio.CancelledError):
        await handle


async def _held_inline() -> tuple[Any, asyncio.Event, Any]:
    """An inline actor busy with hold(): what is sent to it now stays queued."""
    gate, started = asyncio.Event(), asyncio.Event()
    ref = await Inline.spawn(gate, started)
    held = ref.hold()
    await started.wait()
    return ref, gate, held


async def _only_kept_runs(ref: Any, held: Any, open_gate: Callable[[], object]) -> None:
    """Queue one more ask, let the actor go on, and check only that one ran."""
    kept = ref.record("kept")  # queued after the others: once it has run, so would they
    open_gate()
    await held
    assert await kept == "kept"
    assert await ref.history() == ["kept"]


async def test_an_abandoned_queued_ask_never_runs_inline(actorrt_runtime: actorrt.Runtime) -> None:
    ref, gate, held = await _held_inline()
    await _give_up_three_ways(ref)
    await _only_kept_runs(ref, held, gate.set)


async def test_an_abandoned_queued_ask_never_runs_in_a_worker_process(
    actorrt_runtime: actorrt.Runtime, tmp_path: Path
) -> None:
    ref = await Remote.spawn()
    started, gate = tmp_path / "started", tmp_path / "gate"
    held = ref.hold(str(started), str(gate))
    deadline = time.monotonic() + 30
    while not started.exists():
        assert time.monotonic() < deadline, "hold() never began"
        await asyncio.sleep(0.01)
    await _give_up_three_ways(ref)
    # The worker reads its connection in order: once it has answered a ping sent after the
    # cancellations, it has handled them, so the gate may open.
    await ref._cell.conn.request(Ping())
    await _only_kept_runs(ref, held, gate.touch)


async def test_a_running_ask_runs_to_its_end_and_cancel_says_whether_it_gave_up(
    actorrt_runtime: actorrt.Runtime,
) -> None:
    ref, gate, held = await _held_inline()
    assert held.cancel() is True  # begun: it runs on, its answer is discarded
    gate.set()
    assert await ref.record("after") == "after"
    done = ref.record("done")
    assert await done == "done"
    assert done.cancel() is False  # answered already: nothing to give up
    assert await done == "done"
    with pytest.raises(asyncio.CancelledError):
        await held


async def test_an_ask_made_and_cancelled_from_another_thread_never_runs(
    actorrt_runtime: actorrt.Runtime,
) -> None:
    ref, gate, held = await _held_inline()

    def from_thread() -> bool:
        handle = ref.record("from a thread")
        return handle.cancel()

    assert await asyncio.to_thread(from_thread) is True
    await _only_kept_runs(ref, held, gate.set)
