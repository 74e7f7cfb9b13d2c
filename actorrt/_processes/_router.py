"""A runtime's cross-process side: its socket, secret, codec, worker pool and dispatch, and
the routes of its refs.

Made on first need: a runtime that never spawns a worker-process actor opens no socket. In a
worker process the same object holds the connection to the owning runtime instead of a
server: the worker's refs to actors elsewhere go through it.

**Refs carry an address.** On the wire a ref is a
:class:`~actorrt._wire._messages.WireRef`: the :class:`~actorrt._wire._messages.RefAddress`
of the process that hosts the actor (the owning runtime's id, and the worker's id or ``None``
for the owner's own process), the actor's id, class name, methods and name. A process actor
is addressed to its owner, which supervises it and routes to whichever worker runs it now;
an actor of a worker (the actor placed there, or an inline actor it started) to that worker.
Decoding resolves the address (:meth:`Workers.decode_ref`):

- an actor of this process: its cell or proxy;
- in a worker, any other actor of the same runtime: a relay over the owner's connection (the
  owner routes it on);
- in the owner, an actor of one of its workers that it does not know itself (an inline actor
  there): a relay over that worker's connection, which the owner also uses to route calls
  other workers make to it (:meth:`Workers.resolve`);
- an actor of this process or of a worker that has ended, or of another runtime: a
  :class:`~actorrt._processes._proxies.DeadTarget` whose calls say so (for another runtime:
  that its runtime is gone).

In cluster mode workers on other nodes connect to this runtime over TCP (TLS, the cluster's
token) and are served as local ones: an actor's calls go straight to the node that runs it.

A worker's calls to a process actor in another worker start through the owner and then go
straight to that worker once a direct connection is made (:mod:`._direct`; the owner's side
is :meth:`Workers.locate`).
"""

from __future__ import annotations

import asyncio
import os
import shutil
from collections.abc import Collection
from typing import TYPE_CHECKING, Any, cast

from .._core._cell import ActorCell
from .._core._context import current_cell, host, running_hosted
from .._core._ref import ActorRef
from .._core._threads import ActorThread, ThreadPoolRunner, actor_threads
from .._core._waits import bounded_by_awaiter
from .._errors import ActorDiedError, DeathReason
from .._wire import _auth, _tls
from .._wire._codec import Codec
from .._wire._connection import Connection
from .._wire._dispatcher import Dispatcher
from .._wire._messages import (
    Died,
    GetActor,
    PeerEndpoint,
    Restarted,
    Retire,
    SpawnCancel,
    SpawnProcess,
    WaitEdge,
)
from .._wire._refs import RefAddress, WireRef
from .._wire._refs import decode_ref as decode_wire_ref
from .._wire._refs import encode_ref as encode_wire_ref
from .._wire._transport import WireServer, make_private_dir, serve_tcp, serve_unix
from ._descendants import end_descendants
from ._direct import DirectRoutes, PeerSide
from ._dispatch import Host
from ._pool import THREAD_VARIABLES, WorkerKey, WorkerPool
from ._process_actor import ProcessActor
from ._proxies import DeadTarget, RelayTarget, RemoteActor
from ._remote_worker import ClusterSide

if TYPE_CHECKING:
    from collections.abc import Hashable

    from .._core._actor import ActorClass
    from ._services import RuntimeForProcesses

NOSET_CUDA = "ACTORRT_NOSET_CUDA_VISIBLE_DEVICES"
THREAD_END_WAIT = 1.0  # seconds an ended actor's closed threads get to return


class Workers:
    """Everything one runtime needs to own worker processes, or to be one."""

    def __init__(self, runtime: RuntimeForProcesses, worker_env: dict[str, str]) -> None:
        self.runtime = runtime
        self.worker_env = worker_env
        self.host = Host(runtime, self)
        self.codec = Codec(
            ref_types=(ActorRef,), encode_ref=self.encode_ref, decode_ref=self.decode_ref
        )
        self.head: Connection | None = None  # in a worker: the owning runtime
        # Where this process's own actors live (in a worker: set by attach_owner).
        self.address = RefAddress(runtime.runtime_id, None)
        self._relays: dict[str, RelayTarget] = {}
        self._spawns = 0
        self._idle_threads: list[ActorThread] = []
        self._own_processes: tuple[int, ...] = ()  # in a worker: its watcher
        self._dir: str | None = None
        self._server: WireServer | None = None
        self._pool: WorkerPool | None = None
        self._opening: asyncio.Future[None] | None = None
        # Cluster mode: the driver's link to its cluster; workers on other nodes connect
        # back over TCP (TLS), proving they know the cluster's token.
        self.cluster: ClusterSide | None = None
        self._tcp: WireServer | None = None
        # In a worker: its listener for, and connections to, other workers (``_direct``).
        self.direct: DirectRoutes | None = None

    # ----------------------------------------------------------- the owner side

    async def pool(self) -> WorkerPool:
        """The worker pool, its socket opened on first use (once, however many ask)."""
        if self._pool is None:
            if self._opening is None:
                self._opening = asyncio.ensure_future(self._open())
            await asyncio.shield(self._opening)
        assert self._pool is not None
        return self._pool

    async def _open(self) -> None:
        self._dir = make_private_dir()
        secret = _auth.new_secret()
        path = os.path.join(self._dir, "rt.sock")
        self._server = await serve_unix(path, self.dispatcher, secret, codec=self.codec)
        pool = WorkerPool(path, _auth.secret_to_text(secret), self._boot_fields())
        if self.cluster is not None:
            await self._open_tcp(pool, self.cluster)
        self._pool = pool

    async def _open_tcp(self, pool: WorkerPool, cluster: ClusterSide) -> None:
        """Listen where the cluster's nodes reach this runtime, for workers started there."""
        assert self._dir is not None
        folder = os.path.join(self._dir, "tls")
        os.makedirs(folder, mode=0o700, exist_ok=True)
        files = _tls.generate_self_signed(folder, [cluster.host])
        self._tcp = await serve_tcp(
            cluster.host, 0, self.dispatcher, cluster.token, tls=_tls.server_context(files),
            binding=_tls.context_fingerprint(files), codec=self.codec,
        )
        host, port = self._tcp.address
        pool.node_starter = cluster.starter
        pool.remote_boot = {"tcp": [host, port], "tls": True}
        pool.remote_secret = _auth.secret_to_text(cluster.token)

    def _boot_fields(self) -> dict[str, str]:
        """What a new worker is told besides the socket: its owner's runtime id (its refs'
        addresses), and the runtime class to run (its owner's own, by import path)."""
        cls = type(self.runtime)
        return {
            "owner_runtime": self.runtime.runtime_id,
            "runtime_class": f"{cls.__module__}:{cls.__qualname__}",
        }

    @property
    def dispatcher(self) -> Dispatcher:
        """The handler of this runtime's connections (worker socket, or owner connection)."""
        return self.host.dispatcher

    def started_pool(self) -> WorkerPool:
        assert self._pool is not None
        return self._pool

    def worker_connected(self, worker_id: str, conn: Connection) -> bool:
        return self._pool is not None and self._pool.connected(worker_id, conn)

    def worker_key(
        self,
        actor_class: ActorClass[Any],
        gpus: tuple[str, ...],
        cpus: float,
        node: str | None = None,
    ) -> WorkerKey:
        env = dict(self.worker_env)
        env.update(actor_class.actor_options.worker_env)
        # Thread pools sized to the grant's whole CPUs (at least 1), unless the user chose.
        threads = str(max(1, int(cpus)))
        for name in THREAD_VARIABLES:
            if name not in env and name not in os.environ:
                env[name] = threads
        # The devices of the actor's own grant; "" when it has none, so it sees no GPU.
        cuda = None if os.environ.get(NOSET_CUDA) == "1" else ",".join(gpus)
        return WorkerKey.current(env, cuda, node)

    def new_process_actor(
        self,
        actor_class: ActorClass[Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        parent: Any,
        actor_id: str,
        gpus: tuple[str, ...],
        cpus: float,
        node: str | None = None,
    ) -> ProcessActor:
        key = self.worker_key(actor_class, gpus, cpus, node)
        runtime = cast(Any, self.runtime)  # process actors still type their runtime concretely
        return ProcessActor(runtime, actor_class, args, kwargs, parent, actor_id, key)

    async def close(self) -> None:
        await self.host.close()
        if self._pool is not None:
            await self._pool.shutdown()
        for server in (self._server, self._tcp):
            if server is not None:
                server.close()
                await server.wait_closed()
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
        if self.direct is not None:
            await self.direct.close()
        if self.head is not None:
            self.head.close()

    def locate(
        self, actor_id: str, transport: str
    ) -> tuple[str, asyncio.Future[Any]] | None:
        """In the owner, for a worker's ``Locate``: the worker that runs process actor
        ``actor_id`` now and the request for its endpoint, sent in line behind the calls
        passed on to it; ``None`` when the asking worker (which connects over
        ``transport``) should keep calling through here: the actor is not a process actor,
        is not running (starting, restarting, ending), or runs where that worker cannot
        connect (a worker on the driver's machine and one on a node)."""
        target = self.runtime.lookup(actor_id)
        if not isinstance(target, ProcessActor) or not target.running:
            return None
        worker, conn = target.worker, target.conn
        if worker is None or conn is None or conn.is_closing():
            return None
        if ("tcp" if target.key.node is not None else "unix") != transport:
            return None
        return worker.worker_id, conn.request(PeerEndpoint())

    async def peer_endpoint(self) -> dict[str, Any] | None:
        """In a worker, for the owner's ``PeerEndpoint``: where peers connect to it."""
        return None if self.direct is None else await self.direct.endpoint()

    # ---------------------------------------------------------- the worker side

    def host_cell(
        self,
        actor_id: str,
        actor_class: ActorClass[Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        restart_count: int,
    ) -> ActorCell:
        """The cell for the actor this worker hosts: sync code off the loop, crashes
        restarted here from what is left of its budget (the owner restarts it only when the
        process dies), and notices to the owner of each restart and of its end."""
        total = actor_class.actor_options.max_restarts
        left = -1 if total < 0 else max(total - restart_count, 0)
        hosted = actor_class.options(max_restarts=left)
        runtime = cast(Any, self.runtime)  # cells still type their runtime concretely
        cell = ActorCell(runtime, hosted, args, kwargs, None, actor_id)
        cell.max_restarts = total
        cell.restart_count = restart_count
        cell.on_restart = self._notify_restarted
        host(cell)  # its code's own threads run for it
        threads = hosted.actor_options.max_concurrency
        if threads == 1:
            cell.executor = self._idle_threads.pop() if self._idle_threads else ActorThread(
                "actorrt-actor"
            )
        else:
            cell.executor = ThreadPoolRunner(threads, f"actorrt-{cell.cls_name}")
        cell.on_finish = self._hosted_ended
        return cell

    def _hosted_ended(self, cell: ActorCell, error: ActorDiedError) -> None:
        if running_hosted() is cell:
            host(None)
        executor, cell.executor = cell.executor, None
        if isinstance(executor, ActorThread) and not executor.busy and len(self._idle_threads) < 4:
            self._idle_threads.append(executor)  # reused by the worker's next actor
        elif executor is not None:
            executor.close()
            executor.join(THREAD_END_WAIT)
        left = self._end_what_it_started()
        if left and self.head is not None and not self.head.is_closing():
            # Before the end is reported (the stop's reply, or Died): the owner retires the
            # worker instead of pooling it.
            self.head.notify(Retire(cell.actor_id, left))
        self._notify_died(cell, error)

    def _end_what_it_started(self) -> str:
        """Kill every process the ended actor started; say what is left that could not be
        ended (threads, a process stuck in the kernel), ``""`` when nothing is."""
        processes = end_descendants(self._own_processes)
        threads = actor_threads()
        left = []
        if threads:
            names = ", ".join(repr(t.name) for t in threads[:5])
            more = f" and {len(threads) - 5} more" if len(threads) > 5 else ""
            left.append(f"{len(threads)} thread(s) ({names}{more})")
        if processes:
            left.append(f"{len(processes)} process(es) that did not end (pids {processes[:10]})")
        return " and ".join(left)

    def attach_owner(
        self, conn: Connection, address: RefAddress, own_processes: Collection[int] = ()
    ) -> None:
        """In a worker: from now on the owning runtime is reached through ``conn``, and this
        process's actors live at ``address`` (the owner's runtime id, this worker's id).
        ``own_processes``: the worker's own children (its watcher), spared when the processes
        an ended actor started are killed."""
        self.head = conn
        self.address = address
        self._own_processes = tuple(own_processes)
        self.runtime.waits.listener = self._notify_wait

    def attach_peers(self, side: PeerSide, worker_id: str) -> None:
        """In a worker, once attached to its owner: take and make direct connections to the
        other workers of its runtime, as ``side`` says (``_direct``)."""
        assert self.head is not None
        self.direct = DirectRoutes(
            side, worker_id, self.head, self.host.peer_dispatcher, self.codec
        )

    def _notify_wait(self, waiter: Hashable, target: Hashable, added: bool) -> None:
        if self.head is not None and not self.head.is_closing():
            cell = self.runtime.lookup(str(waiter))
            serial = cell is None or self.runtime.waits.saturated(
                waiter, getattr(cell, "max_concurrency", 1)
            )
            self.head.notify(WaitEdge(str(waiter), str(target), added, serial))

    def _notify_restarted(self, cell: ActorCell) -> None:
        if self.head is not None and not self.head.is_closing():
            self.head.notify(Restarted(cell.actor_id))

    def _notify_died(self, cell: ActorCell, error: ActorDiedError) -> None:
        if cell.requested_end:
            return  # the owner asked for this end and hears of it in the reply
        if self.head is not None and not self.head.is_closing():
            self.head.notify(Died(cell.actor_id, error))

    async def spawn_via_owner(
        self, actor_class: ActorClass[Any], args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> ActorRef[Any]:
        assert self.head is not None
        # The spawning actor and its ancestors here, nearest first: the owner knows the
        # outermost (the actor it placed in this worker), not the inline ones inside it.
        chain = []
        cell = current_cell.get()
        while cell is not None:
            chain.append((cell.actor_id, cell.describe()))
            cell = cell.parent
        # A spawn bounded here by asyncio.wait_for waits there: say so (no wait edge).
        bounded = bounded_by_awaiter()
        self._spawns += 1
        token = f"{self.runtime.runtime_id}-s{self._spawns}"
        reply = self.head.request(
            SpawnProcess(actor_class, list(args), kwargs, chain, bounded, token),
            context=f"the class and constructor arguments of {actor_class.__name__}",
        )
        try:
            ref: ActorRef[Any] = await reply
        except asyncio.CancelledError:
            # Given up here (a timeout, a cancelled task): withdraw it there too.
            if not self.head.is_closing():
                self.head.notify(SpawnCancel(token))
            raise
        return ref

    async def get_actor_via_owner(self, name: str) -> ActorRef[Any]:
        assert self.head is not None
        ref: ActorRef[Any] = await self.head.request(GetActor(name))
        return ref

    # ------------------------------------------------------------------- refs

    def resolve(self, actor_id: str) -> Any:
        """The target of a message to ``actor_id``: an actor of this process, or the relay
        on the connection that reaches it; ``None`` if neither is known here."""
        target = self.runtime.lookup(actor_id)
        if target is None:
            target = self._relays.get(actor_id)
        return target

    def encode_ref(self, ref: ActorRef[Any]) -> bytes:
        """The codec's hook: a ref's wire form, with the address of its actor."""
        target = ref._cell
        address = target.address if isinstance(target, (RelayTarget, DeadTarget)) else (
            self.address  # an actor of this process (or, in the owner, a process actor)
        )
        methods = sorted(target.methods)
        return encode_wire_ref(
            WireRef(address, target.actor_id, target.cls_name, methods, target.name)
        )

    def decode_ref(self, data: bytes) -> ActorRef[Any]:
        """The codec's hook: resolve a ref's address to a target here (module docstring)."""
        return ActorRef(self._target_of(decode_wire_ref(data)))

    def _target_of(self, wire: WireRef) -> Any:
        address, actor_id = wire.address, wire.actor_id
        methods = frozenset(wire.methods)
        if address.runtime != self.address.runtime:
            return DeadTarget(
                self.runtime, address, actor_id, wire.cls_name, methods, wire.name,
                why=f"belonged to runtime {address.runtime}, which is gone (this process runs "
                f"under runtime {self.address.runtime}); refs do not outlive their runtime",
                reason=DeathReason.RUNTIME_SHUT_DOWN,
            )
        target = self.resolve(actor_id)
        if target is not None:
            return target
        if address == self.address:
            return self._dead(wire, methods)  # ours, and it has ended
        conn, via = self._route(address)
        if conn is None:
            return self._dead(wire, methods, via)
        relay = RelayTarget(
            self.runtime, conn, address, actor_id, wire.cls_name, methods, wire.name, via,
            # A process actor (addressed to the owner) may be called directly (``_direct``).
            routes=self.direct if address.worker is None else None,
        )
        self._relays[actor_id] = relay
        return relay

    def _route(self, address: RefAddress) -> tuple[Connection | None, str]:
        """The connection that reaches ``address`` from here (``None``: nothing does), and
        what it leads to, for error messages."""
        if self.head is not None:
            return self.head, "the runtime that owns"  # the owner routes it on
        worker = self._pool.worker(address.worker) if self._pool and address.worker else None
        conn = worker.conn if worker is not None and worker.alive else None
        if conn is None or conn.is_closing():
            return None, f"the worker process {address.worker} that hosted"
        return conn, "the worker process that hosts"

    def _dead(self, wire: WireRef, methods: frozenset[str], via: str | None = None) -> RemoteActor:
        if via is None:
            why, reason = "no longer exists", DeathReason.STOPPED
        else:
            why, reason = f"cannot be reached: {via} it has exited", DeathReason.PROCESS_DIED
        return DeadTarget(
            self.runtime, wire.address, wire.actor_id, wire.cls_name, methods, wire.name,
            why=why, reason=reason,
        )
