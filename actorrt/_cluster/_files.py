"""A cluster's files on one machine, its token and its addresses.

The head writes its state into a private directory (``ACTORRT_CLUSTER_DIR``, by default
``/tmp/actorrt-cluster-<uid>``): the token (mode 0600), its TLS certificate and key, and
``head.json`` (its address and pid). Node agents add ``node-<pid>.json``. ``actorrt stop``
ends the processes those files name; ``address="auto"`` reads ``head.json``.

The token never appears on a command line (where ``ps`` would show it): a joining node or a
driver reads it from ``ACTORRT_CLUSTER_TOKEN``, from the file ``ACTORRT_CLUSTER_TOKEN_FILE``
names, or from the cluster directory's ``token`` (on the head's own machine).
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import os
import socket
from typing import Any

from .._errors import ActorrtError
from .._wire import _auth

__all__ = [
    "ClusterConfigError",
    "cluster_dir",
    "local_address_towards",
    "parse_address",
    "read_head_file",
    "read_token",
    "running_head",
    "write_json",
    "write_token",
]

DIR_VARIABLE = "ACTORRT_CLUSTER_DIR"
TOKEN_VARIABLE = _auth.TOKEN_VARIABLE
TOKEN_FILE_VARIABLE = _auth.TOKEN_FILE_VARIABLE
DEFAULT_PORT = 6380


class ClusterConfigError(ActorrtError, ValueError):
    """A cluster address, token or directory that cannot be used (the message says why)."""


def cluster_dir(create: bool = False) -> str:
    """The directory of this machine's cluster files (private: mode 0700)."""
    path = os.environ.get(DIR_VARIABLE) or f"/tmp/actorrt-cluster-{os.getuid()}"
    if create:
        os.makedirs(path, mode=0o700, exist_ok=True)
        os.chmod(path, 0o700)
    return path


def parse_address(address: str) -> tuple[str, int]:
    """``HOST:PORT`` (or ``HOST``: the default port) as a pair, checked.

    Raises:
        ClusterConfigError: not of that form, or a port outside 1-65535.
    """
    if not isinstance(address, str) or not address.strip():
        raise ClusterConfigError(
            f"a cluster address is 'HOST:PORT' (e.g. '10.0.0.5:{DEFAULT_PORT}'), got "
            f"{address!r}"
        )
    text = address.strip()
    if text.startswith("["):  # [IPv6]:port
        host, _, rest = text[1:].partition("]")
        port_text = rest.lstrip(":") or str(DEFAULT_PORT)
    elif text.count(":") == 1:
        host, port_text = text.split(":")
    else:
        host, port_text = text, str(DEFAULT_PORT)
    try:
        port = int(port_text)
    except ValueError:
        port = -1
    if not host or not 0 < port < 65536:
        raise ClusterConfigError(
            f"cluster address {address!r}: expected 'HOST:PORT' with a port from 1 to 65535"
        )
    return host, port


def write_token(directory: str, token: bytes | None = None) -> bytes:
    """Write ``token`` (by default a new one) to ``directory/token`` (mode 0600)."""
    token = _auth.new_secret() if token is None else token
    path = os.path.join(directory, "token")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(_auth.secret_to_text(token) + "\n")
    os.chmod(path, 0o600)
    return token


def read_token(explicit_file: str | None = None) -> bytes:
    """The cluster's token: from ``explicit_file``, ``ACTORRT_CLUSTER_TOKEN``,
    ``ACTORRT_CLUSTER_TOKEN_FILE``, or this machine's cluster directory, in that order.

    Raises:
        ClusterConfigError: none of them has a token, or it is not one.
    """
    sources: list[tuple[str, str | None]] = []
    if explicit_file:
        sources.append((f"the file {explicit_file}", _read(explicit_file, must=True)))
    else:
        sources.append((f"${TOKEN_VARIABLE}", os.environ.get(TOKEN_VARIABLE)))
        named = os.environ.get(TOKEN_FILE_VARIABLE)
        if named:
            sources.append((f"the file {named} (${TOKEN_FILE_VARIABLE})", _read(named, True)))
        default = os.path.join(cluster_dir(), "token")
        sources.append((f"the file {default}", _read(default, must=False)))
    for where, text in sources:
        if text is None or not text.strip():
            continue
        try:
            return _auth.secret_from_text(text)
        except ValueError as exc:
            raise ClusterConfigError(
                f"the cluster token in {where} is not a token ({exc}); copy the head's "
                "token file as it is"
            ) from None
    raise ClusterConfigError(
        "no cluster token: give the head's token file with --token-file (for `actorrt "
        f"start`) or ${TOKEN_FILE_VARIABLE}, or the token itself in ${TOKEN_VARIABLE}; the "
        f"head wrote it to {os.path.join(cluster_dir(), 'token')} on its machine"
    )


def _read(path: str, must: bool) -> str | None:
    try:
        with open(path) as f:
            return f.read()
    except FileNotFoundError:
        if must:
            raise ClusterConfigError(f"the token file {path} does not exist") from None
        return None
    except OSError as exc:
        raise ClusterConfigError(f"cannot read the token file {path}: {exc}") from None


def write_json(path: str, data: dict[str, Any]) -> None:
    """Write ``data`` to ``path`` atomically (mode 0600)."""
    tmp = f"{path}.{os.getpid()}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump(data, f)
    os.replace(tmp, path)


def read_head_file() -> dict[str, Any]:
    """``head.json`` of this machine's cluster directory (for ``address="auto"``).

    Raises:
        ClusterConfigError: no head runs from this machine's cluster directory.
    """
    path = os.path.join(cluster_dir(), "head.json")
    try:
        with open(path) as f:
            data: dict[str, Any] = json.load(f)
    except (OSError, ValueError):
        raise ClusterConfigError(
            f"address='auto': no cluster head was started on this machine ({path} does not "
            "exist); start one with `actorrt start --head`, or give the head's HOST:PORT"
        ) from None
    with contextlib.suppress(OSError, KeyError, TypeError):
        os.kill(int(data["pid"]), 0)
        return data
    raise ClusterConfigError(
        f"address='auto': the head that wrote {path} (pid {data.get('pid')}) is no longer "
        "running; start one with `actorrt start --head`"
    )


def running_head() -> str | None:
    """The address of the head started on this machine (its cluster directory), if it still
    runs; else ``None``."""
    try:
        with open(os.path.join(cluster_dir(), "head.json")) as f:
            data = json.load(f)
        os.kill(int(data["pid"]), 0)
        return str(data["address"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def local_address_towards(host: str, port: int) -> str:
    """This machine's address on the route to ``host`` (what peers there can reach)."""
    with contextlib.suppress(ValueError):
        if ipaddress.ip_address(host).is_loopback:
            return host
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect((host, port))  # UDP: picks the route, sends nothing
        except OSError as exc:
            raise ClusterConfigError(f"no route to the cluster at {host}:{port}: {exc}") from None
        return str(probe.getsockname()[0])


def cluster_address(address: object) -> tuple[str, int] | None:
    """A runtime's ``address=`` argument: ``None`` or ``"local"`` for this machine alone,
    ``"auto"`` for the head started on this machine, else ``"HOST:PORT"``.

    Raises:
        ClusterConfigError: an address of another form (named, with what is allowed).
    """
    if address is None or address == "local":
        return None
    if address == "auto":
        return parse_address(str(read_head_file()["address"]))
    if not isinstance(address, str):
        raise ClusterConfigError(
            f"address must be 'HOST:PORT', 'auto' or None, got {address!r}"
        )
    return parse_address(address)
