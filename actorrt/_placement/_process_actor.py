"""The owning runtime's side of an actor that runs in a worker process.

A ``ProcessActor`` acquires a worker from the pool, has it construct the actor, and then
supervises the process. A crash inside the actor (a failing tell) is restarted by the worker
itself, as for any actor, from what is left of ``max_restarts``; the worker reports each
restart, so the count is shared. When the process dies, this side fails what is pending with
``ActorDiedError`` and, while ``max_restarts`` allows, starts a new instance in a new worker
after a backoff. Calls made during that backoff wait here and are sent to the new instance.
A process that died is described by its exit code or signal, with a hint when a SIGKILL
nobody asked for looks like the kernel's out-of-memory killer.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any

from .._core._cell import RESTART_BACKOFF_INITIAL, RESTART_BACKOFF_MAX, stop_within
from .._core._handle import AskHandle
from .._errors import ActorDiedError
from .._wire._connection import Connection, ConnectionLostError
from .._wire._messages import Kill, Stop
from ._dispatch import spawn_message
from ._pool import WorkerKey, WorkerProcess, describe_exit
from ._proxies import RemoteActor

if TYPE_CHECKING:
    from .._core._actor import ActorClass
    from .._runtime import Runtime

logger = logging.getLogger("actorrt")

KILL_GRACE = 2.0  # seconds a worker gets to cancel the current message before SIGKILL


class ProcessActor(RemoteActor):
    """A worker-process actor, as its owning runtime holds it."""

    def __init__(
        self,
        runtime: Runtime,
        actor_class: ActorClass[Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        parent: Any,
        actor_id: str,
        key: WorkerKey,
    ) -> None:
        options = actor_class.actor_options
        super().__init__(
            runtime, actor_id, actor_class.cls.__name__, actor_class.method_table, options.name
        )
        self.actor_class = actor_class
        self.args = args
        self.kwargs = kwargs
        self.parent = parent
        self.key = key
        self.max_restarts = options.max_restarts
        self.restart_count = 0
        self.children: set[Any] = set()
        self.worker: WorkerProcess | None = None
        self.died: asyncio.Future[ActorDiedError] = self.loop.create_future()
        self.task: asyncio.Task[None] | None = None
        self.state = "starting"
        self.grant: Any = None
        self.grant_info: tuple[dict[str, float], Any] | None = None
        self._held: list[tuple[str, tuple[Any, ...], dict[str, Any], Any]] = []
        self._ended: asyncio.Future[ActorDiedError] | None = None
        self._stop_requested = False
        self._stopping: asyncio.Task[None] | None = None
        self._kill_requested = False
        self._end_reason: tuple[str, BaseException | None] | None = None
        self._lost: asyncio.Future[ActorDiedError] = self.loop.create_future()
        self._last_loss: ActorDiedError | None = None

    # ----------------------------------------------------------------- sending

    def _usable_conn(self) -> Connection | None:
        return self.conn if self.state == "running" else None

    @property
    def running(self) -> bool:  # type: ignore[override]
        return self.state == "running"

    def _unusable(
        self, method: str, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> asyncio.Future[Any]:
        if self.state in ("starting", "restarting"):
            own: asyncio.Future[Any] = self.loop.create_future()
            self._held.append((method, args, kwargs, own))
            return own
        return super()._unusable(method, args, kwargs)

    def tell(self, method: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        if self.state in ("starting", "restarting"):
            self._check_loop()
            self._held.append((method, args, kwargs, None))
            return
        super().tell(method, args, kwargs)

    def tell_wait(
        self, method: str, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Awaitable[None]:
        if self.state in ("starting", "restarting"):
            self.tell(method, args, kwargs)
            done: asyncio.Future[None] = self.loop.create_future()
            done.set_result(None)
            return done
        return super().tell_wait(method, args, kwargs)

    def _send_held(self) -> None:
        held, self._held = self._held, []
        for method, args, kwargs, own in held:
            if own is None:
                try:
                    super().tell(method, args, kwargs)
                except Exception as exc:
                    logger.warning("a tell to %s was lost at restart: %s", self.describe(), exc)
            elif not own.done():
                sent = super()._submit(method, args, kwargs)
                sent.add_done_callback(functools.partial(self._relay, own=own))

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

    def death_error(self) -> ActorDiedError:
        if self.died.done():
            return self.died.result()
        reason = "killed" if self._kill_requested else "stopped"
        return ActorDiedError(
            f"actor {self.describe()} was {reason}", actor=self.describe(), reason=reason
        )

    # --------------------------------------------------------------- lifecycle

    def start(self, started: asyncio.Future[None]) -> None:
        self.task = self.loop.create_task(
            self._supervise(started), name=f"actorrt:{self.describe()}"
        )

    async def _incarnate(self) -> None:
        worker = self.worker
        if worker is None or not worker.alive:
            worker = await (await self.runtime.workers.pool()).acquire(self.key)
            self.worker = worker
        worker.label = self.describe()
        worker.hosted = self
        if self._lost.done():
            self._lost = self.loop.create_future()
        self.conn = worker.conn
        assert self.conn is not None
        try:
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
            raise await self.lost() from None
        except Exception:
            worker.tainted = True  # a failed constructor may have left anything behind
            raise
        self._ended = self.loop.create_future()
        self.state = "running"
        self._send_held()
        if self._stop_requested:
            self.loop.create_task(self._graceful_stop())

    async def _supervise(self, started: asyncio.Future[None]) -> None:
        error: ActorDiedError | None = None
        try:
            while True:
                try:
                    await self._incarnate()
                except asyncio.CancelledError:
                    raise
                except Exception as exc:
                    error = self._crash_error(exc)
                    if not started.done():
                        started.set_exception(exc)
                        break
                    # A constructor that fails at a restart is one more crash.
                else:
                    if not started.done():
                        started.set_result(None)
                    assert self._ended is not None
                    error = await self._ended
                    if self._stop_requested or self._kill_requested:
                        break
                    if error.reason != "process died":
                        if self.worker is not None:
                            self.worker.tainted = True  # never reused after a crash
                        break  # it crashed in its worker with no restarts left there
                if self._kill_requested or not await self._after_crash(error):
                    break
        except asyncio.CancelledError:
            task = asyncio.current_task()
            ours = self._kill_requested and task is not None and task.uncancel() == 0
            if self.worker is not None:
                self.worker.tainted = True  # cut off mid-way: what runs there is unknown
            if not started.done():
                started.set_exception(self._make_error("killed"))
                started.exception()  # retrieved: a spawner that still waits gets it anyway
            if not ours:
                self._end_reason = self._end_reason or ("runtime shut down", None)
                raise
        finally:
            await self._end_children(kill=self._kill_requested)
            self._release_worker()
            if self._end_reason is not None:
                error = self._make_error(*self._end_reason)
            elif error is None or self._kill_requested:
                error = self._make_error("killed" if self._kill_requested else "stopped")
            self._finish(error)

    async def _after_crash(self, error: ActorDiedError) -> bool:
        self.state = "restarting"
        await self._end_children(kill=True)
        worker = self.worker
        if worker is not None and (
            not worker.alive or worker.tainted or error.reason == "process died"
        ):
            self.runtime.workers.started_pool().release(worker)
            self.worker = None
        can_restart = self.max_restarts < 0 or self.restart_count < self.max_restarts
        if not can_restart:
            return False
        delay = min(RESTART_BACKOFF_INITIAL * 2**self.restart_count, RESTART_BACKOFF_MAX)
        self.restart_count += 1
        self.runtime.children_may_start(self)
        logger.warning(
            "restarting %s in %.2f s (restart %d): %s",
            self.describe(), delay, self.restart_count, error,
        )
        await asyncio.sleep(delay)
        return True

    def _crash_error(self, exc: BaseException) -> ActorDiedError:
        if isinstance(exc, ActorDiedError):
            return exc
        return ActorDiedError(
            f"actor {self.describe()} crashed with {type(exc).__name__}: {exc}",
            actor=self.describe(),
            reason="crashed",
            cause=exc,
        )

    def _make_error(self, reason: str, cause: BaseException | None = None) -> ActorDiedError:
        text = {
            "stopped": "was stopped",
            "killed": "was killed",
            "parent ended": "ended because its parent ended",
            "runtime shut down": "ended because its runtime shut down",
            "placement group removed": "ended because its placement group was removed",
        }.get(reason, reason)
        return ActorDiedError(
            f"actor {self.describe()} {text}", actor=self.describe(), reason=reason, cause=cause
        )

    # --------------------------------------------- what the worker tells us

    def remote_died(self, error: ActorDiedError) -> None:
        """The actor ended inside its worker without being asked to: out of restarts."""
        if self._ended is not None and not self._ended.done():
            self._ended.set_result(error)

    def remote_restarted(self) -> None:
        """The actor crashed in its worker and restarts there."""
        self.restart_count += 1

    def process_exited(self, code: int) -> None:
        """Our worker process ended."""
        worker = self.worker
        signal_number = -code if code < 0 else None
        text = f"its worker process {worker.pid if worker else '?'} died ({describe_exit(code)})"
        if signal_number == 9 and not (worker and worker.kill_requested):
            text += (
                "; a SIGKILL nobody asked for is often the kernel's out-of-memory killer "
                "(check `dmesg`, or give the actor more memory)"
            )
        error = ActorDiedError(
            f"actor {self.describe()} {text}",
            actor=self.describe(),
            reason="process died",
            exitcode=code if code >= 0 else None,
            signal=signal_number,
        )
        self._lose(error)
        self._fail_held(error)
        if self._ended is not None and not self._ended.done():
            if self.state == "running":
                self.state = "restarting"
            self._ended.set_result(error)

    # ------------------------------------------------------ stop, kill, wait

    async def stop(self, grace: float | None = None) -> ActorDiedError:
        if asyncio.get_running_loop() is not self.loop:
            return await self.runtime.call_on_loop(self.stop(grace))
        if not self._stop_requested and not self._kill_requested and not self.died.done():
            self._stop_requested = True
            if self.worker is not None and self.worker.liveness.stopped:
                self.frozen()  # it could never finish: kill it now
            else:
                self._stopping = self.loop.create_task(self._graceful_stop())
        return await stop_within(self, grace)

    def frozen(self) -> None:
        """Our worker was found stopped or unresponsive (see ``_liveness``). A stop that
        waits on a process stopped by a signal escalates to a kill: it could never end."""
        worker = self.worker
        if (
            self._stop_requested
            and worker is not None
            and worker.liveness.stopped
            and not self._kill_requested
            and not self.died.done()
        ):
            logger.warning(
                "stopping %s: its worker process %d is %s; killing it",
                self.describe(), worker.pid, worker.liveness.describe(),
            )
            self.kill_nowait()

    async def _graceful_stop(self) -> None:
        if self.state in ("starting", "restarting"):
            return  # sent once the new instance runs: what was sent before the stop runs first
        if self.state != "running" or self.conn is None or self._ended is None:
            return
        self.state = "stopping"
        try:
            error = await self.conn.request(Stop(self.actor_id, None))
        except ConnectionLostError:  # the process died under the stop: say how
            error = await self.lost()
        except Exception as exc:
            error = self._crash_error(exc)
        if not self._ended.done():
            self._ended.set_result(error)
        if self._end_reason is None and isinstance(error, ActorDiedError):
            self._end_reason = (error.reason or "stopped", error.cause)

    async def kill(self) -> ActorDiedError:
        if asyncio.get_running_loop() is not self.loop:
            return await self.runtime.call_on_loop(self.kill())
        if self.died.done() or self._kill_requested:
            return await asyncio.shield(self.died)
        self._kill_requested = True
        worker, conn, state = self.worker, self.conn, self.state
        if worker is not None:
            worker.tainted = True  # a message may still run on its thread: never reuse it
        self._lose(self._make_error("killed"))
        if worker is not None and worker.liveness.why is not None:
            worker.kill()  # frozen: it cannot answer a kill request
        elif state in ("running", "stopping") and conn is not None and worker is not None:
            try:
                await asyncio.wait_for(conn.request(Kill(self.actor_id)), KILL_GRACE)
            except (TimeoutError, Exception):
                worker.kill()
        self._lose(self._make_error("killed"))
        if self._ended is not None and not self._ended.done():
            self._ended.set_result(self._make_error("killed"))
        elif self.task is not None and not self.task.done():
            self.task.cancel()
        return await asyncio.shield(self.died)

    def kill_nowait(self) -> None:
        if not self.died.done():
            self.loop.create_task(self.kill())

    async def wait_stopped(self) -> ActorDiedError:
        if asyncio.get_running_loop() is not self.loop:
            return await self.runtime.call_on_loop(self.wait_stopped())
        return await asyncio.shield(self.died)

    async def _end_children(self, kill: bool = False) -> None:
        self.runtime.children_ending(self)
        children = list(self.children)
        for child in children:
            child._end_reason = ("parent ended", None)
        if kill:
            await asyncio.gather(*(c.kill() for c in children), return_exceptions=True)
        else:
            await asyncio.gather(*(c.stop() for c in children), return_exceptions=True)

    def _release_worker(self) -> None:
        worker, self.worker = self.worker, None
        self.conn = None
        if worker is None:
            return
        worker.hosted = None
        if self._kill_requested:
            worker.kill()
        self.runtime.workers.started_pool().release(worker)

    def _finish(self, error: ActorDiedError) -> None:
        self.state = "dead"
        self._lose(error)
        self._fail_held(error)
        if self.parent is not None:
            self.parent.children.discard(self)
        self.runtime.forget(self)
        if not self.died.done():
            self.died.set_result(error)

