"""A runtime's cross-process side: its socket, secret, codec, worker pool and host.

Made on first need: a runtime that never spawns a worker-process actor opens no socket. In a
worker process the same object holds the connection to the owning runtime instead of a
server: the worker's refs to actors elsewhere go through it.
"""

from __future__ import annotations

import asyncio
import os
import shutil
from typing import TYPE_CHECKING, Any

import msgpack

from .._core._cell import ActorCell
from .._core._context import current_cell
from .._core._ref import ActorRef
from .._core._threads import ActorThread, ThreadPoolRunner
from .._core._waits import bounded_by_awaiter
from .._errors import ActorDiedError
from .._wire import _auth
from .._wire._codec import Codec
from .._wire._connection import Connection
from .._wire._transport import WireServer, make_private_dir, serve_unix
from ._dispatch import Host
from ._pool import THREAD_VARIABLES, WorkerKey, WorkerPool
from ._process_actor import ProcessActor
from ._proxies import DeadTarget, RelayTarget

if TYPE_CHECKING:
    from .._core._actor import ActorClass
    from .._runtime import Runtime

NOSET_CUDA = "ACTORRT_NOSET_CUDA_VISIBLE_DEVICES"


class Workers:
    """Everything one runtime needs to own worker processes, or to be one."""

    def __init__(self, runtime: Runtime, worker_env: dict[str, str]) -> None:
        self.runtime = runtime
        self.worker_env = worker_env
        self.host = Host(runtime)
        self.codec = Codec(
            ref_types=(ActorRef,), encode_ref=self._encode_ref, decode_ref=self._decode_ref
        )
        self.head: Connection | None = None  # in a worker: the owning runtime
        self._relays: dict[str, RelayTarget] = {}
        self._spawns = 0
        self._idle_threads: list[ActorThread] = []
        self._dir: str | None = None
        self._server: WireServer | None = None
        self._pool: WorkerPool | None = None
        self._opening: asyncio.Future[None] | None = None

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
        self._server = await serve_unix(path, self.host.handle, secret, codec=self.codec)
        self._pool = WorkerPool(path, _auth.secret_to_text(secret))

    def started_pool(self) -> WorkerPool:
        assert self._pool is not None
        return self._pool

    def worker_connected(self, worker_id: str, conn: Connection) -> bool:
        return self._pool is not None and self._pool.connected(worker_id, conn)

    def worker_key(
        self, actor_class: ActorClass[Any], gpus: tuple[str, ...], cpus: float
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
        return WorkerKey.current(env, cuda)

    def new_process_actor(
        self,
        actor_class: ActorClass[Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        parent: Any,
        actor_id: str,
        gpus: tuple[str, ...],
        cpus: float,
    ) -> ProcessActor:
        key = self.worker_key(actor_class, gpus, cpus)
        return ProcessActor(self.runtime, actor_class, args, kwargs, parent, actor_id, key)

    async def close(self) -> None:
        await self.host.close()
        if self._pool is not None:
            await self._pool.shutdown()
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
        if self.head is not None:
            self.head.close()

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
        cell = ActorCell(self.runtime, hosted, args, kwargs, None, actor_id)
        cell.max_restarts = total
        cell.restart_count = restart_count
        cell.on_restart = self._notify_restarted
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
        executor, cell.executor = cell.executor, None
        if isinstance(executor, ActorThread) and not executor.busy and len(self._idle_threads) < 4:
            self._idle_threads.append(executor)  # reused by the worker's next actor
        elif executor is not None:
            executor.close()
        self._notify_died(cell, error)

    def attach_owner(self, conn: Connection) -> None:
        """In a worker: from now on the owning runtime is reached through ``conn``."""
        self.head = conn
        self.runtime.waits.listener = self._notify_wait

    def _notify_wait(self, waiter: Any, target: Any, added: bool) -> None:
        if self.head is not None and not self.head.is_closing():
            cell = self.runtime.lookup(waiter)
            serial = cell is None or getattr(cell, "max_concurrency", 1) == 1
            self.head.notify(("wait_edge", waiter, target, added, serial))

    def _notify_restarted(self, cell: ActorCell) -> None:
        if self.head is not None and not self.head.is_closing():
            self.head.notify(("restarted", cell.actor_id))

    def _notify_died(self, cell: ActorCell, error: ActorDiedError) -> None:
        if cell.requested_end:
            return  # the owner asked for this end and hears of it in the reply
        if self.head is not None and not self.head.is_closing():
            self.head.notify(("died", cell.actor_id, error))

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
            ("spawn_process", actor_class, args, kwargs, chain, bounded, token),
            context=f"the class and constructor arguments of {actor_class.__name__}",
        )
        try:
            ref: ActorRef[Any] = await reply
        except asyncio.CancelledError:
            # Given up here (a timeout, a cancelled task): withdraw it there too.
            if not self.head.is_closing():
                self.head.notify(("spawn_cancel", token))
            raise
        return ref

    async def get_actor_via_owner(self, name: str) -> ActorRef[Any]:
        assert self.head is not None
        ref: ActorRef[Any] = await self.head.request(("get_actor", name))
        return ref

    # ------------------------------------------------------------------- refs

    def _encode_ref(self, ref: ActorRef[Any]) -> bytes:
        target = ref._cell
        packed: bytes = msgpack.packb(
            (target.actor_id, target.cls_name, sorted(target.methods), target.name)
        )
        return packed

    def _decode_ref(self, data: bytes) -> ActorRef[Any]:
        actor_id, cls_name, methods, name = msgpack.unpackb(data)
        target = self.runtime.lookup(actor_id)
        if target is None:
            if self.head is not None:
                target = self._relays.get(actor_id)
                if target is None:
                    target = RelayTarget(
                        self.runtime, self.head, actor_id, cls_name, frozenset(methods), name
                    )
                    self._relays[actor_id] = target
            else:
                target = DeadTarget(self.runtime, actor_id, cls_name, frozenset(methods))
        return ActorRef(target)
