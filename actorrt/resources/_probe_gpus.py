"""Probing GPUs: NVML devices in PCI-bus order, restricted to ``CUDA_VISIBLE_DEVICES``.

The backend is chosen by the environment variable ``ACTORRT_NVML_BACKEND``:

- unset or ``nvml``: the real NVML library (the ``pynvml`` module of ``nvidia-ml-py``). With no
  NVIDIA driver (the library fails to load or initialise) there are zero GPUs and no error.
- ``fake:/path/to/spec.json``: devices described by a JSON file (see :func:`write_fake_gpu_spec`).
  Because the choice travels in the environment, worker processes started by the runtime see the
  same fake devices as the test that wrote the file. A fake device's used memory can free over
  time: ``used(t) = max(memory_used_min, memory_used - free_rate * (t - free_start))`` for
  ``t >= free_start``, with ``t`` wall-clock seconds (``time.time()``), so every process computes
  the same value at the same moment.

Device numbering is the PCI-bus order of every device the driver reports (what CUDA numbers with
``CUDA_DEVICE_ORDER=PCI_BUS_ID``). An inherited ``CUDA_VISIBLE_DEVICES`` restricts the list: its
entries are those indices or device UUIDs (``GPU-...``, a unique prefix is enough); as in CUDA,
an empty value means no device and the list ends at the first entry that names no device.
A :class:`GpuDevice` keeps its machine-wide index, so ``str(device.index)`` is what a worker's
``CUDA_VISIBLE_DEVICES`` should carry.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Protocol

from .._errors import NvmlUnavailableError as NvmlUnavailableError

__all__ = [
    "BACKEND_ENV",
    "FakeGpu",
    "GpuDevice",
    "NvmlUnavailableError",
    "find_device",
    "list_devices",
    "memory_used_fraction",
    "write_fake_gpu_spec",
]

BACKEND_ENV = "ACTORRT_NVML_BACKEND"


@dataclass(frozen=True, slots=True)
class GpuDevice:
    """One GPU as discovered.

    Attributes:
        index: the device's index in PCI-bus order among all devices of the machine.
        uuid: the device UUID (``GPU-...``).
        pci_bus_id: the PCI bus id (``00000000:3B:00.0``).
        memory_total: total memory in bytes.
        memory_used: used memory in bytes at discovery time.
    """

    index: int
    uuid: str
    pci_bus_id: str
    memory_total: int
    memory_used: int

    @property
    def id(self) -> str:
        """The id a worker's ``CUDA_VISIBLE_DEVICES`` carries for this device."""
        return str(self.index)


@dataclass(frozen=True, slots=True)
class FakeGpu:
    """One device of the fake backend (see the module docstring for the used-memory model)."""

    uuid: str
    pci_bus_id: str
    memory_total: int = 16 << 30
    memory_used: int = 0
    free_rate: float = 0.0
    free_start: float = 0.0
    memory_used_min: int = 0

    def used_at(self, now: float) -> int:
        """Used memory in bytes at wall-clock time ``now``."""
        freed = self.free_rate * max(0.0, now - self.free_start)
        return max(self.memory_used_min, int(self.memory_used - freed))


class _Backend(Protocol):
    def all_devices(self, now: float) -> list[GpuDevice]: ...

    def memory_used(self, uuid: str, now: float) -> int: ...


class _NvmlBackend:
    """The real NVML library; every call initialises and shuts NVML down (it is ref-counted)."""

    def _init(self) -> Any:
        try:
            import pynvml
        except ImportError as exc:  # pragma: no cover - nvidia-ml-py is a dependency
            raise NvmlUnavailableError(f"the pynvml module is not installed: {exc}") from exc
        try:
            pynvml.nvmlInit()
        except Exception as exc:
            raise NvmlUnavailableError(f"NVML is unavailable (no NVIDIA driver?): {exc}") from exc
        return pynvml

    def all_devices(self, now: float) -> list[GpuDevice]:
        nvml = self._init()
        try:
            found = []
            for i in range(nvml.nvmlDeviceGetCount()):
                handle = nvml.nvmlDeviceGetHandleByIndex(i)
                mem = nvml.nvmlDeviceGetMemoryInfo(handle)
                bus = _text(nvml.nvmlDeviceGetPciInfo(handle).busId)
                found.append((bus.upper(), _text(nvml.nvmlDeviceGetUUID(handle)), mem))
        finally:
            nvml.nvmlShutdown()
        found.sort(key=lambda t: t[0])
        return [
            GpuDevice(i, uuid, bus, int(mem.total), int(mem.used))
            for i, (bus, uuid, mem) in enumerate(found)
        ]

    def memory_used(self, uuid: str, now: float) -> int:
        nvml = self._init()
        try:
            handle = nvml.nvmlDeviceGetHandleByUUID(uuid)
            return int(nvml.nvmlDeviceGetMemoryInfo(handle).used)
        finally:
            nvml.nvmlShutdown()


class _FakeBackend:
    """Devices read from a JSON spec file on every call (so a test may rewrite it)."""

    def __init__(self, path: str) -> None:
        self._path = path

    def _gpus(self) -> list[FakeGpu]:
        try:
            with open(self._path, encoding="utf-8") as f:
                data = json.load(f)
        except (OSError, ValueError) as exc:
            raise NvmlUnavailableError(
                f"{BACKEND_ENV}=fake:{self._path}: cannot read the fake GPU spec: {exc}"
            ) from exc
        return [FakeGpu(**entry) for entry in data["devices"]]

    def all_devices(self, now: float) -> list[GpuDevice]:
        gpus = sorted(self._gpus(), key=lambda g: g.pci_bus_id.upper())
        return [
            GpuDevice(i, g.uuid, g.pci_bus_id, g.memory_total, g.used_at(now))
            for i, g in enumerate(gpus)
        ]

    def memory_used(self, uuid: str, now: float) -> int:
        for g in self._gpus():
            if g.uuid == uuid:
                return g.used_at(now)
        raise ValueError(f"no fake GPU with uuid {uuid!r}")


def _text(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else value


def _backend(env: Mapping[str, str]) -> _Backend:
    spec = env.get(BACKEND_ENV, "") or "nvml"
    if spec == "nvml":
        return _NvmlBackend()
    if spec.startswith("fake:") and len(spec) > len("fake:"):
        return _FakeBackend(spec[len("fake:") :])
    raise ValueError(
        f"{BACKEND_ENV}={spec!r}: expected 'nvml' (or unset) or 'fake:/path/to/spec.json'"
    )


def _restrict(devices: list[GpuDevice], visible: str | None) -> list[GpuDevice]:
    if visible is None:
        return devices
    chosen: list[GpuDevice] = []
    for entry in (e.strip() for e in visible.split(",")):
        device = _match(devices, entry)
        if device is None:
            break  # CUDA ignores everything from the first entry that names no device
        if device not in chosen:
            chosen.append(device)
    return chosen


def _match(devices: list[GpuDevice], entry: str) -> GpuDevice | None:
    if not entry:
        return None
    if entry.isdigit():
        index = int(entry)
        return devices[index] if index < len(devices) else None
    prefix = entry if entry.startswith("GPU-") else f"GPU-{entry}"
    hits = [d for d in devices if d.uuid.startswith(prefix)]
    return hits[0] if len(hits) == 1 else None


def list_devices(env: Mapping[str, str] | None = None, now: float | None = None) -> list[GpuDevice]:
    """The GPUs this process may use, in PCI-bus order.

    Args:
        env: the environment to read ``ACTORRT_NVML_BACKEND`` and ``CUDA_VISIBLE_DEVICES`` from
            (default ``os.environ``).
        now: wall-clock time for the fake backend's used-memory model (default ``time.time()``).

    Returns:
        The visible devices; an empty list when there is no NVIDIA driver.

    Raises:
        ValueError: ``ACTORRT_NVML_BACKEND`` has an unknown form.
    """
    env = os.environ if env is None else env
    backend = _backend(env)
    try:
        devices = backend.all_devices(time.time() if now is None else now)
    except NvmlUnavailableError:
        if isinstance(backend, _FakeBackend):
            raise
        return []
    return _restrict(devices, env.get("CUDA_VISIBLE_DEVICES"))


def find_device(
    gpu_id: int | str, env: Mapping[str, str] | None = None, now: float | None = None
) -> GpuDevice:
    """The visible device named by an index (as in ``CUDA_VISIBLE_DEVICES``) or a UUID.

    Raises:
        ValueError: no visible device has that index or UUID.
    """
    devices = list_devices(env, now)
    key = str(gpu_id).strip()
    for device in devices:
        if key in (device.id, device.uuid):
            return device
    known = ", ".join(f"{d.id} ({d.uuid})" for d in devices) or "none"
    raise ValueError(f"no GPU with id or UUID {gpu_id!r}; visible devices: {known}")


def memory_used_fraction(
    device: GpuDevice, env: Mapping[str, str] | None = None, now: float | None = None
) -> float:
    """The device's used memory as a fraction of its total, read fresh from the backend.

    Raises:
        NvmlUnavailableError: NVML cannot be used (a ``RuntimeError``).
    """
    env = os.environ if env is None else env
    used = _backend(env).memory_used(device.uuid, time.time() if now is None else now)
    return used / device.memory_total if device.memory_total else 0.0


def write_fake_gpu_spec(path: str | os.PathLike[str], gpus: int | Sequence[FakeGpu]) -> str:
    """Write a fake-backend spec file and return the matching ``ACTORRT_NVML_BACKEND`` value.

    Args:
        path: where to write the JSON file.
        gpus: a device count (16 GiB devices with nothing used) or explicit :class:`FakeGpu`\\ s.

    Returns:
        ``"fake:<absolute path>"``, to put in ``os.environ[ACTORRT_NVML_BACKEND]``.
    """
    if isinstance(gpus, int):
        gpus = [
            FakeGpu(
                uuid=f"GPU-fa4e0000-0000-0000-0000-{i:012d}", pci_bus_id=f"00000000:{i:02X}:00.0"
            )
            for i in range(gpus)
        ]
    target = os.path.abspath(os.fspath(path))
    tmp = f"{target}.tmp{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump({"devices": [asdict(g) for g in gpus]}, f)
    os.replace(tmp, target)
    return f"fake:{target}"
