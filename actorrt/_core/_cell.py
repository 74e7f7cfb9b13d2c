"""The running state of one actor: its mailbox, its incarnations, its children.

Where each failure goes is decided here, and only here:

=====================================  ==================================================
what failed                            where it goes
=====================================  ==================================================
a method called by an ask              the caller (the handle raises it); the actor goes on
a method called by a tell              logged on ``actorrt``; the actor crashes
the constructor or ``on_start``        at the first start: ``spawn`` raises it; at a
                                       restart: the actor crashes again
``on_stop``                            logged; the actor still ends, with it as ``cause``
a crash                                the supervisor: restart after a backoff while
                                       ``max_restarts`` allows, else the actor dies
asks queued at a crash, stop or kill   fail with ``ActorDiedError``
calls after the actor has ended        ask: the handle raises ``ActorDiedError``;
                                       tell: raises ``ActorDiedError`` at the call
=====================================  ==================================================

A crash ends the incarnation's children (they are killed) and runs ``on_stop`` best-effort;
the next incarnation starts with a fresh instance and an empty child list. Messages sent
while a restart is backing off wait in the mailbox for the new incarnation.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import logging
import time
from asyncio import get_running_loop
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from .._errors import ActorDiedError, MailboxFullError, RuntimeClosedError
from ._context import current_cell
from ._handle import AskHandle, ThreadWait
from ._mailbox import STOP, Envelope, Mailbox
from ._threads import ActorThread, ThreadPoolRunner

if TYPE_CHECKING:
    from .._runtime import Runtime
    from ._actor import ActorClass

logger = logging.getLogger("actorrt")

try:
    from asyncio import _get_running_loop as _running_loop
except ImportError:  # pragma: no cover - CPython always has it
    from asyncio.events import _get_running_loop as _running_loop

RESTART_BACKOFF_INITIAL = 0.05
RESTART_BACKOFF_MAX = 5.0

MethodTable = dict[str, tuple[Callable[..., Any], bool]]


class _Crash(Exception):
    """An incarnation ended by an error; carries it to the supervisor loop."""

    def __init__(self, cause: BaseException, where: str) -> None:
        super().__init__(where)
        self.cause = cause
        self.where = where


async def stop_within(target: Any, grace: float | None) -> ActorDiedError:
    """Wait for ``target``'s requested stop; past ``grace`` seconds, kill it."""
    if grace is None:
        return await asyncio.shield(target.died)
    try:
        return await asyncio.wait_for(asyncio.shield(target.died), grace)
    except TimeoutError:
        logger.warning(
            "%s did not stop within its grace of %g s: killing it", target.describe(), grace
        )
        result: ActorDiedError = await target.kill()
        return result


class ActorCell:
    """Everything the runtime knows about one actor that runs in this process.

    Refs point here for actors of this process; for actors elsewhere they point to a
    proxy with the same sending and lifecycle methods (``actorrt._placement._proxies``).
    """

    # Refs take their fast path only for inline cells (proxies route every call themselves).
    inline = True

    def __init__(
        self,
        runtime: Runtime,
        actor_class: ActorClass[Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        parent: ActorCell | None,
        actor_id: str,
    ) -> None:
        options = actor_class.actor_options
        self.runtime = runtime
        self.loop = runtime.loop
        self.actor_class = actor_class
        self.cls_name = actor_class.cls.__name__
        self.methods: MethodTable = actor_class.method_table
        self.args = args
        self.kwargs = kwargs
        self.parent = parent
        self.actor_id = actor_id
        self.name = options.name
        self.max_restarts = options.max_restarts
        self.max_concurrency = options.max_concurrency
        self.mailbox = Mailbox(options.mailbox_size)
        self.children: set[ActorCell] = set()
        self.restart_count = 0
        self.accepting = True
        self.instance: Any = None
        self.task: asyncio.Task[None] | None = None
        self.died: asyncio.Future[ActorDiedError] = self.loop.create_future()
        self._death: ActorDiedError | None = None
        self._stop_requested = False
        self._kill_requested = False
        self._end_reason: tuple[str, BaseException | None] | None = None
        # Replies of messages that were running when the actor was cancelled.
        self._orphans: list[Any] = []
        # Set in worker processes: sync code runs on these threads, off the event loop.
        self.executor: ActorThread | ThreadPoolRunner | None = None
        self.on_finish: Callable[[ActorCell, ActorDiedError], None] | None = None
        self.on_restart: Callable[[ActorCell], None] | None = None
        self.requested_end = False  # the owning runtime asked for the stop or kill
        # (assigned resources, PlacementInfo | None), from the grant (or sent by the owner).
        self.grant_info: tuple[dict[str, float], Any] | None = None

    def describe(self) -> str:
        name = f" name={self.name!r}" if self.name else ""
        return f"{self.cls_name}(id={self.actor_id}{name})"

    # ----------------------------------------------------------------- sending

    def ask(
        self, method: str, args: tuple[Any, ...], kwargs: dict[str, Any], timeout: float | None
    ) -> AskHandle[Any]:
        loop = self.loop
        deadline = None if timeout is None else time.monotonic() + timeout
        if _running_loop() is not loop:
            return self._ask_from_thread(method, args, kwargs, deadline)
        fut = loop.create_future()
        if self.accepting:
            mailbox = self.mailbox
            envelope = (method, args, kwargs, fut)
            if mailbox.has_room():
                mailbox.put(envelope)
            else:
                mailbox.put_waiting(envelope, None)
        else:
            self._check_runtime()
            fut.set_exception(self.death_error())
        return AskHandle(fut, self, method, deadline)

    def _ask_from_thread(
        self, method: str, args: tuple[Any, ...], kwargs: dict[str, Any], deadline: float | None
    ) -> AskHandle[Any]:
        self._check_runtime()
        cf: concurrent.futures.Future[Any] = concurrent.futures.Future()
        try:
            self.loop.call_soon_threadsafe(self._deliver, (method, args, kwargs, cf))
        except RuntimeError as exc:  # the loop closed under us
            raise self._closed_error() from exc
        return AskHandle(cf, self, method, deadline)

    def _deliver(self, envelope: Envelope) -> None:
        if self.accepting:
            self.mailbox.put_waiting(envelope, None)
        else:
            settle(envelope[3], None, self.death_error())

    def tell(self, method: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        envelope: Envelope = (method, args, kwargs, None)
        if _running_loop() is self.loop:
            self._tell_now(envelope)
            return
        self._check_runtime()

        async def on_loop() -> None:
            self._tell_now(envelope)

        # From another thread: wait for the loop to take it, so errors raise at the call.
        asyncio.run_coroutine_threadsafe(on_loop(), self.loop).result()

    def _tell_now(self, envelope: Envelope) -> None:
        if not self.accepting:
            self._check_runtime()
            raise self.death_error()
        mailbox = self.mailbox
        if not mailbox.has_room():
            raise MailboxFullError(
                f"the mailbox of {self.describe()} is full ({mailbox.size} messages); "
                f"use `await ref.{envelope[0]}.tell_wait(...)` to wait for room, "
                "or spawn it with a larger mailbox_size"
            )
        mailbox.put(envelope)

    def tell_wait(
        self, method: str, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Awaitable[None]:
        if _running_loop() is not self.loop:
            self._check_runtime()

            async def on_loop() -> None:
                await self.tell_wait(method, args, kwargs)

            # Handed to the loop now (in call order); the returned handle waits for room.
            return ThreadWait(asyncio.run_coroutine_threadsafe(on_loop(), self.loop))
        admitted: asyncio.Future[None] = self.loop.create_future()
        if not self.accepting:
            self._check_runtime()
            admitted.set_exception(self.death_error())
        else:
            self.mailbox.put_waiting((method, args, kwargs, None), admitted)
        return admitted

    def _check_runtime(self) -> None:
        if self.runtime.closed:
            raise self._closed_error()

    def _closed_error(self) -> RuntimeClosedError:
        return RuntimeClosedError(
            f"{self.describe()} belonged to a runtime that has shut down; "
            "refs do not outlive their runtime"
        )

    # --------------------------------------------------------------- lifecycle

    def start(self, started: asyncio.Future[None]) -> None:
        self.task = self.loop.create_task(
            self._supervise(started), name=f"actorrt:{self.describe()}"
        )

    async def stop(self, grace: float | None = None) -> ActorDiedError:
        if get_running_loop() is not self.loop:
            return await self._on_loop(self.stop(grace))
        if self.accepting:
            self.accepting = False
            self._stop_requested = True
            self.mailbox.put_waiting((STOP, (), {}, None), None)
        return await stop_within(self, grace)

    async def kill(self) -> ActorDiedError:
        if get_running_loop() is not self.loop:
            return await self._on_loop(self.kill())
        self.kill_nowait()
        return await asyncio.shield(self.died)

    def kill_nowait(self) -> None:
        if self.died.done() or self._kill_requested:
            return
        self.accepting = False
        self._kill_requested = True
        if self.task is not None:
            self.task.cancel()

    async def wait_stopped(self) -> ActorDiedError:
        if get_running_loop() is not self.loop:
            return await self._on_loop(self.wait_stopped())
        return await asyncio.shield(self.died)

    async def _on_loop(self, coro: Any) -> ActorDiedError:
        self._check_runtime()
        result: ActorDiedError = await asyncio.wrap_future(
            asyncio.run_coroutine_threadsafe(coro, self.loop)
        )
        return result

    async def lost(self) -> ActorDiedError:
        """(For handles of proxies; an inline actor's answers never travel a connection.)"""
        return self.death_error()

    def death_error(self) -> ActorDiedError:
        if self._death is not None:
            return self._death
        if self._stop_requested:
            return self._make_error("stopped", None)
        if self._kill_requested:
            return self._make_error("killed", None)
        return self._make_error("stopped", None)

    def _make_error(self, reason: str, cause: BaseException | None) -> ActorDiedError:
        text = {
            "stopped": "was stopped",
            "killed": "was killed",
            "parent ended": "ended because its parent ended",
            "runtime shut down": "ended because its runtime shut down",
            "placement group removed": "ended because its placement group was removed",
        }.get(reason, reason)
        if reason == "crashed" and cause is not None:
            limit = "unlimited" if self.max_restarts < 0 else str(self.max_restarts)
            text = (
                f"crashed with {type(cause).__name__}: {cause} "
                f"(after {self.restart_count} restart(s), max_restarts={limit})"
            )
        elif cause is not None:
            text += f" (its on_stop raised {type(cause).__name__}: {cause})"
        return ActorDiedError(
            f"actor {self.describe()} {text}",
            actor=self.describe(),
            reason=reason,
            cause=cause,
        )

    # -------------------------------------------------------------- supervision

    async def _supervise(self, started: asyncio.Future[None]) -> None:
        current_cell.set(self)
        reason: str = "stopped"
        cause: BaseException | None = None
        try:
            while True:
                try:
                    cause = await self._incarnation(started)
                    reason = "stopped"
                    break
                except _Crash as crash:
                    reason, cause = "crashed", crash.cause
                    if not started.done():
                        started.set_exception(crash.cause)
                        break
                    if not await self._after_crash(crash):
                        break
        except asyncio.CancelledError:
            # Our own kill_nowait() cancelled us: that cancellation is consumed here. Any
            # other cancellation (the loop shutting down) is re-raised after the cleanup.
            task = asyncio.current_task()
            ours = self._kill_requested and task is not None and task.uncancel() == 0
            reason, cause = "killed", None
            if not started.done():
                started.set_exception(self._make_error(reason, None))
                started.exception()  # retrieved: a spawner that still waits gets it anyway
            await self._end_children(kill=True)
            if not ours:
                raise
        finally:
            if self._end_reason is not None:
                reason, cause = self._end_reason
            self._finish(self._make_error(reason, cause))

    async def _after_crash(self, crash: _Crash) -> bool:
        """Handle a crash; return whether to start a new incarnation."""
        logger.error(
            "actor %s crashed in %s", self.describe(), crash.where, exc_info=crash.cause
        )
        can_restart = not self._stop_requested and (
            self.max_restarts < 0 or self.restart_count < self.max_restarts
        )
        error = self._make_error("crashed", crash.cause)
        if can_restart:
            error = ActorDiedError(
                f"{error}; the message was queued at the crash and is dropped, the actor "
                "restarts and takes new messages",
                actor=error.actor,
                reason="crashed",
                cause=crash.cause,
            )
        for envelope in self.mailbox.drain(error):
            settle(envelope[3], None, error)
        for reply in self._orphans:  # messages the crash cut short
            settle(reply, None, error)
        self._orphans.clear()
        await self._end_children(kill=True)
        await self._call_hook("on_stop")
        self.instance = None
        if not can_restart:
            return False
        delay = min(RESTART_BACKOFF_INITIAL * 2**self.restart_count, RESTART_BACKOFF_MAX)
        self.restart_count += 1
        self.runtime.children_may_start(self)
        if self.on_restart is not None:
            self.on_restart(self)
        logger.warning(
            "restarting %s in %.2f s (restart %d)", self.describe(), delay, self.restart_count
        )
        await asyncio.sleep(delay)
        return True

    async def _incarnation(self, started: asyncio.Future[None]) -> BaseException | None:
        """Run one instance from constructor to stop; return on_stop's error, if any."""
        try:
            if self.executor is None:
                self.instance = self.actor_class.cls(*self.args, **self.kwargs)
            else:
                self.instance = await self._off_loop(
                    self.actor_class.cls, *self.args, **self.kwargs
                )
        except Exception as exc:
            raise _Crash(exc, "its constructor") from exc
        try:
            await self._call_hook("on_start", propagate=True)
        except Exception as exc:
            raise _Crash(exc, "on_start") from exc
        if not started.done():
            started.set_result(None)
        if self.max_concurrency == 1 and self.executor is not None:
            await self._serve_in_batches(self.instance)
        elif self.max_concurrency == 1:
            await self._serve_one_at_a_time(self.instance)
        else:
            await self._serve_concurrently(self.instance)
        await self._end_children(kill=False)
        return await self._call_hook("on_stop")

    async def _call_hook(self, name: str, propagate: bool = False) -> BaseException | None:
        hook = getattr(self.instance, name, None)
        if hook is None:
            return None
        try:
            if asyncio.iscoroutinefunction(hook):
                await hook()
            elif self.executor is None:
                hook()
            else:
                await self._off_loop(hook)
        except Exception as exc:
            if propagate:
                raise
            logger.error("%s.%s raised", self.describe(), name, exc_info=exc)
            return exc
        return None

    async def _off_loop(self, func: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Run sync user code on the actor's own thread, so it may block."""
        assert self.executor is not None
        return await self.executor.run(functools.partial(func, *args, **kwargs))

    async def _end_children(self, kill: bool) -> None:
        self.runtime.children_ending(self)
        children = list(self.children)
        if not children:
            return
        for child in children:
            child._end_reason = ("parent ended", None)
        if kill:
            for child in children:
                child.kill_nowait()
            await asyncio.gather(*(asyncio.shield(c.died) for c in children))
        else:
            await asyncio.gather(*(c.stop() for c in children))

    def _finish(self, error: ActorDiedError) -> None:
        self.accepting = False
        self._death = error
        for envelope in self.mailbox.drain(error):
            settle(envelope[3], None, error)
        for reply in self._orphans:
            settle(reply, None, error)
        self._orphans.clear()
        if self.parent is not None:
            self.parent.children.discard(self)
        self.runtime.forget(self)
        self.instance = None
        if not self.died.done():
            self.died.set_result(error)
        if self.on_finish is not None:
            self.on_finish(self, error)

    # ----------------------------------------------------------------- serving

    async def _serve_one_at_a_time(self, instance: Any) -> None:
        """Serve an inline actor: sync methods on the loop (worker-process actors batch)."""
        mailbox = self.mailbox
        queue = mailbox.queue
        methods = self.methods
        while True:
            if not queue:
                await mailbox.wait()
                continue
            name, args, kwargs, reply = queue.popleft()
            if mailbox.overflow:
                mailbox.admit_one()
            if name is STOP:
                return
            try:
                func, is_async = methods[name]
                result = func(instance, *args, **kwargs)
                if is_async:
                    result = await result
            except asyncio.CancelledError as exc:
                if _being_cancelled():
                    self._orphans.append(reply)  # answered with the death error at the end
                    raise
                self._failed(reply, name, exc)
            except Exception as exc:
                self._failed(reply, name, exc)
            else:
                if reply is not None and not reply.done():
                    reply.set_result(result)

    async def _serve_in_batches(self, instance: Any) -> None:
        """Serve with sync methods on the actor's thread, a run of queued ones per trip.

        Handing each message to the thread and back costs more than most methods; handing
        over every sync message that is queued at once keeps pipelined calls cheap. Order
        is kept: an async method or a stop ends the run.
        """
        mailbox = self.mailbox
        queue = mailbox.queue
        methods = self.methods
        while True:
            if not queue:
                await mailbox.wait()
                continue
            batch = self._take_sync_run(queue, mailbox, methods)
            if batch:
                await self._run_batch(instance, batch)
                continue
            name, args, kwargs, reply = queue.popleft()
            if mailbox.overflow:
                mailbox.admit_one()
            if name is STOP:
                return
            try:
                func, _is_async = methods[name]
                result = await func(instance, *args, **kwargs)
            except asyncio.CancelledError as exc:
                if _being_cancelled():
                    self._orphans.append(reply)
                    raise
                self._failed(reply, name, exc)
            except Exception as exc:
                self._failed(reply, name, exc)
            else:
                settle(reply, result, None)

    @staticmethod
    def _take_sync_run(queue: Any, mailbox: Mailbox, methods: MethodTable) -> list[Envelope]:
        batch: list[Envelope] = []
        while queue and len(batch) < BATCH_LIMIT:
            entry = methods.get(queue[0][0])
            if entry is None or entry[1]:
                break  # a stop, or an async method: it runs on the loop, after this run
            batch.append(queue.popleft())
            if mailbox.overflow:
                mailbox.admit_one()
        return batch

    async def _run_batch(self, instance: Any, batch: list[Envelope]) -> None:
        methods = self.methods
        try:
            assert self.executor is not None
            outcomes = await self.executor.run(_run_sync_batch, instance, methods, batch)
        except asyncio.CancelledError:
            self._orphans.extend(envelope[3] for envelope in batch)
            raise
        for (name, _args, _kwargs, reply), (ok, value) in zip(batch, outcomes, strict=False):
            if ok:
                settle(reply, value, None)
            elif reply is not None:
                settle(reply, None, value)
            else:
                # A failing tell crashes the actor; what it had not reached yet was queued
                # at the crash: put it back for the crash handling to fail.
                self.mailbox.queue.extendleft(reversed(batch[len(outcomes) :]))
                raise _Crash(value, f"{name}() (called by tell)")

    def _failed(self, reply: Any, method: str, exc: BaseException) -> None:
        exc = _as_error(exc, method)
        if reply is None:
            raise _Crash(exc, f"{method}() (called by tell)")
        settle(reply, None, exc)

    async def _serve_concurrently(self, instance: Any) -> None:
        mailbox = self.mailbox
        slots = asyncio.Semaphore(self.max_concurrency)
        running: dict[asyncio.Task[None], Envelope] = {}
        crashed: asyncio.Future[_Crash] = self.loop.create_future()
        try:
            while not crashed.done():
                envelope = mailbox.take()
                if envelope is None:
                    await _first(mailbox.wait(), crashed)
                    continue
                if envelope[0] is STOP:
                    break
                try:
                    await _first(slots.acquire(), crashed)
                except asyncio.CancelledError:
                    mailbox.queue.appendleft(envelope)  # killed waiting: the end fails it
                    raise
                if crashed.done():
                    mailbox.queue.appendleft(envelope)  # taken, never started: still queued
                    break
                task = self.loop.create_task(self._one(instance, envelope, slots, crashed))
                running[task] = envelope
                task.add_done_callback(lambda t: running.pop(t, None))
            if running and not crashed.done():
                await asyncio.wait(list(running))
        finally:
            left = dict(running)
            for task in left:
                task.cancel()
            if left:
                await asyncio.wait(list(left))
            # Messages cut short (or never started) get the actor's death or crash error.
            self._orphans.extend(envelope[3] for envelope in left.values())
        if crashed.done():
            raise crashed.result()

    async def _one(
        self,
        instance: Any,
        envelope: Envelope,
        slots: asyncio.Semaphore,
        crashed: asyncio.Future[_Crash],
    ) -> None:
        try:
            name, args, kwargs, _reply = envelope
            func, is_async = self.methods[name]
            if is_async:
                result = await func(instance, *args, **kwargs)
            elif self.executor is None:
                result = func(instance, *args, **kwargs)
            else:
                result = await self._off_loop(func, instance, *args, **kwargs)
        except asyncio.CancelledError as exc:
            if _being_cancelled():
                self._orphans.append(envelope[3])  # answered with the death error at the end
                raise
            self._failed_concurrent(envelope, exc, crashed)
        except Exception as exc:
            self._failed_concurrent(envelope, exc, crashed)
        else:
            settle(envelope[3], result, None)
        finally:
            slots.release()

    def _failed_concurrent(
        self, envelope: Envelope, exc: BaseException, crashed: asyncio.Future[_Crash]
    ) -> None:
        exc = _as_error(exc, envelope[0])
        if envelope[3] is None:
            if not crashed.done():
                crashed.set_result(_Crash(exc, f"{envelope[0]}() (called by tell)"))
        else:
            settle(envelope[3], None, exc)


BATCH_LIMIT = 512  # sync messages handed to an actor's thread in one trip


def _run_sync_batch(
    instance: Any, methods: MethodTable, batch: list[Envelope]
) -> list[tuple[bool, Any]]:
    """On the actor's thread: run each message; stop after a failing tell (a crash)."""
    outcomes: list[tuple[bool, Any]] = []
    for name, args, kwargs, reply in batch:
        try:
            outcomes.append((True, methods[name][0](instance, *args, **kwargs)))
        except Exception as exc:
            outcomes.append((False, exc))
            if reply is None:
                break
    return outcomes


def settle(reply: Any, result: Any, error: BaseException | None) -> None:
    """Deliver an answer to an asyncio or concurrent future that may be gone or done."""
    if reply is None or reply.done():
        return
    if error is None:
        reply.set_result(result)
    else:
        reply.set_exception(error)


def _as_error(exc: BaseException, method: str) -> BaseException:
    """A method that raised ``CancelledError`` itself (the actor was not cancelled) failed:
    its caller must not take that for a cancellation of its own wait."""
    if isinstance(exc, asyncio.CancelledError):
        error = RuntimeError(f"{method}() raised CancelledError (the actor was not cancelled)")
        error.__cause__ = exc
        return error
    return exc


def _being_cancelled() -> bool:
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


async def _first(aw: Any, crashed: asyncio.Future[Any]) -> None:
    """Await ``aw`` unless ``crashed`` resolves first."""
    if crashed.done():
        return
    task = asyncio.ensure_future(aw)
    try:
        await asyncio.wait({task, crashed}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        if not task.done():
            task.cancel()
            try:
                await task
            except asyncio.CancelledError:
                if _being_cancelled():
                    raise
