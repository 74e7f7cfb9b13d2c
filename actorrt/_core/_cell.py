"""An actor that runs in this process: its mailbox, served on the event loop.

An ``ActorCell`` is an inline actor, or the actor a worker process hosts for its owner. Its
lifecycle (states, restarts, stop, kill, children, death errors) is the one every actor shares,
:class:`~actorrt._core._supervision.Supervised`, whose docstring says where each failure goes;
this module supplies what is particular to serving a mailbox here: taking messages, constructing
each incarnation, running its hooks, and the serving loops of
:mod:`actorrt._core._serving`. Messages sent while a restart is backing off wait in the
mailbox for the new incarnation.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import time
from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any

from .._errors import ActorDiedError, DeathReason, MailboxFullError
from ._context import current_cell
from ._handle import AskHandle, ThreadWait
from ._lifecycle import ActorServices, Crash, Parked
from ._mailbox import STOP, Envelope, Mailbox
from ._serving import MailboxServing, MethodTable, settle
from ._supervision import Supervised

if TYPE_CHECKING:
    from ._actor import ActorClass

logger = logging.getLogger("actorrt")
KILLED = DeathReason.KILLED

try:
    from asyncio import _get_running_loop as _running_loop
except ImportError:  # pragma: no cover - CPython always has it
    from asyncio.events import _get_running_loop as _running_loop


class ActorCell(Supervised, MailboxServing):
    """Everything the runtime knows about one actor that runs in this process.

    Refs point here for actors of this process; for actors elsewhere they point to a
    proxy with the same sending and lifecycle methods (``actorrt._processes._proxies``).
    """

    # Refs take their fast path only for inline cells (proxies route every call themselves).
    inline = True
    parent: ActorCell | None  # a cell's parent runs in its process: a cell too

    def __init__(
        self,
        runtime: ActorServices,
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
        self.actor_id = actor_id
        self.name = options.name
        self.max_concurrency = options.max_concurrency
        self.mailbox = Mailbox(options.mailbox_size)
        self.instance: Any = None
        self._orphans: list[Any] | None = None
        self.executor = None
        self.requested_end = False  # the owning runtime asked for the stop or kill
        # (assigned resources, PlacementInfo | None), from the grant (or sent by the owner).
        self.grant_info: tuple[dict[str, float], Any] | None = None
        self._init_supervision(parent, options)

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

    def withdraw(self, answer: asyncio.Future[Any] | concurrent.futures.Future[Any]) -> None:
        """Nothing to tell: the envelope carries ``answer`` itself, and the serving loop
        drops an envelope whose answer is cancelled before it begins."""

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

    # ------------------------------------------------- what the supervisor calls

    async def _incarnate(self) -> None:
        """Construct a fresh instance and run its ``on_start``."""
        current_cell.set(self)  # for the constructor, on_start and every message after
        try:
            if self.executor is None:
                self.instance = self.actor_class.cls(*self.args, **self.kwargs)
            else:
                self.instance = await self._off_loop(
                    self.actor_class.cls, *self.args, **self.kwargs
                )
        except asyncio.CancelledError:
            raise  # killed while constructing
        except BaseException as exc:  # a constructor's exit (SystemExit) ends the actor too
            raise Crash(exc, "its constructor") from exc
        try:
            await self._call_hook("on_start", propagate=True)
        except asyncio.CancelledError:
            raise
        except BaseException as exc:
            raise Crash(exc, "on_start") from exc

    def _serve(self) -> Awaitable[Parked | None]:
        # The serving coroutine itself, awaited by the supervisor: it returns once the actor
        # took its stop (None). No coroutine of its own, as in _serve_mailbox.
        return self._serve_mailbox(self.instance)

    async def _wind_down(self) -> BaseException | None:
        return await self._call_hook("on_stop")

    def _fail_queued(self, error: ActorDiedError) -> None:
        for envelope in self.mailbox.drain(error):
            settle(envelope[3], None, error)
        for reply in self._orphans or ():  # messages the crash, stop or kill cut short
            settle(reply, None, error)
        self._orphans = None

    async def _drop_incarnation(self, error: ActorDiedError) -> None:
        await self._call_hook("on_stop")  # best-effort after a crash
        self.instance = None

    def _close(self, error: ActorDiedError) -> None:
        self._fail_queued(error)
        self.instance = None

    def _begin_stop(self) -> None:
        self.mailbox.put_waiting((STOP, (), {}, None), None)

    def _begin_kill(self) -> None:
        task = self.task
        if task is None:
            if self.mailbox.idle is not None:
                self.mailbox.resume()  # its new task sees the kill before serving
        elif not self._resuming:  # a task cancelled before it began would never end the actor
            task.cancel()

    def _resume(self) -> None:
        """Serve again, after parking: sync methods one at a time run in a loop callback
        first (``_take_turn``); a task is made only for what needs one."""
        if self.max_concurrency == 1 and self.executor is None and self.ending is not KILLED:
            self.runtime.turns.add(self)
            return
        super()._resume()

    def _serve_in_task(self) -> None:
        super()._resume()

    def _turn_again(self) -> None:
        self.runtime.turns.add(self)

    def _park(self) -> None:
        """The incarnation is idle: its task ends; the next message, stop or kill resumes it
        (``Supervised._resume``)."""
        self.task = None
        self.mailbox.idle = self

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
        except asyncio.CancelledError:
            raise
        except BaseException as exc:
            if propagate:
                raise
            logger.error("%s.%s raised", self.describe(), name, exc_info=exc)
            return exc
        return None
