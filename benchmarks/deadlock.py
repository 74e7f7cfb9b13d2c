"""The seed's Modin-style deadlock: how long until actorrt says so (SEED-NOTES.md point 8).

    python -m benchmarks.deadlock [--check] [--reps R] [--trials N]

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
  complete) to the moment the error reached the trial, in seconds. DESIGN.md §4 says within
  one second of the last wait edge; ``--check`` fails above 1 s;
- the whole sweep: ``Tuner.fit`` from its call to its return (trial start-up included).

Each repetition is a fresh runtime. A run that does not end in one error and N - 1 finished
trials fails with an assertion.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from typing import Any

import actorrt
from actorrt import tune

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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if a target is missed")
    parser.add_argument("--reps", type=int, default=3, help="samples per figure")
    parser.add_argument("--trials", type=int, default=4, help="trials, and CPUs")
    args = parser.parse_args()

    detect: list[float] = []
    total: list[float] = []
    for _ in range(args.reps):

        async def one() -> tuple[float, float]:
            return await sweep(args.trials)

        d, t = actorrt.run(one, num_cpus=args.trials)
        detect.append(d)
        total.append(t)
    figures = [
        Figure("Modin-style deadlock: time to ResourceDeadlockError", "s", detect,
               target_value=1.0, lower_is_better=True),
        Figure("Modin-style deadlock: whole sweep, fit() returns", "s", total,
               lower_is_better=True),
    ]
    ok = report("benchmarks.deadlock: an undeclared worker request while trials hold every CPU",
                figures, "deadlock", {"loop": "uvloop", "trials": args.trials,
                                      "cpus": args.trials, "reps": args.reps})
    exit_for(ok, args.check)


if __name__ == "__main__":
    main()
