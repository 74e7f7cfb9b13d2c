"""Node inventories: what one node has, and what is free on it.

A :class:`NodeInventory` is a :class:`~actorrt.resources._pool.ResourcePool` with a node id:
totals of CPU, memory and custom resources, plus GPUs tracked per device (each device has
capacity 1.0). Detecting the local node's inventory (affinity, cgroups, NVML) is
:mod:`actorrt.resources._probe`'s work; this module touches no operating system.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ._pool import ResourcePool
from ._spec import UNIT, Resources, parse_resources

__all__ = ["NodeInventory"]

class NodeInventory(ResourcePool):
    """One node's resources: amounts plus per-device GPUs, with what is free now.

    Args:
        node_id: any hashable naming the node.
        resources: totals (``{"CPU": 8, "memory": 2**34, "custom": 2}``); a ``GPU`` amount,
            which must be whole, gives logical devices ``0..n-1`` unless ``gpu_ids`` is given.
        gpu_ids: the device ids (``CUDA_VISIBLE_DEVICES`` form), one per device.

    Raises:
        ValueError: a fractional GPU total, or a GPU total that disagrees with ``gpu_ids``.
    """

    # Slots for speed, as the base class.
    __slots__ = ("node_id",)

    def __init__(
        self,
        node_id: object,
        resources: Mapping[str, object] | Resources,
        gpu_ids: Sequence[str] | None = None,
    ) -> None:
        totals = parse_resources(resources)
        gpu_units = totals.gpu_units
        if gpu_units % UNIT:
            raise ValueError(
                f"node {node_id!r}: GPU={gpu_units / UNIT} is not whole; a node has whole devices"
            )
        if gpu_ids is None:
            gpu_ids = [str(i) for i in range(gpu_units // UNIT)]
        elif gpu_units and gpu_units // UNIT != len(gpu_ids):
            raise ValueError(
                f"node {node_id!r}: GPU={gpu_units // UNIT} but {len(gpu_ids)} device ids given"
            )
        super().__init__(dict(totals.other_units), gpu_ids)
        self.node_id = node_id

    def __repr__(self) -> str:
        return (
            f"NodeInventory({self.node_id!r}, total={self.total_resources()}, "
            f"free={self.free_resources()}, gpu_ids={list(self.gpu_ids)!r})"
        )
