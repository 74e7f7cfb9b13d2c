"""Ray Core's idioms: an actor pool's map, task round trips, a stream and a shared object,
each beside its same-run baseline (docs/benchmarks.md).

    python -m benchmarks.idioms [--check] [--reps R] [--quick]
                                [--items N] [--workers W] [--n-tasks N] [--n-asks N]
                                [--mb N] [--n-items N] [--ray] [--ray-python PATH]

1. pool map: ``actorrt.util.ActorPool`` over W worker-process actors (``num_cpus=1``), from a
   synchronous script (``actorrt.init``): ``list(pool.map(lambda a, v: a.work(v), items))``
   over ``--items`` CPU-bound items (a pure-Python loop of about a millisecond each).
   Baseline: ``concurrent.futures.ProcessPoolExecutor(max_workers=W).map(work, items)``, on
   the same function. Both pools are started and warmed (one item per worker) before the
   clock starts.
2. task round trip: ``await square(i)`` of an ``@actorrt.task`` function, sequentially
   (each call finds the runner of the call before kept warm: one ask to a worker-process
   actor, plus the task's bookkeeping). Baseline: the same number of sequential
   cross-process asks to one worker-process actor (``await ref.square(i)``), in the same
   runtime.
3. tasks in flight: ``--n-tasks`` task calls issued at once and gathered (calls/s), against
   the same number of asks pipelined to one worker-process actor.

4. stream: ``async for`` over a generator method of a worker-process actor yielding
   ``--n-items`` small items (batches of 16, one prefetched), items/s. Baseline: the same
   number of asks to that actor, pipelined in windows of 1,000.
5. shared object: ``ref = actorrt.put(array)`` of a 100 MB numpy array, then 4 worker-process
   actors each reading it (``actorrt.get(ref)``: mapped, not copied) and answering its last
   item (each has read a small array first, so numpy is imported in it), milliseconds from
   the put to the last answer. Baseline: one ``numpy.copyto`` of the array into an array of
   the same size already in memory (a memcpy of 100 MB).

Each repetition runs the baseline and the figure in turn, so drift hits both alike.

``--ray`` adds Ray 2.60's figures (``benchmarks/ray_side.py idioms`` with the Ray
virtualenv's interpreter, ``--ray-python``, default ``.venv-ray/bin/python``; ``make
bench-ray`` creates it): each repetition ends with a Ray turn, a fresh ``ray.init`` on W CPUs
in a subprocess of its own under a hard bound, with every process it started gone before the
next turn. Its figures stand as the baselines of rows of their own: the pool's map against
Ray tasks (``ray.get`` of W-CPU ``work.remote(v)`` calls) and against Ray's ``ActorPool``, task
round trips and tasks in flight against Ray's, ``put`` + 4 readers against ``ray.put`` read by
4 actors.
``--check`` exits 1 when the pool's map is under 1.0x the process pool's speed, or the
sequential task round trip under 0.3x the rate of the sequential ask.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import importlib
import json
import os
import shutil
import statistics
import tempfile
import time
import uuid
from typing import Any

import actorrt
from actorrt.util import ActorPool

from ._common import ROOT, Figure, chosen_sizes, exit_for, report, sized_parser
from ._turns import MARKER, run_bounded, sweep_marked

SIZES = {
    "default": {"items": 1000, "workers": 0, "n_tasks": 200, "n_asks": 200, "mb": 100,
                "n_items": 10_000, "reps": 5},
    "quick": {"items": 100, "workers": 0, "n_tasks": 20, "n_asks": 20, "mb": 10,
              "n_items": 200, "reps": 1},
}
LOOP = 20_000  # iterations per CPU-bound item: about a millisecond of pure Python
POOL_TARGET = 1.0
TASK_TARGET = 0.3
RAY_PYTHON = ROOT / ".venv-ray" / "bin" / "python"
RAY_TIMEOUT = 600.0  # seconds for one Ray turn, its ray.init included
# Ray's figures (keys of ray_side.py's JSON) under the names of this module's samples.
RAY_KEYS = {"ray_tasks_map": "pool map, tasks items/s",
            "ray_pool_map": "pool map, ActorPool items/s",
            "ray_task_seq": "task submit+get, sequential calls/s",
            "ray_task_pipe": "tasks in flight calls/s",
            "ray_shared": "put + 4 readers ms"}


def work(x: int) -> int:
    """One CPU-bound item, the same for both pools."""
    total = 0
    for i in range(LOOP):
        total += i ^ x
    return total


@actorrt.actor(process=True)
class Worker:
    def work(self, x: int) -> int:
        return work(x)

    def square(self, x: int) -> int:
        return x * x

    def last(self, ref: Any) -> int:
        return int(actorrt.get(ref)[-1])

    def count(self, n: int):  # type: ignore[no-untyped-def]
        yield from range(n)


@actorrt.task
def square(x: int) -> int:
    return x * x


def _here() -> Any:
    """This module as imported by name (also when run as ``__main__``): its actor class and
    task travel to workers by name, as an application's do."""
    return importlib.import_module("benchmarks.idioms")


def pool_map_rate(items: int, workers: int) -> float:
    here = _here()
    actorrt.init(num_cpus=workers)
    try:
        actors = [actorrt.get(here.Worker.options(num_cpus=1).spawn()) for _ in range(workers)]
        pool = ActorPool(actors)
        list(pool.map(lambda a, v: a.work(v), range(workers)))  # warm
        start = time.perf_counter()
        results = list(pool.map(lambda a, v: a.work(v), range(items)))
        seconds = time.perf_counter() - start
        assert results == [work(v) for v in range(items)]
        return items / seconds
    finally:
        actorrt.shutdown()


def executor_map_rate(items: int, workers: int) -> float:
    here = _here()
    with concurrent.futures.ProcessPoolExecutor(max_workers=workers) as pool:
        list(pool.map(here.work, range(workers)))  # warm: every worker started
        start = time.perf_counter()
        results = list(pool.map(here.work, range(items)))
        seconds = time.perf_counter() - start
    assert results == [work(v) for v in range(items)]
    return items / seconds


async def _put_and_read_ms(mb: int, readers: list[Any]) -> tuple[float, float]:
    """(put + every reader's answer, one memcpy of the same array), in milliseconds."""
    import numpy as np

    warm = actorrt.put(np.arange(8))  # each reader imports numpy once, before the clock
    await asyncio.gather(*(r.last(warm) for r in readers))
    array = np.arange(mb * 2**20 // 8, dtype=np.int64)
    target = np.zeros_like(array)  # touched: the copy below is a memcpy, not page faults
    start = time.perf_counter()
    np.copyto(target, array)
    memcpy = (time.perf_counter() - start) * 1000
    start = time.perf_counter()
    ref = actorrt.put(array)
    answers = await asyncio.gather(*(r.last(ref) for r in readers))
    shared = (time.perf_counter() - start) * 1000
    assert answers == [int(array[-1])] * len(readers)
    return shared, memcpy


async def _rates(n_tasks: int, n_asks: int, mb: int, n_items: int) -> dict[str, float]:
    here = _here()
    readers = [await here.Worker.options(num_cpus=0.25).spawn() for _ in range(4)]
    await asyncio.gather(*(r.square(0) for r in readers))
    shared, memcpy = await _put_and_read_ms(mb, readers)
    for reader in readers:
        await reader.stop()
    ref = await here.Worker.spawn()
    await ref.square(0)
    await here.square(0)  # warm: the task's worker process is pooled
    start = time.perf_counter()
    for i in range(n_asks):
        assert await ref.square(i) == i * i
    ask_seq = n_asks / (time.perf_counter() - start)
    start = time.perf_counter()
    for i in range(n_tasks):
        assert await here.square(i) == i * i
    task_seq = n_tasks / (time.perf_counter() - start)
    start = time.perf_counter()
    await asyncio.gather(*(ref.square(i) for i in range(n_asks)))
    ask_pipe = n_asks / (time.perf_counter() - start)
    start = time.perf_counter()
    await asyncio.gather(*(here.square(i) for i in range(n_tasks)))
    task_pipe = n_tasks / (time.perf_counter() - start)
    start = time.perf_counter()
    assert [x async for x in ref.count(n_items)] == list(range(n_items))
    stream = n_items / (time.perf_counter() - start)
    start = time.perf_counter()
    for base in range(0, n_items, 1000):
        await asyncio.gather(*(ref.square(i) for i in range(base, min(base + 1000, n_items))))
    windowed = n_items / (time.perf_counter() - start)
    await ref.stop()
    return {"stream": stream, "windowed": windowed, "ask_seq": ask_seq, "task_seq": task_seq,
            "ask_pipe": ask_pipe, "task_pipe": task_pipe, "shared": shared, "memcpy": memcpy}


def ray_turn(ray_python: str, sizes: dict[str, int], workers: int) -> dict[str, float]:
    """One Ray turn of ``ray_side.py idioms``: its figures, by this module's sample names.

    Raises:
        RuntimeError: the turn failed, timed out, or printed no figures.
    """
    token = uuid.uuid4().hex
    temp = tempfile.mkdtemp(prefix="rb", dir="/tmp")  # Ray's socket paths must be short
    cmd = [ray_python, str(ROOT / "benchmarks" / "ray_side.py"), "idioms", "--temp-dir", temp,
           "--items", str(sizes["items"]), "--workers", str(workers),
           "--n-tasks", str(sizes["n_tasks"]), "--mb", str(sizes["mb"])]
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env[MARKER] = token
    try:
        turn = run_bounded(cmd, timeout=RAY_TIMEOUT, env=env, cwd=temp)
    finally:
        sweep_marked(token)
        shutil.rmtree(temp, ignore_errors=True)
    lines = [line for line in turn.stdout.splitlines() if line.startswith("RAY_BENCH_JSON ")]
    if not turn.ok or not lines:
        why = "timed out" if turn.timed_out else f"exit status {turn.rc}"
        raise RuntimeError(f"the Ray turn failed ({why}):\n{turn.tail()}")
    payload = json.loads(lines[-1].split(" ", 1)[1])
    return {name: float(payload[key]) for name, key in RAY_KEYS.items()}


def main() -> None:
    parser = sized_parser(__doc__, SIZES, {
        "items": "CPU-bound items per pool map",
        "workers": "pool size (0: this machine's CPUs, at most 4)",
        "n_tasks": "task calls per sample",
        "n_asks": "cross-process asks per sample",
        "mb": "megabytes of the shared array",
        "n_items": "items of the stream",
    })
    parser.add_argument("--ray", action="store_true",
                        help="add Ray's figures (a Ray turn after each repetition)")
    parser.add_argument("--ray-python", default=str(RAY_PYTHON),
                        help="the Ray virtualenv's interpreter (default: %(default)s)")
    args = parser.parse_args()
    sizes = chosen_sizes(args, SIZES)
    workers = sizes["workers"] or min(4, len(os.sched_getaffinity(0)))
    samples: dict[str, list[float]] = {
        k: [] for k in ("pool", "executor", "ask_seq", "task_seq", "ask_pipe", "task_pipe",
                        "shared", "memcpy", "stream", "windowed", *RAY_KEYS)
    }
    for _ in range(sizes["reps"]):
        samples["executor"].append(executor_map_rate(sizes["items"], workers))
        samples["pool"].append(pool_map_rate(sizes["items"], workers))

        async def one() -> dict[str, float]:
            return await _rates(sizes["n_tasks"], sizes["n_asks"], sizes["mb"], sizes["n_items"])

        for key, value in actorrt.run(one, num_cpus=workers).items():
            samples[key].append(value)
        if args.ray:
            for key, value in ray_turn(args.ray_python, sizes, workers).items():
                samples[key].append(value)
    figures = [
        Figure(f"pool map, {sizes['items']} CPU-bound items", "items/s", samples["pool"],
               samples["executor"], target_ratio=POOL_TARGET),
        Figure("task submit+get, sequential", "calls/s", samples["task_seq"],
               samples["ask_seq"], target_ratio=TASK_TARGET),
        Figure(f"tasks in flight, {sizes['n_tasks']} at once", "calls/s",
               samples["task_pipe"], samples["ask_pipe"]),
        Figure(f"stream of {sizes['n_items']} items across processes", "items/s",
               samples["stream"], samples["windowed"]),
        Figure(f"put + 4 readers, {sizes['mb']} MB array", "ms", samples["shared"],
               samples["memcpy"], lower_is_better=True),
    ]
    if args.ray:
        figures += [
            Figure(f"pool map, {sizes['items']} items, vs Ray tasks", "items/s",
                   samples["pool"], samples["ray_tasks_map"]),
            Figure(f"pool map, {sizes['items']} items, vs Ray's ActorPool", "items/s",
                   samples["pool"], samples["ray_pool_map"]),
            Figure("task submit+get, sequential, vs Ray", "calls/s", samples["task_seq"],
                   samples["ray_task_seq"]),
            Figure(f"tasks in flight, {sizes['n_tasks']} at once, vs Ray", "calls/s",
                   samples["task_pipe"], samples["ray_task_pipe"]),
            Figure(f"put + 4 readers, {sizes['mb']} MB, vs ray.put", "ms", samples["shared"],
                   samples["ray_shared"], lower_is_better=True),
        ]
    extra = {
        "loop": "uvloop",
        **sizes,
        "workers": workers,
        "baselines": {
            "pool map": "concurrent.futures.ProcessPoolExecutor(max_workers=W).map",
            "task submit+get, sequential": "sequential asks to one worker-process actor",
            "tasks in flight": "the same number of asks to one worker-process actor, "
                               "gathered",
            "put + 4 readers": "one numpy.copyto of the array into one in memory (a memcpy)",
            "stream": "the same number of asks, pipelined in windows of 1,000",
            **({"vs Ray": "benchmarks/ray_side.py idioms, a Ray turn after each "
                          "repetition"} if args.ray else {}),
        },
        "item_loop": LOOP,
    }
    ok = report("benchmarks.idioms: ActorPool and tasks vs their baselines", figures,
                "idioms", extra)
    print(f"pool map over {workers} workers: ActorPool "
          f"{statistics.median(samples['pool']):,.0f} items/s, ProcessPoolExecutor "
          f"{statistics.median(samples['executor']):,.0f} items/s")
    exit_for(ok, args.check)


if __name__ == "__main__":
    main()
