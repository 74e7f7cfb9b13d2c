"""The messages of cluster mode: between a cluster's head, its node agents and its drivers.

Part of the one message set of :mod:`actorrt._wire._messages` (which gives each its tag and
checks its fields); kept here so that each module holds one part of the protocol.
See docs/cluster.md for who sends what.
"""

from __future__ import annotations

from typing import Any, NamedTuple

__all__ = [
    "Beat", "Blocked", "Claim", "ClusterStatus", "Deadlocked", "Deny", "Grant", "JoinDriver",
    "JoinNode", "KillWorker", "Leave", "NodeDown", "NodeUp", "ReleaseHolder", "Revoke", "SetParent",
    "Stall", "StartWorker", "View", "Withdraw", "WorkerExit", "WorkerOutput",
]


class JoinNode(NamedTuple):
    """A node agent joins the cluster (request, node to head). Reply: the head's
    ``{"head_id": str, "beat": seconds, "lost_after": seconds}``."""

    node_id: str
    host: str  # the address drivers reach the agent at
    port: int  # the agent's port
    resources: dict[str, float]  # CPU, memory and custom totals (GPUs: gpu_ids)
    gpu_ids: list[str]
    pid: int


class JoinDriver(NamedTuple):
    """A driver connects to the head (request, driver to head). Reply: the head's
    ``{"head_id": str, "beat": seconds, "lost_after": seconds, "nodes": [node, ...],
    "total": resources, "available": resources}``."""

    runtime_id: str
    host: str
    pid: int


class Beat(NamedTuple):
    """Still here (notification, both ways between the head and its peers)."""


class Leave(NamedTuple):
    """This end ends the membership, and says why (notification, both ways between the head
    and its peers): a peer that stops, or the head dropping a peer it lost. The connection
    closes after it; a connection that closes without one is a peer lost."""

    reason: str


class NodeUp(NamedTuple):
    """A node joined (notification, head to drivers): ``{"node_id", "host", "port",
    "resources", "gpu_ids"}``."""

    node: dict[str, Any]


class NodeDown(NamedTuple):
    """A node left or was lost (notification, head to drivers)."""

    node_id: str
    reason: str


class Claim(NamedTuple):
    """A resource request to the head's broker (request, driver to head). Reply: ``None``
    once it waits or was granted (its grant arrives as :class:`Grant`); an infeasible
    request is the error."""

    request_id: str
    holder: str
    resources: dict[str, float] | None
    bundles: list[dict[str, float]] | None
    strategy: str
    placement: Any  # "auto", "cluster" or [group id, bundle index]
    parent: str | None
    allow_empty_head: bool


class Withdraw(NamedTuple):
    """Withdraw a waiting request, or give back a granted one (notification)."""

    request_id: str


class ReleaseHolder(NamedTuple):
    """Everything ``holder`` holds comes back (notification, driver to head)."""

    holder: str


class SetParent(NamedTuple):
    """Record ``holder``'s parent, for capture and the deadlock check (notification)."""

    holder: str
    parent: str


class Blocked(NamedTuple):
    """An actor began or stopped awaiting a request or another actor (notification, driver
    to head), for the deadlock check."""

    waiter: str
    on_request: str | None
    on_holder: str | None
    serial: bool
    added: bool


class Grant(NamedTuple):
    """A request was granted (notification, head to driver). ``placements``: per bundle
    ``[node id, resources, [[gpu id, share], ...], group, bundle index]``."""

    request_id: str
    holder: str
    placements: list[Any]
    group: str | None


class Deny(NamedTuple):
    """A waiting request failed and was withdrawn (notification, head to driver)."""

    request_id: str
    holder: str
    error: BaseException


class Revoke(NamedTuple):
    """A grant ended: its group was removed or its node lost (notification, head to
    driver)."""

    request_id: str
    holder: str
    group: str | None
    node: str | None


class Deadlocked(NamedTuple):
    """``waiter``'s ask to ``target`` can never be answered (notification, head to
    driver)."""

    waiter: str
    target: str
    error: BaseException


class Stall(NamedTuple):
    """A request has waited long with no grant (notification, head to driver)."""

    request_id: str
    holder: str
    reason: str


class View(NamedTuple):
    """The cluster's resources now, and this driver's waiting requests (notification, head
    to driver)."""

    total: dict[str, float]
    available: dict[str, float]
    pending: list[Any]


class ClusterStatus(NamedTuple):
    """The cluster's status (request, anyone to head). Reply: nodes, resources, drivers."""


class StartWorker(NamedTuple):
    """Start a worker process on this node (request, driver to node agent). Reply: its
    pid."""

    worker_id: str
    env: dict[str, str]  # variables set over the node's own environment
    cwd: str
    boot: dict[str, Any]  # the worker's boot line (where to connect, its id, sys.path)


class KillWorker(NamedTuple):
    """Kill that worker's process group (notification, driver to node agent)."""

    worker_id: str


class WorkerOutput(NamedTuple):
    """A line a worker wrote (notification, node agent to driver): stream 1 or 2."""

    worker_id: str
    stream: int
    text: str


class WorkerExit(NamedTuple):
    """A worker exited, with its exit code, minus the signal (notification, node agent to
    driver); ``why`` when the agent itself ended it (it lost the head, it is stopping)."""

    worker_id: str
    code: int
    why: str | None = None
