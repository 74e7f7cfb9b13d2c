"""``LightGBMConfig`` and the backend that gives every worker LightGBM's network set-up.

LightGBM's distributed training connects its workers itself, given every worker's
``ip:port`` (``machines``), its own port (``local_listen_port``) and their number
(``num_machines``). Before the training function runs, each rank picks a free port; rank
0 gathers the ranks' ports over a short-lived socket (at the address it broadcasts), with
each rank's address as rank 0 sees it, and sends the whole list back, in rank order.
``get_network_params()`` in the function returns them for ``lightgbm.train``'s params.
"""

from __future__ import annotations

import json
import socket
from dataclasses import dataclass
from typing import Any

from ..backend import BackendConfig, WorkerBackend, WorkerSetup
from ..collective import broadcast_from_rank_zero

__all__ = ["LightGBMConfig", "get_network_params"]

_params: dict[str, Any] | None = None


def get_network_params() -> dict[str, Any]:
    """LightGBM's network parameters for this worker (``machines``, ``local_listen_port``,
    ``num_machines``): merge them into ``lightgbm.train``'s params (Ray's
    ``ray.train.lightgbm.get_network_params``).

    Raises:
        RuntimeError: called outside a ``LightGBMTrainer``'s training function.
    """
    if _params is None:
        raise RuntimeError(
            "get_network_params() works in the training function of a LightGBMTrainer"
        )
    return dict(_params)


@dataclass(frozen=True)
class LightGBMConfig(BackendConfig):
    """How ``LightGBMTrainer`` sets up LightGBM's network (Ray's ``LightGBMConfig``).

    Args:
        timeout_s: how long rank 0 waits for every rank's port.
    """

    timeout_s: float = 120.0

    def __post_init__(self) -> None:
        t = self.timeout_s
        if isinstance(t, bool) or not isinstance(t, int | float) or t <= 0:
            raise ValueError(f"timeout_s must be a positive number of seconds, got {t!r}")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("", 0))
        return int(probe.getsockname()[1])


class LightGBMBackend(WorkerBackend):
    """Finds the workers' addresses and ports before the training function runs."""

    def __init__(self, config: LightGBMConfig) -> None:
        self.config = config

    def on_start(self, setup: WorkerSetup) -> None:
        global _params
        port = _free_port()
        if setup.world_size == 1:
            _params = {"machines": f"127.0.0.1:{port}", "local_listen_port": port,
                       "num_machines": 1}
            return
        server = None
        where = None
        if setup.world_rank == 0:
            server = socket.create_server((setup.master_addr or "127.0.0.1", 0))
            server.settimeout(self.config.timeout_s)
            where = (setup.master_addr or "127.0.0.1", server.getsockname()[1])
        gather_at = broadcast_from_rank_zero(where)
        assert gather_at is not None  # rank 0 sent its address
        host, gather_port = gather_at
        if server is not None:
            with server:
                machines = self._gather(server, setup, host, port)
        else:
            machines = self._send(host, gather_port, setup.world_rank, port)
        _params = {"machines": ",".join(machines), "local_listen_port": port,
                   "num_machines": setup.world_size, "tree_learner": "data",
                   "pre_partition": True}

    def _gather(self, server: socket.socket, setup: WorkerSetup, host: str,
                port: int) -> list[str]:
        found = {0: f"{host}:{port}"}
        peers = []
        try:
            while len(found) < setup.world_size:
                peer, (ip, _) = server.accept()
                peers.append(peer)
                rank, their_port = json.loads(peer.makefile().readline())
                found[int(rank)] = f"{ip}:{their_port}"
        except TimeoutError:
            raise RuntimeError(
                f"LightGBMTrainer: {setup.world_size - len(found)} of {setup.world_size} "
                f"ranks did not send their port within {self.config.timeout_s} s"
            ) from None
        machines = [found[r] for r in range(setup.world_size)]
        for peer in peers:
            with peer:
                peer.sendall((json.dumps(machines) + "\n").encode())
        return machines

    def _send(self, host: str, gather_port: int, rank: int, port: int) -> list[str]:
        with socket.create_connection((host, gather_port), self.config.timeout_s) as conn:
            conn.sendall((json.dumps([rank, port]) + "\n").encode())
            machines: list[str] = json.loads(conn.makefile().readline())
        return machines

    def on_shutdown(self) -> None:
        global _params
        _params = None
