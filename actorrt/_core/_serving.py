"""How an actor's incarnation serves its mailbox: the hot loops.

One loop per shape: one message at a time on the loop (inline actors), one at a time with sync
methods handed to the actor's thread in runs (actors in worker processes), and up to
``max_concurrency`` messages as concurrent tasks. None of them checks the lifecycle per
message: a stop arrives as the ``STOP`` envelope, a kill as the cancellation of the task.
A failing tell raises :class:`~actorrt._core._lifecycle.Crash` for the supervisor.
An ask whose reply is cancelled by the time the actor reaches it (its caller timed out, was
cancelled or called ``handle.cancel()``) is dropped unrun; one that has begun runs to its end.

A reply (the fourth item of an envelope) has the part of the future interface that
:func:`settle` uses; it may also have ``settle_run(batch, outcomes) -> bool``, which answers
every envelope of a run handed to the actor's thread at once (the replies of a connection
leave as one frame) and returns ``False`` when it cannot (then each is settled alone).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import functools
import types
from collections.abc import Callable, Coroutine
from typing import Any

from .._errors import DeathReason
from ._lifecycle import ENDS_ACTOR, PARKED, Crash, Parked, State
from ._mailbox import STOP, Envelope, Mailbox
from ._threads import ActorThread, ThreadPoolRunner

MethodTable = dict[str, tuple[Callable[..., Any], bool]]
_KILLED, _DEAD = DeathReason.KILLED, State.DEAD


class MailboxServing:
    """The serving loops of an actor cell (a mixin of ``ActorCell``)."""

    loop: asyncio.AbstractEventLoop
    mailbox: Mailbox
    methods: MethodTable
    instance: Any
    state: State
    ending: DeathReason | None
    max_concurrency: int
    # Set in worker processes: sync code runs on these threads, off the event loop.
    executor: ActorThread | ThreadPoolRunner | None
    # Replies of messages that were running when the actor was cancelled or crashed (None
    # until there is one: not a list kept by every idle actor).
    _orphans: list[Any] | None
    task: asyncio.Task[None] | None
    _context: contextvars.Context | None
    # The tasks of the messages running now, when it handles several at once.
    _message_tasks: dict[asyncio.Task[None], Envelope] | None = None

    def _park(self) -> None:
        raise NotImplementedError

    def _orphaned(self) -> list[Any]:
        """The replies of messages a crash, stop or kill cut short (see ``_orphans``)."""
        if self._orphans is None:
            self._orphans = []
        return self._orphans

    def serves_in(self, task: asyncio.Task[Any]) -> bool:
        """Whether ``task`` does this actor's own work: its task, a task of one of its
        running messages, or a task one of those awaits (``asyncio.gather``, ``await task``),
        as opposed to a task its code started and left running (``asyncio.create_task``),
        or one bounded by ``asyncio.wait_for``: those leave the actor free to serve."""
        own = self.task
        if task is own:
            return True
        running = self._message_tasks
        if running and task in running:
            return True
        roots = [own] if own is not None else []
        if running:
            roots.extend(running)
        return awaited_by(task, roots)

    def _serve_mailbox(self, instance: Any) -> Coroutine[Any, Any, Parked | None]:
        """The coroutine that serves ``instance`` until the mailbox hands over its stop
        (or, one message at a time inline, until it parks idle: ``PARKED``).

        Chosen here and returned, not awaited: an idle actor that keeps its serving task
        keeps it suspended, and each coroutine frame in that chain is one more object the
        cyclic garbage collector walks on every full collection.
        """
        if self.max_concurrency == 1 and self.executor is not None:
            return self._serve_in_batches(instance)
        if self.max_concurrency == 1:
            return self._serve_one_at_a_time(instance)
        return self._serve_concurrently(instance)

    async def _off_loop(self, func: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Run sync user code on the actor's own thread, so it may block."""
        assert self.executor is not None
        return await self.executor.run(functools.partial(func, *args, **kwargs))

    def _take_turn(self) -> None:
        """Serve a parked inline actor's queued messages in a loop callback, with no task,
        while each is a sync method; park again once the queue stays dry for one more turn,
        or hand over to a new serving task (``_serve_in_task``) at the first message that
        needs one.

        A task, its coroutines and its scheduled steps cost more than most sync methods,
        and each is one more object for the cyclic garbage collector while it lives: an
        ``asyncio.gather`` over 100,000 actors would make 100,000 of each. What needs the
        task is left to it, in order: a stop, an async method, a kill, and an exit or a
        failing tell, which end the incarnation (``_crash_first`` carries that failure to
        the task, which raises it before anything else).
        """
        if self.state is _DEAD:
            return
        if self.ending is _KILLED:
            self._serve_in_task()
            return
        mailbox = self.mailbox
        queue = mailbox.queue
        methods = self.methods
        instance = self.instance
        served = False
        while queue:
            served = True
            name, args, kwargs, reply = queue[0]
            entry = methods.get(name)  # None for a stop
            if entry is None or entry[1]:
                self._serve_in_task()
                return
            queue.popleft()
            if mailbox.overflow:
                mailbox.admit_one()
            if reply is not None and reply.cancelled():
                continue  # its caller gave up before it began: it never runs
            try:
                result = entry[0](instance, *args, **kwargs)
                if reply is None or reply.done():
                    continue
                if type(result) in _STREAMS:
                    self._failed(reply, name, refused_stream(name, result))
                else:
                    settle(reply, result, None)
            except BaseException as exc:  # SystemExit, KeyboardInterrupt: see _failed
                try:
                    self._failed(reply, name, exc)
                except Crash as crash:
                    self._crash_first = crash
                    self._serve_in_task()
                    return
        if served:
            # Once more, as a serving task waits one more loop turn before it parks: a
            # caller asking in turn finds it still serving, with no resume to make.
            self._turn_again()
        else:
            mailbox.idle = self  # parked again: the next message calls _resume

    def _serve_in_task(self) -> None:
        """Start a serving task for the actor (``ActorCell`` makes it)."""
        raise NotImplementedError

    def _turn_again(self) -> None:
        """Take one more turn in the next turns callback (``ActorCell`` queues it)."""
        raise NotImplementedError

    def _after_failed_turn(self) -> None:
        """``_take_turn`` raised (a defect): a serving task takes over, so that the actor is
        neither left unserved with messages queued nor deaf to a stop or a kill."""
        if self.state is not _DEAD and self.task is None and self.mailbox.idle is None:
            self._serve_in_task()

    # A failure _take_turn met that ends the incarnation, raised by the task it hands to.
    _crash_first: Crash | None

    async def _serve_one_at_a_time(self, instance: Any) -> Parked | None:
        """Serve an inline actor: sync methods on the loop (worker-process actors batch).

        Once the mailbox stays empty for one more turn of the loop (so a caller asking in
        turn finds it still serving), it parks: the task ends, and the next message is
        served by ``_take_turn``, or by a new task (``Supervised._resume``).
        """
        crash = self._crash_first
        if crash is not None:
            self._crash_first = None
            raise crash
        mailbox = self.mailbox
        queue = mailbox.queue
        methods = self.methods
        args: Any
        kwargs: Any
        reply: Any
        result: Any
        idle = False
        while True:
            if not queue:
                if idle:
                    self._park()
                    return PARKED
                # Let go of the last message (its arguments, its answer), which would
                # otherwise live as long as the actor waits.
                args = kwargs = reply = result = None
                idle = True
                await asyncio.sleep(0)
                continue
            idle = False
            name, args, kwargs, reply = queue.popleft()
            if mailbox.overflow:
                mailbox.admit_one()
            if name is STOP:
                return None
            if reply is not None and reply.cancelled():
                continue  # its caller gave up before it began: it never runs
            try:
                func, is_async = methods[name]
                result = func(instance, *args, **kwargs)
                if is_async:
                    result = await result
            except asyncio.CancelledError as exc:
                if _being_cancelled():
                    self._orphaned().append(reply)  # answered with the death error at the end
                    raise
                self._failed(reply, name, exc)
            except BaseException as exc:  # SystemExit, KeyboardInterrupt: see _failed
                self._failed(reply, name, exc)
            else:
                if reply is not None and not reply.done():
                    if type(result) in _STREAMS:
                        self._failed(reply, name, refused_stream(name, result))
                    else:
                        settle(reply, result, None)

    async def _serve_in_batches(self, instance: Any) -> None:
        """Serve with sync methods on the actor's thread, a run of queued ones per trip.

        Handing each message to the thread and back costs more than most methods; handing
        over every sync message that is queued at once keeps pipelined calls cheap. Order
        is kept: an async method or a stop ends the run.
        """
        mailbox = self.mailbox
        queue = mailbox.queue
        methods = self.methods
        batch: Any
        args: Any
        kwargs: Any
        reply: Any
        result: Any
        while True:
            if not queue:
                batch = args = kwargs = reply = result = None  # idle: as _serve_one_at_a_time
                await mailbox.wait()
                continue
            batch = self._take_sync_run(queue, mailbox, methods)
            if batch:
                mailbox.taken = batch
                try:
                    await self._run_batch(instance, batch)
                finally:
                    mailbox.taken = ()
                continue
            name, args, kwargs, reply = queue.popleft()
            if mailbox.overflow:
                mailbox.admit_one()
            if name is STOP:
                return
            if reply is not None and reply.cancelled():
                continue  # its caller gave up before it began: it never runs
            try:
                func, _is_async = methods[name]
                result = await func(instance, *args, **kwargs)
            except asyncio.CancelledError as exc:
                if _being_cancelled():
                    self._orphaned().append(reply)
                    raise
                self._failed(reply, name, exc)
            except BaseException as exc:  # SystemExit, KeyboardInterrupt: see _failed
                self._failed(reply, name, exc)
            else:
                if reply is not None and type(result) in _STREAMS:
                    result = refused_stream(name, result)
                    settle(reply, None, result)
                else:
                    settle(reply, result, None)

    @staticmethod
    def _take_sync_run(queue: Any, mailbox: Mailbox, methods: MethodTable) -> list[Envelope]:
        batch: list[Envelope]
        if not mailbox.overflow:
            # Nothing to admit as messages are taken: find the run's end, then take it.
            batch = []
            name: object = None
            for envelope in queue:
                if envelope[0] != name:  # a method's entry is looked up once per run of it
                    entry = methods.get(envelope[0])
                    if entry is None or entry[1]:
                        break  # a stop, or an async method: it runs on the loop, after this
                    name = envelope[0]
                batch.append(envelope)
                if len(batch) == BATCH_LIMIT:
                    break
            if len(batch) == len(queue):
                queue.clear()
            else:
                for _ in batch:
                    queue.popleft()
            return batch
        batch = []
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
            self._orphaned().extend(envelope[3] for envelope in batch)
            raise
        if len(outcomes) < len(batch) and outcomes[-1][0]:
            # Cut short after an answer a later message could change: the rest runs on the
            # next trip, once this answer has been sent.
            self.mailbox.queue.extendleft(reversed(batch[len(outcomes) :]))
            batch = batch[: len(outcomes)]
        if len(outcomes) == len(batch) > 1 and not isinstance(outcomes[-1][1], ENDS_ACTOR):
            # A run, and no failing tell or exit cut it short.
            # Replies that can answer a whole run at once do (the wire's: one frame).
            settle_run = getattr(batch[0][3], "settle_run", None)
            if settle_run is not None and settle_run(batch, outcomes):
                return
        for (name, _args, _kwargs, reply), (ok, value) in zip(batch, outcomes, strict=False):
            if ok:
                settle(reply, value, None)
            elif reply is not None and not isinstance(value, ENDS_ACTOR):
                settle(reply, None, value)
            else:
                # A failing tell or an exit crashes the actor; what it had not reached yet
                # was queued at the crash: put it back for the crash handling to fail.
                self.mailbox.queue.extendleft(reversed(batch[len(outcomes) :]))
                if reply is not None:
                    self._orphaned().append(reply)
                raise Crash(value, _crashed_in(name, reply, value))

    def _failed(self, reply: Any, method: str, exc: BaseException) -> None:
        exc = _as_error(exc, method)
        if reply is None or isinstance(exc, ENDS_ACTOR):
            if reply is not None:
                self._orphaned().append(reply)  # answered with the crash's death error
            raise Crash(exc, _crashed_in(method, reply, exc))
        settle(reply, None, exc)

    async def _serve_concurrently(self, instance: Any) -> None:
        mailbox = self.mailbox
        slots = asyncio.Semaphore(self.max_concurrency)
        running: dict[asyncio.Task[None], Envelope] = {}
        self._message_tasks = running
        crashed: asyncio.Future[Crash] = self.loop.create_future()
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
            self._orphaned().extend(envelope[3] for envelope in left.values())
        if crashed.done():
            raise crashed.result()

    async def _one(
        self,
        instance: Any,
        envelope: Envelope,
        slots: asyncio.Semaphore,
        crashed: asyncio.Future[Crash],
    ) -> None:
        try:
            name, args, kwargs, reply = envelope
            if reply is not None and reply.cancelled():
                return  # its caller gave up before it began: it never runs
            func, is_async = self.methods[name]
            if is_async:
                result = await func(instance, *args, **kwargs)
            elif self.executor is None:
                result = func(instance, *args, **kwargs)
            else:
                result = await self._off_loop(func, instance, *args, **kwargs)
        except asyncio.CancelledError as exc:
            if _being_cancelled():
                self._orphaned().append(envelope[3])  # answered with the death error at the end
                raise
            self._failed_concurrent(envelope, exc, crashed)
        except BaseException as exc:  # SystemExit, KeyboardInterrupt: see _failed
            self._failed_concurrent(envelope, exc, crashed)
        else:
            if envelope[3] is not None and type(result) in _STREAMS:
                settle(envelope[3], None, refused_stream(envelope[0], result))
            else:
                settle(envelope[3], result, None)
        finally:
            slots.release()

    def _failed_concurrent(
        self, envelope: Envelope, exc: BaseException, crashed: asyncio.Future[Crash]
    ) -> None:
        exc = _as_error(exc, envelope[0])
        reply = envelope[3]
        if reply is None or isinstance(exc, ENDS_ACTOR):
            if reply is not None:
                self._orphaned().append(reply)
            if not crashed.done():
                crashed.set_result(Crash(exc, _crashed_in(envelope[0], reply, exc)))
        else:
            settle(reply, None, exc)


BATCH_LIMIT = 512  # sync messages handed to an actor's thread in one trip


def _crashed_in(method: str, reply: Any, exc: BaseException) -> str:
    """Where a crash in a method happened, for the log and the death error."""
    if reply is None:
        return f"{method}() (called by tell)"
    return f"{method}(), which raised {type(exc).__name__} (an exit: it ends the actor)"


def _run_sync_batch(
    instance: Any, methods: MethodTable, batch: list[Envelope]
) -> list[tuple[bool, Any]]:
    """On the actor's thread: run each message; stop after a failing tell (a crash), and
    after an answer that a later message could still change (a list, a dict, an object):
    an answer is sent as it was when its method returned, so it is encoded before the next
    message runs. What is not run goes back to the mailbox's front, in order."""
    outcomes: list[tuple[bool, Any]] = []
    for name, args, kwargs, reply in batch:
        if reply is not None and reply.cancelled():
            # Its caller gave up before it began: it never runs (settling a cancelled
            # reply does nothing).
            outcomes.append((True, None))
            continue
        try:
            result = methods[name][0](instance, *args, **kwargs)
        except BaseException as exc:  # everything goes back to the loop, in order
            outcomes.append((False, exc))
            if reply is None or isinstance(exc, ENDS_ACTOR):
                break
        else:
            if reply is None:
                outcomes.append((True, result))
                continue
            if type(result) in _STREAMS:
                outcomes.append((False, refused_stream(name, result)))
                continue
            outcomes.append((True, result))
            # Whether no later message can change the answer: a scalar, or a tuple of
            # scalars (inline, not a function: this runs once per message).
            kind = type(result)
            if kind not in _SCALARS and not (
                kind is tuple and _SCALARS.issuperset(map(type, result))
            ):
                break
    return outcomes


_SCALARS = frozenset({type(None), bool, int, float, complex, str, bytes})

# What a method may not hand back: a live generator would run the actor's code outside its
# mailbox (inline) or could not travel at all (from a worker process).
_STREAMS = frozenset({types.GeneratorType, types.AsyncGeneratorType})


def refused_stream(method: str, stream: Any) -> TypeError:
    """The error for a method that returned a generator; the generator is closed unrun."""
    if isinstance(stream, types.GeneratorType):
        stream.close()
    kind = "an async generator" if isinstance(stream, types.AsyncGeneratorType) else "a generator"
    return TypeError(
        f"{method}() returned {kind}, which an actor cannot hand out: its items would be "
        "produced outside the actor's mailbox. Return a list of the items instead, or send "
        "them one by one to another actor with ref.method.tell(item)"
    )


def settle(reply: Any, result: Any, error: BaseException | None) -> None:
    """Deliver an answer to an asyncio or concurrent future that may be gone or done."""
    if reply is None or reply.done():
        return
    try:
        if error is None:
            reply.set_result(result)
        else:
            reply.set_exception(error)
    except _INVALID_STATE:  # a caller on another thread gave up (cancelled it) meanwhile
        pass


_INVALID_STATE = (asyncio.InvalidStateError, concurrent.futures.InvalidStateError)


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


def awaited_by(task: asyncio.Task[Any], roots: list[asyncio.Task[Any]]) -> bool:
    """Whether one of ``roots`` is suspended awaiting ``task``, directly or through tasks
    and ``asyncio.gather`` futures it awaits. Reads the awaited future of each task
    (``Task._fut_waiter``) and the children of a gathering future: CPython's asyncio keeps
    both; where they are missing, the answer is ``False`` (no wait edge: never a false
    deadlock report)."""
    seen: set[int] = set()
    stack: list[Any] = [getattr(root, "_fut_waiter", None) for root in roots]
    while stack:
        fut = stack.pop()
        if fut is None or id(fut) in seen:
            continue
        if fut is task:
            return True
        seen.add(id(fut))
        inner = getattr(fut, "_fut_waiter", None)
        if inner is not None:
            stack.append(inner)
        children = getattr(fut, "_children", None)
        if children:
            stack.extend(children)
    return False
