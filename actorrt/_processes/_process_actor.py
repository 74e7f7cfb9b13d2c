"""The owning runtime's side of an actor that runs in a worker process.

A ``ProcessActor`` has the lifecycle every actor shares
(:class:`~actorrt._core._supervision.Supervised`); what it supplies is how an incarnation is
started and served here: a worker from the pool constructs the actor, and calls go to it over
the worker's connection. A crash inside the actor (a failing tell) is restarted by the worker
itself, as for any actor, from what is left of ``max_restarts``; the worker reports each
restart, so the count is shared. When the process dies, this side fails what is pending with
``ActorDiedError`` and, while ``max_restarts`` allows, starts a new instance in a new worker
after the shared backoff, keeping the grant. Calls made while it starts or restarts are held
here and sent to the new instance. A process that died is described by its exit code or
signal, with a hint when a SIGKILL nobody asked for looks like the kernel's out-of-memory
killer.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol, cast

from .._core._handle import AskHandle
from .._core._lifecycle import ActorServices, Crash, ProcessExit, State
from .._core._spawn_progress import waiting_for
from .._core._supervision import Supervised
from .._errors import ActorDiedError, ConnectionLostError, DeathReason
from .._wire._connection import Connection
from .._wire._messages import Kill, Stop
from ._dispatch import spawn_message
from ._pool import WorkerKey, WorkerPool, WorkerProcess, describe_exit
from ._proxies import RemoteActor

if TYPE_CHECKING:
    from .._core._actor import ActorClass

logger = logging.getLogger("actorrt")

KILL_GRACE = 2.0  # seconds a worker gets to cancel the current message before SIGKILL


class WorkerSource(Protocol):
    """Where a process actor gets its workers from (the runtime's ``workers``)."""

    async def pool(self) -> WorkerPool: ...

    def started_pool(self) -> WorkerPool: ...


class ProcessOwner(ActorServices, Protocol):
    """What a process actor asks of the runtime that owns its worker."""

    @property
    def workers(self) -> WorkerSource: ...


class ProcessActor(Supervised, RemoteActor):
    """A worker-process actor, as its owning runtime holds it."""

    # Both bases keep the runtime, each typed by what it uses of it (``owner``: this class).
    runtime: Any

    def __init__(
        self,
        runtime: ProcessOwner,
        actor_class: ActorClass[Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        parent: Supervised | None,
        actor_id: str,
        key: WorkerKey,
    ) -> None:
        options = actor_class.actor_options
        RemoteActor.__init__(
            self, cast(Any, runtime), actor_id, actor_class.cls.__name__,
            actor_class.method_table, options.name,
        )
        self.owner = runtime  # the runtime, as this module uses it
        self.actor_class = actor_class
        self.args = args
        self.kwargs = kwargs
        self.key = key
        self.worker: WorkerProcess | None = None
        self.grant: Any = None
        self.grant_info: tuple[dict[str, float], Any] | None = None
        self._held: list[tuple[str, tuple[Any, ...], dict[str, Any], Any]] = []
        # Resolved with how the incarnation served now ended (set once it is up).
        self._ended: asyncio.Future[ActorDiedError] | None = None
        self._stopping: asyncio.Task[None] | None = None
        self._killing: asyncio.Task[None] | None = None
        self._lost: asyncio.Future[ActorDiedError] = self.loop.create_future()
        self._last_loss: ActorDiedError | None = None
        self.lost_node: str | None = None  # cluster mode: why the node it ran on is gone
        # Cluster mode: asks for a grant like its lost one on another node (None: it has
        # none to ask for, as an actor placed in a placement group's bundle).
        self.regrant: Callable[[ProcessActor], Awaitable[None]] | None = None
        self.relocating = False  # its node was lost and it restarts on another
        self._init_supervision(parent, options)

    # ----------------------------------------------------------------- sending

    def _usable_conn(self) -> Connection | None:
        return self.conn if self.running else None

    def _unusable(
        self, method: str, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> asyncio.Future[Any]:
        if self.accepting:  # starting or restarting: held for the next incarnation
            own: asyncio.Future[Any] = self.loop.create_future()
            self._held.append((method, args, kwargs, own))
            return own
        return super()._unusable(method, args, kwargs)

    def tell(self, method: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        if not self.running and self.accepting:  # starting or restarting: held
            self._check_loop()
            self._held.append((method, args, kwargs, None))
            return
        super().tell(method, args, kwargs)

    def tell_wait(
        self, method: str, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Awaitable[None]:
        if not self.running and self.accepting:  # starting or restarting: held
            self.tell(method, args, kwargs)
            done: asyncio.Future[None] = self.loop.create_future()
            done.set_result(None)
            return done
        return super().tell_wait(method, args, kwargs)

    def _send_held(self) -> None:
        """Send what was held while the incarnation started, ahead of anything later (also
        when a stop was asked for meanwhile: what was sent before it runs first)."""
        held, self._held = self._held, []
        self.running = True  # the held calls go out on the new connection, in order
        try:
            for method, args, kwargs, own in held:
                if own is None:
                    try:
                        super().tell(method, args, kwargs)
                    except Exception as exc:
                        logger.warning(
                            "a tell to %s was lost at restart: %s", self.describe(), exc
                        )
                elif not own.done():
                    sent = super()._submit(method, args, kwargs)
                    sent.add_done_callback(functools.partial(self._relay, own=own))
        finally:
            self.running = self.state is State.RUNNING

    def _relay(self, sent: asyncio.Future[Any], own: asyncio.Future[Any]) -> None:
        """Answer an ask held during a restart from the reply to its late send."""

        async def copy() -> None:
            try:
                result = await AskHandle(sent, self, "", None)
            except BaseException as exc:
                if not own.done():
                    own.set_exception(exc)
            else:
                if not own.done():
                    own.set_result(result)

        if not own.done():
            self.loop.create_task(copy())

    async def lost(self) -> ActorDiedError:
        """Why a pending ask's connection went away: how the process (or actor) ended."""
        if self._lost.done():
            return self._lost.result()
        conn = self.conn
        if self._last_loss is not None and conn is not None and not conn.is_closing():
            return self._last_loss  # an ask of an earlier incarnation, awaited late
        return await asyncio.shield(self._lost)

    def _lose(self, error: ActorDiedError) -> None:
        """Record why this incarnation's connection went (or will go) away."""
        self._last_loss = error
        if not self._lost.done():
            self._lost.set_result(error)

    def _fail_held(self, error: BaseException) -> None:
        held, self._held = self._held, []
        for _method, _args, _kwargs, own in held:
            if own is not None and not own.done():
                own.set_exception(error)

    # ------------------------------------------------- what the supervisor calls

    async def _incarnate(self) -> None:
        """Have a worker (the last one, if it lives) construct the actor."""
        if self.relocating and self.regrant is not None:
            try:
                await self.regrant(self)  # a grant on a node that is there
            except Exception as exc:
                raise Crash(exc, "asking for a new node") from exc
            self.relocating = False
        try:
            worker = self.worker
            if worker is None or not worker.alive:
                try:
                    worker = await (await self.owner.workers.pool()).acquire(self.key)
                except ConnectionLostError as exc:  # no process of ours died: say so
                    raise ConnectionError(f"cannot start a worker process: {exc}") from exc
                self.worker = worker
            if worker.gone_because is not None or not worker.alive:
                # It ended before it was ours: nobody will tell us.
                how = worker.gone_because or describe_exit(worker.exited.result())
                raise ConnectionError(
                    f"worker process {worker.pid}{worker.where} ended before it could run "
                    f"{self.describe()}: {how}"
                )
            worker.label = self.describe()
            worker.hosted = self
            waiting_for(
                f"worker process {worker.pid}{worker.where} to run the constructor of "
                f"{self.describe()} and its on_start"
            )
            if self._lost.done():
                self._lost = self.loop.create_future()
            self.conn = worker.conn
            assert self.conn is not None
            await self.conn.request(
                spawn_message(
                    self.actor_id,
                    self.actor_class,
                    self.args,
                    self.kwargs,
                    self.restart_count,
                    self.grant_info,
                ),
                context=f"the class and constructor arguments of {self.cls_name}",
            )
        except ConnectionLostError:
            # The process died under the constructor: say how it died.
            died = await self.lost()
            raise Crash(died, "its worker process", died) from None
        except asyncio.CancelledError:
            raise
        except BaseException as exc:  # the constructor's own, sent back: pytest's too
            if self.worker is not None:
                self.worker.tainted = True  # a failed constructor may have left anything
            raise Crash(exc, "its constructor") from exc
        self._ended = self.loop.create_future()

    def _up(self) -> bool:
        """Whether an incarnation runs in the worker now."""
        return self._ended is not None and not self._ended.done()

    async def _serve(self) -> ActorDiedError | None:
        self._send_held()
        if self.ending is DeathReason.STOPPED:
            self._begin_stop()  # asked for while it started: after what was held
        elif self.ending is DeathReason.KILLED and (
            self._killing is None or self._killing.done()
        ):
            # Killed while it started, and the kill's cancellation of this task did not
            # land (Python 3.11's wait_for returns a result that arrived with the cancel,
            # here the worker's connection): the incarnation is up now, so kill it again,
            # in its worker, or it would wait for an end nobody sends.
            self._killing = self.loop.create_task(self._kill_worker())
        assert self._ended is not None
        error = await self._ended
        if self.ending is not None:
            return error  # the stop's answer, or the kill
        if self.relocating:
            raise Crash(error, "a node that was lost", error)
        if error.reason is not DeathReason.PROCESS_DIED:
            if self.worker is not None:
                self.worker.tainted = True  # never reused after a crash
            return error  # it crashed in its worker with no restarts left there
        raise Crash(error, "its worker process", error)

    async def _drop_incarnation(self, error: ActorDiedError) -> None:
        worker = self.worker
        if worker is not None and (
            not worker.alive or worker.tainted or error.reason is DeathReason.PROCESS_DIED
        ):
            self.owner.workers.started_pool().release(worker)
            self.worker = None

    def _close(self, error: ActorDiedError) -> None:
        self._lose(error)
        self._fail_held(error)
        worker, self.worker = self.worker, None
        self.conn = None
        if worker is None:
            return
        worker.hosted = None
        if self.ending is DeathReason.KILLED:
            worker.kill()
        self.owner.workers.started_pool().release(worker)

    def _begin_stop(self) -> None:
        worker = self.worker
        if worker is not None and worker.liveness.stopped:
            self.frozen()  # it could never finish: kill it now
        elif self._up():
            self._stopping = self.loop.create_task(self._graceful_stop())
        # else: sent by _serve once the incarnation is up

    async def _graceful_stop(self) -> None:
        ended, conn = self._ended, self.conn
        assert ended is not None and conn is not None
        try:
            error = await conn.request(Stop(self.actor_id, None))
        except ConnectionLostError:  # the process died under the stop: say how
            error = await self.lost()
        except Exception as exc:
            error = self.died_error(DeathReason.CRASHED, exc)
        if not ended.done():
            ended.set_result(error)

    def _begin_kill(self) -> None:
        worker = self.worker
        if worker is not None:
            worker.tainted = True  # a message may still run on its thread: never reuse it
        self._lose(self._kill_error())
        self._killing = self.loop.create_task(self._kill_worker())

    def _kill_error(self) -> ActorDiedError:
        """What a kill fails the calls in flight with: the reason it was killed for (its
        node lost, its group removed, its parent ended), else that it was killed."""
        return self.died_error(self.imposed or DeathReason.KILLED)

    async def _kill_worker(self) -> None:
        worker, conn = self.worker, self.conn
        if worker is not None and worker.liveness.why is not None:
            worker.kill()  # frozen: it cannot answer a kill request
        elif self._up() and conn is not None and worker is not None:
            try:
                # A kill overtakes calls waiting for room in flight: queued ones fail anyway.
                reason = None if self.imposed is None else self.imposed.value
                kill = conn.request(Kill(self.actor_id, reason), urgent=True)
                await asyncio.wait_for(kill, KILL_GRACE)
            except Exception:
                worker.kill()
        killed = self._kill_error()
        self._lose(killed)
        if self._up():
            assert self._ended is not None
            self._ended.set_result(killed)
        elif self.task is not None and not self.task.done():
            self.task.cancel()

    # --------------------------------------------- what the worker tells us

    def remote_died(self, error: ActorDiedError) -> None:
        """The actor ended inside its worker without being asked to: out of restarts."""
        if self._up():
            assert self._ended is not None
            self._ended.set_result(error)

    def remote_restarted(self) -> None:
        """The actor crashed in its worker and restarts there."""
        self.restart_count += 1

    def left_behind(self, left: str) -> None:
        """The actor ended in its worker and left ``left`` there: retire the worker."""
        worker = self.worker
        if worker is not None:
            worker.tainted = True
            logger.info(
                "%s left %s in its worker process %s: the worker is not reused",
                self.describe(), left, worker.pid,
            )

    def process_exited(self, code: int) -> None:
        """Our worker process ended."""
        worker = self.worker
        if worker is not None and worker.gone_because is not None and self.lost_node is None:
            self.node_lost(worker.gone_because)  # its node, or our link to it, is gone
            return
        how = ProcessExit(
            worker.pid if worker else None, code, describe_exit(code),
            asked=bool(worker and worker.kill_requested),
        )
        error = self.died_error(DeathReason.PROCESS_DIED, process=how)
        self._lose(error)
        self._fail_held(error)
        if self._up():
            assert self._ended is not None
            if self.state is State.RUNNING and self._may_restart():
                self._to(State.RESTARTING)  # calls made from now on wait for the next
            self._ended.set_result(error)

    def node_lost(self, why: str) -> None:
        """Cluster mode: the node its worker ran on is lost (``why`` names it). What was in
        flight fails with ``DeathReason.NODE_LOST``. With restarts left and a grant of its
        own, the actor restarts on another node once the broker grants it the same again
        (calls made meanwhile wait for it, as in any restart); else it ends."""
        self.lost_node = why
        error = self.died_error(DeathReason.NODE_LOST)
        self._lose(error)
        self._fail_held(error)
        relocate = (
            self.regrant is not None and self.state is State.RUNNING and self._may_restart()
        )
        if relocate:
            self.relocating = True
            self._to(State.RESTARTING)
        else:
            self.ending_because(DeathReason.NODE_LOST)
        if self._up():
            assert self._ended is not None
            self._ended.set_result(error)

    def died_error(
        self,
        reason: DeathReason,
        cause: BaseException | None = None,
        *,
        restarting: bool = False,
        process: ProcessExit | None = None,
    ) -> ActorDiedError:
        error = super().died_error(reason, cause, restarting=restarting, process=process)
        if reason is DeathReason.NODE_LOST and self.lost_node is not None:
            error = ActorDiedError(
                f"{error}: {self.lost_node}", actor=error.actor, reason=reason, cause=cause
            )
        return error

    def frozen(self) -> None:
        """Our worker was found stopped or unresponsive (see ``_liveness``). A stop that
        waits on a process stopped by a signal escalates to a kill: it could never end."""
        worker = self.worker
        if (
            self.ending is DeathReason.STOPPED
            and self.state is not State.DEAD
            and worker is not None
            and worker.liveness.stopped
        ):
            logger.warning(
                "stopping %s: its worker process %d is %s; killing it",
                self.describe(), worker.pid, worker.liveness.describe(),
            )
            self.kill_nowait()
