"""A stalled request is a warning only when an actor is stuck on it; queued spawns of the
driver program (a sweep's waiting trials) are ordinary queueing, logged at info."""

import asyncio
import heapq
import logging
import time

import pytest
from conftest import eventually

import actorrt


@actorrt.actor
class Hog:
    def ping(self) -> str:
        return "held"


@actorrt.actor
class Spawner:
    async def spawn_hog(self) -> None:
        await Hog.options(num_cpus=1, process=False).spawn()


def stall_records(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if "is stalled" in r.getMessage()]


@pytest.mark.actorrt(num_cpus=1)
async def test_a_queued_spawn_of_the_driver_is_an_info_line(
    actorrt_runtime: actorrt.Runtime, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="actorrt")
    actorrt_runtime.grants.broker._stall_after = 0.2  # seconds instead of 10
    hog = await Hog.options(num_cpus=1, process=False).spawn()
    queued = asyncio.ensure_future(Hog.options(num_cpus=1, process=False).spawn())
    assert await eventually(lambda: len(stall_records(caplog)) >= 1, within=10)
    record = stall_records(caplog)[0]
    assert record.levelno == logging.INFO and "awaited by" not in record.getMessage()
    await hog.stop()  # the CPU frees: the queued spawn is served
    await (await queued).stop()


@pytest.mark.actorrt(num_cpus=1)
async def test_a_request_an_actor_is_stuck_on_is_a_warning_naming_it(
    actorrt_runtime: actorrt.Runtime, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="actorrt")
    actorrt_runtime.grants.broker._stall_after = 0.2
    hog = await Hog.options(num_cpus=1, process=False).spawn()
    spawner = await Spawner.options(name="spawner").spawn()
    inner = asyncio.ensure_future(spawner.spawn_hog())
    assert await eventually(lambda: len(stall_records(caplog)) >= 1, within=10)
    record = stall_records(caplog)[0]
    assert record.levelno == logging.WARNING
    assert "awaited by Spawner(" in record.getMessage() and "spawner" in record.getMessage()
    await hog.stop()
    await inner
    await spawner.stop()


@actorrt.actor
class Waiter:
    async def want(self) -> str:
        try:
            await Hog.options(num_cpus=1, process=False, placement="cluster").spawn()
        except actorrt.ResourceDeadlockError as exc:
            return str(exc)
        return "granted"


@pytest.mark.timeout(180)
@pytest.mark.actorrt(num_cpus=1)
async def test_a_deadlock_among_1000_waiters_and_their_stall_warnings_all_arrive(
    actorrt_runtime: actorrt.Runtime, caplog: pytest.LogCaptureFixture
) -> None:
    # benchmarks/deadlock.py times this shape at 10,000 waiters (loop stalls, report time).
    caplog.set_level(logging.INFO, logger="actorrt")
    broker = actorrt_runtime.grants.broker
    broker._stall_after = 3600.0  # no stall warning before the deadlock is reported
    n = 1000
    holder = await Waiter.options(num_cpus=1, process=False, name="holder").spawn()
    waiters = [await Waiter.spawn() for _ in range(n)]
    calls = [asyncio.ensure_future(w.want()) for w in waiters]
    assert await eventually(lambda: broker.waiting_count == n, within=60)
    # The holder waits too: now nothing can proceed, and the holder's request is the one
    # whose failure lets the others go on.
    text = await asyncio.wait_for(holder.want(), 60)
    assert text.startswith("resource deadlock: Waiter(") and "name='holder'" in text, text
    assert "holds {CPU: 1}" in text, text
    assert not stall_records(caplog)
    # Every waiter's request is stalled at once (the waits are older than the limit): each
    # gets its warning, in bounded batches, none twice.
    # The loop keeps serving meanwhile: a counter bumped once per loop turn tells how many
    # warnings one turn emitted.
    loop = asyncio.get_running_loop()
    turns = [0]
    per_turn: dict[int, int] = {}

    def turn() -> None:
        turns[0] += 1
        if len(stall_records(caplog)) < n:
            loop.call_soon(turn)

    class PerTurn(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if "is stalled" in record.getMessage():
                per_turn[turns[0]] = per_turn.get(turns[0], 0) + 1

    counter = PerTurn()
    logging.getLogger("actorrt").addHandler(counter)
    loop.call_soon(turn)
    broker._stall_after = 0.5
    for rid in list(broker._awaited_known):
        req = broker._requests[rid]
        heapq.heappush(broker._awaited, (req.arrival + 0.5, req.seq, rid))
    try:
        assert await eventually(lambda: len(stall_records(caplog)) >= n, within=60)
    finally:
        logging.getLogger("actorrt").removeHandler(counter)
    assert max(per_turn.values()) <= 100, f"{max(per_turn.values())} warnings in one loop turn"
    records = stall_records(caplog)
    assert len({r.getMessage().split()[2] for r in records}) == len(records) == n
    assert all(r.levelno == logging.WARNING and "awaited by Waiter(" in r.getMessage()
               for r in records)
    for call in calls:
        call.cancel()
    await asyncio.gather(*calls, return_exceptions=True)
    for ref in [holder, *waiters]:
        await ref.stop()


@actorrt.actor(max_concurrency=8)
class Box:
    """A value one trial gives and another takes."""

    def __init__(self) -> None:
        self.given = asyncio.Event()

    async def take(self) -> int:
        await self.given.wait()
        return 1

    def give(self) -> None:
        self.given.set()


def taker_or_giver(config: dict[str, object]) -> None:
    from actorrt import tune

    box = actorrt.get(actorrt.get_actor("box"))
    if config["i"] == 0:
        tune.report({"got": actorrt.get(box.take())})  # only trial 1 gives it
    else:
        actorrt.get(box.give())
        tune.report({"got": 0})


@pytest.mark.timeout(120)
@pytest.mark.actorrt(num_cpus=1)
async def test_a_trial_waiting_for_a_queued_trial_is_warned_about_and_the_budget_holds(
    actorrt_runtime: actorrt.Runtime, caplog: pytest.LogCaptureFixture, tmp_path: object
) -> None:
    from actorrt import tune

    caplog.set_level(logging.INFO, logger="actorrt")
    # Seconds instead of 10, but enough for the first trial to be waiting on the box when
    # the second trial's request is reported (a loaded machine starts processes slowly).
    actorrt_runtime.grants.broker._stall_after = 4.0
    box = await Box.options(name="box").spawn()
    budget = 15.0
    started = time.monotonic()
    grid = await tune.Tuner(
        tune.with_resources(taker_or_giver, {"cpu": 1}),
        param_space={"i": tune.grid_search([0, 1])},
        tune_config=tune.TuneConfig(time_budget_s=budget),
        run_config=tune.RunConfig(storage_path=str(tmp_path), verbose=0),
    ).fit_async()
    took = time.monotonic() - started
    await box.kill()
    # The running trial is stopped at the budget (killed after a grace: it never reports).
    assert took < budget + 8.0, f"fit() took {took:.1f} s with a {budget:.0f} s budget"
    assert grid.num_errors == 0
    warned = [r.getMessage() for r in stall_records(caplog) if r.levelno == logging.WARNING]
    assert warned, caplog.text[-3000:]
    text = warned[0]
    assert "TrialDriver(" in text and "is itself waiting, for an answer from Box(" in text, text
    assert "name='box'" in text and "The fix: do not make a running actor wait" in text, text
