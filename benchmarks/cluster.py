"""Cluster mode against the same work on one machine and a raw TCP echo, in one run
(docs/benchmarks.md).

    python -m benchmarks.cluster [--check] [--reps R] [--quick] [--loopback]
                                 [--n-seq N] [--n-pipe N] [--pgs N] [--trials N] [--reports N]

Three nodes in network namespaces (``benchmarks._cluster_hosts``: head + node on host 0,
nodes on hosts 1 and 2, two CPUs each), the driver in the root namespace, and per repetition
(the single-machine baselines first, then the raw echo, then the cluster, so that the three
kinds of ask run back to back):

1. Cross-node asks to the echo actor of :mod:`benchmarks.processes`, pinned to host 1,
   measured exactly as that module measures its cross-process asks (a warm-up of 200, then
   sequential asks to its sync and its async method, then pipelined calls in windows of
   1,000), against the raw TCP msgpack echo (``benchmarks._tcp_echo``, the Unix-socket
   baseline moved onto TCP) between the root namespace and host 1, sequential and with a
   sliding window of 1,000, measured just before. actorrt's connections run over TLS, the
   raw echo does not: the same echo over TLS (Python's ``ssl`` on both ends) is measured too,
   and each ask figure is also reported against it, and against the same asks to the same
   actor in a worker process of this machine (a local runtime, same run), which a loaded
   machine slows as it slows the cross-node ones; the targets (sequential >= 0.60,
   pipelined >= 0.30, as for the cross-process figures) are checked against the plain echo.
   Then actor -> actor: a caller actor on host 0 asks the same echo actor's async method
   sequentially (after a warm-up), through the driver (``ACTORRT_DIRECT_CALLS=0`` in the
   caller's worker) and directly (worker to worker, TLS and the cluster's token), against the
   raw TCP echo on host 1 measured from the caller's own worker process on host 0 (target:
   direct >= 0.60 of it).
2. A STRICT_SPREAD placement group of 3 x ``{"CPU": 1}`` (one bundle on each node) reserved
   (``ready()``) and removed, per second; baseline: the same three bundles (PACK: one machine
   cannot spread them) on a local runtime of 6 CPUs.
3. ``Tuner.fit`` of 100 trials x 10 reports (the trainable of :mod:`benchmarks.tune_overhead`),
   each ``with_resources(..., {"CPU": 1})``, so six run at a time, two on each node; a fresh
   driver each repetition (worker processes start cold; the agents' fork servers are warm).
   Baseline: the same sweep on a local runtime of 6 CPUs. No target.
4. Node loss: a fresh node on host 2, an actor on it with a pending ask (an
   ``asyncio.sleep``); the node's processes SIGKILLed (their sockets close), or its link cut
   (silence: the head declares the node lost after its heartbeats stop); seconds from the
   kill or cut until the ask fails with ``ActorDiedError``. Target: at most 3 s each.

Where network namespaces cannot be made (not root), or with ``--loopback``, the same runs on
loopback, every member a separate process; the output says which. ``--check`` exits 1 when
a target is missed.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import uvloop

import actorrt
from actorrt import ActorDiedError

from . import _tcp_echo
from ._cluster_hosts import CPUS_PER_NODE, ECHO_HOST, HOSTS, Hosts, pin
from ._common import ROOT, Figure, chosen_sizes, exit_for, report, sized_parser
from .broker import pg_rate
from .processes import _caller_class, _echo_class, ask_rep, with_cpu, worker_to_worker
from .tune_overhead import sweep
from .wire import WINDOW, raw_pipelined, raw_sequential

SIZES = {
    "default": {"n_seq": 3_000, "n_pipe": 30_000, "pgs": 300, "trials": 100, "reports": 10,
                "reps": 5},
    "quick": {"n_seq": 200, "n_pipe": 2_000, "pgs": 20, "trials": 6, "reports": 3, "reps": 1},
}
SEQ_TARGET, PIPE_TARGET = 0.60, 0.30  # of the plain raw echo, as for cross-process asks
LOSS_TARGET_S = 3.0
LOSS_BOUND_S = 30.0  # an ask still pending this long after the loss counts as this long
SPREAD = [{"CPU": 1.0}] * HOSTS
TRIAL = {"CPU": 1.0}
LOCAL_CPUS = HOSTS * CPUS_PER_NODE


def _mark(flag: str) -> None:
    Path(flag).touch()


@actorrt.actor
class Holder:
    async def hold(self, flag: str, seconds: float) -> None:
        _mark(flag)  # the ask is running on its node now
        await asyncio.sleep(seconds)


async def until(condition: Callable[[], bool], what: str, within: float = 30.0) -> None:
    deadline = time.monotonic() + within
    while not condition():
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what}: not so after {within:.0f} s")
        await asyncio.sleep(0.01)


# ---------------------------------------------------------------------------- baselines


async def raw_rep(hosts: Hosts, n_seq: int, n_pipe: int) -> dict[str, tuple[float, ...]]:
    """The raw TCP echo between here and host 1, plain and over TLS, as
    ``benchmarks.processes.raw_rep`` measures the Unix one."""
    out: dict[str, tuple[float, ...]] = {}
    for tls, prefix in ((False, "raw"), (True, "tls")):
        port, pid = hosts.echo_ports[tls], hosts.echo_pids[tls]
        client = await _tcp_echo.connect(hosts.ip(ECHO_HOST), port, tls)
        out[f"{prefix}_seq"] = await with_cpu(raw_sequential(client, n_seq), n_seq, pid)
        out[f"{prefix}_pipe"] = await with_cpu(raw_pipelined(client, n_pipe), n_pipe, pid)
        client.transport.close()
    return out


def local_rep(sizes: dict[str, int]) -> dict[str, Any]:
    """The single-machine figures on a local runtime of 6 CPUs: the same echo actor in a
    worker process of this machine, the three bundles, and the sweep."""

    async def figures() -> dict[str, Any]:
        out = {"pg_local": await pg_rate(sizes["pgs"], SPREAD, warmup=20),
               "tune_local": await sweep(sizes["trials"], sizes["reports"], TRIAL)}
        ref = await _echo_class().spawn()
        asks = await ask_rep(ref, sizes["n_seq"], sizes["n_pipe"])
        await ref.stop()
        return out | {"local_seq": asks["seq"], "local_pipe": asks["pipe"]}

    result: dict[str, Any] = actorrt.run(figures, num_cpus=LOCAL_CPUS)
    return result


# ------------------------------------------------------------------------------ cluster


async def loss_seconds(
    runtime: actorrt.Runtime, hosts: Hosts, how: str, flags: Path
) -> tuple[float, str]:
    """A fresh node on host 2 with a pending ask; seconds from its loss (``"kill"`` or
    ``"cut"``) until the ask fails, and the error's reason."""
    resource = await asyncio.to_thread(hosts.fresh_loss_node)
    await until(lambda: runtime.cluster_resources().get(resource) == 1,
                f"the fresh node offering {resource} joined")
    ref = await Holder.options(num_cpus=0, resources={resource: 1}).spawn()
    flag = flags / resource
    pending = asyncio.ensure_future(ref.hold(str(flag), 10 * LOSS_BOUND_S))
    await until(flag.exists, "the held ask started")
    lose = hosts.kill_loss_node if how == "kill" else hosts.cut_loss_node
    start = time.perf_counter()
    await asyncio.to_thread(lose)
    try:
        await asyncio.wait_for(pending, LOSS_BOUND_S)
    except ActorDiedError as exc:
        return time.perf_counter() - start, str(exc.reason)
    except TimeoutError:
        return LOSS_BOUND_S, f"no error in {LOSS_BOUND_S:.0f} s"
    finally:
        if how == "cut":
            await asyncio.to_thread(hosts.end_cut)
    raise RuntimeError(f"the ask to an actor on a lost node ({how}) returned")


async def actor_to_actor(hosts: Hosts, ref: Any, n_seq: int) -> dict[str, Any]:
    """Sequential asks from a caller actor on host 0 to the echo actor ``ref`` on host 1:
    through the driver, directly, and the raw TCP echo on host 1 from the caller's own worker
    process (the like-for-like floor: the same two hosts)."""
    on_host0 = {"num_cpus": 0, "resources": {pin(0): 1}}
    relayed = await worker_to_worker(ref, n_seq, False, **on_host0)
    direct = await worker_to_worker(ref, n_seq, True, **on_host0)
    caller = await _caller_class().options(**on_host0).spawn()
    raw = await caller.raw_tcp(hosts.ip(ECHO_HOST), hosts.echo_ports[False], n_seq)
    await caller.stop()
    return {"a2a_relay": relayed, "a2a": direct, "a2a_raw_seq": raw}


async def cluster_rep(hosts: Hosts, sizes: dict[str, int], flags: Path) -> dict[str, Any]:
    """One repetition on the cluster, a fresh driver: asks, groups, the sweep, node loss."""
    os.environ["ACTORRT_CLUSTER_TOKEN_FILE"] = hosts.cluster.token_file
    async with actorrt.Runtime(address=hosts.cluster.address) as runtime:
        await until(lambda: runtime.cluster_resources().get("CPU") == LOCAL_CPUS,
                    f"the driver saw {HOSTS} nodes of {CPUS_PER_NODE} CPUs")
        ref = await _echo_class().options(num_cpus=0, resources={pin(ECHO_HOST): 1}).spawn()
        out: dict[str, Any] = await ask_rep(ref, sizes["n_seq"], sizes["n_pipe"])
        out |= await actor_to_actor(hosts, ref, sizes["n_seq"])
        await ref.stop()
        out["pg"] = await pg_rate(sizes["pgs"], SPREAD, "STRICT_SPREAD", warmup=20)
        out["tune"] = await sweep(sizes["trials"], sizes["reports"], TRIAL)
        out["kill"] = await loss_seconds(runtime, hosts, "kill", flags)
        out["cut"] = await loss_seconds(runtime, hosts, "cut", flags)
    await asyncio.to_thread(hosts.fresh_loss_node)  # three nodes again for the next one
    return out


# --------------------------------------------------------------------------------- main


def measure(sizes: dict[str, int], loopback: bool) -> tuple[dict[str, list[Any]], str]:
    samples: dict[str, list[Any]] = {}

    def add(key: str, value: Any) -> None:
        samples.setdefault(key, []).append(value)

    with tempfile.TemporaryDirectory(prefix="actorrt-bench-cluster-") as tmp, \
            Hosts(Path(tmp), loopback) as hosts:
        hosts.start()
        flags = Path(tmp) / "flags"
        flags.mkdir()
        for _ in range(sizes["reps"]):
            # The asks of the three kinds back to back: cross-process, raw, cross-node.
            rep = local_rep(sizes)
            rep |= uvloop.run(raw_rep(hosts, sizes["n_seq"], sizes["n_pipe"]))
            rep |= uvloop.run(cluster_rep(hosts, sizes, flags))
            for key, value in rep.items():
                if key in ("kill", "cut"):
                    add(key, value[0])
                    add(key + "_reason", value[1])
                elif isinstance(value, tuple):  # (rate, CPU µs here, CPU µs there)
                    add(key, value[0])
                    add(key + "_cpu", value[1])
                    add(key + "_peer_cpu", value[2])
                else:
                    add(key, value)
        return samples, hosts.mode


def figures_of(s: dict[str, list[Any]], sizes: dict[str, int]) -> list[Figure]:
    trials = f"Tune {sizes['trials']} trials x {sizes['reports']} reports, {{CPU: 1}}"
    return [
        Figure("cross-node ask, sequential", "calls/s", s["seq"], s["raw_seq"],
               target_ratio=SEQ_TARGET),
        Figure("cross-node ask, sequential, vs TLS echo", "calls/s", s["seq"], s["tls_seq"]),
        Figure("cross-node ask, sequential, vs cross-process", "calls/s", s["seq"],
               s["local_seq"]),
        Figure("cross-node ask, sequential, async method", "calls/s", s["aseq"], s["raw_seq"]),
        Figure("cross-node calls, pipelined 1000", "calls/s", s["pipe"], s["raw_pipe"],
               target_ratio=PIPE_TARGET),
        Figure("cross-node actor -> actor ask, sequential", "calls/s", s["a2a"],
               s["a2a_raw_seq"], target_ratio=SEQ_TARGET),
        Figure("cross-node actor -> actor ask, sequential, through the driver", "calls/s",
               s["a2a_relay"], s["a2a_raw_seq"]),
        Figure("cross-node actor -> actor ask, direct vs through the driver", "calls/s",
               s["a2a"], s["a2a_relay"]),
        Figure("cross-node calls, pipelined 1000, vs TLS echo", "calls/s", s["pipe"],
               s["tls_pipe"]),
        Figure("cross-node calls, pipelined 1000, vs cross-process", "calls/s", s["pipe"],
               s["local_pipe"]),
        Figure("placement group STRICT_SPREAD 3 x {CPU: 1}, 3 nodes", "per s", s["pg"],
               s["pg_local"]),
        Figure(trials + ", 3 nodes", "s", s["tune"], s["tune_local"], lower_is_better=True),
        Figure("node loss, SIGKILL: pending ask to ActorDiedError", "s", s["kill"],
               target_value=LOSS_TARGET_S, lower_is_better=True),
        Figure("node loss, link cut: pending ask to ActorDiedError", "s", s["cut"],
               target_value=LOSS_TARGET_S, lower_is_better=True),
        Figure("raw TCP echo, sequential", "req/s", s["raw_seq"]),
        Figure("raw TCP echo, sequential, host 0 worker to host 1", "req/s", s["a2a_raw_seq"]),
        Figure("raw TCP echo, pipelined window 1000", "req/s", s["raw_pipe"]),
        Figure("raw TLS echo, sequential", "req/s", s["tls_seq"]),
        Figure("raw TLS echo, pipelined window 1000", "req/s", s["tls_pipe"]),
    ]


def main() -> None:
    parser = sized_parser(__doc__, SIZES, {
        "n_seq": "sequential asks per sample", "n_pipe": "pipelined calls per sample",
        "pgs": "placement groups per sample", "trials": "Tune trials per sweep",
        "reports": "reports per trial",
    })
    parser.add_argument("--loopback", action="store_true",
                        help="run on 127.0.0.1 even where network namespaces can be made")
    args = parser.parse_args()
    sizes = chosen_sizes(args, SIZES)
    # Members, workers on other nodes and echo servers import this checkout.
    path = [str(ROOT), os.environ.get("PYTHONPATH", "")]
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, path))

    started = time.perf_counter()
    s, mode = measure(sizes, args.loopback)
    cpu = {key: {"here_median": statistics.median(s[key + "_cpu"]),
                 "there_median": statistics.median(s[key + "_peer_cpu"])}
           for key in ("seq", "aseq", "pipe", "local_seq", "local_pipe", "raw_seq", "raw_pipe",
                       "tls_seq", "tls_pipe")}
    note = (f"cluster: {mode}. Cross-node ask targets are checked against the plain TCP "
            "echo; actorrt's calls are TLS-encrypted, so each is also shown against a TLS echo")
    extra = {"loop": "uvloop", "mode": mode, "loopback": "loopback" in mode, "suite_note": note,
             "cpu_us_per_call": cpu, **sizes, "window": WINDOW, "local_cpus": LOCAL_CPUS,
             "loss_reasons": {"kill": s["kill_reason"], "cut": s["cut_reason"]},
             "seconds": round(time.perf_counter() - started, 1)}
    ok = report("benchmarks.cluster: 3 nodes vs raw TCP echo and one machine",
                figures_of(s, sizes), "cluster", extra)
    print(f"\n{mode}")
    print("Targets for cross-node asks are checked against the plain TCP echo; actorrt's "
          "calls are TLS-encrypted, the plain echo is not (the 'vs TLS echo' rows).")
    print(f"Group baseline: the same 3 x {{CPU: 1}} (PACK) on a local runtime of {LOCAL_CPUS} "
          f"CPUs; Tune baseline: the same sweep on it.")
    print(f"Why the pending asks failed: SIGKILL {s['kill_reason']}; cut {s['cut_reason']}")
    print("CPU µs per call, medians (here: this driver; there: the worker or echo server):")
    for key, row in cpu.items():
        print(f"  {key:<10} {row['here_median']:>8.1f} {row['there_median']:>8.1f}")
    exit_for(ok, args.check)


if __name__ == "__main__":
    main()
