"""Where the dashboard listens and who may read it: host, port, token."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from typing import Any

__all__ = ["DEFAULT_HOST", "DEFAULT_PORT", "DashboardConfig", "dashboard_config", "is_loopback"]

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8265  # Ray's dashboard port


@dataclass(frozen=True)
class DashboardConfig:
    """The dashboard's settings.

    Args:
        host: the address to bind (default ``127.0.0.1``, this machine only). Any other
            address needs a token: requests without it are refused (401, 403 when wrong).
        port: the TCP port; 0 lets the system choose a free one. Left out: 8265 (Ray's),
            or, when that is in use, the next free port above it (as Ray does).
        token: the token a non-loopback bind requires (given on a loopback one, it is
            required there too). Left out: the cluster's token where the runtime joined a
            cluster, else a random one, printed in the URL.
    """

    host: str = DEFAULT_HOST
    port: int | None = None
    token: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.host, str) or not self.host.strip():
            raise ValueError(f"dashboard host must be a non-empty string, got {self.host!r}")
        if self.port is not None:
            if isinstance(self.port, bool) or not isinstance(self.port, int):
                raise TypeError(f"dashboard port must be an int, got {self.port!r}")
            if not 0 <= self.port <= 65535:
                raise ValueError(f"dashboard port must be 0..65535, got {self.port}")
        if self.token is not None and (not isinstance(self.token, str) or len(self.token) < 8):
            raise ValueError("dashboard token must be a string of at least 8 characters")


def dashboard_config(value: Any) -> DashboardConfig | None:
    """``Runtime(dashboard=...)``'s value as settings: ``None``/``False`` (no dashboard),
    ``True`` (the defaults), a :class:`DashboardConfig`, or a dict of its fields."""
    if value is None or value is False:
        return None
    if value is True:
        return DashboardConfig()
    if isinstance(value, DashboardConfig):
        return value
    if isinstance(value, dict):
        unknown = sorted(set(value) - {"host", "port", "token"})
        if unknown:
            raise TypeError(f"dashboard= got unknown keys {unknown}; it takes host, port, token")
        return DashboardConfig(**value)
    raise TypeError(
        f"dashboard= must be True, False, None, a dict or a DashboardConfig, got {value!r}"
    )


def is_loopback(host: str) -> bool:
    """Whether binding ``host`` reaches this machine only."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a name: it may resolve anywhere
