"""The Ray 2.60 side of the suite's comparison: the same workloads, on Ray.

    .venv-ray/bin/python benchmarks/ray_side.py actors|tune|deadlock|idioms [options]

Run with the Ray virtualenv's interpreter (``make bench-ray`` creates it); this script
imports only Ray, the standard library and (``idioms``) numpy, never actorrt.
``benchmarks.suite --ray`` (``benchmarks.idioms --ray`` for ``idioms``) runs it
in a subprocess of its own session under a hard time bound, one workload per turn, between
actorrt's turns, and checks that no Ray process is left before the next turn. It prints its
figures as one line: ``RAY_BENCH_JSON {...}``.

Workloads, each on a fresh ``ray.init(num_cpus=4)`` without the dashboard (not counted in the
figures), shaped as
actorrt's:

- ``actors``: one echo actor (a method returning its argument); sequential calls
  (``ray.get(a.echo.remote((i, "x")))`` N times); pipelined calls (issue 1,000, ``ray.get``
  the list, repeat); actor start + stop (``Echo.remote()``, its first call answered, then
  ``ray.kill``), a new worker process each; placement groups of 2 x ``{"CPU": 1}`` reserved
  (``ready()``) and removed from the driver.
- ``tune``: ``Tuner.fit()`` of T trials x R reports of a trivial function trainable
  ``with_resources(..., {"cpu": 0.5})``.
- ``idioms``: ``benchmarks.idioms``' shapes on W CPUs (``--workers``): ``--items``
  CPU-bound items (the same function) as Ray tasks (``ray.get`` of the list) and through
  ``ray.util.ActorPool.map`` over W actors; ``ray.get(square.remote(i))`` sequentially and
  ``--n-tasks`` at once; ``ray.put`` of a ``--mb`` MB array read by 4 actors (the ref as an
  argument: the array read from the object store), from the put to the last answer.
- ``deadlock``: the seed's Modin-style case: 4 trials of ``{"cpu": 1}`` on 4 CPUs meet at a
  gate, then each starts a 1-CPU actor outside its placement group
  (``scheduling_strategy="DEFAULT"``) and waits for it (``--deadlock-trials`` trials on
  that many CPUs). Ray has no answer for this; once every trial has asked for its worker,
  the script waits ``--wait`` seconds for ``fit()`` to return, reports whether it did, and
  exits without waiting longer.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from typing import Any

# As on actorrt's side: no automatic TensorBoard logger (its import is not trial overhead).
os.environ.setdefault("TUNE_DISABLE_AUTO_CALLBACK_LOGGERS", "1")

WINDOW = 1000
NAMESPACE = "actorrt_bench"


def emit(payload: dict[str, Any]) -> None:
    sys.stdout.write("RAY_BENCH_JSON " + json.dumps(payload) + "\n")
    sys.stdout.flush()


def start_ray(temp_dir: str | None, cpus: int) -> float:
    import ray

    start = time.perf_counter()
    ray.init(num_cpus=cpus, include_dashboard=False, namespace=NAMESPACE, _temp_dir=temp_dir)
    return time.perf_counter() - start


# --------------------------------------------------------------------------------- actors


def actors(args: argparse.Namespace) -> dict[str, Any]:
    import ray
    from ray.util.placement_group import placement_group, remove_placement_group

    @ray.remote
    class Echo:
        def echo(self, item: object) -> object:
            return item

    a = Echo.remote()
    for i in range(100):  # warm up: the worker process, the first calls
        ray.get(a.echo.remote((i, "x")))

    start = time.perf_counter()
    for i in range(args.n_seq):
        ray.get(a.echo.remote((i, "x")))
    seq = args.n_seq / (time.perf_counter() - start)

    start = time.perf_counter()
    for base in range(0, args.n_pipe, WINDOW):
        ray.get([a.echo.remote((i, "x")) for i in range(base, min(args.n_pipe, base + WINDOW))])
    pipe = args.n_pipe / (time.perf_counter() - start)
    ray.kill(a)

    start_ms: list[float] = []
    start = time.perf_counter()
    for _ in range(args.starts):
        t0 = time.perf_counter()
        b = Echo.remote()
        ray.get(b.echo.remote(0))
        start_ms.append((time.perf_counter() - t0) * 1000)
        ray.kill(b)
    cycles = args.starts / (time.perf_counter() - start)

    bundles = [{"CPU": 1}, {"CPU": 1}]
    for _ in range(3):  # warm up
        pg = placement_group(bundles)
        ray.get(pg.ready())
        remove_placement_group(pg)
    start = time.perf_counter()
    for _ in range(args.pgs):
        pg = placement_group(bundles)
        ray.get(pg.ready())
        remove_placement_group(pg)
    pgs = args.pgs / (time.perf_counter() - start)
    return {
        "sequential calls/s": seq,
        "pipelined calls/s": pipe,
        "actor start+stop/s": cycles,
        "actor start ms": statistics.median(start_ms),
        "actor start ms samples": start_ms,
        "placement group reserve+release/s": pgs,
        "sizes": {"n_seq": args.n_seq, "n_pipe": args.n_pipe, "starts": args.starts,
                  "pgs": args.pgs, "window": WINDOW},
    }


# ----------------------------------------------------------------------------------- tune


def body(trial: int, reports: int) -> list[dict[str, Any]]:
    """The same trivial trial body as ``benchmarks.tune_overhead``."""
    return [{"loss": 1.0 / (trial + i + 1), "i": i} for i in range(reports)]


def trainable(config: dict[str, Any]) -> None:
    from ray import tune

    for metrics in body(config["trial"], config["reports"]):
        tune.report(metrics)


def tune_sweep(args: argparse.Namespace) -> dict[str, Any]:
    from ray import tune

    with tempfile.TemporaryDirectory() as storage:
        tuner = tune.Tuner(
            tune.with_resources(trainable, {"cpu": 0.5}),
            param_space={"trial": tune.grid_search(list(range(args.trials))),
                         "reports": args.reports},
            run_config=tune.RunConfig(storage_path=storage, name="bench", verbose=0),
        )
        start = time.perf_counter()
        grid = tuner.fit()
        elapsed = time.perf_counter() - start
    errors = len(grid.errors)
    iterations = [r.metrics.get("training_iteration") for r in grid]
    return {
        "tune seconds": elapsed,
        "trials": args.trials,
        "reports": args.reports,
        "errors": errors,
        "all_reported": all(i == args.reports for i in iterations) and len(grid) == args.trials,
    }


# -------------------------------------------------------------------------------- idioms

LOOP = 20_000  # as benchmarks.idioms: about a millisecond of pure Python per item


def work(x: int) -> int:
    """The same CPU-bound item as ``benchmarks.idioms``."""
    total = 0
    for i in range(LOOP):
        total += i ^ x
    return total


def idioms(args: argparse.Namespace) -> dict[str, Any]:
    import numpy as np
    import ray
    from ray.util import ActorPool

    remote_work = ray.remote(num_cpus=1)(work)

    @ray.remote(num_cpus=1)
    def square(x: int) -> int:
        return x * x

    @ray.remote(num_cpus=1)
    class Worker:
        def work(self, x: int) -> int:
            return work(x)

        def last(self, array: Any) -> int:
            return int(array[-1])

    expected = [work(v) for v in range(args.items)]
    ray.get([remote_work.remote(v) for v in range(args.workers)])  # warm: the workers
    start = time.perf_counter()
    results = ray.get([remote_work.remote(v) for v in range(args.items)])
    tasks_map = args.items / (time.perf_counter() - start)
    assert results == expected

    ray.get(square.remote(0))
    start = time.perf_counter()
    for i in range(args.n_tasks):
        assert ray.get(square.remote(i)) == i * i
    task_seq = args.n_tasks / (time.perf_counter() - start)
    start = time.perf_counter()
    assert ray.get([square.remote(i) for i in range(args.n_tasks)]) == [
        i * i for i in range(args.n_tasks)]
    task_pipe = args.n_tasks / (time.perf_counter() - start)

    # The actors hold every CPU from here on: no task runs after this.
    actors = [Worker.remote() for _ in range(args.workers)]
    pool = ActorPool(actors)
    list(pool.map(lambda a, v: a.work.remote(v), range(args.workers)))  # warm
    start = time.perf_counter()
    results = list(pool.map(lambda a, v: a.work.remote(v), range(args.items)))
    pool_map = args.items / (time.perf_counter() - start)
    assert results == expected

    # put + 4 readers: a ref passed as an argument is read from the object store.
    readers = actors[:4] + [Worker.options(num_cpus=0).remote()
                            for _ in range(4 - len(actors[:4]))]
    ray.get([r.last.remote(np.arange(8)) for r in readers])  # numpy imported in each
    array = np.arange(args.mb * 2**20 // 8, dtype=np.int64)
    start = time.perf_counter()
    ref = ray.put(array)
    answers = ray.get([r.last.remote(ref) for r in readers])
    shared = (time.perf_counter() - start) * 1000
    assert answers == [int(array[-1])] * 4
    for actor in {id(r): r for r in readers}.values():
        ray.kill(actor)
    return {
        "pool map, tasks items/s": tasks_map,
        "pool map, ActorPool items/s": pool_map,
        "task submit+get, sequential calls/s": task_seq,
        "tasks in flight calls/s": task_pipe,
        "put + 4 readers ms": shared,
        "sizes": {"items": args.items, "workers": args.workers, "n_tasks": args.n_tasks,
                  "mb": args.mb, "item_loop": LOOP},
    }


# ------------------------------------------------------------------------------- deadlock


def deadlock(args: argparse.Namespace) -> dict[str, Any]:
    import asyncio

    import ray
    from ray import tune

    @ray.remote(num_cpus=0)
    class Gate:
        def __init__(self, n: int) -> None:
            self.n = n
            self.arrived = 0
            self.asked = 0
            self.opened = asyncio.Event()

        async def meet(self) -> None:
            self.arrived += 1
            if self.arrived >= self.n:
                self.opened.set()
            await self.opened.wait()

        async def note_asked(self) -> None:
            self.asked += 1

        async def seen(self) -> dict[str, int]:
            return {"arrived": self.arrived, "asked": self.asked}

    @ray.remote
    class Helper:
        def ping(self) -> str:
            return "pong"

    def undeclared(config: dict[str, Any]) -> None:
        gate = ray.get_actor("bench_gate", namespace=NAMESPACE)
        ray.get(gate.meet.remote())
        ray.get(gate.note_asked.remote())
        # Outside the trial's placement group, as actorrt's placement="cluster": the
        # Modin-style case. (Left to Tune's capture, the request targets the trial's own
        # group, which Ray Tune's launch hook rejects at once with a RuntimeError.)
        helper = Helper.options(num_cpus=1, scheduling_strategy="DEFAULT").remote()
        tune.report({"ping": ray.get(helper.ping.remote())})

    trials = args.deadlock_trials
    gate = Gate.options(name="bench_gate").remote(trials)
    storage = tempfile.mkdtemp()
    outcome: dict[str, Any] = {}

    def fit() -> None:
        try:
            grid = tune.Tuner(
                tune.with_resources(undeclared, {"cpu": 1}),
                param_space={"i": tune.grid_search(list(range(trials)))},
                run_config=tune.RunConfig(storage_path=storage, name="deadlock", verbose=0),
            ).fit()
            outcome["errors"] = len(grid.errors)
            outcome["error_types"] = sorted({type(e).__name__ for e in grid.errors})
            if grid.errors:
                outcome["first_error"] = str(grid.errors[0])[-1500:]
        except BaseException as exc:  # reported, whatever it is
            outcome["raised"] = f"{type(exc).__name__}: {exc}"[:500]

    def seen() -> dict[str, Any]:
        try:
            state: dict[str, Any] = ray.get(gate.seen.remote(), timeout=10)
        except Exception as exc:  # a detail of the report
            state = {"error": repr(exc)[:200]}
        return state

    start = time.perf_counter()
    thread = threading.Thread(target=fit, daemon=True)
    thread.start()
    # The clock for "no answer" starts when every trial holds its CPU and has asked for its
    # worker (the deadlock is then complete), as actorrt's figure does; trial start-up on a
    # loaded machine can take a while, bounded by --startup.
    all_asked: float | None = None
    while thread.is_alive() and time.perf_counter() - start < args.startup:
        if seen().get("asked") == trials:
            all_asked = time.perf_counter()
            break
        time.sleep(0.5)
    thread.join(args.wait if all_asked is not None else 0)
    end = time.perf_counter()
    return {
        "answered": not thread.is_alive(),
        "seconds": end - (all_asked if all_asked is not None else start),
        "all_asked": all_asked is not None,
        "startup_s": (all_asked or end) - start,
        "wait_s": args.wait,
        "trials": trials,
        "gate": seen(),
        **outcome,
    }


# ----------------------------------------------------------------------------------- main


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("workload", choices=["actors", "tune", "deadlock", "idioms"])
    parser.add_argument("--temp-dir", help="Ray's session directory (short path)")
    parser.add_argument("--n-seq", type=int, default=1_000)
    parser.add_argument("--n-pipe", type=int, default=5_000)
    parser.add_argument("--starts", type=int, default=5)
    parser.add_argument("--pgs", type=int, default=50)
    parser.add_argument("--trials", type=int, default=100)
    parser.add_argument("--reports", type=int, default=10)
    parser.add_argument("--items", type=int, default=1_000, help="idioms: pool map items")
    parser.add_argument("--workers", type=int, default=2, help="idioms: CPUs, pool size")
    parser.add_argument("--n-tasks", type=int, default=200, help="idioms: task calls")
    parser.add_argument("--mb", type=int, default=100, help="idioms: shared array, MB")
    parser.add_argument("--deadlock-trials", type=int, default=4, help="deadlock: trials")
    parser.add_argument("--wait", type=float, default=60.0,
                        help="deadlock: seconds to wait once every trial asked for its worker")
    parser.add_argument("--startup", type=float, default=180.0,
                        help="deadlock: most seconds to wait for every trial to ask")
    args = parser.parse_args()

    t0 = time.perf_counter()
    import ray

    import_s = time.perf_counter() - t0
    cpus = {"deadlock": args.deadlock_trials, "idioms": args.workers}.get(args.workload, 4)
    init_s = start_ray(args.temp_dir, cpus)
    run = {"actors": actors, "tune": tune_sweep, "deadlock": deadlock, "idioms": idioms}
    figures = run[args.workload](args)
    emit({"workload": args.workload, "ray": ray.__version__, "import_s": import_s,
          "init_s": init_s, "pid": os.getpid(), **figures})
    if args.workload == "deadlock" and not figures["answered"]:
        # fit() is still waiting in its thread; shutting Ray down under it can block. The
        # suite kills what is left of this turn's processes.
        os._exit(0)
    ray.shutdown()


if __name__ == "__main__":
    main()
