"""Lightning strategies and the cluster environment for a gang of Train workers.

``TorchTrainer`` has already started the workers and joined them into one
``torch.distributed`` process group before the training function builds its
``pl.Trainer``. These classes tell Lightning so: ranks and sizes come from
``train.get_context()``, the device from ``train.torch.get_device()``, and Lightning
neither launches processes nor starts a process group of its own.
"""

from __future__ import annotations

import importlib.util
import warnings
from collections.abc import Mapping
from typing import Any

import torch

from ..context import get_context
from ..torch.train_loop_utils import get_device
from ._pl import LightningEnvironment, pl

# Arguments Lightning would use to start its own process group; TorchTrainer has done that.
_PROCESS_GROUP_ARGUMENTS = ("process_group_backend", "timeout", "start_method")


def _warn_ignored(strategy: str, kwargs: Mapping[str, Any]) -> None:
    given = [name for name in _PROCESS_GROUP_ARGUMENTS if name in kwargs]
    if given:
        shown = ", ".join(f"{name}={kwargs[name]!r}" for name in given)
        warnings.warn(
            f"{strategy}({shown}): ignored, because TorchTrainer starts the process group "
            "before the training function runs; choose the backend and timeout with "
            "TorchTrainer(torch_config=TorchConfig(backend=..., timeout_s=...))",
            UserWarning,
            stacklevel=3,
        )


class _OnTheGang:
    """What the Ray strategies share: this worker's device, and data sharded over the gang."""

    @property
    def root_device(self) -> torch.device:
        """This worker's device (``train.torch.get_device()``)."""
        return get_device()

    @property
    def distributed_sampler_kwargs(self) -> dict[str, Any]:
        """Shard data across the whole gang: one replica per worker, this worker's rank."""
        strategy: Any = self
        return {"num_replicas": strategy.world_size, "rank": strategy.global_rank}


class RayDDPStrategy(_OnTheGang, pl.strategies.DDPStrategy):
    """Lightning's ``DDPStrategy`` for a Train worker gang (Ray's ``RayDDPStrategy``).

    Takes ``DDPStrategy``'s arguments (``find_unused_parameters``, ``static_graph``, ...).
    ``process_group_backend``, ``timeout`` and ``start_method`` have no effect here (a
    warning says so): set the backend and timeout with ``TorchConfig``.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        _warn_ignored(type(self).__name__, kwargs)
        super().__init__(*args, **kwargs)


class RayFSDPStrategy(_OnTheGang, pl.strategies.FSDPStrategy):
    """Lightning's ``FSDPStrategy`` for a Train worker gang (Ray's ``RayFSDPStrategy``).

    Takes ``FSDPStrategy``'s arguments (``sharding_strategy``, ``auto_wrap_policy``,
    ``state_dict_type``, ...); like ``RayDDPStrategy``, ``process_group_backend`` and
    ``timeout`` have no effect. With ``state_dict_type="full"`` (Lightning's default),
    rank 0 writes the whole checkpoint; with ``state_dict_type="sharded"`` each rank writes
    and reports its own shards, which ``train.report`` keeps as it keeps every rank's
    checkpoint.

    torch's FSDP needs a GPU per worker (``ScalingConfig(use_gpu=True)``). As in Ray, it
    may be constructed anywhere (a CPU machine, the driver); a worker without a GPU
    raises when ``Trainer.fit`` sets the strategy up, saying why.

    Raises:
        ValueError: at setup, this worker has no GPU that CUDA can use.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        _warn_ignored(type(self).__name__, kwargs)
        super().__init__(*args, **kwargs)

    def setup_environment(self) -> None:
        """Refuse a CPU worker before Lightning starts FSDP (it would fail deep in torch)."""
        device = get_device()
        if device.type == "cpu":
            raise ValueError(
                "RayFSDPStrategy needs a GPU per worker (torch's FSDP does not run on CPU), "
                f"and this worker's device is {device}: run the TorchTrainer with "
                "ScalingConfig(use_gpu=True), or use RayDDPStrategy on CPU "
                "(see 'Lightning' in docs/porting.md)"
            )
        super().setup_environment()


def _installed(module: str) -> bool:
    """Whether ``module`` can be imported, without importing it."""
    try:
        return importlib.util.find_spec(module) is not None
    except ImportError:  # a finder that refuses it
        return False


class RayDeepSpeedStrategy(_OnTheGang, pl.strategies.DeepSpeedStrategy):
    """Lightning's ``DeepSpeedStrategy`` for a Train worker gang (Ray's
    ``RayDeepSpeedStrategy``).

    Takes ``DeepSpeedStrategy``'s arguments (``stage``, ``offload_optimizer``, ``config``,
    ...); like ``RayDDPStrategy``, ``process_group_backend`` and ``timeout`` have no effect.
    DeepSpeed joins the process group ``TorchTrainer`` started.

    Lightning runs its DeepSpeed strategy on CUDA GPUs only (its ``setup_environment``
    refuses any other accelerator), so each worker needs a GPU
    (``ScalingConfig(use_gpu=True)``). As in Ray, it may be constructed anywhere; a worker
    without a GPU raises when ``Trainer.fit`` sets the strategy up, saying why. On CPU,
    call ``deepspeed.initialize`` in the training function instead (docs/integrations.md).

    Raises:
        ImportError: deepspeed is not installed (``pip install 'actorrt[deepspeed]'``).
        ValueError: at setup, this worker has no GPU that CUDA can use.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        if not _installed("deepspeed"):  # Lightning imports it at setup
            raise ImportError(
                "RayDeepSpeedStrategy needs deepspeed, which is not installed here: "
                "pip install 'actorrt[deepspeed]'"
            )
        _warn_ignored(type(self).__name__, kwargs)
        super().__init__(*args, **kwargs)

    def setup_environment(self) -> None:
        """Refuse a CPU worker with the reason, before Lightning's own refusal."""
        device = get_device()
        if device.type != "cuda":
            raise ValueError(
                "RayDeepSpeedStrategy needs a CUDA GPU per worker (Lightning's "
                "DeepSpeedStrategy refuses every accelerator but CUDA), and this worker's "
                f"device is {device}: run the TorchTrainer with ScalingConfig(use_gpu=True), "
                "or on CPU call deepspeed.initialize(...) in the training function (see "
                "'DeepSpeed' in docs/integrations.md), or use RayDDPStrategy"
            )
        super().setup_environment()


class RayLightningEnvironment(LightningEnvironment):
    """Lightning's cluster environment for a Train worker (Ray's
    ``RayLightningEnvironment``).

    World size and ranks are the gang's (``train.get_context()``); Lightning's attempts to
    set them are ignored, and Lightning never launches processes: the gang's workers are
    the processes. ``MASTER_ADDR`` and ``MASTER_PORT`` are those ``TorchTrainer`` set.
    Used outside a training function, its methods raise ``RuntimeError``.
    """

    @property
    def creates_processes_externally(self) -> bool:
        return True

    def world_size(self) -> int:
        return get_context().get_world_size()

    def set_world_size(self, size: int) -> None:
        pass  # the gang's size is fixed by ScalingConfig

    def global_rank(self) -> int:
        return get_context().get_world_rank()

    def set_global_rank(self, rank: int) -> None:
        pass  # the rank is fixed by the gang

    def local_rank(self) -> int:
        return get_context().get_local_rank()

    def node_rank(self) -> int:
        return get_context().get_node_rank()

    def teardown(self) -> None:
        pass  # TorchTrainer destroys the process group after the training function
