"""The long-running processes of a cluster: a head (with its machine's node agent) or a node.

``actorrt start`` runs one of these in the foreground (``--block``) or in a background
process of its own; each runs until SIGTERM or SIGINT, then ends its workers and leaves.
Each writes a file into this machine's cluster directory once it is ready (``head.json``,
``node-<pid>.json``: its address and pid), which ``actorrt stop`` and ``address="auto"``
read, and removes it when it ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import shutil
import signal
import socket
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from .._wire import _tls
from ..resources import NodeInventory, detect_local_node
from ._agent import NodeAgent
from ._files import (
    DEFAULT_PORT,
    cluster_dir,
    local_address_towards,
    parse_address,
    read_token,
    write_json,
    write_token,
)
from ._head import Head


class HeadView(Protocol):
    """A server that shows the head (the dashboard): where it is, and how it stops."""

    url: str

    async def close(self) -> None: ...


#: Starts a view of the head (given the head and the cluster's token) on its loop.
ViewStarter = Callable[[Head, bytes], Awaitable[HeadView]]

__all__ = ["NodeOptions", "default_ip", "serve_head", "serve_node"]


@dataclasses.dataclass(frozen=True)
class NodeOptions:
    """What a machine offers, as ``actorrt start`` was told (``None``: detect it)."""

    num_cpus: float | None = None
    num_gpus: int | None = None
    memory: int | None = None
    resources: dict[str, float] | None = None

    def inventory(self) -> NodeInventory:
        return detect_local_node(
            num_cpus=self.num_cpus, num_gpus=self.num_gpus, memory=self.memory,
            resources=self.resources,
        )


def default_ip() -> str:
    """This machine's address for its peers: the one its host name resolves to, if that is
    not a loopback address, else the address of its first route."""
    with contextlib.suppress(OSError):
        ip = socket.gethostbyname(socket.gethostname())
        if not ip.startswith("127."):
            return ip
    with contextlib.suppress(Exception):
        return local_address_towards("10.255.255.255", 1)
    return "127.0.0.1"


async def _until_stopped() -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        await stop.wait()
    finally:
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(sig)


def _tls_files(directory: str, cert: str | None, key: str | None, ip: str) -> _tls.TlsFiles:
    if (cert is None) != (key is None):
        raise ValueError("give both --tls-cert and --tls-key, or neither")
    if cert is not None and key is not None:
        files = _tls.TlsFiles(os.path.abspath(cert), os.path.abspath(key))
        _tls.server_context(files)  # a clear error now if they cannot be used
        return files
    return _own_certificate(directory, ip)


def _own_certificate(directory: str, ip: str) -> _tls.TlsFiles:
    """A self-signed pair for this process, in a folder of its own (removed at its end)."""
    folder = os.path.join(directory, f"tls-{os.getpid()}")
    os.makedirs(folder, mode=0o700, exist_ok=True)
    return _tls.generate_self_signed(folder, [ip])


async def serve_head(
    port: int = DEFAULT_PORT,
    ip: str | None = None,
    node: NodeOptions | None = None,
    tls_cert: str | None = None,
    tls_key: str | None = None,
    ready: Any = None,
    token_file: str | None = None,
    dashboard: ViewStarter | None = None,
) -> None:
    """Run a head, and a node agent for this machine unless ``node`` is ``None``, until
    SIGTERM or SIGINT. ``ready(info)`` is called once both serve. ``token_file``: the
    cluster's token (a Kubernetes Secret, say); by default a new one is made. Either way it
    is written to this machine's cluster directory, where drivers here find it.
    ``dashboard``: starts the cluster's dashboard on the head (its URL is
    ``info["dashboard"]``); it is closed first when the head stops."""
    ip = ip or default_ip()
    directory = cluster_dir(create=True)
    token = write_token(directory, read_token(token_file) if token_file else None)
    files = _tls_files(directory, tls_cert, tls_key, ip)
    head = Head(ip, port, token, files)
    host, bound = await head.start()
    agent = None
    runs = None
    server = None
    try:
        if dashboard is not None:
            server = await dashboard(head, token)
        if node is not None:
            agent = NodeAgent((host, bound), token, node.inventory(), ip, files)
            await agent.start()
            runs = asyncio.get_running_loop().create_task(agent.run())
            await asyncio.wait_for(agent.joined.wait(), 30)
        info = {
            "role": "head", "address": f"{host}:{bound}", "pid": os.getpid(),
            "token_file": os.path.join(directory, "token"),
            "dashboard": None if server is None else server.url,
        }
        head_file = os.path.join(directory, "head.json")
        write_json(head_file, info)
        try:
            if ready is not None:
                ready(info)
            await _until_stopped()
        finally:
            with contextlib.suppress(OSError):
                os.unlink(head_file)
    finally:
        if server is not None:
            await server.close()
        if agent is not None:
            await agent.close()
        if runs is not None:
            runs.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await runs
        await head.close()
        shutil.rmtree(os.path.join(directory, f"tls-{os.getpid()}"), ignore_errors=True)


async def _joined_or_refused(agent: NodeAgent, runs: asyncio.Task[None]) -> None:
    """Wait until ``agent`` has joined; raise what ended its ``runs`` first (a refusal)."""
    joined = asyncio.ensure_future(agent.joined.wait())
    try:
        await asyncio.wait([joined, runs], return_when=asyncio.FIRST_COMPLETED)
    finally:
        joined.cancel()
    if not agent.joined.is_set():
        runs.result()  # the refusal, raised here


async def serve_node(
    address: str,
    ip: str | None = None,
    node: NodeOptions | None = None,
    token_file: str | None = None,
    port: int = 0,
    ready: Any = None,
) -> None:
    """Run a node agent joined to the head at ``address`` until SIGTERM or SIGINT.
    ``ready(info)`` is called once it has joined.

    Raises:
        AuthenticationError: the head refused this node (a wrong token), at the first
            join or a later one; an unreachable head is tried again instead.
        ProtocolVersionError: the head runs another actorrt release.
    """
    head = parse_address(address)
    token = read_token(token_file)
    ip = ip or local_address_towards(*head)
    directory = cluster_dir(create=True)
    files = _own_certificate(directory, ip)
    agent = NodeAgent(head, token, (node or NodeOptions()).inventory(), ip, files, port)
    await agent.start()
    runs = asyncio.get_running_loop().create_task(agent.run())
    node_file = os.path.join(directory, f"node-{os.getpid()}.json")
    try:
        await _joined_or_refused(agent, runs)
        info = {"role": "node", "head": address, "address": f"{ip}:{agent.port}",
                "pid": os.getpid(), "node_id": agent.node_id}
        write_json(node_file, info)
        if ready is not None:
            ready(info)
        stopped = asyncio.ensure_future(_until_stopped())
        try:  # until stopped, or refused when joining again (a head with a new token)
            await asyncio.wait([stopped, runs], return_when=asyncio.FIRST_COMPLETED)
        finally:
            stopped.cancel()
            await asyncio.gather(stopped, return_exceptions=True)
        if runs.done():
            runs.result()
    finally:
        with contextlib.suppress(OSError):
            os.unlink(node_file)
        await agent.close()
        runs.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await runs
        shutil.rmtree(os.path.join(directory, f"tls-{os.getpid()}"), ignore_errors=True)
