"""Probing the local machine: the one part of ``actorrt.resources`` that reads the system.

Everything else in this package is pure logic over the inventories built here (and by a
simulation or, later, by remote nodes reporting theirs). :func:`detect_local_node` builds the
local node's inventory:

- CPUs: the process's CPU affinity (``os.sched_getaffinity``), capped by the cgroup v2
  (``cpu.max``) or v1 (``cpu.cfs_quota_us`` / ``cpu.cfs_period_us``) quota of its cgroup and
  every ancestor cgroup. A quota is rounded *up* to whole CPUs (1.5 CPUs of quota give 2): the
  broker counts schedulable slots, and a fractional quota still runs that many processes, a
  little slower; at least 1.
- memory: the tightest cgroup limit (v2 ``memory.max``, v1 ``memory.limit_in_bytes``) or, with
  none, the machine's physical memory.
- GPUs: :func:`~actorrt.resources._probe_gpus.list_devices` (NVML, or the fake backend that
  ``ACTORRT_NVML_BACKEND`` selects; PCI-bus order, restricted to an inherited
  ``CUDA_VISIBLE_DEVICES``); none and no error without a driver.

Every value can be overridden. ``num_gpus`` at most the detected count takes the first devices;
on a machine without GPUs it gives logical devices ``0..n-1`` (for tests and simulations); more
than the (non-zero) detected count is a ``ValueError``.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping

from ._node import NodeInventory
from ._probe_gpus import list_devices
from ._spec import CPU, GPU, MEMORY, UNIT, Resources, parse_resources, to_units

__all__ = [
    "cgroup_cpu_quota",
    "cgroup_memory_limit",
    "detect_cpus",
    "detect_local_node",
    "detect_memory",
]

_CGROUP_ROOT = "/sys/fs/cgroup"
_PROC_CGROUP = "/proc/self/cgroup"


def detect_local_node(
    *,
    num_cpus: object = None,
    num_gpus: object = None,
    memory: object = None,
    resources: Mapping[str, object] | None = None,
    node_id: object = "local",
    env: Mapping[str, str] | None = None,
) -> NodeInventory:
    """Detect the local node's inventory, with overrides.

    Args:
        num_cpus: CPUs instead of the detected count (may be fractional).
        num_gpus: whole GPUs instead of the detected devices (see the module docstring).
        memory: bytes instead of the detected memory.
        resources: custom resources (``CPU``, ``GPU``, ``memory`` go through the options above).
        node_id: the node's id.
        env: the environment for GPU discovery (default ``os.environ``).

    Raises:
        TypeError, ValueError: a bad override (named, with its value).
    """
    units: dict[str, int] = {}
    if num_cpus is None:
        units[CPU] = detect_cpus() * UNIT
    else:
        units[CPU] = to_units(CPU, num_cpus, label="num_cpus")
    if memory is None:
        units[MEMORY] = detect_memory() * UNIT
    else:
        units[MEMORY] = to_units(MEMORY, memory, label="memory")
    if resources:
        for key in resources:
            if key in (CPU, GPU, MEMORY, "cpu", "gpu"):
                raise ValueError(
                    f"resources={dict(resources)!r}: {key!r} is not allowed in resources=; "
                    "use num_cpus=, num_gpus= or memory="
                )
        units.update(parse_resources(resources).items_units())
    gpu_ids = _gpu_ids(num_gpus, env)
    return NodeInventory(node_id, Resources.from_units(units), gpu_ids)


def _gpu_ids(num_gpus: object, env: Mapping[str, str] | None) -> list[str]:
    detected = [d.id for d in list_devices(env)]
    if num_gpus is None:
        return detected
    wanted = to_units(GPU, num_gpus, label="num_gpus")
    if wanted % UNIT:
        raise ValueError(f"num_gpus={num_gpus!r}: a node has whole GPUs; use a whole number")
    count = wanted // UNIT
    if not detected:
        return [str(i) for i in range(count)]
    if count > len(detected):
        raise ValueError(
            f"num_gpus={num_gpus!r}: only {len(detected)} GPU(s) are visible "
            f"({', '.join(detected)}); ask for at most that many"
        )
    return detected[:count]


def detect_cpus(cgroup_root: str = _CGROUP_ROOT, proc_cgroup: str = _PROC_CGROUP) -> int:
    """Whole CPUs this process may use: affinity, capped by the cgroup quota (rounded up)."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        cpus = os.cpu_count() or 1
    quota = cgroup_cpu_quota(cgroup_root, proc_cgroup)
    if quota is not None:
        cpus = min(cpus, math.ceil(quota))
    return max(1, cpus)


def detect_memory(cgroup_root: str = _CGROUP_ROOT, proc_cgroup: str = _PROC_CGROUP) -> int:
    """Memory in bytes: the tightest cgroup limit, or the machine's physical memory."""
    machine = _machine_memory()
    limit = cgroup_memory_limit(cgroup_root, proc_cgroup)
    return min(machine, limit) if limit is not None else machine


def _machine_memory() -> int:
    try:
        return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):  # pragma: no cover - not POSIX
        return 0


def _cgroup_dirs(root: str, proc_cgroup: str, controller: str) -> list[str]:
    """Directories to read, innermost first: the process's cgroup and each ancestor."""
    try:
        with open(proc_cgroup, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError:
        return []
    dirs: list[str] = []
    for line in lines:
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, names, path = parts
        if names == "" and os.path.exists(os.path.join(root, "cgroup.controllers")):
            base = root  # cgroup v2 unified hierarchy
        elif controller in names.split(","):
            base = os.path.join(root, names)
            if not os.path.isdir(base):
                base = os.path.join(root, controller)
        else:
            continue
        rel = path.strip("/")
        while True:
            dirs.append(os.path.join(base, rel) if rel else base)
            if not rel:
                break
            rel = os.path.dirname(rel)
    return dirs


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8") as f:
            return f.read().strip()
    except OSError:
        return None


def cgroup_cpu_quota(root: str = _CGROUP_ROOT, proc_cgroup: str = _PROC_CGROUP) -> float | None:
    """The tightest CPU quota (in CPUs) over the process's cgroups, or ``None`` if unlimited."""
    best: float | None = None
    for d in _cgroup_dirs(root, proc_cgroup, "cpu"):
        quota: float | None = None
        v2 = _read(os.path.join(d, "cpu.max"))
        if v2 is not None:
            fields = v2.split()
            if len(fields) == 2 and fields[0] != "max" and int(fields[1]) > 0:
                quota = int(fields[0]) / int(fields[1])
        else:
            q = _read(os.path.join(d, "cpu.cfs_quota_us"))
            p = _read(os.path.join(d, "cpu.cfs_period_us"))
            if q is not None and p is not None and int(q) > 0 and int(p) > 0:
                quota = int(q) / int(p)
        if quota is not None and (best is None or quota < best):
            best = quota
    return best


def cgroup_memory_limit(root: str = _CGROUP_ROOT, proc_cgroup: str = _PROC_CGROUP) -> int | None:
    """The tightest memory limit in bytes over the process's cgroups, or ``None``."""
    best: int | None = None
    for d in _cgroup_dirs(root, proc_cgroup, "memory"):
        raw = _read(os.path.join(d, "memory.max"))
        if raw is None:
            raw = _read(os.path.join(d, "memory.limit_in_bytes"))
        if raw is None or not raw.isdigit():
            continue
        limit = int(raw)
        if limit >= 1 << 60:  # v1 reports "unlimited" as a huge page-aligned number
            continue
        if best is None or limit < best:
            best = limit
    return best
