"""Incoming messages to their handlers: one table per kind of connection, typed.

A :class:`Dispatcher` is a connection's handler (:class:`~actorrt._wire._connection.Handler`).
It is built from a table of routes, one per message class that end takes: :func:`request`
routes pair a class with a handler ``(conn, request_id, message)`` that must arrange exactly
one reply; :func:`notification` routes pair a class with a handler ``(conn, message)``. mypy
checks at each route that the handler takes that class. A class may have both kinds of route.

A request class may also have a run route (:func:`request_run`): the connection then hands
it the requests of that class that arrive together in one batch frame, in their wire form,
in one call (:data:`~actorrt._wire._reader.RunRoutes` says how); the class's request route
still takes those that arrive alone.

What the table does not take is refused with a :class:`~actorrt._wire._messages.
MalformedMessage` naming it: a payload that is no typed message, a message this end does not
take, a request sent as a notification or the other way round. A refused request gets that
error as its reply; a refused notification is logged (there is no one to tell). A message
with an unknown tag or a field of the wrong type never gets here: decoding refuses it
(:func:`~actorrt._wire._messages.from_wire`), and the connection answers the same way.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from ._connection import Connection
from ._messages import MalformedMessage, Message, tag_of

__all__ = [
    "Dispatcher",
    "NotificationRoute",
    "RequestRoute",
    "RunRoute",
    "notification",
    "request",
    "request_run",
]

logger = logging.getLogger("actorrt")

M = TypeVar("M", bound=Message)

RequestRoute = tuple[type[Any], Callable[[Connection, int, Any], None]]
NotificationRoute = tuple[type[Any], Callable[[Connection, Any], None]]
RunRoute = tuple[type[Any], Callable[[Connection, list[Any], int, int], int]]


def request(cls: type[M], handler: Callable[[Connection, int, M], None]) -> RequestRoute:
    """A route for ``cls`` sent as a request: ``handler(conn, request_id, message)``."""
    return cls, handler


def request_run(
    cls: type[Message], handler: Callable[[Connection, list[Any], int, int], int]
) -> RunRoute:
    """A run route for ``cls`` sent as requests: ``handler(conn, items, start, stop)`` takes
    those of a batch at once (:data:`~actorrt._wire._reader.RunRoutes`)."""
    return cls, handler


def notification(cls: type[M], handler: Callable[[Connection, M], None]) -> NotificationRoute:
    """A route for ``cls`` sent as a notification: ``handler(conn, message)``."""
    return cls, handler


class Dispatcher:
    """Hands each incoming message to the handler its class is routed to.

    Args:
        name: what this end is, for error messages (``"the runtime's worker socket"``).
        requests: the request routes (see :func:`request`).
        notifications: the notification routes (see :func:`notification`).
        runs: run routes (see :func:`request_run`), each for a class that has a request
            route here.
    """

    # __slots__ for speed. A connection takes ``request_routes``, ``notification_routes``
    # and ``request_runs`` and calls a routed message's handler itself (one call less per
    # message); __call__ sees only what those tables lack (and the messages of a plain
    # handler's caller).
    __slots__ = ("_name", "_notifications", "_requests", "_runs")

    def __init__(
        self,
        name: str,
        requests: Iterable[RequestRoute] = (),
        notifications: Iterable[NotificationRoute] = (),
        runs: Iterable[RunRoute] = (),
    ) -> None:
        self._name = name
        self._requests: dict[type[Any], Callable[[Connection, int, Any], None]] = {}
        self._notifications: dict[type[Any], Callable[[Connection, Any], None]] = {}
        for cls, handler in requests:
            self._add(self._requests, cls, handler)
        for cls, note in notifications:
            self._add(self._notifications, cls, note)
        self._runs: dict[int, Callable[[Connection, list[Any], int, int], int]] = {}
        for cls, run in runs:
            tag = tag_of(cls)
            if tag is None or cls not in self._requests:
                raise ValueError(f"a run route for {cls.__name__} needs its request route")
            self._add(self._runs, tag, run)

    @property
    def request_routes(self) -> dict[type[Any], Callable[[Connection, int, Any], None]]:
        """The request table, by message class."""
        return self._requests

    @property
    def notification_routes(self) -> dict[type[Any], Callable[[Connection, Any], None]]:
        """The notification table, by message class."""
        return self._notifications

    @property
    def request_runs(self) -> dict[int, Callable[[Connection, list[Any], int, int], int]]:
        """The run routes, by message tag."""
        return self._runs

    @staticmethod
    def _add(table: dict[Any, Any], key: Any, handler: object) -> None:
        if key in table:
            what = key.__name__ if isinstance(key, type) else f"tag {key}"
            raise ValueError(f"{what} is routed twice")
        table[key] = handler

    def __call__(self, conn: Connection, request_id: int | None, payload: Any) -> None:
        if request_id is not None:
            handler = self._requests.get(type(payload))
            if handler is None:
                conn.reply_error(request_id, self._refused(payload, "a request"))
                return
            handler(conn, request_id, payload)
            return
        note = self._notifications.get(type(payload))
        if note is None:
            logger.error("dropped a notification: %s", self._refused(payload, "a notification"))
            return
        note(conn, payload)

    def _refused(self, payload: object, kind: str) -> MalformedMessage:
        takes = self._requests if kind == "a request" else self._notifications
        names = ", ".join(sorted(cls.__name__ for cls in takes)) or "none"
        verb = "answers" if kind == "a request" else "accepts"
        cls = type(payload)
        if tag_of(cls) is not None:
            what = f"a {cls.__name__} message"
        else:
            text = repr(payload)
            text = text if len(text) <= 60 else text[:57] + "..."
            what = f"a plain {cls.__name__} {text}, which is no typed message"
        return MalformedMessage(
            f"{self._name} {verb} only these {kind[2:]}s: {names}; it got {what}"
        )
