"""Worker-process actors against the raw echo baseline, in one run (docs/benchmarks.md).

    python -m benchmarks.processes [--check] [--reps R] [--quick]
                                   [--n-seq N] [--n-pipe N] [--cycles N] [--cold N]
                                   [--burst N]

Baseline, shaped as docs/benchmarks.md fixes it, reused from :mod:`benchmarks.wire`: a child
interpreter on uvloop (``benchmarks._echo_server raw``) echoes length-prefixed msgpack frames
over a Unix socket; the hand-written ``RawClient`` drives it sequentially (send one frame,
await its reply, N times) and pipelined (a sliding window of 1,000 requests in flight).

actorrt, through the public API on a fresh runtime (``actorrt.run``) per repetition, with an
``@actorrt.actor(process=True)`` echo actor imported by module name (sent to the worker by
reference, as an actor class in an importable module is):

1. sequential: ``await ref.echo((i, "x"))`` N times;
2. pipelined: windows of 1,000: issue 1,000 ``ref.echo((i, "x"))`` calls (each sends at
   once), await them in order, repeat until N;
3. start+stop cycles on a warm worker process: ``await Echo.spawn()`` then ``await
   ref.stop()``, repeated; the worker was warmed by the earlier figures' spawn (not counted);
   the cycle count stays under the pool's reuse limit, and the JSON records whether the same
   worker process served every cycle;
4. cold worker start: ``Echo.options(worker_env={"ACTORRT_BENCH_COLD": <new>}).spawn()``, a
   new worker process each time (milliseconds until ``spawn`` returns), forked by the
   runtime's fork server, which the first spawn of the repetition started; that first
   spawn's time (the fork server's start included) goes into the JSON as
   ``first_start_ms_samples`` and is printed below the table;
5. a burst: ``--burst`` spawns in flight at once (one ``asyncio.gather``), each on a new
   worker process (one ``worker_env`` for the burst, new to the pool), seconds until every
   one has started; beside it, in the same repetition, the same burst on a runtime whose
   workers all start as fresh interpreters (``ACTORRT_FORKSERVER=0``).

Each repetition runs the raw baseline (its own uvloop loop and echo child) and then the actorrt
figures, so drift hits both alike. Beside each rate, the CPU time per call of each process
(user + system, all threads: ``time.process_time`` here, ``/proc/PID/stat`` for the child or
worker), which a shared, loaded machine disturbs far less than wall time. Ray 2.60's figures
on this machine class (docs/benchmarks.md) are printed beside the table for reference and the
actorrt/Ray ratios go into the JSON.

6. worker -> worker: a ``Caller`` actor in a second worker process asks the echo actor's
   async method sequentially (after a warm-up, so its calls go over the direct connection
   between the two workers), and the same with ``ACTORRT_DIRECT_CALLS=0`` in the caller's
   worker (through the owning runtime, as before direct calls), alternated in each
   repetition; CPU time per call in the caller and in the echo's worker.

``--check`` exits 1 when the sequential ask to a sync method is under 75% of raw sequential,
pipelined calls under 50% of raw pipelined, a direct worker -> worker sequential ask under
60% of raw sequential, start+stop under 500 cycles/s, the cold worker
start's median over 30 ms, or the burst through the fork server under twice as fast as the
same burst of fresh interpreters.
"""

from __future__ import annotations

import asyncio
import importlib
import itertools
import os
import shutil
import statistics
import time
from typing import Any

import uvloop

import actorrt
from actorrt._wire._auth import new_secret
from actorrt._wire._transport import make_private_dir

from ._common import Figure, chosen_sizes, exit_for, report, sized_parser
from .wire import WINDOW, RawClient, raw_pipelined, raw_sequential, start_server, stop_server

# Ray 2.60 on a 2-core machine of this project's kind (docs/benchmarks.md), for reference only.
RAY = {"sequential calls/s": 832.0, "pipelined calls/s": 1955.0, "actor starts/s": 2.0}

SIZES = {  # n_seq, n_pipe, cycles, cold, reps
    "default": {"n_seq": 10_000, "n_pipe": 100_000, "cycles": 500, "cold": 3, "burst": 100,
                "reps": 5},
    "quick": {"n_seq": 200, "n_pipe": 2_000, "cycles": 20, "cold": 1, "burst": 10, "reps": 1},
}
WARMUP = 200
W2W_TARGET = 0.60  # worker -> worker sequential asks, of the raw echo's sequential rate
SEQUENTIAL_RATIO = 0.75  # sequential asks against the raw echo's sequential requests
PIPELINED_RATIO = 0.50  # pipelined calls against the raw echo's sliding window
COLD_START_MS = 30.0  # median of the starts on a new worker process
BURST_RATIO = 2.0  # a burst through the fork server against one of fresh interpreters
_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
_cold_keys = itertools.count()
_SOCKET_BASE = "/tmp" if os.path.isdir("/tmp") else None  # short socket paths, as wire.py


@actorrt.actor(process=True)
class Echo:
    def echo(self, item: object) -> object:
        return item

    async def aecho(self, item: object) -> object:
        # An async method runs on the worker's loop: no hand-over to the actor's thread.
        return item

    def pid(self) -> int:
        return os.getpid()


@actorrt.actor(process=True)
class Caller:
    """Asks another worker's actor from its own worker process (worker -> worker)."""

    async def sequential(self, ref: Any, n: int, warmup: int = WARMUP) -> tuple[float, float]:
        """``(calls/s, CPU µs per call of this worker)`` of ``n`` sequential asks to an
        echo actor's async method (no hand-over to a thread on either side)."""
        await actor_sequential(ref, warmup, "aecho")
        await asyncio.sleep(0.05)  # the switch to a direct connection has settled
        here = time.process_time()
        rate = await actor_sequential(ref, n, "aecho")
        return rate, 1e6 * (time.process_time() - here) / n

    async def raw_tcp(self, host: str, port: int, n: int) -> float:
        """The raw TCP echo at ``host:port``, sequential, from this worker process: the
        baseline of the asks this worker makes to an actor on that host."""
        from . import _tcp_echo

        client = await _tcp_echo.connect(host, port, False)
        await raw_sequential(client, WARMUP)
        rate = await raw_sequential(client, n)
        client.transport.close()
        return rate

    def pid(self) -> int:
        return os.getpid()


def _caller_class() -> Any:
    """``Caller`` as defined in ``benchmarks.processes`` (see :func:`_echo_class`)."""
    return importlib.import_module("benchmarks.processes").Caller


async def worker_to_worker(
    ref: Any, n: int, direct: bool, **options: Any
) -> tuple[float, float, float]:
    """Sequential asks from a caller in another worker process (spawned with ``options``)
    to the echo actor ``ref``: directly, or through the owner (``ACTORRT_DIRECT_CALLS=0`` in
    the caller's worker), as ``(rate, CPU µs per call in the caller, CPU µs per call in the
    echo's worker)``."""
    env = {} if direct else {"ACTORRT_DIRECT_CALLS": "0"}
    caller = await _caller_class().options(worker_env=env, **options).spawn()
    peer = await ref.pid()
    there = process_cpu(peer)
    rate, here = await caller.sequential(ref, n)
    await caller.stop()
    return rate, here, 1e6 * (process_cpu(peer) - there) / n


def _echo_class() -> Any:
    """``Echo`` as defined in ``benchmarks.processes``, also when run as ``__main__``.

    A class from ``__main__`` travels to the worker pickled by value on every spawn; one from
    an importable module travels by name, which is how an application's actors travel.
    """
    return importlib.import_module("benchmarks.processes").Echo


# ------------------------------------------------------------------------------- CPU time


def process_cpu(pid: int) -> float:
    """CPU seconds (user + system, all threads) process ``pid`` has used; 0.0 without /proc."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / _TICK
    except (OSError, IndexError, ValueError):
        return 0.0


async def with_cpu(run: Any, n: int, peer: int) -> tuple[float, float, float]:
    """``(rate, µs of CPU per call here, µs of CPU per call in process peer)`` of ``run``."""
    here, there = time.process_time(), process_cpu(peer)
    rate = await run
    return (
        rate,
        1e6 * (time.process_time() - here) / n,
        1e6 * (process_cpu(peer) - there) / n,
    )


# ------------------------------------------------------------------------------- baseline


async def raw_rep(n_seq: int, n_pipe: int) -> dict[str, tuple[float, float, float]]:
    """One repetition of the raw echo baseline: sequential and pipelined, each as
    ``(rate, CPU µs per call here, CPU µs per call in the echo child)``."""
    directory = make_private_dir(base=_SOCKET_BASE)
    path = os.path.join(directory, "raw")
    proc = await start_server("raw", path, new_secret())
    try:
        _, client = await asyncio.get_running_loop().create_unix_connection(RawClient, path)
        await raw_sequential(client, WARMUP)
        seq = await with_cpu(raw_sequential(client, n_seq), n_seq, proc.pid)
        pipe = await with_cpu(raw_pipelined(client, n_pipe), n_pipe, proc.pid)
        client.transport.close()
    finally:
        await stop_server(proc)
        shutil.rmtree(directory, ignore_errors=True)
    return {"raw_seq": seq, "raw_pipe": pipe}


# -------------------------------------------------------------------------------- actorrt


async def actor_sequential(ref: Any, n: int, method: str = "echo") -> float:
    echo = getattr(ref, method)
    start = time.perf_counter()
    for i in range(n):
        await echo((i, "x"))
    return n / (time.perf_counter() - start)


async def actor_pipelined(ref: Any, n: int) -> float:
    echo = ref.echo
    start = time.perf_counter()
    for base in range(0, n, WINDOW):
        handles = [echo((i, "x")) for i in range(base, min(n, base + WINDOW))]
        for handle in handles:
            await handle
    return n / (time.perf_counter() - start)


async def start_stop_cycles(cls: Any, n: int) -> float:
    start = time.perf_counter()
    for _ in range(n):
        ref = await cls.spawn()
        await ref.stop()
    return n / (time.perf_counter() - start)


async def cold_start_ms(cls: Any) -> float:
    options = cls.options(worker_env={"ACTORRT_BENCH_COLD": str(next(_cold_keys))})
    start = time.perf_counter()
    ref = await options.spawn()
    elapsed = (time.perf_counter() - start) * 1000
    await ref.stop()  # its worker idles in the pool until this runtime ends
    return elapsed


async def burst_seconds(cls: Any, n: int) -> float:
    """Seconds until ``n`` spawns issued at once have all started, each on a new worker."""
    options = cls.options(worker_env={"ACTORRT_BENCH_BURST": str(next(_cold_keys))})
    start = time.perf_counter()
    refs = await asyncio.gather(*(options.spawn() for _ in range(n)))
    elapsed = time.perf_counter() - start
    await asyncio.gather(*(ref.stop() for ref in refs))
    return elapsed


def plain_burst_seconds(n: int) -> float:
    """:func:`burst_seconds` on a fresh runtime whose workers start as fresh interpreters."""
    before = os.environ.get("ACTORRT_FORKSERVER")
    os.environ["ACTORRT_FORKSERVER"] = "0"

    async def one() -> float:
        return await burst_seconds(_echo_class(), n)

    try:
        return actorrt.run(one)
    finally:
        if before is None:
            del os.environ["ACTORRT_FORKSERVER"]
        else:
            os.environ["ACTORRT_FORKSERVER"] = before


async def ask_rep(ref: Any, n_seq: int, n_pipe: int) -> dict[str, tuple[float, float, float]]:
    """The ask figures of one echo actor ``ref``, after a warm-up of 200 asks: sequential
    (sync and async method) and pipelined, each as ``(rate, CPU µs per call here, CPU µs
    per call in its worker)``."""
    pid = await ref.pid()
    await actor_sequential(ref, WARMUP)
    seq = await with_cpu(actor_sequential(ref, n_seq), n_seq, pid)
    aseq = await with_cpu(actor_sequential(ref, n_seq, "aecho"), n_seq, pid)
    pipe = await with_cpu(actor_pipelined(ref, n_pipe), n_pipe, pid)
    return {"seq": seq, "aseq": aseq, "pipe": pipe}


async def worker_rep(ref: Any, n_seq: int) -> dict[str, tuple[float, float, float]]:
    """Worker -> worker sequential asks to ``ref``, through the owner and directly,
    alternated (each after a warm-up)."""
    relayed = await worker_to_worker(ref, n_seq, direct=False)
    direct = await worker_to_worker(ref, n_seq, direct=True)
    return {"w2w_relay": relayed, "w2w": direct}


async def actor_rep(
    n_seq: int, n_pipe: int, cycles: int, cold: int, burst: int
) -> dict[str, Any]:
    """One repetition of the actorrt figures, on the runtime ``actorrt.run`` made."""
    cls = _echo_class()
    started = time.perf_counter()
    ref = await cls.spawn()  # starts the fork server and a worker: warms the pool
    first = (time.perf_counter() - started) * 1000
    pid = await ref.pid()
    asks = await ask_rep(ref, n_seq, n_pipe)
    asks |= await worker_rep(ref, n_seq)
    await ref.stop()
    cps = await start_stop_cycles(cls, cycles)
    last = await cls.spawn()
    # A replaced worker is never handed back, so the same pid at the end means every cycle
    # ran on the one warm worker.
    same_worker = await last.pid() == pid
    await last.stop()
    colds = [await cold_start_ms(cls) for _ in range(cold)]  # cold workers stay idle
    bursts = await burst_seconds(cls, burst)
    return {**asks, "cycles": cps, "same_worker": same_worker, "cold": colds, "first": first,
            "burst": bursts}


# ----------------------------------------------------------------------------------- main


def measure(
    n_seq: int, n_pipe: int, cycles: int, cold: int, burst: int, reps: int
) -> dict[str, Any]:
    timed = ("raw_seq", "raw_pipe", "seq", "aseq", "pipe", "w2w", "w2w_relay")
    samples: dict[str, list[Any]] = {
        k: [] for k in (*timed, "cycles", "same_worker", "cold", "first", "burst", "plain_burst")
    }
    for key in timed:  # CPU µs per call: here, and in the child or worker
        samples[key + "_cpu"], samples[key + "_peer_cpu"] = [], []
    for _ in range(reps):
        rep: dict[str, Any] = uvloop.run(raw_rep(n_seq, n_pipe))

        async def one() -> dict[str, Any]:
            return await actor_rep(n_seq, n_pipe, cycles, cold, burst)

        rep |= actorrt.run(one)
        rep["plain_burst"] = plain_burst_seconds(burst)
        for key in timed:
            rate, here, there = rep[key]
            samples[key].append(rate)
            samples[key + "_cpu"].append(here)
            samples[key + "_peer_cpu"].append(there)
        for key in ("cycles", "same_worker", "first", "burst", "plain_burst"):
            samples[key].append(rep[key])
        samples["cold"].extend(rep["cold"])
    return samples


def main() -> None:
    args = sized_parser(__doc__, SIZES, {
        "n_seq": "sequential calls per sample", "n_pipe": "pipelined calls per sample",
        "cycles": "start+stop cycles per sample", "cold": "cold worker starts per repetition",
        "burst": "spawns in flight at once, each on a new worker process",
    }).parse_args()
    sizes = chosen_sizes(args, SIZES)

    s = measure(**sizes)
    figures = [
        Figure("process ask, sequential", "calls/s", s["seq"], s["raw_seq"],
               target_ratio=SEQUENTIAL_RATIO),
        # Reported beside it, no target of its own: the same ask to an async method, which
        # runs on the worker's loop, shows what the hand-over to the actor's thread costs.
        Figure("process ask, sequential, async method", "calls/s", s["aseq"], s["raw_seq"]),
        Figure("process calls, pipelined 1000", "calls/s", s["pipe"], s["raw_pipe"],
               target_ratio=PIPELINED_RATIO),
        # One worker's actor asking another's (an async method): a direct connection
        # between the two workers, against the raw echo, and the same through the owner.
        Figure("worker -> worker ask, sequential", "calls/s", s["w2w"], s["raw_seq"],
               target_ratio=W2W_TARGET),
        Figure("worker -> worker ask, sequential, through the owner", "calls/s",
               s["w2w_relay"], s["raw_seq"]),
        Figure("worker -> worker ask, sequential, direct vs through the owner", "calls/s",
               s["w2w"], s["w2w_relay"]),
        Figure("start+stop, warm worker", "cycles/s", s["cycles"], target_value=500),
        Figure("cold worker start", "ms", s["cold"], target_value=COLD_START_MS,
               lower_is_better=True),
        Figure(f"burst of {sizes['burst']} spawns in flight", "s", s["burst"],
               s["plain_burst"], target_ratio=BURST_RATIO, lower_is_better=True),
        Figure("raw echo, sequential", "req/s", s["raw_seq"]),
        Figure("raw echo, pipelined window 1000", "req/s", s["raw_pipe"]),
    ]
    seq, pipe, cycles = (statistics.median(s[k]) for k in ("seq", "pipe", "cycles"))
    vs_ray = {
        "sequential calls/s": seq / RAY["sequential calls/s"],
        "pipelined calls/s": pipe / RAY["pipelined calls/s"],
        "actor starts/s": cycles / RAY["actor starts/s"],
    }
    # Ray's start starts a new process each time: the like-for-like figure is a cold start.
    cold_per_s = 1000 / statistics.median(s["cold"])
    vs_ray_cold = cold_per_s / RAY["actor starts/s"]
    cpu_rows = {
        "process ask, sequential": "seq",
        "process ask, sequential, async method": "aseq",
        "process calls, pipelined 1000": "pipe",
        "worker -> worker ask, sequential": "w2w",
        "worker -> worker ask, sequential, through the owner": "w2w_relay",
        "raw echo, sequential": "raw_seq",
        "raw echo, pipelined window 1000": "raw_pipe",
    }
    cpu = {
        name: {
            "here_median": statistics.median(s[key + "_cpu"]),
            "there_median": statistics.median(s[key + "_peer_cpu"]),
            "here_samples": s[key + "_cpu"],
            "there_samples": s[key + "_peer_cpu"],
        }
        for name, key in cpu_rows.items()
    }
    extra = {
        "loop": "uvloop",
        "cpu_us_per_call": cpu,
        **sizes,
        "window": WINDOW,
        "pipelined_shape": "actorrt: issue 1,000 calls, await them in order, repeat; "
        "raw: sliding window of 1,000 in flight",
        "same_worker_for_all_cycles": s["same_worker"],
        "cold_start_ms_samples": s["cold"],
        "first_start_ms_samples": s["first"],
        "burst_baseline": "the same burst with ACTORRT_FORKSERVER=0 (fresh interpreters)",
        "ray_2_60": RAY,
        "actorrt_over_ray": vs_ray,
        "actorrt_cold_starts_per_s_over_ray": vs_ray_cold,
    }
    ok = report("benchmarks.processes: worker-process actors vs raw echo", figures,
                "processes", extra)
    print("\nCPU time per call, medians (µs; here: this process; there: the worker, or the "
          "raw echo child):")
    print(f"{'figure':<42} {'here':>8} {'there':>8}")
    for name, row in cpu.items():
        print(f"{name:<42} {row['here_median']:>8.1f} {row['there_median']:>8.1f}")
    print("\nRay 2.60 on this machine class (docs/benchmarks.md), for reference:")
    print(f"{'figure':<24} {'Ray 2.60':>10} {'actorrt':>12} {'actorrt/Ray':>12}")
    for (name, ray), mine in zip(RAY.items(), (seq, pipe, cycles), strict=True):
        print(f"{name:<24} {ray:>10,.0f} {mine:>12,.0f} {vs_ray[name]:>11,.1f}x")
    print(f"{'(cold starts/s)':<24} {RAY['actor starts/s']:>10,.0f} {cold_per_s:>12,.1f} "
          f"{vs_ray_cold:>11,.1f}x  (a new process each, like Ray's)")
    if not all(s["same_worker"]):
        print("note: a start+stop sample was served by more than one worker process")
    print(f"cold worker start samples (ms): {', '.join(f'{v:.0f}' for v in s['cold'])}")
    print("first start of each runtime, its fork server's start included (ms): "
          + ", ".join(f"{v:.0f}" for v in s["first"]))
    print(f"burst of {sizes['burst']} spawns in flight (s), forked: "
          + ", ".join(f"{v:.2f}" for v in s["burst"])
          + "; fresh interpreters (ACTORRT_FORKSERVER=0): "
          + ", ".join(f"{v:.2f}" for v in s["plain_burst"]))
    exit_for(ok, args.check)


if __name__ == "__main__":
    main()
