"""The cluster commands of the ``actorrt`` command line (docs/cluster.md).

::

    actorrt start --head [--port P] [--node-ip-address IP] [--num-cpus N] [--num-gpus N]
                  [--memory BYTES] [--resources JSON] [--tls-cert F --tls-key F] [--block]
    actorrt start --address HOST:PORT [--token-file F] [--node-ip-address IP] [--port P]
                  [--num-cpus N] [--num-gpus N] [--memory BYTES] [--resources JSON] [--block]
    actorrt stop [--timeout S]
    actorrt status --address HOST:PORT|auto [--json]

Without ``--block``, ``start`` runs the head or node in a background process of its own
(its output in the cluster directory's ``*.log``), waits until it is ready and says how to
join it; with ``--block`` it runs in the foreground until SIGTERM or Ctrl-C. ``stop`` ends
every head and node this machine's cluster directory names. The token is never taken on
the command line: see ``actorrt._cluster._files``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import glob
import importlib
import json
import logging
import math
import os
import signal
import subprocess
import sys
import time
from typing import Any

import uvloop

from .._cluster._files import (
    DEFAULT_PORT,
    ClusterConfigError,
    cluster_address,
    cluster_dir,
    read_token,
    running_head,
)
from .._cluster._head import Head
from .._cluster._serve import HeadView, NodeOptions, ViewStarter, serve_head, serve_node
from .._errors import ActorrtError
from .._wire import _tls
from .._wire._auth import secret_to_text
from .._wire._messages import ClusterStatus
from .._wire._transport import connect_tcp

__all__ = [
    "add_cluster_commands", "cluster_status", "head_started_here", "render_cluster", "start",
    "stop",
]

READY_TIMEOUT = 60.0  # seconds a background start may take to be ready


class _Failed(ActorrtError):
    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.code = code


def add_cluster_commands(commands: Any) -> None:
    start_cmd = commands.add_parser(
        "start",
        help="start a cluster's head, or join this machine to one as a node",
        description="Start an actorrt cluster's head (--head: the broker, and a node for "
        "this machine) or join this machine to a cluster as a node (--address HOST:PORT). "
        "The head writes the cluster's token to its cluster directory; give it to joining "
        "nodes and drivers as a file (--token-file, $ACTORRT_CLUSTER_TOKEN_FILE) or in "
        "$ACTORRT_CLUSTER_TOKEN, never on a command line.",
    )
    role = start_cmd.add_mutually_exclusive_group(required=True)
    role.add_argument("--head", action="store_true", help="start the cluster's head")
    role.add_argument("--address", metavar="HOST:PORT", help="the head to join as a node")
    start_cmd.add_argument(
        "--port", type=_port, default=None,
        help=f"the port to listen on (head: default {DEFAULT_PORT}; node: any free one)",
    )
    start_cmd.add_argument(
        "--node-ip-address", metavar="IP", help="this machine's address as its peers reach it"
    )
    start_cmd.add_argument("--num-cpus", type=_amount("--num-cpus"), metavar="N")
    start_cmd.add_argument("--num-gpus", type=_whole("--num-gpus"), metavar="N")
    start_cmd.add_argument("--memory", type=_whole("--memory"), metavar="BYTES")
    start_cmd.add_argument(
        "--resources", type=_resources, metavar="JSON",
        help='custom resources, e.g. \'{"TRAIN_DRIVER_RESOURCE": 1}\'',
    )
    start_cmd.add_argument(
        "--token-file", metavar="F",
        help="the cluster's token: for a node, the head's token file; for the head, a token "
        "to use instead of a new one (a Kubernetes Secret, say)",
    )
    start_cmd.add_argument("--tls-cert", metavar="F", help="the head's certificate (PEM)")
    start_cmd.add_argument("--tls-key", metavar="F", help="the head's private key (PEM)")
    start_cmd.add_argument(
        "--include-dashboard", type=_boolean, nargs="?", const=True, default=False,
        metavar="BOOL",
        help="the head serves the cluster's dashboard (--include-dashboard=true, Ray's "
        "spelling; needs the dashboard extra)",
    )
    start_cmd.add_argument(
        "--dashboard-host", default=None, metavar="HOST",
        help="the address the dashboard binds (default 127.0.0.1; any other needs the "
        "cluster token to read it)",
    )
    start_cmd.add_argument(
        "--dashboard-port", type=_port, default=None, metavar="PORT",
        help="the dashboard's port (default 8265, or the next free one; 0: any free one)",
    )
    start_cmd.add_argument(
        "--block", action="store_true", help="run in the foreground until SIGTERM or Ctrl-C"
    )
    stop_cmd = commands.add_parser(
        "stop", help="stop the cluster head and nodes started on this machine",
        description="Stop every actorrt head and node that this machine's cluster directory "
        "names (SIGTERM, then SIGKILL after --timeout seconds); their workers go with them.",
    )
    stop_cmd.add_argument("--timeout", type=_amount("--timeout"), default=10.0, metavar="S")


def _port(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = -1
    if not 0 <= value < 65536:
        raise argparse.ArgumentTypeError(f"expected a port from 0 to 65535, got {text!r}")
    return value


def _boolean(text: str) -> bool:
    word = text.strip().lower()
    if word in ("true", "1", "yes", "on"):
        return True
    if word in ("false", "0", "no", "off"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")


def _amount(option: str) -> Any:
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            value = -1.0
        if not (value >= 0 and math.isfinite(value)):
            raise argparse.ArgumentTypeError(f"{option}: expected a number >= 0, got {text!r}")
        return value

    return parse


def _whole(option: str) -> Any:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = -1
        if value < 0:
            raise argparse.ArgumentTypeError(
                f"{option}: expected a whole number >= 0, got {text!r}"
            )
        return value

    return parse


def _resources(text: str) -> dict[str, float]:
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"--resources: not JSON ({exc}): {text!r}") from None
    if not isinstance(value, dict) or not all(
        isinstance(k, str) and isinstance(v, int | float) and not isinstance(v, bool) and v >= 0
        for k, v in value.items()
    ):
        raise argparse.ArgumentTypeError(
            f"--resources: expected a JSON object of names to amounts >= 0, got {text!r}"
        )
    return {k: float(v) for k, v in value.items()}


def start(args: argparse.Namespace, argv: list[str]) -> int:
    options = NodeOptions(args.num_cpus, args.num_gpus, args.memory, args.resources)
    misplaced = [
        option for option, given in (("--tls-cert", args.tls_cert), ("--tls-key", args.tls_key))
        if given is not None and args.address is not None
    ]
    if misplaced:
        print(f"actorrt start: error: {' and '.join(misplaced)} are the head's (--head); a "
              "node makes its own certificate", file=sys.stderr)
        return 2
    dashboard_options = [
        option for option, given in (
            ("--include-dashboard", args.include_dashboard),
            ("--dashboard-host", args.dashboard_host),
            ("--dashboard-port", args.dashboard_port),
        ) if given not in (None, False)
    ]
    if dashboard_options and not args.head:
        print(f"actorrt start: error: {', '.join(dashboard_options)}: the dashboard is the "
              "head's (--head); a node serves none", file=sys.stderr)
        return 2
    dashboard = None
    if args.include_dashboard:
        try:
            from ..dashboard import DashboardConfig

            importlib.import_module("actorrt.dashboard._server")  # its extra is installed
            dashboard = _head_dashboard(DashboardConfig(
                args.dashboard_host or DashboardConfig.host, args.dashboard_port
            ))
        except (ImportError, ValueError, TypeError) as exc:
            print(f"actorrt start: error: --include-dashboard: {exc}", file=sys.stderr)
            return 2
    elif args.dashboard_host is not None or args.dashboard_port is not None:
        print("actorrt start: error: --dashboard-host and --dashboard-port need "
              "--include-dashboard=true", file=sys.stderr)
        return 2
    try:
        options.inventory()  # bad amounts are refused here, not in the background
        if args.address is not None or args.token_file is not None:
            if args.address is not None:
                cluster_address(args.address)
            read_token(args.token_file)
    except (ValueError, TypeError) as exc:
        print(f"actorrt start: error: {exc}", file=sys.stderr)
        return 2
    if not args.block:
        return _start_in_background(argv)
    _log_to_stderr()
    try:
        if args.head:
            uvloop.run(serve_head(
                DEFAULT_PORT if args.port is None else args.port, args.node_ip_address,
                options, args.tls_cert, args.tls_key, ready=_say_ready,
                token_file=args.token_file, dashboard=dashboard,
            ))
        else:
            uvloop.run(serve_node(
                args.address, args.node_ip_address, options, args.token_file,
                args.port or 0, ready=_say_ready,
            ))
    except (ClusterConfigError, OSError, ValueError) as exc:
        print(f"actorrt start: error: {exc}", file=sys.stderr)
        return 1
    return 0


def _head_dashboard(config: Any) -> ViewStarter:
    """What starts the cluster's dashboard on the head, with ``config``."""

    async def start(head: Head, token: bytes) -> HeadView:
        from ..dashboard._head_state import HeadState
        from ..dashboard._server import DashboardServer

        server = DashboardServer(config, HeadState(head), cluster_token=secret_to_text(token))
        await server.start()
        return server

    return start


def _log_to_stderr() -> None:
    """A head or node says what happens to its members on its output (its log file when in
    the background): joins and departures at INFO, losses and refusals at WARNING or above,
    each with its time. Only the ``actorrt`` logger is configured, and only when nothing
    else configured it."""
    log = logging.getLogger("actorrt")
    if not log.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        log.addHandler(handler)
        log.setLevel(logging.INFO)
        log.propagate = False


def _say_ready(info: dict[str, Any]) -> None:
    if info["role"] == "head":
        address = info["address"]
        print(
            f"actorrt head ready at {address} (pid {info['pid']}).\n"
            f"  token file: {info['token_file']} (copy it to each node; keep it secret)\n"
            f"  join a node:   ACTORRT_CLUSTER_TOKEN_FILE=<token file> actorrt start "
            f"--address {address}\n"
            f"  in a program:  actorrt.init(address='{address}')"
            + (f"\n  dashboard:     {_token_hidden(info['dashboard'])}"
               if info.get("dashboard") else ""),
            flush=True,
        )
    else:
        print(
            f"actorrt node {info['node_id']} ready at {info['address']} (pid {info['pid']}), "
            f"joined the head at {info['head']}",
            flush=True,
        )


def _token_hidden(url: str) -> str:
    """A dashboard URL as printed: its token (the cluster's) is named, not shown."""
    base, sep, _ = url.partition("?token=")
    return f"{base}?token=<the cluster token>" if sep else url


def _start_in_background(argv: list[str]) -> int:
    directory = cluster_dir(create=True)
    log = os.path.join(directory, f"{'head' if '--head' in argv else 'node'}-{time.time():.0f}.log")
    with open(log, "ab") as out:
        child = subprocess.Popen(
            [sys.executable, "-m", "actorrt", *argv, "--block"], stdin=subprocess.DEVNULL,
            stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
        )
    deadline = time.monotonic() + READY_TIMEOUT
    while time.monotonic() < deadline:
        info = _ready_file(directory, child.pid)
        if info is not None:
            _say_ready(info)
            print(f"  output: {log}; stop it with `actorrt stop`")
            return 0
        if child.poll() is not None:
            break
        time.sleep(0.05)
    else:
        child.kill()
    print(f"actorrt start: error: it did not start; its output ({log}):", file=sys.stderr)
    with open(log, errors="replace") as f:
        sys.stderr.write("".join(f.readlines()[-20:]))
    return 1


def _ready_file(directory: str, pid: int) -> dict[str, Any] | None:
    for path in (os.path.join(directory, "head.json"), os.path.join(directory, f"node-{pid}.json")):
        with contextlib.suppress(OSError, ValueError):
            with open(path) as f:
                info: dict[str, Any] = json.load(f)
            if info.get("pid") == pid:
                return info
    return None


def stop(args: argparse.Namespace) -> int:
    directory = cluster_dir()
    files = glob.glob(os.path.join(directory, "head.json")) + glob.glob(
        os.path.join(directory, "node-*.json")
    )
    running: list[tuple[str, int, str]] = []
    for path in files:
        try:
            with open(path) as f:
                info = json.load(f)
            pid = int(info["pid"])
            os.kill(pid, signal.SIGTERM)
            running.append((path, pid, str(info.get("role", "?"))))
        except (OSError, ValueError, KeyError, TypeError):
            with contextlib.suppress(OSError):
                os.unlink(path)  # its process is gone: a stale file
    deadline = time.monotonic() + args.timeout
    while running and time.monotonic() < deadline and any(_alive(p) for _, p, _ in running):
        time.sleep(0.05)
    for path, pid, role in running:
        if _alive(pid):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
            print(f"actorrt stop: killed the {role} (pid {pid}): it did not stop in time")
        else:
            print(f"actorrt stop: stopped the {role} (pid {pid})")
        with contextlib.suppress(OSError):
            os.unlink(path)
    if not running:
        print(f"actorrt stop: no actorrt head or node runs from {directory}")
    return 0


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    with contextlib.suppress(OSError):
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
        if stat[stat.rindex(b")") + 2:][:1] == b"Z":
            return False
    return True


def head_started_here() -> bool:
    """Whether this machine's cluster directory names a head that still runs."""
    return running_head() is not None


def cluster_status(address: str, timeout: float) -> dict[str, Any]:
    """The head's status (``actorrt status --address``)."""
    where = cluster_address(address)
    if where is None:
        raise _Failed(f"--address {address!r}: give the head's HOST:PORT, or 'auto'", 2)
    token = read_token()

    async def fetch() -> dict[str, Any]:
        conn = await connect_tcp(*where, token, tls=_tls.client_context(),
                                 connect_timeout=timeout)
        try:
            data: dict[str, Any] = await asyncio.wait_for(conn.request(ClusterStatus()), timeout)
        finally:
            conn.close()
        return data

    return asyncio.run(fetch())


def render_cluster(data: dict[str, Any]) -> str:
    lines = [
        f"actorrt cluster: head {data['head_id']} at {data['address']} (pid {data['pid']}), "
        f"{len(data['nodes'])} node(s), {len(data['drivers'])} driver(s), "
        f"{data['pending']} pending request(s)",
        "resources (available / total): " + _amounts(data["available"], data["total"]),
        "nodes:",
    ]
    for node in data["nodes"]:
        total = dict(node["resources"])
        lines.append(
            f"  {node['node_id']}  {node['host']}:{node['port']}  "
            + _amounts(node["available"], total)
            + (f"  GPUs {','.join(node['gpu_ids'])}" if node["gpu_ids"] else "")
        )
    if data["drivers"]:
        lines.append("drivers:")
        for driver in data["drivers"]:
            lines.append(f"  {driver['runtime_id']}  {driver['host']} pid {driver['pid']}")
    return "\n".join(lines)


def _amounts(available: dict[str, float], total: dict[str, float]) -> str:
    def show(key: str, value: float) -> str:
        if key == "memory":
            return f"{value / 2**30:.1f}GiB"
        return f"{value:g}"

    return ", ".join(
        f"{key} {show(key, available.get(key, 0.0))}/{show(key, value)}"
        for key, value in sorted(total.items())
    )
