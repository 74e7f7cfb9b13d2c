"""``TorchConfig`` and the backend that starts ``torch.distributed`` in each worker."""

from __future__ import annotations

import datetime
import math
import os
from dataclasses import dataclass

from .._extras import require
from ..backend import BackendConfig, WorkerBackend, WorkerSetup

BACKENDS = (None, "gloo", "nccl")

# This worker's devices, set while a training function runs (read by get_device()).
current_device_index: int | None = None
current_device_indices: tuple[int, ...] = ()

@dataclass(frozen=True)
class TorchConfig(BackendConfig):
    """How ``TorchTrainer`` sets up ``torch.distributed``.

    Args:
        backend: ``"gloo"``, ``"nccl"``, or ``None`` (default): as in Ray, NCCL when the
            workers hold GPUs (``ScalingConfig(use_gpu=True)``), else gloo.
        timeout_s: seconds a collective (and the rendezvous) may wait before failing.

    Raises:
        ValueError: an unknown backend or a non-positive timeout.
    """

    backend: str | None = None
    timeout_s: float = 1800

    def __post_init__(self) -> None:
        if self.backend not in BACKENDS:
            raise ValueError(
                f"backend must be None, 'gloo' or 'nccl', got {self.backend!r}"
            )
        t = self.timeout_s
        if isinstance(t, bool) or not isinstance(t, int | float):
            raise TypeError(f"timeout_s must be a number of seconds, got {t!r}")
        if not math.isfinite(t) or t <= 0:
            raise ValueError(f"timeout_s must be a positive number of seconds, got {t!r}")


class TorchBackend(WorkerBackend):
    """Joins the gang's process group before the training function, leaves it after."""

    def __init__(self, config: TorchConfig) -> None:
        self.config = config
        self._cuda_used = False
        self._saved_env: dict[str, str | None] = {}

    def on_start(self, setup: WorkerSetup) -> None:
        global current_device_index, current_device_indices
        require("torch", "train", "TorchTrainer's workers")
        import torch
        import torch.distributed as dist

        backend = self.config.backend or ("nccl" if setup.device_index is not None else "gloo")
        current_device_index = setup.device_index
        current_device_indices = setup.device_indices
        on_gpu = setup.device_index is not None and torch.cuda.is_available()
        if on_gpu:
            torch.cuda.set_device(setup.device_index)
            self._cuda_used = True
        if backend == "nccl" and not torch.cuda.is_available():
            raise RuntimeError(
                f"the torch process group's backend is NCCL (the worker holds GPU(s): "
                f"CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES', '')!r}, "
                f"LOCAL_RANK={setup.local_rank}), but torch {torch.__version__} in this "
                "worker cannot use CUDA. Install a CUDA build of torch, or pass "
                "TorchConfig(backend='gloo') to train on the CPU"
            )
        _use_node_interface()
        dist.init_process_group(
            backend=backend,
            init_method=f"tcp://{setup.master_addr}:{setup.master_port}",
            rank=setup.world_rank,
            world_size=setup.world_size,
            timeout=datetime.timedelta(seconds=self.config.timeout_s),
        )
        self._set_accelerate_env(self._cuda_used, setup.device_index)

    def _set_accelerate_env(self, on_gpu: bool, device_index: int | None) -> None:
        """Hugging Face ``accelerate`` (under ``transformers.Trainer``) reads these: the
        device (as Ray sets it) and, on a CPU worker, that it is one; without the latter,
        accelerate trains each CPU worker alone instead of joining this process group."""
        env = {"ACCELERATE_TORCH_DEVICE": f"cuda:{device_index}" if on_gpu else "cpu"}
        if not on_gpu:
            env["ACCELERATE_USE_CPU"] = "true"
        self._saved_env = {key: os.environ.get(key) for key in env}
        os.environ.update(env)

    def on_shutdown(self) -> None:
        global current_device_index, current_device_indices
        import torch.distributed as dist

        for key, old in self._saved_env.items():
            if old is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = old
        self._saved_env = {}
        current_device_index = None
        current_device_indices = ()
        if dist.is_initialized():
            dist.destroy_process_group()

    def needs_fresh_process(self) -> bool:
        # CUDA started under the node's union of devices: a later actor in this process
        # would see that list, not its own grant's.
        return self._cuda_used


def _use_node_interface() -> None:
    """In a cluster, have gloo and NCCL talk over the interface that holds this node's
    address (the one its agent gave), unless the user chose one: a host name that resolves
    to a loopback address would otherwise make the other nodes dial 127.0.0.1."""
    ip = os.environ.get("ACTORRT_NODE_IP")
    if not ip:
        return
    name = interface_of(ip)
    if name is None:
        return
    for variable in ("GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME"):
        os.environ.setdefault(variable, name)


def interface_of(ip: str) -> str | None:
    """The name of the network interface that holds the IPv4 address ``ip``, if any."""
    import fcntl
    import socket
    import struct

    siocgifaddr = 0x8915
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        for _, name in socket.if_nameindex():
            try:
                packed = fcntl.ioctl(
                    probe.fileno(), siocgifaddr, struct.pack("256s", name[:15].encode())
                )
            except OSError:
                continue  # no IPv4 address on it
            if socket.inet_ntoa(packed[20:24]) == ip:
                return name
    return None
