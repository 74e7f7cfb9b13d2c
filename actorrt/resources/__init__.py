"""actorrt.resources: the pure resource layer (docs/broker.md, docs/resources.md).

Specs, node inventories, placement groups and the broker. This layer imports nothing from
the actor core except ``actorrt._errors``: no actors, no processes, no asyncio, no threads and
no clock. Two modules read the machine, and only they: ``_probe`` (the local node's CPUs and
memory, from affinity and cgroups) and ``_probe_gpus`` (GPUs through NVML, or the fake backend
that ``ACTORRT_NVML_BACKEND`` selects); the rest is pure logic over
inventories. Its inputs are events (request, cancel, release, blocked/unblocked, node added,
drained or lost, poll with the current time), so it can be driven by the runtime or by a
simulation of 1,000 nodes.
"""

from actorrt._errors import InfeasibleResourceError as InfeasibleResourceError
from actorrt._errors import ResourceDeadlockError as ResourceDeadlockError
from actorrt._errors import ResourceError as ResourceError

from ._broker import Broker as Broker
from ._events import AskDeadlocked as AskDeadlocked
from ._events import BundlePlacement as BundlePlacement
from ._events import DeadlockReport as DeadlockReport
from ._events import Event as Event
from ._events import Failed as Failed
from ._events import Granted as Granted
from ._events import GroupInfo as GroupInfo
from ._events import GroupTarget as GroupTarget
from ._events import PendingRequest as PendingRequest
from ._events import Revoked as Revoked
from ._events import Stalled as Stalled
from ._node import NodeInventory as NodeInventory
from ._placement import PlacementStrategy as PlacementStrategy
from ._placement import parse_bundles as parse_bundles
from ._placement import parse_strategy as parse_strategy
from ._pool import ResourcePool as ResourcePool
from ._probe import detect_local_node as detect_local_node
from ._probe_gpus import BACKEND_ENV as BACKEND_ENV
from ._probe_gpus import FakeGpu as FakeGpu
from ._probe_gpus import GpuDevice as GpuDevice
from ._probe_gpus import NvmlUnavailableError as NvmlUnavailableError
from ._probe_gpus import find_device as find_device
from ._probe_gpus import list_devices as list_devices
from ._probe_gpus import memory_used_fraction as memory_used_fraction
from ._probe_gpus import write_fake_gpu_spec as write_fake_gpu_spec
from ._spec import UNIT as UNIT
from ._spec import Resources as Resources
from ._spec import parse_resources as parse_resources
from ._spec import resources_from_options as resources_from_options

__all__ = [
    "BACKEND_ENV",
    "UNIT",
    "AskDeadlocked",
    "Broker",
    "BundlePlacement",
    "DeadlockReport",
    "Event",
    "Failed",
    "FakeGpu",
    "GpuDevice",
    "Granted",
    "GroupInfo",
    "GroupTarget",
    "InfeasibleResourceError",
    "NodeInventory",
    "NvmlUnavailableError",
    "PendingRequest",
    "PlacementStrategy",
    "ResourceDeadlockError",
    "ResourceError",
    "ResourcePool",
    "Resources",
    "Revoked",
    "Stalled",
    "detect_local_node",
    "find_device",
    "list_devices",
    "memory_used_fraction",
    "parse_bundles",
    "parse_resources",
    "parse_strategy",
    "resources_from_options",
    "write_fake_gpu_spec",
]

# Public objects show their public module in reprs and tracebacks.
for _cls in (
    AskDeadlocked, Broker, BundlePlacement, Failed, FakeGpu, GpuDevice, Granted, GroupInfo,
    GroupTarget,
    NodeInventory, PendingRequest, PlacementStrategy, ResourcePool,
    Resources, Revoked, Stalled,
):  # fmt: skip
    _cls.__module__ = __name__
del _cls
