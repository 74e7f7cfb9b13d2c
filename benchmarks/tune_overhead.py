"""Tune's per-trial and per-result overhead against a process-pool floor (docs/benchmarks.md).

    python -m benchmarks.tune_overhead [--check] [--trials N] [--reports R] [--reps K]
                                       [--quick | --large]

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
time over actorrt's. Beside it, the driver's CPU per trial (``time.process_time`` of the
driver process over ``fit()``: its event loop and its storage threads), against the floor's
driver (the pool's parent process). The storage path is a temporary folder (``TMPDIR``): its
file system is recorded in the results, since it moves Tune's figures more than anything
else (docs/benchmarks.md, "What moves Tune's figures"). Ray 2.60 took 126.6 s for 100 x 10
on this machine class (docs/benchmarks.md), printed for reference (``python -m
benchmarks.suite --ray`` measures Ray in the same run).
Targets: 100 x 10 in at most 0.4 s cold (worker processes starting included) and 0.3 s warm;
1,000 x 10 in at most 1.5 s, 10,000 x 10 in at most 15 s; at most 0.8 ms of driver CPU per
trial at every size. ``--quick`` runs 100 and 1,000 trials, one repetition; ``--large`` (the
suite's full run) 100, 1,000 and 10,000 (that one once), and prints the growth table of
docs/benchmarks.md: time, driver CPU per trial, the driver's peak RSS and the floor at each
size (the sizes run in increasing order, so the peak RSS is that of the largest so far).
Beside them, in each repetition, what a trial's five file creations (its folder,
``params.json``, ``params.pkl``, ``result.json``, ``progress.csv``) cost the kernel in a
fresh experiment folder of the storage path, against the same on tmpfs (``/dev/shm``), so
the table says what the disk gave this run (docs/benchmarks.md, "What moves Tune's
figures").
``--check`` exits 1 when a target is missed.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import os
import resource
import tempfile
import time
from typing import Any

import actorrt
from actorrt import tune
from actorrt.tune._controller._storage import spread_subfolders

from ._common import Figure, exit_for, filesystem_of, report

# The automatic TensorBoard logger imports tensorboardX, which imports torch: about 2.5 s
# once per driver process, a cost of that logger rather than of running trials. Off here,
# and on Ray's side too (the same switch under Ray's name), so both measure the same work.
os.environ.setdefault("ACTORRT_TUNE_DISABLE_AUTO_CALLBACK_LOGGERS", "1")

RAY_SECONDS_100x10 = 126.6
CONCURRENT = 8
TARGET_COLD_S = 0.4  # 100 x 10, a fresh runtime: worker processes start cold
TARGET_WARM_S = 0.3  # 100 x 10 again, on the workers the first sweep left in the pool
TARGET_S = {100: TARGET_COLD_S, 1000: 1.5, 10000: 15.0}  # N x 10, a fresh runtime
TARGET_DRIVER_CPU_MS = 0.8  # the driver's CPU per trial, at every size


def body(trial: int, reports: int) -> list[dict[str, Any]]:
    """The trivial work of one trial: ``reports`` small metric dicts."""
    return [{"loss": 1.0 / (trial + i + 1), "i": i} for i in range(reports)]


def trainable(config: dict[str, Any]) -> None:
    for metrics in body(config["trial"], config["reports"]):
        tune.report(metrics)


def floor(trials: int, reports: int) -> tuple[float, float, float]:
    """Seconds for the process pool to run the same trial bodies: cold (its start-up
    included), then warm (the same bodies again on the same pool, as a warm sweep runs on
    the workers of the first); and the parent's CPU milliseconds per trial, cold."""
    start, cpu = time.perf_counter(), time.process_time()
    with concurrent.futures.ProcessPoolExecutor(CONCURRENT) as pool:
        done = list(pool.map(body, range(trials), [reports] * trials))
        cold = time.perf_counter() - start
        cpu_ms = (time.process_time() - cpu) * 1000 / trials
        start = time.perf_counter()
        again = list(pool.map(body, range(trials), [reports] * trials))
        warm = time.perf_counter() - start
    assert len(done) == len(again) == trials
    return cold, warm, cpu_ms


async def sweep(trials: int, reports: int, resources: dict[str, float] | None = None) -> float:
    """One sweep on the running runtime, each trial ``with_resources(..., resources)``
    (default ``{"cpu": 0.5}``); its wall time in seconds."""
    return (await timed_sweep(trials, reports, resources))[0]


async def timed_sweep(
    trials: int, reports: int, resources: dict[str, float] | None = None
) -> tuple[float, float]:
    """:func:`sweep`'s wall time in seconds and the driver's CPU milliseconds per trial."""
    with tempfile.TemporaryDirectory() as storage:
        # Built before the clock starts, as Ray's side of the comparison builds its Tuner
        # (benchmarks/ray_side.py): the figure is fit()'s time.
        tuner = tune.Tuner(
            tune.with_resources(trainable, resources or {"cpu": 0.5}),
            param_space={"trial": tune.grid_search(list(range(trials))), "reports": reports},
            run_config=tune.RunConfig(storage_path=storage, name="bench", verbose=0),
        )
        start, cpu = time.perf_counter(), time.process_time()
        grid = await tuner.fit_async()
        elapsed = time.perf_counter() - start
        cpu_ms = (time.process_time() - cpu) * 1000 / trials
    assert len(grid) == trials and not grid.errors, grid.errors
    assert all(r.metrics["training_iteration"] == reports for r in grid)
    return elapsed, cpu_ms


def actorrt_seconds(trials: int, reports: int, warm: bool) -> list[tuple[float, float]]:
    """A fresh runtime's first sweep (cold workers) and, with ``warm``, a second one: each
    one's seconds and driver CPU milliseconds per trial."""

    async def sweeps() -> list[tuple[float, float]]:
        rates = [await timed_sweep(trials, reports)]
        if warm:
            rates.append(await timed_sweep(trials, reports))
        return rates

    seconds: list[tuple[float, float]] = actorrt.run(sweeps, num_cpus=4)
    return seconds


def trial_files_us(base: str | None, folders: int = 40) -> float:
    """Microseconds of CPU that a trial's five file creations take in a fresh folder under
    ``base`` (the temporary folder by default), marked as Tune marks an experiment folder
    (its subfolders spread over the file system: ``spread_subfolders``): ``folders``
    trial-like folders, each with four files, the median folder's cost."""
    costs = []
    with tempfile.TemporaryDirectory(dir=base) as experiment:
        spread_subfolders(experiment)
        for i in range(folders):
            start = time.process_time()
            trial = os.path.join(experiment, f"trial_{i}")
            os.mkdir(trial, 0o700)
            for name in ("params.json", "params.pkl", "result.json", "progress.csv"):
                fd = os.open(os.path.join(trial, name), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
                os.write(fd, b"{}\n")
                os.close(fd)
            costs.append((time.process_time() - start) * 1e6)
    costs.sort()
    return costs[len(costs) // 2]


def peak_rss_mib() -> float:
    """The driver's peak resident memory so far, in MiB (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if a target is missed")
    parser.add_argument("--trials", type=int, default=100)
    parser.add_argument("--reports", type=int, default=10)
    parser.add_argument("--reps", type=int, default=3)
    sizes = parser.add_mutually_exclusive_group()
    sizes.add_argument("--quick", action="store_true", help="100 and 1,000 trials, once")
    sizes.add_argument("--large", action="store_true",
                       help="100, 1,000 and 10,000 trials x 10 reports (10,000 once)")
    args = parser.parse_args()

    shapes = [(args.trials, args.reports)]
    if args.quick or args.large:
        shapes = [(100, 10), (1000, 10)] + ([(10000, 10)] if args.large else [])
    reps = 1 if args.quick else args.reps
    storage_fs = filesystem_of(tempfile.gettempdir())
    figures: list[Figure] = []
    growth: list[dict[str, Any]] = []
    files_here: list[float] = []
    files_tmpfs: list[float] = []
    for trials, reports in shapes:
        cold: list[float] = []
        cold_cpu: list[float] = []
        warm: list[float] = []
        base: list[float] = []
        base_warm: list[float] = []
        base_cpu: list[float] = []
        first = not figures
        for _ in range(1 if trials >= 10000 else reps):
            files_here.append(trial_files_us(None))
            if os.path.isdir("/dev/shm"):
                files_tmpfs.append(trial_files_us("/dev/shm"))
            cold_floor, warm_floor, floor_cpu = floor(trials, reports)
            base.append(cold_floor)
            base_warm.append(warm_floor)
            base_cpu.append(floor_cpu)
            runs = actorrt_seconds(trials, reports, warm=first)
            cold.append(runs[0][0])
            cold_cpu.append(runs[0][1])
            warm += [seconds for seconds, _ in runs[1:]]
        name = f"{trials} trials x {reports} reports"
        target_s = TARGET_S.get(trials) if reports == 10 else None
        time_figure = Figure(name, "s", cold, base, target_value=target_s, lower_is_better=True)
        cpu_figure = Figure(f"{name}, driver CPU per trial", "ms", cold_cpu, base_cpu,
                            target_value=TARGET_DRIVER_CPU_MS if reports == 10 else None,
                            lower_is_better=True)
        figures += [time_figure, cpu_figure]
        if warm:  # the same sweep again, on the workers the first one started
            figures.append(Figure(
                f"{name}, warm (floor: a warm pool)", "s", warm, base_warm,
                target_value=TARGET_WARM_S if (trials, reports) == (100, 10) else None,
                lower_is_better=True,
            ))
        growth.append({
            "trials": trials, "reports": reports, "seconds": time_figure.value,
            "driver_cpu_ms_per_trial": cpu_figure.value, "peak_rss_mib": peak_rss_mib(),
            "floor_seconds": time_figure.baseline, "floor_cpu_ms_per_trial": cpu_figure.baseline,
        })
    # What the disk gave this run (no target: the machine's, not actorrt's).
    figures.append(Figure("a trial's 5 file creations in the storage, vs on tmpfs", "µs",
                          files_here, files_tmpfs, lower_is_better=True))
    ok = report("benchmarks.tune_overhead: Tuner.fit vs a process pool", figures,
                "tune_overhead", {"loop": "uvloop", "reps": reps, "storage_filesystem": storage_fs,
                                  "storage_path": tempfile.gettempdir(), "growth": growth,
                                  "ray_2_60_seconds_100x10": RAY_SECONDS_100x10})
    print(f"\nstorage: {tempfile.gettempdir()} on {storage_fs}")
    print("| trials x reports | time (s) | driver CPU per trial (ms) | driver peak RSS (MiB) "
          "| floor (s) | floor's driver CPU per trial (ms) |")
    print("|---|---|---|---|---|---|")
    for row in growth:
        print(f"| {row['trials']:,} x {row['reports']} | {row['seconds']:.3g} "
              f"| {row['driver_cpu_ms_per_trial']:.3g} | {row['peak_rss_mib']:.0f} "
              f"| {row['floor_seconds']:.3g} | {row['floor_cpu_ms_per_trial']:.3g} |")
    print(f"Ray 2.60, 100 trials x 10 reports (docs/benchmarks.md): {RAY_SECONDS_100x10} s")
    exit_for(ok, args.check)


if __name__ == "__main__":
    main()
