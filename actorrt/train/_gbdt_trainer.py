"""What ``XGBoostTrainer`` and ``LightGBMTrainer`` share: a ``DataParallelTrainer`` whose
backend joins the workers to the library's distributed training, and that refuses Ray
Train V1's arguments by name."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from .backend import BackendConfig, WorkerBackend
from .data_parallel_trainer import DataParallelTrainer

__all__ = ["BoostingTrainer"]

# Ray Train V1's arguments, which V2 (and so actorrt) no longer takes.
_V1_ARGUMENTS = ("label_column", "params", "num_boost_round", "dmatrix_params",
                 "dataset_params")


class BoostingTrainer(DataParallelTrainer):
    """A data-parallel trainer with a library's backend (``_backend_for``)."""

    _config_type: type[BackendConfig]
    _config_name: str

    def __init__(
        self,
        train_loop_per_worker: Callable[..., Any],
        backend_config: Any,
        v1_arguments: Mapping[str, Any],
        **trainer_arguments: Any,
    ) -> None:
        name = type(self).__name__
        for argument in v1_arguments:
            if argument in _V1_ARGUMENTS:
                raise TypeError(
                    f"{name}({argument}=...) is Ray Train V1's API; as in V2, pass a "
                    "train_loop_per_worker that builds the data set and calls the library's "
                    "train() with RayTrainReportCallback (docs/train.md, docs/porting.md)"
                )
            raise TypeError(f"{name}() got an unexpected keyword argument {argument!r}")
        super().__init__(train_loop_per_worker, **trainer_arguments)
        if backend_config is None:
            backend_config = self._config_type()
        if not isinstance(backend_config, self._config_type):
            raise TypeError(
                f"{self._config_name} must be a {self._config_type.__name__}, "
                f"got {backend_config!r}"
            )
        setattr(self, self._config_name, backend_config)
        self._backend_config = backend_config
        self.backend_config = backend_config  # Ray's: the library's config is the backend's

    def _backend(self) -> WorkerBackend:
        return self._backend_for(self._backend_config)

    def _backend_for(self, config: Any) -> WorkerBackend:
        raise NotImplementedError  # each library's trainer names its backend
