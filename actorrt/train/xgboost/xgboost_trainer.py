"""``XGBoostTrainer``: a ``DataParallelTrainer`` whose workers train one XGBoost model
together, over XGBoost's own collective (Ray Train V2's ``ray.train.xgboost``)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ..._shared._checkpoint import Checkpoint
from .._gbdt_trainer import BoostingTrainer
from .._run_config import RunConfig
from .._scaling import ScalingConfig
from ..backend import WorkerBackend
from .config import XGBoostBackend, XGBoostConfig

__all__ = ["XGBoostTrainer"]


class XGBoostTrainer(BoostingTrainer):
    """Runs a training function that calls ``xgboost.train`` on every worker of a gang,
    joined to one XGBoost collective (``XGBoostConfig``), so the workers train one model,
    each on its shard (``train.get_dataset_shard``). As in Ray Train V2, the function does
    the training: it builds its ``DMatrix`` from its shard and passes
    ``RayTrainReportCallback()`` to ``xgboost.train`` to report metrics and checkpoints.

    Args:
        train_loop_per_worker, train_loop_config, scaling_config, run_config, datasets,
        dataset_config, resume_from_checkpoint, metadata: as for ``DataParallelTrainer``.
        xgboost_config: the collective's set-up (default ``XGBoostConfig()``).

    Example::

        def train_fn(config):
            rows = train.get_dataset_shard("train")
            batch = next(rows.iter_batches(batch_size=len(rows)))
            dtrain = xgboost.DMatrix(batch["x"], label=batch["y"])
            xgboost.train(config, dtrain, evals=[(dtrain, "train")], num_boost_round=20,
                          callbacks=[RayTrainReportCallback()])

        result = XGBoostTrainer(train_fn, train_loop_config={"objective": "binary:logistic"},
                                datasets={"train": {"x": x, "y": y}},
                                scaling_config=train.ScalingConfig(num_workers=2)).fit()
        booster = RayTrainReportCallback.get_model(result.checkpoint)

    Raises:
        TypeError: Ray Train V1's ``label_column``, ``params``, ``num_boost_round`` or
            ``dmatrix_params`` (V2 moved them into the training function).
    """

    _config_type = XGBoostConfig
    _config_name = "xgboost_config"

    def __init__(
        self,
        train_loop_per_worker: Callable[..., Any],
        *,
        train_loop_config: Mapping[str, Any] | None = None,
        xgboost_config: XGBoostConfig | None = None,
        scaling_config: ScalingConfig | None = None,
        run_config: RunConfig | None = None,
        datasets: Mapping[str, Any] | None = None,
        dataset_config: Any = None,
        resume_from_checkpoint: Any = None,
        metadata: Mapping[str, Any] | None = None,
        **v1_arguments: Any,
    ) -> None:
        super().__init__(
            train_loop_per_worker, xgboost_config, v1_arguments,
            train_loop_config=train_loop_config, scaling_config=scaling_config,
            run_config=run_config, datasets=datasets, dataset_config=dataset_config,
            resume_from_checkpoint=resume_from_checkpoint, metadata=metadata,
        )

    def _backend_for(self, config: Any) -> WorkerBackend:
        return XGBoostBackend(config)

    @classmethod
    def get_model(cls, checkpoint: Checkpoint) -> Any:
        """The ``xgboost.Booster`` in a checkpoint that ``RayTrainReportCallback`` saved."""
        from ._xgboost_utils import RayTrainReportCallback

        return RayTrainReportCallback.get_model(checkpoint)
