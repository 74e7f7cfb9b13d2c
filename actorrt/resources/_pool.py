"""A resource pool: amounts plus GPUs tracked per device.

One class serves both a node's inventory and a reserved bundle's sub-inventory. Non-GPU
resources (CPU, memory, custom) are plain amounts. GPUs are a list of devices, each with its own
capacity (1.0 on a node; on a bundle, the share of that device the bundle got) and free amount.

GPU placement rules (docs/resources.md):

- a fractional request (below 1) is placed on exactly one device and never split; it goes to the
  device with the *least* free amount that still fits it (best fit, lowest index on ties), so
  fractions pack onto a partly used device before a fresh one is touched;
- a whole request of ``k`` GPUs takes ``k`` devices that are entirely free (lowest indices);
  a bundle that holds only part of a device can never give a whole GPU from it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from ._spec import GPU, UNIT, Resources

__all__ = ["Allocation", "ResourcePool"]


class Allocation:
    """What one allocation took from a pool, so that releasing it gives back exactly that.

    Attributes:
        other: the non-GPU ``(name, units)`` amounts taken.
        gpus: ``(device position in the pool, units)`` per GPU device used.
    """

    # Slots for speed: one Allocation per grant, on the hot path.
    __slots__ = ("gpus", "other")

    def __init__(
        self, other: tuple[tuple[str, int], ...], gpus: tuple[tuple[int, int], ...]
    ) -> None:
        self.other = other
        self.gpus = gpus

    def __repr__(self) -> str:
        return f"Allocation(other={self.other!r}, gpus={self.gpus!r})"


class ResourcePool:
    """Capacity and free amounts of one node or one reserved bundle.

    Args:
        capacity: non-GPU capacity in units (``GPU`` keys are ignored here).
        gpu_ids: the id of each GPU device (``CUDA_VISIBLE_DEVICES`` form).
        gpu_capacity: each device's capacity in units (default ``UNIT``, a whole device, each).
    """

    # Slots for speed: pools are read on every placement decision.
    __slots__ = ("capacity", "free", "gpu_capacity", "gpu_free", "gpu_ids")

    def __init__(
        self,
        capacity: Mapping[str, int],
        gpu_ids: Sequence[str] = (),
        gpu_capacity: Sequence[int] | None = None,
    ) -> None:
        self.capacity: dict[str, int] = {k: v for k, v in capacity.items() if v and k != GPU}
        self.free: dict[str, int] = dict(self.capacity)
        self.gpu_ids: tuple[str, ...] = tuple(gpu_ids)
        caps = [UNIT] * len(self.gpu_ids) if gpu_capacity is None else list(gpu_capacity)
        if len(caps) != len(self.gpu_ids) or any(not 0 < c <= UNIT for c in caps):
            raise ValueError(f"bad GPU capacities {caps!r} for devices {self.gpu_ids!r}")
        self.gpu_capacity: tuple[int, ...] = tuple(caps)
        self.gpu_free: list[int] = list(caps)

    # -- queries ---------------------------------------------------------------------------

    def fits(self, req: Resources) -> bool:
        """Whether ``req`` could be allocated now."""
        free = self.free
        for k, v in req._other:
            if free.get(k, 0) < v:
                return False
        g = req._gpu
        return not g or _pick_gpus(self.gpu_free, g) is not None

    def fits_capacity(self, req: Resources) -> bool:
        """Whether ``req`` could be allocated from this pool when it is entirely free."""
        cap = self.capacity
        for k, v in req.other_units:
            if cap.get(k, 0) < v:
                return False
        g = req.gpu_units
        return not g or _pick_gpus(self.gpu_capacity, g) is not None

    def total_resources(self) -> Resources:
        """Capacity as a :class:`Resources` (GPU = the sum of device capacities)."""
        return _as_resources(self.capacity, self.gpu_capacity)

    def free_resources(self) -> Resources:
        """Free amounts as a :class:`Resources` (GPU = the sum of device free amounts)."""
        return _as_resources(self.free, self.gpu_free)

    def is_idle(self) -> bool:
        """Whether nothing is allocated."""
        return self.free == self.capacity and tuple(self.gpu_free) == self.gpu_capacity

    def gpu_shares(self, alloc: Allocation) -> tuple[tuple[str, float], ...]:
        """``(device id, fraction)`` for each GPU device an allocation uses."""
        if not alloc.gpus:
            return ()
        return tuple((self.gpu_ids[i], units / UNIT) for i, units in alloc.gpus)

    # -- changes ---------------------------------------------------------------------------

    def allocate(self, req: Resources) -> Allocation | None:
        """Take ``req`` from the pool; ``None`` (changing nothing) if it does not fit."""
        free = self.free
        other = req._other  # the private fields, not the properties: this is the hot path
        for k, v in other:
            if free.get(k, 0) < v:
                return None
        gpus: tuple[tuple[int, int], ...] = ()
        g = req._gpu
        if g:
            picked = _pick_gpus(self.gpu_free, g)
            if picked is None:
                return None
            gpus = picked
            gpu_free = self.gpu_free
            for i, units in gpus:
                gpu_free[i] -= units
        for k, v in other:
            free[k] -= v
        return Allocation(other, gpus)

    def release(self, alloc: Allocation) -> None:
        """Give back exactly what ``alloc`` took."""
        free = self.free
        for k, v in alloc.other:
            free[k] += v
        gpu_free = self.gpu_free
        for i, units in alloc.gpus:
            gpu_free[i] += units

    def take(self, amounts: Iterable[tuple[str, int]], gpus: Iterable[tuple[int, int]]) -> None:
        """Take explicit amounts (used for reservations); the caller ensures they are free."""
        free = self.free
        for k, v in amounts:
            free[k] -= v
        gpu_free = self.gpu_free
        for i, units in gpus:
            gpu_free[i] -= units

    def sub_pool(self, alloc: Allocation) -> ResourcePool:
        """A new pool holding exactly what ``alloc`` took from this one (a reserved bundle)."""
        sub = ResourcePool.__new__(ResourcePool)
        sub.capacity = dict(alloc.other)
        sub.free = dict(alloc.other)
        ids = self.gpu_ids
        sub.gpu_ids = tuple(ids[i] for i, _ in alloc.gpus)
        sub.gpu_capacity = tuple(units for _, units in alloc.gpus)
        sub.gpu_free = list(sub.gpu_capacity)
        return sub

    def copy(self) -> ResourcePool:
        """An independent pool with the same capacity and free amounts."""
        twin = ResourcePool.__new__(ResourcePool)
        twin.capacity = self.capacity
        twin.free = dict(self.free)
        twin.gpu_ids = self.gpu_ids
        twin.gpu_capacity = self.gpu_capacity
        twin.gpu_free = list(self.gpu_free)
        return twin

    def __repr__(self) -> str:
        return f"ResourcePool(free={self.free_resources()}, capacity={self.total_resources()})"


def _pick_gpus(free: Sequence[int], units: int) -> tuple[tuple[int, int], ...] | None:
    """Choose devices for a GPU amount under the per-device rules, without changing anything."""
    if units < UNIT:
        best = -1
        best_free = UNIT + 1
        for i, f in enumerate(free):
            if units <= f < best_free:
                best, best_free = i, f
        return ((best, units),) if best >= 0 else None
    wanted = units // UNIT
    chosen: list[tuple[int, int]] = []
    for i, f in enumerate(free):
        if f >= UNIT:
            chosen.append((i, UNIT))
            if len(chosen) == wanted:
                return tuple(chosen)
    return None


def _as_resources(amounts: Mapping[str, int], gpus: Sequence[int]) -> Resources:
    units = dict(amounts)
    if gpus:
        units[GPU] = sum(gpus)
    return Resources.from_units(units)
