"""``TorchTrainer``: a ``DataParallelTrainer`` whose workers join a torch process group."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from .._run_config import RunConfig
from .._scaling import ScalingConfig
from ..backend import WorkerBackend
from ..data_parallel_trainer import DataParallelTrainer
from .config import TorchBackend, TorchConfig


class TorchTrainer(DataParallelTrainer):
    """Runs a PyTorch training function with DDP on ``scaling_config.num_workers`` workers.

    Before the function runs, every worker joins one ``torch.distributed`` process group
    (gloo on CPU, NCCL with GPUs, per ``torch_config``) at ``MASTER_ADDR:MASTER_PORT``;
    afterwards it is destroyed. In the function, ``prepare_model`` wraps the model in
    ``DistributedDataParallel`` and ``prepare_data_loader`` shards the data.

    Args:
        train_loop_per_worker, train_loop_config, scaling_config, run_config, datasets,
        dataset_config, resume_from_checkpoint, metadata: as for ``DataParallelTrainer``.
        torch_config: the backend and collective timeout (default ``TorchConfig()``).

    Example::

        def train_func(config):
            model = train.torch.prepare_model(nn.Linear(4, 1))
            ...
            train.report({"loss": loss.item()})

        result = TorchTrainer(train_func, train_loop_config={"lr": 0.1},
                              scaling_config=train.ScalingConfig(num_workers=2)).fit()
    """

    def __init__(
        self,
        train_loop_per_worker: Callable[..., Any],
        *,
        train_loop_config: Mapping[str, Any] | None = None,
        torch_config: TorchConfig | None = None,
        scaling_config: ScalingConfig | None = None,
        run_config: RunConfig | None = None,
        datasets: Mapping[str, Any] | None = None,
        dataset_config: Any = None,
        resume_from_checkpoint: Any = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(
            train_loop_per_worker,
            train_loop_config=train_loop_config,
            scaling_config=scaling_config,
            run_config=run_config,
            datasets=datasets,
            dataset_config=dataset_config,
            resume_from_checkpoint=resume_from_checkpoint,
            metadata=metadata,
        )
        torch_config = torch_config if torch_config is not None else TorchConfig()
        if not isinstance(torch_config, TorchConfig):
            raise TypeError(f"torch_config must be a TorchConfig, got {torch_config!r}")
        self.torch_config = torch_config
        self.backend_config = torch_config  # Ray's: the torch config is the backend's

    def _backend(self) -> WorkerBackend:
        return TorchBackend(self.torch_config)
