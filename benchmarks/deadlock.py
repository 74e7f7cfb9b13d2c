"""A Modin-style resource deadlock: how long until actorrt says so, and the check at scale.

    python -m benchmarks.deadlock [--check] [--reps R] [--trials N] [--no-sweep]

On a runtime of N CPUs (default 4), a ``Tuner`` runs N trials of ``{"cpu": 1}`` each, so the
trials hold every CPU. Each trial waits at a gate until all N have arrived, then spawns a
1-CPU worker from the cluster queue (``placement="cluster"``, as Modin or a plain remote
actor does) that its ``PlacementGroupFactory`` did not declare, and waits for it. No worker
can start until some trial ends, and no trial ends until its worker starts: a deadlock.

Ray waits forever here (``python -m benchmarks.suite --ray`` shows it, bounded). actorrt's
broker finds the deadlock and fails the newest request with ``ResourceDeadlockError``; that
trial errors, its CPU goes to another trial's worker, and the other trials finish.

Figures (lower is better, no baseline: there is nothing to do the same job faster):

- time to the error: from the last trial's request for its worker (when the deadlock became
  complete) to the moment the error reached the trial, in seconds. docs/broker.md says within
  one second of the last wait edge; ``--check`` fails above 1 s;
- the whole sweep: ``Tuner.fit`` from its call to its return (trial start-up included).

Each repetition is a fresh runtime. A run that does not end in one error and N - 1 finished
trials fails with an assertion.

Under load, in a real runtime: an ask cycle between two actors (A asks B, B asks A) while a
third actor keeps asking and spawning (a grant and a release each time). The figure is the
time from the first ask to the ``DeadlockError``; ``--check`` fails above 1 s.

At scale, the broker alone on an event loop (uvloop), driven as the runtime drives it (a
slice of the check per loop turn). Three shapes at 1,000 and 10,000 waiters: ``modin`` (every
trial holds its group and waits for one more CPU from the cluster), ``chain`` (a chain of
asks ending in an actor that waits for more than is free) and ``ring`` (a cycle of asks).
Figures: the longest slice of the check in CPU time (what the check itself stalls the loop;
``--check`` fails above 10 ms at 10,000), the loop's longest stall in wall time while the
check runs (a probe callback re-queued every turn measures the longest gap between its runs)
beside the same probe on an idle loop for as long (the baseline: what other processes and the
OS cost the loop on this machine), and the time from the check's start to its report
(``--check`` fails above 1 s at 10,000).

In the runtime itself (``--only-runtime`` runs just this): an inline actor holds the one CPU,
1,000 or 10,000 inline actors await a CPU each, then the holder awaits one too, which makes a
deadlock of them all. Figures: the loop's longest stall while the check runs and the time to
the ``ResourceDeadlockError``; then, every wait being older than the stall limit, the loop's
longest stall while every waiter's stall warning is emitted and the time to the last one.
``--check`` fails above 10 ms of stall or 1 s at 10,000. The loop's stalls include the
interpreter's full garbage collections, which at 10,000 actors take hundreds of ms on a
loaded 2-core machine, whatever the runtime does.
"""

from __future__ import annotations

import argparse
import asyncio
import heapq
import logging
import tempfile
import time
from typing import Any

import actorrt
from actorrt import tune
from actorrt.resources import AskDeadlocked, Broker, Failed, GroupTarget, NodeInventory

from ._common import Figure, exit_for, report


@actorrt.actor(max_concurrency=256)
class Gate:
    """Lets trials through once ``n`` have arrived; records when workers were asked for and
    when the deadlock error arrived (wall-clock seconds, comparable across processes)."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.arrived = 0
        self.open = asyncio.Event()
        self.asked: list[float] = []
        self.failed: list[float] = []

    async def meet(self) -> None:
        self.arrived += 1
        if self.arrived >= self.n:
            self.open.set()
        await self.open.wait()

    def note_asked(self, at: float) -> None:
        self.asked.append(at)

    def note_failed(self, at: float) -> None:
        self.failed.append(at)

    def seen(self) -> dict[str, Any]:
        return {"arrived": self.arrived, "asked": self.asked, "failed": self.failed}


@actorrt.actor
class Helper:
    def ping(self) -> str:
        return "pong"


def undeclared(config: dict[str, Any]) -> None:
    """Holds its CPU, waits for the others, then asks the cluster for one more CPU."""
    gate = config["gate"]
    actorrt.get(gate.meet.options(timeout=120)())
    actorrt.get(gate.note_asked(time.time()))
    try:
        helper = actorrt.get(Helper.options(num_cpus=1, placement="cluster").spawn())
    except actorrt.ResourceDeadlockError:
        actorrt.get(gate.note_failed(time.time()))
        raise
    tune.report({"ping": actorrt.get(helper.ping())})


async def sweep(trials: int) -> tuple[float, float]:
    """(seconds from the last worker request to the error, seconds for the whole fit)."""
    gate = await Gate.spawn(trials)
    with tempfile.TemporaryDirectory() as storage:
        start = time.perf_counter()
        grid = await tune.Tuner(
            tune.with_resources(undeclared, {"cpu": 1}),
            param_space={"gate": gate, "i": tune.grid_search(list(range(trials)))},
            run_config=tune.RunConfig(storage_path=storage, name="deadlock", verbose=0),
        ).fit_async()
        fit_s = time.perf_counter() - start
    seen = await gate.seen()
    await gate.stop()
    assert len(grid.errors) == 1 and grid.num_terminated == trials - 1, grid.errors
    assert isinstance(grid.errors[0], actorrt.ResourceDeadlockError), grid.errors
    assert len(seen["asked"]) == trials and len(seen["failed"]) == 1, seen
    return seen["failed"][0] - max(seen["asked"]), fit_s


@actorrt.actor
class Peer:
    """Asks its peer (or itself) and awaits the answer: one message at a time."""

    def __init__(self) -> None:
        self.other: Any = None

    def meet(self, other: Any) -> None:
        self.other = other

    async def ping(self) -> str:
        return "pong"

    async def ask_other(self) -> str:
        return str(await self.other.ask_back())

    async def ask_back(self) -> str:
        return str(await self.other.ping())

    def ask_other_sync(self) -> str:
        return str(actorrt.get(self.other.ask_back_sync()))

    def ask_back_sync(self) -> str:
        return str(actorrt.get(self.other.ping()))


async def ask_cycle_under_load() -> float:
    """Seconds from the first ask of an A -> B -> A cycle to its DeadlockError, while another
    actor keeps asking, spawning and stopping (a grant and a release each time)."""
    a, b, echo = await Peer.spawn(), await Peer.spawn(), await Peer.spawn()
    await a.meet(b)
    await b.meet(a)
    rounds = [0]

    async def churn() -> None:
        while True:
            await echo.ping()
            small = await Helper.options(resources={"token": 1}, process=False).spawn()
            await small.stop()
            rounds[0] += 1

    task = asyncio.ensure_future(churn())
    await asyncio.sleep(0.2)  # the traffic is flowing
    start = time.perf_counter()
    try:
        await a.ask_other()
    except actorrt.DeadlockError:
        took = time.perf_counter() - start
    else:
        raise AssertionError("the ask cycle was not reported")
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    assert rounds[0] > 0
    for ref in (a, b, echo):
        await ref.stop()
    return took


def modin(n: int) -> Broker:
    """Every trial holds its group and waits for one more CPU from the cluster (edges at t=1;
    the check is due then)."""
    b = Broker([NodeInventory("n", {"CPU": n})])
    for i in range(n):
        b.request(f"g{i}", f"T{i}", bundles=[{"CPU": 1}], now=0.0)
        b.request(f"d{i}", f"T{i}", {"CPU": 1}, placement=GroupTarget(f"g{i}", 0), now=0.0)
    for i in range(n):
        b.request(f"w{i}", f"W{i}", {"CPU": 1}, parent=f"T{i}", placement="cluster", now=0.5)
        b.blocked(f"T{i}", on_request=f"w{i}", now=1.0)
    return b


def chain(n: int) -> Broker:
    """A chain of asks, built from its far end (the worst order to search), ending in an
    actor that waits for more than is free."""
    b = Broker([NodeInventory("n", {"CPU": 2})])
    b.request("a", "A0", {"CPU": 2}, now=0.0)
    b.request("more", "X", {"CPU": 1}, parent="A0", now=0.0)
    b.blocked("A0", on_request="more", now=1.0)
    for i in range(n - 1, 0, -1):
        b.blocked(f"A{i}", on_holder=f"A{i - 1}", now=1.0)
    return b


def ring(n: int) -> Broker:
    """A cycle of ``n`` asks."""
    b = Broker([NodeInventory("n", {"CPU": 2})])
    for i in range(n):
        b.blocked(f"A{i}", on_holder=f"A{(i + 1) % n}", now=1.0)
    return b


SCALE_CASES = {"modin": modin, "chain": chain, "ring": ring}


def scale_case(kind: str, n: int) -> Broker:
    """A broker holding one deadlock of ``n`` waiters, of shape ``kind``."""
    return SCALE_CASES[kind](n)


async def idle_stall(seconds: float) -> float:
    """The loop's longest gap (ms) over ``seconds`` with nothing to do but the probe: what
    the machine alone (other processes, the OS) costs the loop."""
    loop = asyncio.get_running_loop()
    worst = 0.0
    last = start = time.perf_counter()
    while last - start < seconds:
        await asyncio.sleep(0)
        t = time.perf_counter()
        worst = max(worst, t - last)
        last = t
    del loop
    return worst * 1000


async def drive_check(b: Broker) -> tuple[float, float, float, float]:
    """(longest loop stall ms, longest slice CPU ms, ms to the report, idle loop's longest
    stall ms over as long) for one check."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future[list[Any]] = loop.create_future()
    worst = worst_cpu = 0.0
    last = time.perf_counter()
    now = 2.0  # broker time: past the check's due time

    def probe() -> None:
        nonlocal last, worst
        t = time.perf_counter()
        worst = max(worst, t - last)
        last = t
        if not done.done():
            loop.call_soon(probe)

    def poll() -> None:
        nonlocal worst_cpu
        c = time.thread_time()
        events = b.poll(now)
        worst_cpu = max(worst_cpu, time.thread_time() - c)
        due = b.next_poll_at()
        if events or due is None or due > now:
            done.set_result(events)
        else:
            loop.call_soon(poll)

    start = time.perf_counter()
    loop.call_soon(probe)
    loop.call_soon(poll)
    events = await done
    took = time.perf_counter() - start
    assert any(isinstance(e, Failed | AskDeadlocked) for e in events), events
    return worst * 1000, worst_cpu * 1000, took * 1000, await idle_stall(took)


def scale_figures(reps: int) -> list[Figure]:
    import uvloop

    figures = []
    for kind in ("modin", "chain", "ring"):
        for n in (1_000, 10_000):
            stall, cpu, took, idle = [], [], [], []
            for _ in range(reps):
                b = scale_case(kind, n)
                s, c, t, i = uvloop.run(drive_check(b))
                stall.append(s)
                cpu.append(c)
                took.append(t)
                idle.append(i)
            big = n == 10_000
            label = f"check, {kind} of {n:,} waiters"
            figures += [
                Figure(f"{label}: longest slice (CPU)", "ms", cpu,
                       target_value=10.0 if big else None, lower_is_better=True),
                Figure(f"{label}: longest loop stall (wall)", "ms", stall, idle,
                       lower_is_better=True),
                Figure(f"{label}: time to report", "ms", took,
                       target_value=1000.0 if big else None, lower_is_better=True),
            ]
    return figures


@actorrt.actor
class Waiter:
    """An inline actor that awaits a 1-CPU spawn (from the cluster queue)."""

    async def want(self) -> str:
        try:
            await Helper.options(num_cpus=1, process=False, placement="cluster").spawn()
        except actorrt.ResourceDeadlockError:
            return "deadlock"
        return "granted"


class LoopProbe:
    """The longest gap between turns of the running loop while it is on (a callback
    re-queued every turn)."""

    def __init__(self) -> None:
        self.loop = asyncio.get_running_loop()
        self.worst = 0.0
        self.on = False
        self._last = 0.0

    def start(self) -> None:
        self.worst = 0.0
        self._last = time.perf_counter()
        if not self.on:
            self.on = True
            self.loop.call_soon(self._turn)

    def stop(self) -> float:
        """Stops measuring; returns the longest gap in ms."""
        self.on = False
        return self.worst * 1000

    def _turn(self) -> None:
        t = time.perf_counter()
        self.worst = max(self.worst, t - self._last)
        self._last = t
        if self.on:
            self.loop.call_soon(self._turn)


async def runtime_scale(n: int) -> tuple[float, float, float, float]:
    """In a runtime of one CPU: an inline actor holds the CPU; ``n`` inline actors await a
    CPU each (queued, no deadlock yet: the holder is not blocked); then the holder awaits a
    CPU too, which makes all of them a deadlock. Returns (longest loop stall ms while the
    check runs, ms to the report, longest loop stall ms while every waiter's stall warning is
    emitted, ms from their due time to the last warning)."""
    from actorrt._runtime._root import current_runtime

    broker = current_runtime().grants.broker
    warned = _Count("is stalled")
    logger = logging.getLogger("actorrt")
    logger.addHandler(warned)
    saved = logger.level, logger.propagate
    logger.setLevel(logging.INFO)
    logger.propagate = False  # counted, not printed (a terminal's speed is not the runtime's)
    try:
        holder = await Waiter.options(num_cpus=1, process=False).spawn()
        waiters = [await Waiter.spawn() for _ in range(n)]
        broker._stall_after = 3600.0  # no stall warning until the check is measured
        calls = [asyncio.ensure_future(w.want()) for w in waiters]
        while True:  # polled: the broker has no event for it
            if broker.waiting_count >= n:
                break
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.5)  # every edge seen, the checks that find nothing done
        probe = LoopProbe()
        probe.start()
        start = time.perf_counter()
        assert await holder.want() == "deadlock"
        took = time.perf_counter() - start
        check_stall = probe.stop()
        # Now every wait is older than the stall limit (as after 10 s in a runtime): all
        # the warnings are due in one poll.
        loop = asyncio.get_running_loop()
        due = loop.time()
        broker._stall_after = 0.001
        for rid in list(broker._awaited_known):
            heapq.heappush(broker._awaited, (due, broker._requests[rid].seq, rid))
        probe.start()
        begun = time.perf_counter()
        current_runtime().grants._arm()
        await warned.reached(n)
        warned_by = time.perf_counter() - begun
        warn_stall = probe.stop()
        for call in calls:
            call.cancel()
        await asyncio.gather(*calls, return_exceptions=True)
        for ref in [holder, *waiters]:
            await ref.stop()
    finally:
        logger.removeHandler(warned)
        logger.setLevel(saved[0])
        logger.propagate = saved[1]
    return check_stall, took * 1000, warn_stall, max(warned_by, 0.0) * 1000


class _Count(logging.Handler):
    """Counts the records whose message contains ``text`` (emitted on the loop's thread)."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.text = text
        self.count = 0
        self._want = 0
        self._reached = asyncio.Event()

    def emit(self, record: logging.LogRecord) -> None:
        if self.text in record.getMessage():
            self.count += 1
            if self._want and self.count >= self._want:
                self._reached.set()

    async def reached(self, count: int) -> None:
        self._want = count
        if self.count < count:
            await self._reached.wait()


def runtime_figures(reps: int) -> list[Figure]:
    """The runtime at scale; one sample at 10,000 waiters (starting 10,000 actors takes most
    of a minute on a 2-core machine)."""
    figures = []
    for n in (1_000, 10_000):
        samples: list[list[float]] = [[], [], [], []]
        for _ in range(reps if n < 10_000 else 1):

            async def one(n: int = n) -> tuple[float, float, float, float]:
                return await runtime_scale(n)

            for got, value in zip(samples, actorrt.run(one, num_cpus=1), strict=True):
                got.append(value)
        big = n == 10_000
        label = f"runtime, a deadlock and {n:,} blocked inline waiters"
        figures += [
            Figure(f"{label}: longest loop stall, check", "ms", samples[0],
                   target_value=10.0 if big else None, lower_is_better=True),
            Figure(f"{label}: time to report", "ms", samples[1],
                   target_value=1000.0 if big else None, lower_is_better=True),
            Figure(f"{label}: longest loop stall, stall warnings", "ms", samples[2],
                   target_value=10.0 if big else None, lower_is_better=True),
            Figure(f"{label}: the last stall warning, after due", "ms", samples[3],
                   target_value=1000.0 if big else None, lower_is_better=True),
        ]
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if a target is missed")
    parser.add_argument("--reps", type=int, default=3, help="samples per figure")
    parser.add_argument("--trials", type=int, default=4, help="trials, and CPUs")
    parser.add_argument("--no-sweep", action="store_true", help="skip the Tune sweep")
    parser.add_argument("--only-runtime", action="store_true",
                        help="only the runtime at scale (a deadlock and many waiters)")
    args = parser.parse_args()

    figures = []
    if args.only_runtime:
        figures += runtime_figures(args.reps)
    if not args.no_sweep and not args.only_runtime:
        detect: list[float] = []
        total: list[float] = []
        for _ in range(args.reps):

            async def one() -> tuple[float, float]:
                return await sweep(args.trials)

            d, t = actorrt.run(one, num_cpus=args.trials)
            detect.append(d)
            total.append(t)
        figures += [
            Figure("Modin-style deadlock: time to ResourceDeadlockError", "s", detect,
                   target_value=1.0, lower_is_better=True),
            Figure("Modin-style deadlock: whole sweep, fit() returns", "s", total,
                   lower_is_better=True),
        ]
    if not args.only_runtime:
        cycle = [
            actorrt.run(ask_cycle_under_load, resources={"token": 1}) for _ in range(args.reps)
        ]
        figures.append(Figure("ask cycle under unrelated traffic: time to DeadlockError", "s",
                              cycle, target_value=1.0, lower_is_better=True))
        figures += scale_figures(args.reps)
        figures += runtime_figures(args.reps)
    ok = report("benchmarks.deadlock: an undeclared worker request while trials hold every CPU",
                figures, "deadlock", {"loop": "uvloop", "trials": args.trials,
                                      "cpus": args.trials, "reps": args.reps})
    exit_for(ok, args.check)


if __name__ == "__main__":
    main()
