"""The training worker: one worker-process actor per rank, running the training function.

``run`` is a sync method, so it runs on the actor's own thread and may take hours, while
the worker's event loop keeps answering messages: ``next_reports`` (async, on the loop)
hands rank 0's reports to the coordinator as they come. Reports stay in the worker until
the coordinator acknowledges them (``after``), so a report is never lost between a poll
and a failure. With ``RunSpec.report_waits`` (the run is a Tune trial's), rank 0's
``train.report`` returns only once the coordinator has acknowledged that report, that is
once Tune has taken it and decided that the trial goes on, as ``tune.report`` does.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import actorrt

from .._shared._checkpoint import Checkpoint
from ._data import DataShard
from ._rendezvous import Meetings
from .backend import WorkerBackend, WorkerSetup
from .context import Session, TrainContext, WorkerInfo, hook_context, set_session

logger = logging.getLogger("actorrt.train")

# (sequence number, rank 0's metrics, checkpoint dir, every rank's metrics)
Report = tuple[int, dict[str, Any], str | None, list[dict[str, Any]]]


class TrainFunctionExit(RuntimeError):
    """The training function ended with a ``BaseException`` that is not an ``Exception``
    (``SystemExit``, a test framework's failure): that rank's error, which Ray's workers
    report as any other; its text names the original."""

    def __init__(self, text: str | BaseException) -> None:
        if isinstance(text, BaseException):
            text = f"the training function raised {type(text).__name__}: {text}"
        super().__init__(text)


@dataclass(frozen=True)
class RunSpec:
    """Everything one worker needs for one attempt (sent with ``run``)."""

    train_fn: Callable[..., Any]
    pass_config: bool
    config: dict[str, Any]
    setup: WorkerSetup
    env: dict[str, str]
    backend: WorkerBackend
    run_dir: str
    experiment_name: str
    restore: str | None
    next_index: int
    score_attribute: str | None
    report_waits: bool = False
    datasets: dict[str, Any] = field(default_factory=dict)  # this worker's shards
    working_dir: str | None = None  # the enclosing Tune trial's working directory
    rendezvous: Any = None  # rank 0's worker (ActorRef): the meetings


@contextlib.contextmanager
def _working_dir(path: str | None) -> Iterator[None]:
    """Run the block in ``path`` (when given), with relative ``sys.path`` entries kept
    meaning the original directory; both are put back after, so a pooled worker process
    is reused as it was."""
    if path is None:
        yield
        return
    original, saved_path = os.getcwd(), list(sys.path)
    sys.path[:] = [p if os.path.isabs(p) else os.path.join(original, p) for p in sys.path]
    try:
        os.chdir(path)
        yield
    finally:
        os.chdir(original)
        sys.path[:] = saved_path


@actorrt.actor(process=True, max_concurrency=3)
class TrainWorker:
    """One rank of the gang. Several messages at once: ``run`` on the actor's thread,
    ``next_reports`` polls and a final drain on the loop, and on rank 0 every rank's
    collective calls (``meet``; the gang raises ``max_concurrency`` for them)."""

    def __init__(self) -> None:
        self._meetings: Meetings | None = None
        self._reports: list[Report] = []
        self._seq = 0
        self._acked = 0
        self._acks = threading.Condition()  # rank 0's thread waits on it (report_waits)
        self._report_waits = False
        self._finished = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._changed: asyncio.Event | None = None

    async def on_start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._changed = asyncio.Event()

    async def describe(self) -> dict[str, Any]:
        """Where this worker runs: pid, node, and the GPUs of its own grant."""
        visible = os.environ.get("CUDA_VISIBLE_DEVICES", "")
        # In a cluster, the node agent names the node and its address; on one machine,
        # the host name and loopback.
        ip = os.environ.get("ACTORRT_NODE_IP") or "127.0.0.1"
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.bind((ip, 0))  # a port free on this node now, for a rendezvous here
            port = sock.getsockname()[1]
        return {
            "pid": os.getpid(),
            "node": os.environ.get("ACTORRT_NODE_ID") or socket.gethostname(),
            "ip": ip,
            "port": port,
            "gpus": [g.strip() for g in visible.split(",") if g.strip()],
        }

    async def meet(
        self, world: int, rank: int, number: int, value: Any, what: str, gather: bool = False
    ) -> Any:
        """On rank 0's worker: rank ``rank``'s ``number``-th collective call, of
        ``world`` ranks (see ``Meetings``)."""
        return await self._meetings_of(world).meet(rank, number, value, what, gather)

    async def ended(self, world: int, rank: int, meetings: int) -> None:
        """On rank 0's worker: rank ``rank``'s function returned after ``meetings``."""
        self._meetings_of(world).ended(rank, meetings)

    def _meetings_of(self, world: int) -> Meetings:
        # Made by the first call, which may come from any rank (even before this rank's
        # run starts); a worker serves one attempt, so one set of meetings.
        if self._meetings is None:
            self._meetings = Meetings(world)
        return self._meetings

    def execute(
        self, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any],
        info: WorkerInfo, experiment_name: str,
    ) -> Any:
        """Run ``fn(*args, **kwargs)`` here for a ``Backend`` hook's worker group, with
        ``train.get_context()`` answering this worker's ranks, as in Ray."""
        with hook_context(TrainContext(info, experiment_name)):
            return fn(*args, **kwargs)

    def run(self, spec: RunSpec) -> dict[str, Any]:
        """Run the training function once; return what the coordinator must know after."""
        with _working_dir(spec.working_dir):
            return self._run(spec)

    def _run(self, spec: RunSpec) -> dict[str, Any]:
        self._report_waits = spec.report_waits
        saved = {key: os.environ.get(key) for key in spec.env}
        os.environ.update(spec.env)
        setup = spec.setup
        info = WorkerInfo(
            setup.world_rank, setup.local_rank, setup.world_size,
            setup.local_world_size, setup.node_rank,
        )
        session = Session(
            TrainContext(info, spec.experiment_name),
            Path(spec.run_dir),
            Checkpoint(spec.restore) if spec.restore else None,
            spec.next_index,
            spec.score_attribute,
            self._push,
            {name: DataShard(name, part) for name, part in spec.datasets.items()},
            spec.rendezvous,
        )
        set_session(session)
        started = False
        try:
            spec.backend.on_start(setup)
            started = True
            try:
                if spec.pass_config:
                    spec.train_fn(spec.config)
                else:
                    spec.train_fn()
            except Exception:
                raise
            except BaseException as exc:  # SystemExit, a test framework's failure
                raise TrainFunctionExit(exc) from exc
        finally:
            if started:
                try:
                    spec.backend.on_shutdown()
                except Exception:
                    logger.exception("the training backend's shutdown failed")
            set_session(None)
            for key, old in saved.items():
                if old is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = old
            self._call_on_loop(self._finish)
        return {
            "reports": session.reports,
            "collectives": session.collectives,
            "fresh_process": spec.backend.needs_fresh_process(),
        }

    async def next_reports(self, after: int, wait: bool = True) -> tuple[list[Report], bool]:
        """Reports after sequence number ``after`` (those up to it are dropped: the
        coordinator has them), and whether ``run`` has ended. With ``wait``, waits until
        there is one or the run ends."""
        assert self._changed is not None
        self._reports = [r for r in self._reports if r[0] > after]
        if after > self._acked:
            with self._acks:
                self._acked = after
                self._acks.notify_all()
        while wait and not self._reports and not self._finished:
            self._changed.clear()
            await self._changed.wait()
        return list(self._reports), self._finished

    # Called on the training thread by train.report (rank 0 only; the session's lock
    # makes the calls one at a time).
    def _push(
        self, metrics: dict[str, Any], checkpoint: str | None, every: list[dict[str, Any]]
    ) -> None:
        self._seq += 1
        seq = self._seq
        self._call_on_loop(self._add, (seq, metrics, checkpoint, every))
        if self._report_waits:
            with self._acks:
                # Ends when the coordinator acknowledges; a gang told to stop is killed
                # while it waits here.
                self._acks.wait_for(lambda: self._acked >= seq)

    def _call_on_loop(self, func: Callable[..., None], *args: Any) -> None:
        assert self._loop is not None
        self._loop.call_soon_threadsafe(func, *args)

    def _add(self, report: Report) -> None:
        self._reports.append(report)
        assert self._changed is not None
        self._changed.set()

    def _finish(self) -> None:
        self._finished = True
        assert self._changed is not None
        self._changed.set()
