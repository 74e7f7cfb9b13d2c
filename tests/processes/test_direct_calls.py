"""Calls between two worker processes go straight from one to the other, not through the
owning runtime: proven by the owner's relay count (``actorrt status --json``, "relayed"),
with order, errors, deaths, restarts and the fallback to the relay kept."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import until_direct as until_direct_calls

import actorrt
from actorrt._control._server import _discovery
from actorrt._core._current import current_services

CLI = os.path.join(os.path.dirname(sys.executable), "actorrt")


@actorrt.actor(process=True, num_cpus=0.01)
class Target:
    def __init__(self) -> None:
        self.seen: list[int] = []

    async def echo(self, value: Any) -> Any:
        return value

    def add(self, value: int) -> None:
        self.seen.append(value)

    async def received(self) -> list[int]:
        return self.seen

    def pid(self) -> int:
        return os.getpid()

    def fail(self) -> None:
        raise KeyError("not here")

    def nap(self, seconds: float) -> str:
        time.sleep(seconds)
        return "rested"

    def refuse_direct(self) -> None:
        """Close this worker's direct listener (its socket goes, and the connections made
        to it): connecting again is refused."""
        current_services().workers.direct._server.close()  # type: ignore[attr-defined]


@actorrt.actor(process=True, num_cpus=0.01)
class Caller:
    def goes_direct(self, ref: Any) -> bool:
        """Whether this worker's calls to ``ref`` take a direct connection now."""
        return bool(ref._cell.direct())

    async def asks(self, ref: Any, n: int) -> int:
        for i in range(n):
            assert await ref.echo(i) == i
        return n

    async def tells_then_ask(self, ref: Any, chunks: int, per_chunk: int) -> list[int]:
        sent = 0
        for _ in range(chunks):
            for _ in range(per_chunk):
                ref.add.tell(sent)
                sent += 1
            await asyncio.sleep(0.001)  # the switch to direct may happen between chunks
        result: list[int] = await ref.received()
        return result

    async def pipelined_then_ask(self, ref: Any, windows: int, per_window: int) -> list[int]:
        sent = 0
        for _ in range(windows):
            handles = []
            for _ in range(per_window):
                handles.append(ref.add(sent))
                sent += 1
            await asyncio.gather(*handles)  # the switch may happen as a window's last answers
        result: list[int] = await ref.received()
        return result

    async def asks_by_name(self, name: str, n: int) -> int:
        ref = await actorrt.get_actor(name)
        return await self.asks(ref, n)

    async def failing(self, ref: Any) -> str:
        try:
            await ref.fail()
        except KeyError as exc:
            return f"KeyError {exc}"
        return "no error"

    async def nap_until_died(self, ref: Any, seconds: float) -> tuple[str, str, float]:
        start = time.monotonic()
        try:
            await ref.nap(seconds)
        except actorrt.ActorDiedError as exc:
            return type(exc).__name__, str(exc), time.monotonic() - start
        return "answered", "", time.monotonic() - start

    async def pid_of(self, ref: Any) -> int:
        pid: int = await ref.pid()
        return pid


def status_relayed() -> dict[str, int]:
    shown = subprocess.run([CLI, "status", "--json"], capture_output=True, text=True, timeout=60)
    assert shown.returncode == 0, shown.stderr
    relayed: dict[str, int] = json.loads(shown.stdout)["relayed"]
    return relayed


async def until_direct(rt: actorrt.Runtime, caller: Any, target: Any) -> None:
    await until_direct_calls(rt, lambda: caller.asks(target, 5))


@pytest.fixture
def discoverable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(_discovery.DIR_ENV, str(tmp_path / "discovery"))
    monkeypatch.delenv(_discovery.ENABLE_ENV, raising=False)


async def test_calls_between_workers_go_direct_as_status_shows(discoverable: None) -> None:
    async with actorrt.Runtime(num_cpus=2) as rt:
        target, caller = await Target.spawn(), await Caller.spawn()
        await until_direct(rt, caller, target)
        before = await asyncio.to_thread(status_relayed)
        assert await caller.asks(target, 1000) == 1000
        after = await asyncio.to_thread(status_relayed)
        assert after["calls"] == before["calls"], (before, after)
        # Errors cross back with their own type.
        assert await caller.failing(target) == "KeyError 'not here'"


async def test_order_holds_across_the_switch_and_after_it() -> None:
    async with actorrt.Runtime(num_cpus=2) as rt:
        target, caller = await Target.spawn(), await Caller.spawn()
        # From the first tell on: some go through the owner, the rest directly.
        assert await caller.tells_then_ask(target, 50, 20) == list(range(1000))
        # Pipelined asks across the switch: it waits for the relay's answers.
        third = await Target.spawn()
        assert await caller.pipelined_then_ask(third, 20, 50) == list(range(1000))
        # A burst from the first tell on: the switch waits for a quiet moment.
        second = await Target.spawn()
        assert await caller.tells_then_ask(second, 1, 1000) == list(range(1000))
        await until_direct(rt, caller, second)
        # 1,000 pipelined tells then an ask, all on the direct connection.
        tells_before = rt.relayed()["tells"]
        assert await caller.tells_then_ask(second, 1, 1000) == list(range(1000)) * 2
        assert rt.relayed()["tells"] == tells_before


async def test_a_peer_killed_mid_call_fails_the_call_and_its_restart_is_reached() -> None:
    async with actorrt.Runtime(num_cpus=2) as rt:
        target = await Target.options(max_restarts=1).spawn()
        caller = await Caller.spawn()
        await until_direct(rt, caller, target)
        pid = await target.pid()
        napping = asyncio.ensure_future(caller.nap_until_died(target, 60))
        await asyncio.sleep(0.5)  # the nap has begun in the target's worker
        os.kill(pid, signal.SIGKILL)
        kind, text, took = await asyncio.wait_for(napping, 10)
        assert kind == "ActorDiedError", text
        assert "went away" in text and took < 5, (text, took)
        # The restarted actor runs in a new process, and the caller reaches it there (a
        # call that reached the owner before it saw the death fails as that death).
        deadline = time.monotonic() + 30
        while True:
            try:
                new_pid = await asyncio.wait_for(caller.pid_of(target), 30)
                break
            except actorrt.ActorDiedError as exc:
                assert "SIGKILL" in str(exc) and time.monotonic() < deadline, exc
                await asyncio.sleep(0.1)
        assert new_pid != pid
        await until_direct(rt, caller, target)


async def test_a_refused_direct_connection_falls_back_to_the_relay() -> None:
    async with actorrt.Runtime(num_cpus=2) as rt:
        target, caller = await Target.spawn(), await Caller.spawn()
        other = await Caller.spawn()
        await until_direct(rt, caller, target)  # the target listens now
        await target.refuse_direct()
        deadline = time.monotonic() + 10.0  # a call on its way as the peer closes is lost
        while await caller.goes_direct(target):
            assert time.monotonic() < deadline, "the caller never saw its connection close"
            await asyncio.sleep(0.02)
        before = rt.relayed()["calls"]
        assert await other.asks(target, 50) == 50  # a new caller is refused: relayed
        assert await caller.asks(target, 50) == 50  # so is one whose connection closed
        assert rt.relayed()["calls"] - before == 100


async def test_a_worker_that_takes_no_direct_calls_is_called_through_the_owner() -> None:
    async with actorrt.Runtime(num_cpus=2) as rt:
        target = await Target.options(worker_env={"ACTORRT_DIRECT_CALLS": "0"}).spawn()
        caller = await Caller.spawn()
        before = rt.relayed()["calls"]
        assert await caller.asks(target, 20) == 20
        assert rt.relayed()["calls"] - before == 20


async def test_an_actor_found_by_name_in_a_worker_is_called_directly() -> None:
    async with actorrt.Runtime(num_cpus=2) as rt:
        await Target.options(name="the-target").spawn()
        caller = await Caller.spawn()
        await until_direct_calls(rt, lambda: caller.asks_by_name("the-target", 5))
        before = rt.relayed()["calls"]
        assert await caller.asks_by_name("the-target", 200) == 200
        assert rt.relayed()["calls"] == before
