"""actorrt.train: data-parallel training on a gang of worker-process actors (Ray Train's API).

Built only on the public ``actorrt`` API and the libraries' shared tier ``actorrt._shared``
(the layering in actorrt/__init__.py). It does not import ``actorrt.tune``, nor does tune
import it: tune knows a trainer only through ``ScalingConfig.as_placement_group_factory()``,
and a trainer finds the Tune trial it runs in through ``set_trial_provider``.

Public modules are at Ray's paths (``backend``, ``context``, ``error``,
``data_parallel_trainer``, ``torch.config``, ``torch.torch_trainer``,
``torch.train_loop_utils``, ``lightning``, ``huggingface.transformers``); the layers inside,
bottom to top (tests/project/test_layering.py checks them): settings and records (``error``,
``backend``, ``_run_config``, ``_scaling``, ``_checkpoint_book``, ``_result``, ...); what
runs in a training worker (``context``, ``_data``, ``_worker``, ``train_loop_utils``, the
Lightning and Transformers helpers); the gang (``_gang``); the trainers; the packages.

- ``ScalingConfig``: how many workers and what each needs.
- ``RunConfig``, ``FailureConfig``, ``CheckpointConfig``: where a run writes, how often it
  restarts after a failure, which checkpoints it keeps.
- ``DataParallelTrainer``: runs a training function on every worker; ``fit()`` returns a
  ``Result``, or raises ``TrainingFailedError`` (``WorkerGroupError``,
  ``ControllerError``). ``actorrt.train.torch.TorchTrainer`` adds ``torch.distributed``.
- In the training function: ``report``, ``get_checkpoint``, ``get_context``,
  ``get_dataset_shard`` (a ``DataShard`` of the trainer's ``datasets=``).
- ``Checkpoint`` is one class with ``actorrt.tune.Checkpoint``, as in Ray.
- ``UserCallback`` (in ``RunConfig(callbacks=...)``) and ``BackendConfig`` (with its
  ``backend.Backend`` hooks, ``DataParallelTrainer(backend_config=...)``): Ray Train's
  driver-side hooks, called in the process that runs ``fit()``.
- ``set_trial_provider`` and the ``EnclosingTrial`` protocol: how a sweep library
  (``actorrt.tune``, or another) tells a trainer which trial its ``fit()`` runs in, so
  rank 0's reports become the trial's results.
"""

from .._shared._checkpoint import Checkpoint as Checkpoint
from .._shared._trial_hook import EnclosingTrial as EnclosingTrial
from .._shared._trial_hook import set_trial_provider as set_trial_provider
from ._callback import UserCallback as UserCallback
from ._data import DataShard as DataShard
from ._result import Result as Result
from ._run_config import CheckpointConfig as CheckpointConfig
from ._run_config import FailureConfig as FailureConfig
from ._run_config import RunConfig as RunConfig
from ._scaling import PlacementGroupSpec as PlacementGroupSpec
from ._scaling import ScalingConfig as ScalingConfig
from .backend import BackendConfig as BackendConfig
from .context import ReportedCheckpoint as ReportedCheckpoint
from .context import TrainContext as TrainContext
from .context import get_all_reported_checkpoints as get_all_reported_checkpoints
from .context import get_checkpoint as get_checkpoint
from .context import get_context as get_context
from .context import get_dataset_shard as get_dataset_shard
from .context import report as report
from .data_parallel_trainer import DataParallelTrainer as DataParallelTrainer
from .error import ControllerError as ControllerError
from .error import TrainingFailedError as TrainingFailedError
from .error import WorkerGroupError as WorkerGroupError

__all__ = [
    "BackendConfig",
    "Checkpoint",
    "CheckpointConfig",
    "ControllerError",
    "DataParallelTrainer",
    "DataShard",
    "EnclosingTrial",
    "FailureConfig",
    "PlacementGroupSpec",
    "ReportedCheckpoint",
    "Result",
    "RunConfig",
    "ScalingConfig",
    "TrainContext",
    "TrainingFailedError",
    "UserCallback",
    "WorkerGroupError",
    "get_all_reported_checkpoints",
    "get_checkpoint",
    "get_context",
    "get_dataset_shard",
    "report",
    "set_trial_provider",
]

# Public objects show their public module in tracebacks and reprs.
for _name in __all__:
    _obj = globals()[_name]
    if getattr(_obj, "__module__", "").startswith("actorrt.train."):
        try:
            _obj.__module__ = "actorrt.train"
        except (AttributeError, TypeError):
            pass
del _name, _obj


def __getattr__(name: str) -> object:
    if name in ("torch", "lightning", "huggingface"):
        # The integrations load on first use, as ``ray.train.lightning`` does.
        import importlib

        return importlib.import_module(f"{__name__}.{name}")
    # A Ray name actorrt does not have: say so, and where the differences are listed.
    from .._ray_names import missing

    raise missing(__name__, name)
