"""``tune.utils.wait_for_gpu``: wait for a GPU's memory to be freed (docs/resources.md).

Called at the start of a trainable, it keeps a new trial from running out of memory while
the previous trial's process is still releasing the device. Devices are read through
``actorrt.resources`` (NVML, or the fake backend that ``ACTORRT_NVML_BACKEND`` selects).
"""

from __future__ import annotations

import os
import time

import actorrt
from actorrt.resources import (
    GpuDevice,
    NvmlUnavailableError,
    list_devices,
    memory_used_fraction,
)

from .. import context as _session

__all__ = ["wait_for_gpu"]


def _all_devices() -> list[GpuDevice]:
    # Ids in CUDA_VISIBLE_DEVICES are machine-wide, so look them up among every device.
    env = {k: v for k, v in os.environ.items() if k != "CUDA_VISIBLE_DEVICES"}
    try:
        return list_devices(env)
    except NvmlUnavailableError as exc:
        raise RuntimeError(f"wait_for_gpu: NVML is unavailable: {exc}") from exc


def _find(devices: list[GpuDevice], gpu_id: int | str) -> GpuDevice:
    key = str(gpu_id).strip()
    for device in devices:
        prefix = key.startswith("GPU-") and device.uuid.startswith(key)
        if key in (device.id, device.uuid) or prefix:
            return device
    known = ", ".join(f"{d.id} ({d.uuid})" for d in devices)
    raise ValueError(f"wait_for_gpu: no GPU has id or UUID {gpu_id!r}; the GPUs are: {known}")


def _shared_fraction() -> float | None:
    """This trial's GPU amount when it is a fraction of one device, else ``None``."""
    session = _session._current
    if session is None:
        return None
    gpu = session.context.get_trial_resources().group_bundles[0].get("GPU", 0.0)
    return gpu if 0 < gpu < 1 else None


def wait_for_gpu(
    gpu_id: int | str | None = None,
    target_util: float = 0.01,
    retry: int = 20,
    delay_s: float = 5,
) -> bool:
    """Wait until a GPU's used memory is at most ``target_util`` of its total.

    Args:
        gpu_id: a device index (as in ``CUDA_VISIBLE_DEVICES``) or UUID; default the first
            GPU assigned to this process (``actorrt.get_gpu_ids()``).
        target_util: the used-memory fraction to wait for (0..1).
        retry: how many times to check.
        delay_s: seconds between checks.

    Returns:
        ``True`` once the device is free enough.

    Raises:
        RuntimeError: no GPU is assigned and none is named; NVML is unavailable or reports
            no GPU; the memory was not freed in ``retry`` checks ("GPU memory was not
            freed"); or this trial holds only a fraction of the device, so other trials'
            memory on it is expected and waiting for it to free would not end.
        ValueError: ``gpu_id`` names no device, or a bad argument.
    """
    if not 0 <= target_util <= 1:
        raise ValueError(f"target_util must be within 0..1, got {target_util!r}")
    if retry < 1:
        raise ValueError(f"retry must be at least 1, got {retry!r}")
    if delay_s < 0:
        raise ValueError(f"delay_s must be >= 0, got {delay_s!r}")
    if gpu_id is None:
        assigned = actorrt.get_gpu_ids()
        if not assigned:
            raise RuntimeError(
                "wait_for_gpu: no GPU is assigned to this process (CUDA_VISIBLE_DEVICES is "
                "empty or unset); ask for one with tune.with_resources(trainable, {'gpu': 1}) "
                "or pass gpu_id"
            )
        gpu_id = assigned[0]
    devices = _all_devices()
    if not devices:
        raise RuntimeError(
            "wait_for_gpu: NVML reports no GPU on this machine (no NVIDIA driver?); the "
            "runtime's GPUs may be logical ones (Runtime(num_gpus=...) without a driver)"
        )
    device = _find(devices, gpu_id)
    used = 0.0
    for attempt in range(retry):
        used = memory_used_fraction(device)
        if used <= target_util:
            return True
        fraction = _shared_fraction()
        if fraction is not None:
            raise RuntimeError(
                f"wait_for_gpu: GPU {device.id} is {used:.0%} used, and this trial holds "
                f"only {fraction} of it: other trials share the device, so its memory need "
                "not free; skip wait_for_gpu for fractional GPUs, or ask for a whole GPU"
            )
        if attempt + 1 < retry:
            time.sleep(delay_s)
    raise RuntimeError(
        f"GPU memory was not freed: GPU {device.id} ({device.uuid}) is still {used:.1%} used "
        f"after {retry} checks {delay_s} s apart (target {target_util:.1%})"
    )
