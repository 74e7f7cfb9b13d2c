"""Tune's per-trial and per-result overhead against a process-pool floor (DESIGN.md §8).

    python -m benchmarks.tune_overhead [--check] [--trials N] [--reports R] [--reps K]
                                       [--large]

actorrt: a fresh runtime (``actorrt.run(num_cpus=4)``) per repetition runs a ``Tuner`` over
``--trials`` trials of a trivial function trainable that reports ``--reports`` times, each
trial ``with_resources(..., {"cpu": 0.5})``, so 8 run at a time. The time covers everything:
worker processes starting cold, every trial's placement group, every report's round trip to
the controller, and the files written per result. A second figure (report only) runs the
same sweep again in the same runtime, on the worker processes the first one left in the pool.

Floor, shaped as DESIGN.md §8 fixes it: a ``ProcessPoolExecutor`` with as many workers as
concurrent trials (8) runs the same trivial bodies (one task per trial, its reports built
and returned), pool start-up included.

The figure is results handled per second (trials x reports / seconds). Ray 2.60 took 126.6 s
for 100 x 10 on this machine class (7.9 results/s), printed for reference. ``--check`` exits 1
when 100 x 10 takes over 3 s (under 333 results/s); ``--large`` adds 1,000 x 10 (target
20 s, 500 results/s).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import tempfile
import time
from typing import Any

import actorrt
from actorrt import tune

from ._common import Figure, exit_for, report

RAY_SECONDS_100x10 = 126.6
CONCURRENT = 8


def body(trial: int, reports: int) -> list[dict[str, Any]]:
    """The trivial work of one trial: ``reports`` small metric dicts."""
    return [{"loss": 1.0 / (trial + i + 1), "i": i} for i in range(reports)]


def trainable(config: dict[str, Any]) -> None:
    for metrics in body(config["trial"], config["reports"]):
        tune.report(metrics)


def floor(trials: int, reports: int) -> float:
    start = time.perf_counter()
    with concurrent.futures.ProcessPoolExecutor(CONCURRENT) as pool:
        done = list(pool.map(body, range(trials), [reports] * trials))
    assert len(done) == trials
    return trials * reports / (time.perf_counter() - start)


async def sweep(trials: int, reports: int) -> float:
    """One sweep on the running runtime; results handled per second."""
    with tempfile.TemporaryDirectory() as storage:
        start = time.perf_counter()
        grid = await tune.Tuner(
            tune.with_resources(trainable, {"cpu": 0.5}),
            param_space={"trial": tune.grid_search(list(range(trials))), "reports": reports},
            run_config=tune.RunConfig(storage_path=storage, name="bench", verbose=0),
        ).fit_async()
        elapsed = time.perf_counter() - start
    assert len(grid) == trials and not grid.errors, grid.errors
    assert all(r.metrics["training_iteration"] == reports for r in grid)
    return trials * reports / elapsed


def actorrt_rates(trials: int, reports: int, warm: bool) -> list[float]:
    """A fresh runtime's first sweep (cold workers) and, with ``warm``, a second one."""

    async def sweeps() -> list[float]:
        rates = [await sweep(trials, reports)]
        if warm:
            rates.append(await sweep(trials, reports))
        return rates

    rates: list[float] = actorrt.run(sweeps, num_cpus=4)
    return rates


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if a target is missed")
    parser.add_argument("--trials", type=int, default=100)
    parser.add_argument("--reports", type=int, default=10)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--large", action="store_true", help="also 1,000 trials x 10 reports")
    args = parser.parse_args()

    shapes = [(args.trials, args.reports, 3.0)]
    if args.large:
        shapes.append((1000, 10, 20.0))
    figures: list[Figure] = []
    for trials, reports, target_s in shapes:
        cold: list[float] = []
        warm: list[float] = []
        base: list[float] = []
        first = not figures
        for _ in range(args.reps):
            base.append(floor(trials, reports))
            rates = actorrt_rates(trials, reports, warm=first)
            cold.append(rates[0])
            warm += rates[1:]
        name = f"{trials} trials x {reports} reports"
        figures.append(Figure(
            name, "results/s", cold, base, target_value=trials * reports / target_s
        ))
        if warm:  # report only: the same sweep again, on the workers the first one started
            figures.append(Figure(f"{name}, warm", "results/s", warm, base))
    ok = report("benchmarks.tune_overhead: Tuner.fit vs a process pool", figures,
                "tune_overhead", {"loop": "uvloop", "reps": args.reps,
                                  "ray_2_60_seconds_100x10": RAY_SECONDS_100x10})
    for f in figures:
        print(f"{f.name}: actorrt {_seconds(f.name, f.value):.2f} s, "
              f"floor {_seconds(f.name, f.baseline or 0):.2f} s")
    print(f"Ray 2.60, 100 trials x 10 reports: {RAY_SECONDS_100x10} s "
          f"({1000 / RAY_SECONDS_100x10:.1f} results/s)")
    exit_for(ok, args.check)


def _seconds(name: str, rate: float) -> float:
    trials, reports = (int(p.split()[0]) for p in name.split(",")[0].split(" x "))
    return trials * reports / rate if rate else float("nan")


if __name__ == "__main__":
    main()
