"""Scaling curves: ask throughput vs concurrent callers and actors; Tune time vs trials.

    python -m benchmarks.scaling [--quick] [--reps R] [--only ask|tune]

1. Ask throughput. For inline actors (``benchmarks.core.Echo``) and worker-process actors
   (``benchmarks.processes.Echo``, a sync method), with 1, 2 and 4 actors: C concurrent
   caller tasks (C = 1 ... 64) on the driver's loop, caller j asking actor j mod A, each
   awaiting its asks one at a time, a fixed total of asks per point. Asks per second.
2. Tune time vs trials: ``Tuner.fit`` of T trials x 10 reports of the trivial trainable of
   ``benchmarks.tune_overhead`` at ``{"cpu": 0.5}`` on 4 CPUs (T = 10 ... 1,000), a fresh
   runtime each (cold workers), beside the process-pool floor of the same bodies.

The broker's curves (decision time vs waiting requests and nodes) are measured by
``benchmarks.broker_sim``. Writes ``RESULTS/scaling.json`` (curves, no targets);
``benchmarks.plots`` draws them. With ``--reps`` above 1, each point is the median of that
many samples.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import statistics
import time
from typing import Any

import actorrt

from ._common import report
from .tune_overhead import actorrt_seconds, floor

SIZES: dict[str, dict[str, Any]] = {
    "default": {"callers": (1, 2, 4, 8, 16, 32, 64), "actors": (1, 2, 4),
                "asks": {"inline": 20_000, "process": 4_000},
                "trials": (10, 30, 100, 300, 1_000), "reports": 10},
    "quick": {"callers": (1, 4, 16), "actors": (1, 2),
              "asks": {"inline": 2_000, "process": 400},
              "trials": (4, 8), "reports": 3},
}


def _echo(kind: str) -> Any:
    """The echo actor class of ``benchmarks.core`` or ``benchmarks.processes``, imported by
    module name so that a worker process imports it too (as it would an application's)."""
    module = "benchmarks.core" if kind == "inline" else "benchmarks.processes"
    return importlib.import_module(module).Echo


async def ask_rate(refs: list[Any], callers: int, total: int) -> float:
    per_caller = max(1, total // callers)

    async def caller(j: int) -> None:
        echo = refs[j % len(refs)].echo
        for i in range(per_caller):
            await echo((i, "x"))

    start = time.perf_counter()
    await asyncio.gather(*(caller(j) for j in range(callers)))
    return callers * per_caller / (time.perf_counter() - start)


async def ask_curves(sizes: dict[str, Any], reps: int) -> dict[str, Any]:
    curves: dict[str, Any] = {}
    for kind in ("inline", "process"):
        cls = _echo(kind)
        total = sizes["asks"][kind]
        series: dict[str, list[float]] = {}
        for actors in sizes["actors"]:
            refs = [await cls.spawn() for _ in range(actors)]
            await ask_rate(refs, actors, max(100, total // 10))  # warm up every actor
            points = []
            for callers in sizes["callers"]:
                rates = [await ask_rate(refs, callers, total) for _ in range(reps)]
                points.append(statistics.median(rates))
            for ref in refs:
                await ref.stop()
            label = f"{actors} actor" + ("s" if actors > 1 else "")
            series[label] = points
            print(f"  {kind:>7}, {label:>8}: " + ", ".join(
                f"{c} callers {r:,.0f}/s" for c, r in zip(sizes["callers"], points,
                                                          strict=True)), flush=True)
        curves[f"ask_{kind}"] = {"x": list(sizes["callers"]), "x_label": "concurrent callers",
                                 "unit": "asks/s", "series": series, "asks_per_point": total}
    return curves


def tune_curve(sizes: dict[str, Any], reps: int) -> dict[str, Any]:
    reports = sizes["reports"]
    cold: list[float] = []
    pool: list[float] = []
    for trials in sizes["trials"]:
        pool.append(statistics.median(floor(trials, reports)[0] for _ in range(reps)))
        cold.append(statistics.median(
            actorrt_seconds(trials, reports, warm=False)[0][0] for _ in range(reps)))
        print(f"  tune {trials:>5} trials x {reports}: actorrt {cold[-1]:.2f} s, "
              f"process pool {pool[-1]:.2f} s", flush=True)
    return {"tune_vs_trials": {"x": list(sizes["trials"]), "x_label": "trials",
                               "unit": "s", "reports": reports,
                               "series": {"actorrt Tuner.fit": cold, "process pool floor": pool}}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="few small points (a smoke run)")
    parser.add_argument("--reps", type=int, default=1, help="samples per point (median)")
    parser.add_argument("--only", choices=["ask", "tune"], help="one of the curves")
    args = parser.parse_args()
    sizes = SIZES["quick" if args.quick else "default"]

    curves: dict[str, Any] = {}
    if args.only in (None, "ask"):
        print("ask throughput vs callers and actors ...", flush=True)

        async def asks() -> dict[str, Any]:
            return await ask_curves(sizes, args.reps)

        curves |= actorrt.run(asks)
    if args.only in (None, "tune"):
        print("Tune time vs trials ...", flush=True)
        curves |= tune_curve(sizes, args.reps)
    report("benchmarks.scaling: curves (no targets)", [], "scaling",
           {"loop": "uvloop", "quick": args.quick, "reps": args.reps, "curves": curves})


if __name__ == "__main__":
    main()
