"""The supervisor every actor shares, whatever runs it, and where each failure goes.

:class:`Supervised` is the base of both kinds of actor: :class:`~actorrt._core._cell.ActorCell`
(an inline actor, or the actor inside a worker process, serving its mailbox on the loop) and
``actorrt._processes._process_actor.ProcessActor`` (the owner's side of a worker-process
actor, serving over the worker's connection). It owns the lifecycle (the states of
:mod:`actorrt._core._lifecycle`, changed only by :meth:`Supervised._to`), the restart policy,
stop, kill, the end of children and the death error. A kind supplies how one incarnation is
started and served:

=========================  ===========================================================
``_incarnate()``           start an incarnation (constructor, ``on_start``); a failure
                           raises :class:`~actorrt._core._lifecycle.Crash`
``_serve()``               serve it until it ends; ``None`` when it took its stop, else
                           the error it ended with; a crash raises ``Crash``
``_wind_down()``           after a stop, once the children ended: ``on_stop``; its error
``_fail_queued(error)``    at a crash: fail the messages the incarnation had queued
``_drop_incarnation(e)``   at a crash, once the children ended: clean the incarnation up
``_close(error)``          at the end: fail what still waits, release what it held
``_begin_stop()``          a stop was asked for: let it reach the incarnation
``_begin_kill()``          a kill was asked for: cut the incarnation short
=========================  ===========================================================

Where each failure goes is decided here, and only here:

=====================================  ==================================================
what failed                            where it goes
=====================================  ==================================================
a method called by an ask              the caller (the handle raises it); the actor goes on
a method called by a tell              logged on ``actorrt``; the actor crashes
the constructor or ``on_start``        at the first start: ``spawn`` raises it; at a
                                       restart: the actor crashes again
``on_stop``                            logged; the actor still ends, with it as ``cause``
a crash (a worker-process actor: also  the supervisor: restart after a backoff (50 ms,
its process dying)                     doubling, at most 5 s; the grant is kept) while
                                       ``max_restarts`` allows and no stop was asked for,
                                       else the actor dies
asks queued at a crash, stop or kill   fail with ``ActorDiedError`` (pending asks to a
                                       process that died: saying how it died)
calls after the actor has ended        ask: the handle raises ``ActorDiedError``;
                                       tell: raises ``ActorDiedError`` at the call
=====================================  ==================================================

A crash ends the incarnation's children (they are killed) and runs ``on_stop`` best-effort; a
stop stops them before ``on_stop``; a kill kills them. The next incarnation starts with a fresh
instance and no children. Messages sent while a restart backs off wait for the new incarnation.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
from collections.abc import Awaitable, Callable, Coroutine
from typing import TYPE_CHECKING, Any

from .._errors import ActorDiedError, DeathReason, RuntimeClosedError
from ._context import current_cell
from ._lifecycle import (
    ACCEPTING,
    ENDS_ACTOR,
    PARKED,
    ActorServices,
    Backoff,
    Crash,
    Parked,
    ProcessExit,
    State,
    check_transition,
    death_text,
)

if TYPE_CHECKING:
    from ._options import ActorOptions

logger = logging.getLogger("actorrt")

STOPPED, KILLED, CRASHED = DeathReason.STOPPED, DeathReason.KILLED, DeathReason.CRASHED
_NO_CHILDREN: frozenset[Any] = frozenset()


class Supervised:
    """One actor's lifecycle and supervision; the base of every kind of actor.

    ``state`` is changed only by :meth:`_to`, which keeps two plain attributes in step with
    it for the hot paths (a check per message is an attribute read): ``accepting`` (new
    messages are taken) and ``running`` (an incarnation serves now; a process actor also
    opens it for the moment it sends what it held while starting).
    """

    # Set by the kind before _init_supervision.
    runtime: ActorServices
    loop: asyncio.AbstractEventLoop
    actor_id: str
    cls_name: str
    name: str | None
    # A failure a callback-served turn met that ends the incarnation (``_take_turn``), for
    # the serving task it hands over to.
    _crash_first: Crash | None = None

    def _init_supervision(self, parent: Supervised | None, options: ActorOptions) -> None:
        self.parent = parent
        self.max_restarts = options.max_restarts
        self.restart_count = 0
        self._options = options  # shared with the actor's class; the backoff's delays
        self.backoff: Backoff | None = None  # made at the first restart
        self._running_since: float | None = None  # when the incarnation began to serve
        # Its live children; the shared empty set until it has one (see adopt).
        self.children: set[Supervised] | frozenset[Supervised] = _NO_CHILDREN
        self.state = State.STARTING
        self.accepting = True
        self.running = False
        self.ending: DeathReason | None = None  # asked for: STOPPED, or KILLED
        self.imposed: DeathReason | None = None  # see ending_because()
        self.death: ActorDiedError | None = None
        self.died: asyncio.Future[ActorDiedError] = self.loop.create_future()
        # The task serving it now: None while an idle inline actor waits (see _resume).
        self.task: asyncio.Task[None] | None = None
        self._context: contextvars.Context | None = None  # every task of the actor runs in it
        self._resuming = False  # a task was made to serve again and has not begun yet
        # Set in worker processes, to tell the owner of each restart and of the end.
        self.on_restart: Callable[[Any], None] | None = None
        self.on_finish: Callable[[Any, ActorDiedError], None] | None = None

    def adopt(self, child: Supervised) -> None:
        """Count ``child`` among this actor's live children."""
        children = self.children
        if type(children) is frozenset:
            # Most actors have none: no set is made for them (one object fewer per idle
            # actor for the cyclic garbage collector to walk).
            self.children = children = set()
        children.add(child)  # type: ignore[union-attr]  # a set now

    def disown(self, child: Supervised) -> None:
        """``child`` has ended."""
        children = self.children
        if child in children:
            children.discard(child)  # type: ignore[union-attr]  # holds one: a set

    def describe(self) -> str:
        name = f" name={self.name!r}" if self.name else ""
        return f"{self.cls_name}(id={self.actor_id}{name})"

    # ------------------------------------------------------------ the states

    def _to(
        self,
        state: State,
        ending: DeathReason | None = None,
        death: ActorDiedError | None = None,
    ) -> None:
        """The one place the state changes: checked, with the end asked for (into
        STOPPING) or the death (into DEAD) recorded."""
        check_transition(self.describe, self.state, state, self.ending, ending)
        self.state = state
        self.accepting = state in ACCEPTING
        self.running = state is State.RUNNING
        if ending is not None:
            self.ending = ending
        if state is State.DEAD:
            assert death is not None, f"actor {self.describe()} died without a death error"
            self.death = death

    def ending_because(self, reason: DeathReason) -> None:
        """Record why the actor is being ended from outside (its parent ended, its placement
        group was removed, its runtime shuts down): its death reports this reason rather than
        the stop or kill that carries it out. A runtime shutting down does not hide a reason
        already given."""
        if reason is DeathReason.RUNTIME_SHUT_DOWN and self.imposed is not None:
            return
        self.imposed = reason

    def died_error(
        self,
        reason: DeathReason,
        cause: BaseException | None = None,
        *,
        restarting: bool = False,
        process: ProcessExit | None = None,
    ) -> ActorDiedError:
        """An ``ActorDiedError`` for this actor, in the words of :func:`death_text`."""
        actor = self.describe()
        text = death_text(
            actor, reason, cause, restarts=self.restart_count, max_restarts=self.max_restarts,
            restarting=restarting, process=process,
        )
        exitcode = process.code if process is not None and process.code >= 0 else None
        return ActorDiedError(
            text, actor=actor, reason=reason, cause=cause, exitcode=exitcode,
            signal=process.signal if process is not None else None,
        )

    def death_error(self) -> ActorDiedError:
        """What a call to this actor gets once it no longer takes messages."""
        if self.death is not None:
            return self.death
        return self.died_error(self.imposed or self.ending or STOPPED)

    # ------------------------------------------------------- stop, kill, wait

    def start(self, started: asyncio.Future[None]) -> None:
        self._context = contextvars.copy_context()
        self.task = self.loop.create_task(
            self._supervise(started), name=f"actorrt:{self.describe()}", context=self._context
        )
        self.task.add_done_callback(lambda task: self._never_ran(task, started))

    def _resume(self) -> None:
        """Serve again: an idle inline actor lets its task end (it parks, see ``PARKED``) and
        gets a new one, in the same context, when a message, a stop or a kill reaches it.
        An idle actor so holds no task, coroutines or futures for the cyclic garbage
        collector to walk."""
        self._resuming = True
        self.task = self.loop.create_task(
            self._supervise(None), name=f"actorrt:{self.describe()}", context=self._context
        )
        # In the actor's context, as the task runs: no copy of it made per resume.
        self.task.add_done_callback(self._resumed_never_ran, context=self._context)

    def _resumed_never_ran(self, task: asyncio.Task[None]) -> None:
        self._never_ran(task, None)

    def _never_ran(self, task: asyncio.Task[None], started: asyncio.Future[None] | None) -> None:
        """A task cancelled before its first step never runs its body: end the actor here."""
        if self.task is not task:
            return  # it parked: the actor lives on without it
        if self.state is not State.DEAD:
            error = self._final_error(self.died_error(KILLED))
            if started is not None and not started.done():
                started.set_exception(error)
                started.exception()
            self._finish(error)

    async def stop(self, grace: float | None = None) -> ActorDiedError:
        """Messages sent before run, later ones fail; then the children stop, then
        ``on_stop`` runs. Past ``grace`` seconds, the actor is killed."""
        if asyncio.get_running_loop() is not self.loop:
            return await self._on_loop(self.stop(grace))
        if self.accepting:
            self._to(State.STOPPING, STOPPED)
            self._begin_stop()
        if grace is None:
            return await asyncio.shield(self.died)
        try:
            return await asyncio.wait_for(asyncio.shield(self.died), grace)
        except TimeoutError:
            logger.warning(
                "%s did not stop within its grace of %g s: killing it", self.describe(), grace
            )
            return await self.kill()

    async def kill(self) -> ActorDiedError:
        """Cancel the current message, fail the queued ones, kill the children."""
        if asyncio.get_running_loop() is not self.loop:
            return await self._on_loop(self.kill())
        self.kill_nowait()
        return await asyncio.shield(self.died)

    def kill_nowait(self) -> None:
        if self.state is State.DEAD or self.ending is KILLED:
            return
        self._to(State.STOPPING, KILLED)
        self._begin_kill()

    async def wait_stopped(self) -> ActorDiedError:
        if asyncio.get_running_loop() is not self.loop:
            return await self._on_loop(self.wait_stopped())
        return await asyncio.shield(self.died)

    async def _on_loop(self, coro: Coroutine[Any, Any, ActorDiedError]) -> ActorDiedError:
        """Run a lifecycle call on the actor's loop, from another thread's loop."""
        if self.runtime.closed:
            coro.close()
            raise self._closed_error()
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro, self.loop))

    def _closed_error(self) -> RuntimeClosedError:
        return RuntimeClosedError(
            f"{self.describe()} belonged to a runtime that has shut down; "
            "refs do not outlive their runtime"
        )

    async def lost(self) -> ActorDiedError:
        """Why a pending ask's connection went away (for handles of proxies)."""
        return self.death_error()

    # ------------------------------------------------------------ supervision

    async def _supervise(self, started: asyncio.Future[None] | None) -> None:
        """Run incarnations until one ends for good, then end the actor; or return early
        when the incarnation parks (its serving went idle). ``started`` is ``None`` for a
        task that serves again an incarnation that parked (one coroutine for both, not a
        chain: each is one more object per busy actor for the cyclic garbage collector)."""
        outcome: ActorDiedError | None = None
        parked = False
        resumed = started is None
        try:
            if resumed:
                self._resuming = False
                if self.ending is KILLED:  # killed while idle, or before this task began
                    crash, self._crash_first = self._crash_first, None
                    if crash is not None:  # a turn's crash the kill overtook: still said
                        logger.error("%s crashed in %s, and was killed before that was handled",
                                     self.describe(), crash.where, exc_info=crash.cause)
                    outcome = self.died_error(KILLED)
                    return
            while True:
                try:
                    if resumed:
                        resumed = False
                    else:
                        await self._incarnate()
                        self._running_since = self.loop.time()
                        if self.state is State.STARTING or self.state is State.RESTARTING:
                            self._to(State.RUNNING)
                        if started is not None:
                            if not started.done():
                                started.set_result(None)
                            started = None  # done: a crash later is the supervisor's
                    served = await self._serve()
                    if served is PARKED:
                        parked = True
                        return
                    crashed = served is not None and served.reason is not STOPPED
                    await self._end_children(kill=crashed)
                    cause = await self._wind_down()
                    outcome = served or self.died_error(STOPPED, cause)
                    return
                except Crash as crash:
                    if started is not None and not started.done():  # spawn raises it
                        # ... unless it is an exit, which would end the spawner's program.
                        started.set_exception(
                            crash.error or self.died_error(CRASHED, crash.cause)
                            if isinstance(crash.cause, ENDS_ACTOR) else crash.cause
                        )
                        outcome = crash.error or self.died_error(CRASHED, crash.cause)
                        return
                    if not await self._after_crash(crash):
                        outcome = crash.error or self.died_error(CRASHED, crash.cause)
                        return
        except asyncio.CancelledError:
            # Our own kill cancelled us: that cancellation is consumed here. Any other
            # (the loop shutting down) is re-raised once the actor has ended.
            task = asyncio.current_task()
            ours = self.ending is KILLED and task is not None and task.uncancel() == 0
            if not ours:
                self.ending_because(DeathReason.RUNTIME_SHUT_DOWN)
            outcome = self.died_error(KILLED)
            if started is not None and not started.done():
                # A spawner still waiting learns why it was ended (its node lost, its group
                # removed, its parent ended), not merely that a kill carried it out.
                started.set_exception(self._final_error(outcome))
                started.exception()  # retrieved: a spawner that still waits gets it anyway
            if not ours:
                raise
        finally:
            if not parked:
                stopped = outcome is not None and outcome.reason is STOPPED
                try:
                    await self._end_children(kill=not stopped or self.ending is KILLED)
                    self._finish(self._final_error(outcome))
                finally:
                    # This task's context holds the actor as the current cell, and the
                    # actor holds this task: a cycle that would leave every ended actor (its
                    # cell, mailbox, task and death) to the cyclic garbage collector. Freed
                    # by reference counting instead, once nothing else refers to it.
                    current_cell.set(None)
                    self._context = None

    def _may_restart(self) -> bool:
        """Whether a crash now is followed by a new incarnation."""
        return self.state is not State.STOPPING and (
            self.max_restarts < 0 or self.restart_count < self.max_restarts
        )

    async def _after_crash(self, crash: Crash) -> bool:
        """Handle a crash; return whether to start a new incarnation."""
        logger.error("actor %s crashed in %s", self.describe(), crash.where, exc_info=crash.cause)
        restart = self._may_restart()
        error: ActorDiedError = crash.error or self.died_error(CRASHED, crash.cause)
        if restart and self.state is not State.RESTARTING:
            self._to(State.RESTARTING)
        if restart and crash.error is None:
            self._fail_queued(self.died_error(CRASHED, crash.cause, restarting=True))
        else:
            self._fail_queued(error)
        await self._end_children(kill=True)
        await self._drop_incarnation(error)
        if not restart:
            return False
        began, self._running_since = self._running_since, None
        if self.backoff is None:
            self.backoff = self._options.backoff()
        delay = self.backoff.next_delay(None if began is None else self.loop.time() - began)
        self.restart_count += 1
        self.runtime.children_may_start(self)
        if self.on_restart is not None:
            self.on_restart(self)
        logger.warning(
            "restarting %s in %.2f s (restart %d)", self.describe(), delay, self.restart_count
        )
        await asyncio.sleep(delay)
        return True

    async def _end_children(self, kill: bool) -> None:
        self.runtime.children_ending(self)
        children = list(self.children)
        if not children:
            return
        for child in children:
            child.ending_because(DeathReason.PARENT_ENDED)
        if kill:
            for child in children:
                child.kill_nowait()
            await asyncio.gather(*(asyncio.shield(c.died) for c in children))
        else:
            await asyncio.gather(*(c.stop() for c in children), return_exceptions=True)

    def _final_error(self, outcome: ActorDiedError | None) -> ActorDiedError:
        if self.imposed is not None:
            return self.died_error(self.imposed)
        if self.ending is KILLED or outcome is None:
            return self.died_error(self.ending or STOPPED)
        return outcome

    def _finish(self, error: ActorDiedError) -> None:
        self._to(State.DEAD, death=error)
        self._close(error)
        if self.parent is not None:
            self.parent.disown(self)
        self.runtime.forget(self)
        if not self.died.done():
            self.died.set_result(error)
        if self.on_finish is not None:
            self.on_finish(self, error)

    # ------------------------------------------------------ what a kind supplies

    async def _incarnate(self) -> None:
        raise NotImplementedError

    def _serve(self) -> Awaitable[ActorDiedError | Parked | None]:
        """What the incarnation's serving awaits: ``None`` once it took its stop,
        ``PARKED`` once it went idle and let its task end (see ``_resume``) (a plain
        method returning the awaitable, so a kind may hand over its own serving coroutine
        without one more suspended frame per idle actor)."""
        raise NotImplementedError

    async def _wind_down(self) -> BaseException | None:
        return None

    def _fail_queued(self, error: ActorDiedError) -> None:
        return None

    async def _drop_incarnation(self, error: ActorDiedError) -> None:
        return None

    def _close(self, error: ActorDiedError) -> None:
        return None

    def _begin_stop(self) -> None:
        raise NotImplementedError

    def _begin_kill(self) -> None:
        raise NotImplementedError
