"""``LightGBMTrainer``: a ``DataParallelTrainer`` whose workers train one LightGBM model
together, over LightGBM's own network (Ray Train V2's ``ray.train.lightgbm``)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ..._shared._checkpoint import Checkpoint
from .._gbdt_trainer import BoostingTrainer
from .._run_config import RunConfig
from .._scaling import ScalingConfig
from ..backend import WorkerBackend
from .config import LightGBMBackend, LightGBMConfig

__all__ = ["LightGBMTrainer"]


class LightGBMTrainer(BoostingTrainer):
    """Runs a training function that calls ``lightgbm.train`` on every worker of a gang
    with LightGBM's network parameters (``get_network_params()``: every worker's address
    and port), so the workers train one model (``tree_learner="data"``), each on its shard.
    As in Ray Train V2, the function does the training and passes
    ``RayTrainReportCallback()`` to ``lightgbm.train`` to report metrics and checkpoints.

    Args:
        train_loop_per_worker, train_loop_config, scaling_config, run_config, datasets,
        dataset_config, resume_from_checkpoint, metadata: as for ``DataParallelTrainer``.
        lightgbm_config: the network set-up (default ``LightGBMConfig()``).

    Example::

        def train_fn(config):
            rows = train.get_dataset_shard("train")
            batch = next(rows.iter_batches(batch_size=len(rows)))
            data = lightgbm.Dataset(batch["x"], label=batch["y"])
            params = {**config, **get_network_params()}
            lightgbm.train(params, data, valid_sets=[data], valid_names=["train"],
                           callbacks=[RayTrainReportCallback()])

    Raises:
        TypeError: Ray Train V1's ``label_column``, ``params``, ``num_boost_round`` or
            ``dataset_params`` (V2 moved them into the training function).
    """

    _config_type = LightGBMConfig
    _config_name = "lightgbm_config"

    def __init__(
        self,
        train_loop_per_worker: Callable[..., Any],
        *,
        train_loop_config: Mapping[str, Any] | None = None,
        lightgbm_config: LightGBMConfig | None = None,
        scaling_config: ScalingConfig | None = None,
        run_config: RunConfig | None = None,
        datasets: Mapping[str, Any] | None = None,
        dataset_config: Any = None,
        resume_from_checkpoint: Any = None,
        metadata: Mapping[str, Any] | None = None,
        **v1_arguments: Any,
    ) -> None:
        super().__init__(
            train_loop_per_worker, lightgbm_config, v1_arguments,
            train_loop_config=train_loop_config, scaling_config=scaling_config,
            run_config=run_config, datasets=datasets, dataset_config=dataset_config,
            resume_from_checkpoint=resume_from_checkpoint, metadata=metadata,
        )

    def _backend_for(self, config: Any) -> WorkerBackend:
        return LightGBMBackend(config)

    @classmethod
    def get_model(cls, checkpoint: Checkpoint) -> Any:
        """The ``lightgbm.Booster`` in a checkpoint that ``RayTrainReportCallback`` saved."""
        from ._lightgbm_utils import RayTrainReportCallback

        return RayTrainReportCallback.get_model(checkpoint)
