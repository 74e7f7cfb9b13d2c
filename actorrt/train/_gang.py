"""One attempt's workers: spawned together, ranked, run, and ended together.

The gang is placed on bundles the caller already holds (a placement group it reserved, or
a Tune trial's own bundles), so a restart spawns a new gang on the same reservation. When
any worker fails, the others are killed at once: they would wait forever in the next
collective for the one that is gone. When the coordinator's report handler says stop (a
Tune trial told to stop), every worker is killed the same way.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, cast

import actorrt

from ._worker import Report, RunSpec, TrainWorker
from .backend import WorkerSetup

logger = logging.getLogger("actorrt.train")

DRAIN_TIMEOUT = 1.0  # seconds a failed attempt waits for rank 0's last reports
DEATH_GRACE = 0.5  # seconds a failure waits for a peer's death, its likelier cause

# What the coordinator does with one of rank 0's reports (metrics, stored checkpoint,
# every rank's metrics); it answers whether the run goes on.
OnReport = Callable[[dict[str, Any], str | None, list[dict[str, Any]]], Awaitable[bool]]


class GangFailed(Exception):
    """A worker of the gang failed; ``__cause__`` is what it raised or how it died.

    Attributes:
        rank, error: the failure taken as the cause (a death before a symptom).
        failures: every rank seen failing in this attempt, with its exception.
    """

    def __init__(
        self, rank: int, error: BaseException, failures: dict[int, BaseException] | None = None
    ) -> None:
        super().__init__(f"worker {rank} failed: {type(error).__name__}: {error}")
        self.rank = rank
        self.error = error
        self.failures = dict(failures) if failures else {rank: error}


@dataclass
class _Member:
    ref: actorrt.ActorRef[Any]
    pid: int
    node: str
    gpus: list[str]
    ip: str = "127.0.0.1"  # its node's address (in a cluster, as its agent gave it)
    port: int = 0  # a port that was free on its node


def actor_resources(bundle: dict[str, float]) -> dict[str, Any]:
    """A bundle dict as spawn options (``num_cpus``, ``num_gpus``, ``memory``, ``resources``)."""
    rest = {k: v for k, v in bundle.items() if k not in ("CPU", "GPU", "memory")}
    options: dict[str, Any] = {
        "num_cpus": bundle.get("CPU", 0),
        "num_gpus": bundle.get("GPU", 0),
        "resources": rest,
    }
    if "memory" in bundle:
        options["memory"] = int(bundle["memory"])
    return options


class Gang:
    """The workers of one attempt.

    Args:
        placements: one ``placement`` per worker (``pg.bundle(i)``, or ``"auto"``).
        bundle: what each worker asks for (the runtime sizes its thread pools from it).
    """

    def __init__(self, placements: Sequence[Any], bundle: dict[str, float]) -> None:
        self.placements = list(placements)
        self.bundle = bundle
        self.members: list[_Member] = []
        self.fresh_process = False
        self._acked = 0

    async def start(self) -> None:
        """Spawn every worker at once; if one fails to start, end the others and raise."""
        # mypy does not apply class decorators: TrainWorker is an ActorClass at run time.
        worker_class = cast("actorrt.ActorClass[TrainWorker]", TrainWorker)
        # Besides ``run`` and the coordinator's calls, rank 0's worker answers every
        # rank's collective calls at once (its meetings): room for all of them.
        cls = worker_class.options(
            max_concurrency=len(self.placements) + 3, **actor_resources(self.bundle)
        )
        # The first alone, then the rest together: concurrent first spawns in a runtime
        # race to start its worker pool (a core issue); once one is up, this costs one
        # round trip.
        first = await cls.options(placement=self.placements[0]).spawn()
        spawns = [cls.options(placement=p).spawn() for p in self.placements[1:]]
        refs = [first, *await asyncio.gather(*spawns, return_exceptions=True)]
        started = [r for r in refs if isinstance(r, actorrt.ActorRef)]
        errors = [r for r in refs if isinstance(r, BaseException)]
        try:
            if errors:
                raise errors[0]
            facts = await asyncio.gather(*(r.describe() for r in started))
        except BaseException:
            await asyncio.gather(*(r.kill() for r in started), return_exceptions=True)
            raise
        self.members = [
            _Member(ref, f["pid"], f["node"], list(f["gpus"]), f["ip"], f["port"])
            for ref, f in zip(started, facts, strict=True)
        ]

    def setups(self) -> list[tuple[WorkerSetup, dict[str, str]]]:
        """Each member's ranks and environment variables (docs/train.md), in member order.

        Ranks follow spawn order within a node, nodes in order of first appearance.
        Workers of one node see the union of their GPUs and pick theirs by position. The
        rendezvous is at rank 0's node address (``MASTER_ADDR``), on a port that was free
        there.
        """
        master_addr, master_port = self.members[0].ip, self.members[0].port
        nodes: dict[str, list[int]] = {}
        for i, member in enumerate(self.members):
            nodes.setdefault(member.node, []).append(i)
        order = [i for members in nodes.values() for i in members]
        world = len(self.members)
        out: list[tuple[WorkerSetup, dict[str, str]]] = [None] * world  # type: ignore[list-item]
        for node_rank, indices in enumerate(nodes.values()):
            union = sorted({g for i in indices for g in self.members[i].gpus}, key=_gpu_key)
            for local_rank, i in enumerate(indices):
                own = self.members[i].gpus
                setup = WorkerSetup(
                    world_rank=order.index(i),
                    local_rank=local_rank,
                    world_size=world,
                    local_world_size=len(indices),
                    node_rank=node_rank,
                    master_addr=master_addr,
                    master_port=master_port,
                    device_index=union.index(own[0]) if own else None,
                    device_indices=tuple(union.index(g) for g in own),
                )
                env = {
                    "MASTER_ADDR": master_addr,
                    "MASTER_PORT": str(master_port),
                    "RANK": str(setup.world_rank),
                    "LOCAL_RANK": str(local_rank),
                    "WORLD_SIZE": str(world),
                    "LOCAL_WORLD_SIZE": str(len(indices)),
                    "NODE_RANK": str(node_rank),
                }
                if union:
                    env["CUDA_VISIBLE_DEVICES"] = ",".join(union)
                out[i] = (setup, env)
        return out

    async def run(
        self, spec: RunSpec, on_report: OnReport, shards: Sequence[dict[str, Any]] = ()
    ) -> bool:
        """Run the training function on every worker until all have finished.

        Rank 0's reports go to ``on_report`` as they come, one at a time, in order.
        ``shards[rank]`` (when given) is that rank's part of each dataset.

        Returns:
            ``True`` when every worker finished; ``False`` when ``on_report`` answered
            stop: no later report is handed over, and every worker has been killed.

        Raises:
            GangFailed: a worker raised or died; every other worker has been killed.
        """
        setups = self.setups()
        runs: list[asyncio.Future[Any]] = []
        rank0 = self.members[0]
        # Rank 0's worker holds the attempt's meetings (train.report, train.collective).
        rendezvous = None
        if len(self.members) > 1:
            rendezvous = next(
                m.ref for m, (s, _) in zip(self.members, setups, strict=True)
                if s.world_rank == 0
            )
        for member, (setup, env) in zip(self.members, setups, strict=True):
            if setup.world_rank == 0:
                rank0 = member
            part = shards[setup.world_rank] if shards else {}
            one = replace(spec, setup=setup, env=env, datasets=part, rendezvous=rendezvous)
            runs.append(asyncio.ensure_future(_awaited(member.ref.run(one))))
            if rendezvous is not None:
                told = _tell_ended(rendezvous, setup.world_size, setup.world_rank)
                runs[-1].add_done_callback(told)
        halt: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        poll = asyncio.ensure_future(self._poll(rank0.ref, on_report, halt))
        waiting = asyncio.ensure_future(self._wait_all(runs, setups))
        try:
            await asyncio.wait({poll, waiting}, return_when=asyncio.FIRST_COMPLETED)
            if poll.done() and not poll.result():  # result() raises on_report's error
                await self._stop_waiting(waiting)
                await self.kill()
                return False
            try:
                await waiting
            except GangFailed:
                # Let the poll finish the report it is handing over, then take rank 0's
                # last reports (its loop answers even while its thread waits in a
                # collective), then end everyone: the survivors would wait forever.
                halt.set_result(None)
                if await poll:
                    await self._drain(rank0.ref, on_report)
                await self.kill()
                raise
            if not await poll:
                await self.kill()
                return False
        finally:
            for task in (poll, waiting):
                await self._stop_waiting(task)
            for run in runs:
                if run.done() and not run.cancelled():
                    run.exception()  # retrieved: a second failure is not logged as lost
                else:
                    run.cancel()
        self.fresh_process = any(r.result()["fresh_process"] for r in runs)
        return True

    @staticmethod
    async def _stop_waiting(task: asyncio.Future[Any]) -> None:
        """Cancel a helper task and wait for it; its outcome is retrieved, not raised."""
        if not task.done():
            task.cancel()
        await asyncio.wait({task})
        if not task.cancelled():
            task.exception()

    async def _wait_all(
        self, runs: list[asyncio.Future[Any]], setups: list[tuple[WorkerSetup, dict[str, str]]]
    ) -> None:
        pending = set(runs)
        while pending:
            done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_EXCEPTION)
            failed = [f for f in done if f.exception() is not None]
            if not failed:
                continue
            if pending and not any(_died(f) for f in failed):
                # A peer's death often reaches the survivors (a collective's connection
                # reset) before the owner has reaped the dead process: give the death a
                # moment to arrive, so the error names the cause, not a symptom.
                more, pending = await asyncio.wait(pending, timeout=DEATH_GRACE)
                failed += [f for f in more if f.exception() is not None and _died(f)]
            cause = next((f for f in failed if _died(f)), failed[0])
            rank = setups[runs.index(cause)][0].world_rank
            error = cause.exception()
            assert error is not None
            everyone: dict[int, BaseException] = {}
            for future in failed:
                exc = future.exception()
                assert exc is not None
                everyone[setups[runs.index(future)][0].world_rank] = exc
            raise GangFailed(rank, error, everyone) from error

    async def _poll(
        self, rank0: actorrt.ActorRef[Any], on_report: OnReport, halt: asyncio.Future[None]
    ) -> bool:
        """Hand rank 0's reports to ``on_report`` until rank 0's run ends, rank 0 is gone,
        or ``halt`` is set (``True``), or ``on_report`` says stop (``False``). Only the
        wait for new reports is interrupted by ``halt``, never a report being handed over."""
        while True:
            fetch = asyncio.ensure_future(_awaited(rank0.next_reports(self._acked)))
            try:
                await asyncio.wait({fetch, halt}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                if not fetch.done():
                    await self._stop_waiting(fetch)
            if halt.done():
                if not fetch.cancelled():
                    fetch.exception()  # retrieved; what it had stays queued for the drain
                return True
            try:
                batch, finished = fetch.result()
            except actorrt.ActorError:
                return True  # rank 0 is gone or failed: its run's outcome says how
            if not await self._take(batch, on_report):
                return False
            if finished:
                return True

    async def _drain(self, rank0: actorrt.ActorRef[Any], on_report: OnReport) -> None:
        """After a failure: rank 0's reports not yet taken, if rank 0 still answers."""
        try:
            batch, _ = await rank0.next_reports.options(timeout=DRAIN_TIMEOUT)(
                self._acked, False
            )
        except Exception:
            return
        await self._take(batch, on_report)

    async def _take(self, batch: list[Report], on_report: OnReport) -> bool:
        for seq, metrics, checkpoint, every in batch:
            if seq > self._acked:
                go_on = await on_report(metrics, checkpoint, every)
                self._acked = seq  # acknowledged once handled: rank 0 may go on
                if not go_on:
                    return False
        return True

    def _kill_processes(self) -> None:
        # SIGKILL at once rather than ref.kill()'s grace period: a worker stuck in a
        # collective cannot cancel anything, and the grace would only delay the restart.
        for member in self.members:
            with contextlib.suppress(ProcessLookupError):
                os.kill(member.pid, signal.SIGKILL)

    async def kill(self) -> None:
        """End every worker now; return once each has ended (its grant is back)."""
        self._kill_processes()
        await asyncio.gather(*(m.ref.kill() for m in self.members), return_exceptions=True)

    async def stop(self, reuse: bool = True) -> None:
        """End every worker gracefully (their processes go back to the pool), or kill them
        if their process must not be reused (``reuse=False``, or the backend says so)."""
        if self.fresh_process or not reuse:
            await asyncio.gather(*(m.ref.kill() for m in self.members), return_exceptions=True)
            return
        await asyncio.gather(*(m.ref.stop() for m in self.members), return_exceptions=True)


def _died(future: asyncio.Future[Any]) -> bool:
    return isinstance(future.exception(), actorrt.ActorDiedError)


async def _awaited(handle: Any) -> Any:
    return await handle


def _gpu_key(gpu: str) -> tuple[int, int | str]:
    return (0, int(gpu)) if gpu.isdigit() else (1, gpu)


def _tell_ended(
    rendezvous: actorrt.ActorRef[Any], world: int, rank: int
) -> Callable[[asyncio.Future[Any]], None]:
    """A done-callback telling the rendezvous that ``rank``'s function returned (so calls
    waiting for it fail instead of hanging)."""

    def told(run: asyncio.Future[Any]) -> None:
        if not run.cancelled() and run.exception() is None:
            rendezvous.ended.tell(world, rank, run.result()["collectives"])

    return told
