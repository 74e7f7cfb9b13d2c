"""Tune's per-trial and per-result overhead against a process-pool floor (docs/benchmarks.md).

    python -m benchmarks.tune_overhead [--check] [--trials N] [--reports R] [--reps K]
                                       [--large]

actorrt: a fresh runtime (``actorrt.run(num_cpus=4)``) per repetition runs ``fit()`` of a
``Tuner`` (built before the clock starts, as on Ray's side) over
``--trials`` trials of a trivial function trainable that reports ``--reports`` times, each
trial ``with_resources(..., {"cpu": 0.5})``, so 8 run at a time. The time covers everything:
worker processes starting cold, every trial's placement group, every report's round trip to
the controller, and the files written per result. A second figure (report only) runs the
same sweep again in the same runtime, on the worker processes the first one left in the pool.

Floor, shaped as docs/benchmarks.md fixes it: a ``ProcessPoolExecutor`` with as many workers as
concurrent trials (8) runs the same trivial bodies (one task per trial, its reports built
and returned), pool start-up included.

The figure is the sweep's wall time in seconds (lower is better); its ratio is the floor's
time over actorrt's. Ray 2.60 took 126.6 s for 100 x 10 on this machine class (docs/benchmarks.md),
printed for reference (``python -m benchmarks.suite --ray`` measures Ray in the same run).
Targets: 100 x 10 in at most 0.6 s cold (worker processes starting included) and 0.3 s warm;
``--large`` adds 1,000 x 10, in at most 3 s. ``--check`` exits 1 when one is missed.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import os
import tempfile
import time
from typing import Any

import actorrt
from actorrt import tune

from ._common import Figure, exit_for, report

# The automatic TensorBoard logger imports tensorboardX, which imports torch: about 2.5 s
# once per driver process, a cost of that logger rather than of running trials. Off here,
# and on Ray's side too (the same switch under Ray's name), so both measure the same work.
os.environ.setdefault("ACTORRT_TUNE_DISABLE_AUTO_CALLBACK_LOGGERS", "1")

RAY_SECONDS_100x10 = 126.6
CONCURRENT = 8
TARGET_COLD_S = 0.6  # 100 x 10, a fresh runtime: worker processes start cold
TARGET_WARM_S = 0.3  # 100 x 10 again, on the workers the first sweep left in the pool
TARGET_LARGE_S = 3.0  # 1,000 x 10, a fresh runtime


def body(trial: int, reports: int) -> list[dict[str, Any]]:
    """The trivial work of one trial: ``reports`` small metric dicts."""
    return [{"loss": 1.0 / (trial + i + 1), "i": i} for i in range(reports)]


def trainable(config: dict[str, Any]) -> None:
    for metrics in body(config["trial"], config["reports"]):
        tune.report(metrics)


def floor(trials: int, reports: int) -> tuple[float, float]:
    """Seconds for the process pool to run the same trial bodies: cold (its start-up
    included), then warm (the same bodies again on the same pool, as a warm sweep runs on
    the workers of the first)."""
    start = time.perf_counter()
    with concurrent.futures.ProcessPoolExecutor(CONCURRENT) as pool:
        done = list(pool.map(body, range(trials), [reports] * trials))
        cold = time.perf_counter() - start
        start = time.perf_counter()
        again = list(pool.map(body, range(trials), [reports] * trials))
        warm = time.perf_counter() - start
    assert len(done) == len(again) == trials
    return cold, warm


async def sweep(trials: int, reports: int, resources: dict[str, float] | None = None) -> float:
    """One sweep on the running runtime, each trial ``with_resources(..., resources)``
    (default ``{"cpu": 0.5}``); its wall time in seconds."""
    with tempfile.TemporaryDirectory() as storage:
        # Built before the clock starts, as Ray's side of the comparison builds its Tuner
        # (benchmarks/ray_side.py): the figure is fit()'s time.
        tuner = tune.Tuner(
            tune.with_resources(trainable, resources or {"cpu": 0.5}),
            param_space={"trial": tune.grid_search(list(range(trials))), "reports": reports},
            run_config=tune.RunConfig(storage_path=storage, name="bench", verbose=0),
        )
        start = time.perf_counter()
        grid = await tuner.fit_async()
        elapsed = time.perf_counter() - start
    assert len(grid) == trials and not grid.errors, grid.errors
    assert all(r.metrics["training_iteration"] == reports for r in grid)
    return elapsed


def actorrt_seconds(trials: int, reports: int, warm: bool) -> list[float]:
    """A fresh runtime's first sweep (cold workers) and, with ``warm``, a second one."""

    async def sweeps() -> list[float]:
        rates = [await sweep(trials, reports)]
        if warm:
            rates.append(await sweep(trials, reports))
        return rates

    seconds: list[float] = actorrt.run(sweeps, num_cpus=4)
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if a target is missed")
    parser.add_argument("--trials", type=int, default=100)
    parser.add_argument("--reports", type=int, default=10)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--large", action="store_true", help="also 1,000 trials x 10 reports")
    args = parser.parse_args()

    shapes = [(args.trials, args.reports, TARGET_COLD_S)]
    if args.large:
        shapes.append((1000, 10, TARGET_LARGE_S))
    figures: list[Figure] = []
    for trials, reports, target_s in shapes:
        cold: list[float] = []
        warm: list[float] = []
        base: list[float] = []
        base_warm: list[float] = []
        first = not figures
        for _ in range(args.reps):
            cold_floor, warm_floor = floor(trials, reports)
            base.append(cold_floor)
            base_warm.append(warm_floor)
            seconds = actorrt_seconds(trials, reports, warm=first)
            cold.append(seconds[0])
            warm += seconds[1:]
        name = f"{trials} trials x {reports} reports"
        figures.append(Figure(
            name, "s", cold, base, target_value=target_s, lower_is_better=True
        ))
        if warm:  # the same sweep again, on the workers the first one started
            figures.append(Figure(
                f"{name}, warm (floor: a warm pool)", "s", warm, base_warm,
                target_value=TARGET_WARM_S,
                lower_is_better=True,
            ))
    ok = report("benchmarks.tune_overhead: Tuner.fit vs a process pool", figures,
                "tune_overhead", {"loop": "uvloop", "reps": args.reps,
                                  "ray_2_60_seconds_100x10": RAY_SECONDS_100x10})
    print(f"Ray 2.60, 100 trials x 10 reports (docs/benchmarks.md): {RAY_SECONDS_100x10} s")
    exit_for(ok, args.check)


if __name__ == "__main__":
    main()
