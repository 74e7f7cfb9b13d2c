"""Direct calls between two worker processes of one runtime, instead of through their owner.

A worker's ref to a process actor is addressed to the owning runtime, which supervises the
actor and knows which worker runs it now. Its calls start out through the owner (one relay
hop: two socket transfers, a decode and an encode there). On the first call the worker asks
the owner where the actor runs (``Locate``) and connects to that worker itself:

- **On one machine** over a Unix socket in the owner's private directory (mode 0700, the
  socket 0600), through the same HMAC challenge-response on the runtime's secret as the
  worker's own connection: only this user's processes of this runtime get in.
- **In a cluster**, between workers on nodes, over TCP and TLS with the cluster's token, as
  a worker's connection to its driver: the handshake is bound to the listener's certificate,
  so only a peer that holds the token gets in. A worker on the driver's machine (which holds
  the runtime's secret, not the token) and one on a node keep calling through the driver.

A worker opens its listener when the owner first asks for it (``PeerEndpoint``) and keeps
it while it lives; a caller keeps one connection per peer worker, shared by all its refs to
actors there, and drops it when it closes (the peer ended). ``ACTORRT_DIRECT_CALLS=0`` in
a worker's environment keeps its calls and those to it on the relay.

**Order.** Messages from one sender to one actor keep their order across the switch: the
owner asks the actor's worker for its endpoint in line behind the calls it has passed on,
so the ``Locate`` reply means every call sent through the owner before it has reached the
actor's mailbox. A ref switches only when nothing went out through the owner since its
``Locate`` left (else it asks again, a few times, then stays on the relay for a while).

**Falling back.** When the owner says no (the actor is restarting, or runs where this worker
cannot connect to) or the connection cannot be made, the ref stays on the relay, says why at
debug level on the ``actorrt`` logger, and tries again :data:`RETRY_AFTER` seconds later.
When a direct connection closes, its refs go back to the relay at once: calls pending on
it fail with ``ActorDiedError`` (the worker process went away), and later calls go through
the owner, which holds them while the actor restarts and then routes them to its new worker,
where the next call connects again.
"""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import socket
from collections.abc import Callable
from typing import Any, NamedTuple

from .._wire import _tls
from .._wire._codec import Codec
from .._wire._connection import Connection, ConnectionLostError
from .._wire._dispatcher import Dispatcher
from .._wire._messages import Locate
from .._wire._transport import (
    WireServer,
    connect_tcp,
    connect_unix,
    make_private_dir,
    serve_tcp,
    serve_unix,
)

logger = logging.getLogger("actorrt")

DIRECT_ENV = "ACTORRT_DIRECT_CALLS"  # "0": no direct calls to or from this process
RETRY_AFTER = 5.0  # seconds a ref that could not go direct stays on the relay
SWITCH_TRIES = 8  # Locate round trips a busy ref gets to find a quiet moment to switch
CONNECT_TIMEOUT = 5.0  # seconds to connect to a peer worker and complete the handshake

Endpoint = dict[str, Any]  # {"unix": path} or {"tcp": [host, port]}


def direct_enabled() -> bool:
    """Whether this process takes part in direct calls (``ACTORRT_DIRECT_CALLS``)."""
    value = os.environ.get(DIRECT_ENV, "1").strip()
    if value not in ("0", "1"):
        raise ValueError(f"{DIRECT_ENV} must be 0 or 1, not {value!r}")
    return value == "1"


class PeerSide(NamedTuple):
    """How this worker meets its peers: over ``transport`` (``"unix"``: a socket in the
    owner's private directory ``where``; ``"tcp"``: a TLS listener on the address ``where``),
    proving ``secret`` (the runtime's secret, or the cluster's token)."""

    transport: str
    where: str
    secret: bytes

    @classmethod
    def of_boot(cls, boot: dict[str, object], secret: bytes) -> PeerSide:
        """The side a worker started with ``boot`` has: the Unix socket's folder, or the
        address of this node's interface that reaches its driver."""
        tcp = boot.get("tcp")
        if isinstance(tcp, list):
            return cls("tcp", _local_address_towards(str(tcp[0]), int(tcp[1])), secret)
        return cls("unix", os.path.dirname(str(boot["socket"])), secret)


def _local_address_towards(host: str, port: int) -> str:
    """The address of this machine's interface that routes to ``host`` (no packet is sent)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_DGRAM) as probe:
        probe.connect((host, port))
        return str(probe.getsockname()[0])


class DirectRoutes:
    """A worker's side of direct calls: its listener, and its connections to peers."""

    def __init__(
        self,
        side: PeerSide,
        worker_id: str,
        head: Connection,
        dispatcher: Dispatcher,
        codec: Codec,
    ) -> None:
        self.side = side
        self.worker_id = worker_id
        self.head = head
        self.enabled = direct_enabled()
        self._dispatcher = dispatcher
        self._codec = codec
        self._server: WireServer | None = None
        self._opening: asyncio.Future[Endpoint] | None = None
        self._peers: dict[str, asyncio.Future[Connection]] = {}
        self._on_lost: dict[Connection, list[Callable[[ConnectionLostError], None]]] = {}

    # ------------------------------------------------------------- the listener

    async def endpoint(self) -> Endpoint | None:
        """Where peers connect to this worker (``PeerEndpoint``), listening from the first
        ask on; ``None`` when this worker takes no direct connections."""
        if not self.enabled:
            return None
        if self._opening is None:
            self._opening = asyncio.ensure_future(self._listen())
        return await asyncio.shield(self._opening)

    async def _listen(self) -> Endpoint:
        side = self.side
        if side.transport == "unix":
            path = os.path.join(side.where, f"peer-{self.worker_id}.sock")
            self._server = await serve_unix(path, self._dispatcher, side.secret, codec=self._codec)
            return {"unix": path}
        # The certificate and its key are read into the context, then their folder goes
        # at once: a worker killed later leaves no key behind in the temporary folder.
        tls_dir = make_private_dir("actorrt-peer-")
        try:
            files = _tls.generate_self_signed(tls_dir, [side.where])
            context, binding = _tls.server_context(files), _tls.context_fingerprint(files)
        finally:
            shutil.rmtree(tls_dir, ignore_errors=True)
        self._server = await serve_tcp(
            side.where, 0, self._dispatcher, side.secret, tls=context, binding=binding,
            codec=self._codec,
        )  # fmt: skip
        host, port = self._server.address
        return {"tcp": [host, port]}

    # -------------------------------------------------------------- the callers

    def locate(self, actor_id: str) -> asyncio.Future[Any]:
        """Ask the owner where ``actor_id`` runs (also the barrier of a switch)."""
        return self.head.request(Locate(actor_id, self.side.transport))

    async def connect(self, worker_id: str, endpoint: Endpoint) -> Connection:
        """The connection to peer ``worker_id``: the open one, or a new one (one at a time
        per peer, however many refs ask).

        Raises:
            OSError, AuthenticationError, ConnectionLostError: it cannot be made.
        """
        pending = self._peers.get(worker_id)
        if pending is not None and pending.done() and (
            pending.exception() is not None or pending.result().is_closing()
        ):
            pending = None  # a failed or ended attempt: make a new one
        if pending is None:
            pending = self._peers[worker_id] = asyncio.ensure_future(
                self._connect(worker_id, endpoint)
            )
        return await asyncio.shield(pending)

    async def _connect(self, worker_id: str, endpoint: Endpoint) -> Connection:
        def closed(conn: Connection, error: ConnectionLostError) -> None:
            pending = self._peers.get(worker_id)
            if (
                pending is not None
                and pending.done()
                and not pending.cancelled()
                and pending.exception() is None
                and pending.result() is conn
            ):
                del self._peers[worker_id]
            for lost in self._on_lost.pop(conn, []):
                lost(error)

        options: dict[str, Any] = {"codec": self._codec, "on_close": closed}
        secret = self.side.secret
        if "unix" in endpoint and self.side.transport == "unix":
            async with asyncio.timeout(CONNECT_TIMEOUT):
                return await connect_unix(
                    str(endpoint["unix"]), secret, self._dispatcher, **options
                )
        if "tcp" in endpoint and self.side.transport == "tcp":
            host, port = endpoint["tcp"]
            return await connect_tcp(
                str(host), int(port), secret, self._dispatcher, tls=_tls.client_context(),
                connect_timeout=CONNECT_TIMEOUT, **options,
            )  # fmt: skip
        raise OSError(f"no transport in common with worker {worker_id}'s endpoint {endpoint}")

    def watch(self, conn: Connection, lost: Callable[[ConnectionLostError], None]) -> None:
        """Call ``lost`` (once) when ``conn`` closes."""
        self._on_lost.setdefault(conn, []).append(lost)

    def unwatch(self, conn: Connection, lost: Callable[[ConnectionLostError], None]) -> None:
        callbacks = self._on_lost.get(conn)
        if callbacks is not None and lost in callbacks:
            callbacks.remove(lost)

    async def close(self) -> None:
        for pending in list(self._peers.values()):
            if pending.done() and pending.exception() is None:
                pending.result().close()
            else:
                pending.cancel()
        self._peers.clear()
        if self._server is not None:
            self._server.close()  # a Unix socket's file goes with it
            await self._server.wait_closed()


__all__ = ["DIRECT_ENV", "DirectRoutes", "PeerSide", "direct_enabled"]
