"""TorchTrainer against a bare torch.multiprocessing + torch.distributed floor (docs/benchmarks.md).

    python -m benchmarks.train_overhead [--check] [--steps N] [--rounds R] [--reps K] [--quick]

The same DDP loop (2 workers, gloo, a small MLP, ``--steps`` steps, a report from rank 0
every ``--every`` steps) runs:
- floor: two processes from ``torch.multiprocessing`` (spawn), each joining the process
  group over TCP; rank 0 reports by putting the metrics on a ``multiprocessing`` queue that
  the parent drains as they come. The processes stay up for a round and run the loop each
  time the parent says so;
- actorrt: ``TorchTrainer(...).fit()`` from this (synchronous) script; rank 0 reports with
  ``train.report``, which the coordinator polls as they come.
Both with ``OMP_NUM_THREADS=MKL_NUM_THREADS=1``, set before anything starts, and both under
the scheduling policy of actorrt's workers (``SCHED_BATCH``; ``ACTORRT_WORKER_SCHED=normal``
puts both under the default one).

Each round starts a fresh floor and a fresh runtime, then alternates ``--reps`` floor loops
with ``--reps`` ``fit()`` calls (the first cold, the rest warm). Figures: the training
steps' rate (timed inside rank 0, from the first step to the last) against the floor's,
target >= 1/1.05 (at most 5% overhead); and start-up, from the call (``Process.start`` /
``fit()``) to the loop's first line on rank 0 (processes, torch import, reserve, spawn,
process group), with actorrt cold (a fresh runtime: new worker processes) and warm (a
later ``fit()``: pooled processes, torch already imported). Start-up is in milliseconds,
lower is better; it has no target, only the floor's cold start beside it. A last figure,
without a target, is the steps per CPU-second of rank 0's training thread: what the
trainer adds inside the worker, whatever else the machine runs.
"""

from __future__ import annotations

import argparse
import os
import queue
import socket
import time
from collections.abc import Callable
from typing import Any

for _var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"  # before torch is imported anywhere, here or in a child

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as tmp  # noqa: E402
from torch import nn  # noqa: E402
from torch.nn.parallel import DistributedDataParallel  # noqa: E402

import actorrt  # noqa: E402
from actorrt import train  # noqa: E402
from actorrt._processes._worker_main import set_scheduling_policy  # noqa: E402
from actorrt.train.torch import TorchConfig, TorchTrainer  # noqa: E402

from ._common import Figure, exit_for, report  # noqa: E402

WORKERS = 2


def ddp_steps(
    rank: int, steps: int, every: int, emit: Callable[[dict[str, Any]], None]
) -> tuple[float, float]:
    """The loop both sides run, in a joined process group; returns the steps' wall seconds
    and the training thread's CPU seconds."""
    torch.manual_seed(0)
    model = DistributedDataParallel(
        nn.Sequential(nn.Linear(128, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(),
                      nn.Linear(256, 10))
    )
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    generator = torch.Generator().manual_seed(rank)
    x = torch.randn(64, 128, generator=generator)
    y = torch.randint(0, 10, (64,), generator=generator)
    start, cpu = time.perf_counter(), time.thread_time()
    for step in range(steps):
        optimizer.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        if (step + 1) % every == 0:
            emit({"step": step, "loss": loss.item()})
    return time.perf_counter() - start, time.thread_time() - cpu


# ------------------------------------------------------------------------------ floor


def floor_worker(rank: int, port: int, steps: int, every: int, go: Any, out: Any) -> None:
    """Join the group, then run the loop each time the parent says "run"."""
    # Its own session, as actorrt's workers have: with the kernel's autogroup scheduling
    # a session is a scheduling group, so both sides compete for CPU on the same terms.
    os.setsid()
    # The scheduling policy of actorrt's workers too (SCHED_BATCH unless
    # ACTORRT_WORKER_SCHED=normal): under the default policy the floor would be slower.
    set_scheduling_policy()
    dist.init_process_group(
        "gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=WORKERS
    )
    entered = time.time()

    def emit(metrics: dict[str, Any]) -> None:
        if rank == 0:
            out.put(metrics)

    while go.get() == "run":
        elapsed, cpu = ddp_steps(rank, steps, every, emit)
        if rank == 0:
            out.put({"steps_s": elapsed, "cpu_s": cpu, "entered": entered})
    dist.destroy_process_group()


class Floor:
    """Two ``torch.multiprocessing`` processes in one gloo group, kept up between loops so
    that floor and actorrt samples can alternate without paying the floor's start each
    time (its steps' rate does not depend on it)."""

    def __init__(self, steps: int, every: int) -> None:
        ctx = tmp.get_context("spawn")
        self.out = ctx.Queue()
        self.go = [ctx.Queue() for _ in range(WORKERS)]
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        self.called = time.time()
        self.procs = [
            ctx.Process(target=floor_worker, args=(r, port, steps, every, self.go[r], self.out))
            for r in range(WORKERS)
        ]
        for proc in self.procs:
            proc.start()

    def run(self) -> tuple[float, float, float, int]:
        """(steps' seconds, their CPU seconds, start-up seconds, reports received)."""
        for go in self.go:
            go.put("run")
        received = 0
        while True:
            try:
                metrics = self.out.get(timeout=300)
            except queue.Empty:
                raise RuntimeError("the floor's workers stopped reporting") from None
            if "steps_s" in metrics:
                return (metrics["steps_s"], metrics["cpu_s"], metrics["entered"] - self.called,
                        received)
            received += 1

    def close(self) -> None:
        for go in self.go:
            go.put("stop")
        for proc in self.procs:
            proc.join()


# ---------------------------------------------------------------------------- actorrt


def trainer_loop(config: dict[str, Any]) -> None:
    entered = time.time()
    rank = train.get_context().get_world_rank()
    elapsed, cpu = ddp_steps(rank, config["steps"], config["every"], train.report)
    train.report({"steps_s": elapsed, "cpu_s": cpu, "entered": entered})


def run_trainer(steps: int, every: int) -> tuple[float, float, float, int]:
    """(steps' seconds, their CPU seconds, start-up seconds, reports received) for a fit()."""
    trainer = TorchTrainer(
        trainer_loop,
        train_loop_config={"steps": steps, "every": every},
        torch_config=TorchConfig(backend="gloo"),
        scaling_config=train.ScalingConfig(num_workers=WORKERS),
        run_config=train.RunConfig(storage_path=os.path.join(_scratch(), "train_overhead")),
    )
    called = time.time()
    result = trainer.fit()  # a failed run raises
    last = result.metrics
    return (last["steps_s"], last["cpu_s"], last["entered"] - called,
            len(result.metrics_history) - 1)


def _scratch() -> str:
    import tempfile

    return tempfile.gettempdir()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if a target is missed")
    parser.add_argument("--steps", type=int, default=400, help="DDP steps per run")
    parser.add_argument("--every", type=int, default=10, help="report every N steps")
    parser.add_argument("--rounds", type=int, default=2,
                        help="cold starts of each side (a fresh floor and runtime each)")
    parser.add_argument("--reps", type=int, default=4, help="alternating runs per round")
    parser.add_argument("--quick", action="store_true", help="tiny sizes, for a smoke run")
    args = parser.parse_args()
    if args.quick:
        args.steps, args.rounds, args.reps = 20, 1, 2
    expected = args.steps // args.every

    floor_rate: list[float] = []
    floor_start: list[float] = []
    floor_cpu: list[float] = []
    rate: list[float] = []
    cpu_rate: list[float] = []
    cold: list[float] = []
    warm: list[float] = []
    for _ in range(args.rounds):
        floor = Floor(args.steps, args.every)
        actorrt.init(num_cpus=WORKERS)
        try:
            for rep in range(args.reps):
                # Alternating, so drift on a noisy machine hits both sides alike.
                seconds, cpu, startup, n = floor.run()
                assert n == expected, n
                floor_rate.append(args.steps / seconds)
                floor_cpu.append(args.steps / cpu)
                if rep == 0:
                    floor_start.append(startup * 1000)
                seconds, cpu, startup, n = run_trainer(args.steps, args.every)
                assert n == expected, n
                rate.append(args.steps / seconds)
                cpu_rate.append(args.steps / cpu)
                (cold if rep == 0 else warm).append(startup * 1000)
        finally:
            actorrt.shutdown()
            floor.close()

    figures = [
        Figure("DDP steps vs floor", "steps/s", rate, floor_rate, target_ratio=1 / 1.05),
        Figure("DDP steps per CPU-second, rank 0 thread", "steps/cpu-s", cpu_rate, floor_cpu),
        Figure("start-up, cold (floor: spawn)", "ms", cold, floor_start, lower_is_better=True),
        Figure("start-up, warm pool (floor: spawn)", "ms", warm, floor_start,
               lower_is_better=True),
    ]
    ok = report(
        "benchmarks.train_overhead: TorchTrainer vs bare torch.distributed",
        figures,
        "train_overhead",
        {"loop": "uvloop", "steps": args.steps, "every": args.every, "rounds": args.rounds,
         "reps": args.reps, "workers": WORKERS, "torch": torch.__version__},
    )
    exit_for(ok, args.check)


if __name__ == "__main__":
    main()
