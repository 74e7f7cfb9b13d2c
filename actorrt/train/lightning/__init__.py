"""actorrt.train.lightning: PyTorch Lightning on a gang of Train workers (Ray's names).

In a ``TorchTrainer``'s training function, build the ``pl.Trainer`` with
``strategy=RayDDPStrategy()``, ``plugins=[RayLightningEnvironment()]`` and
``callbacks=[RayTrainReportCallback()]``, pass it through ``prepare_trainer`` and call
``fit``: Lightning then trains with DDP across the gang's workers, in the process group
``TorchTrainer`` started, and each epoch's metrics and checkpoint reach ``train.report``.

Builds on ``lightning.pytorch`` (or, without the ``lightning`` package, on
``pytorch_lightning``). Importing this module without either raises
``ModuleNotFoundError`` saying to ``pip install 'actorrt[lightning]'``.
``RayFSDPStrategy`` and ``RayDeepSpeedStrategy`` (which needs ``pip install
'actorrt[deepspeed]'``) shard the model; both need a CUDA GPU per worker.
"""

from ._pl import pl as _pl  # first: a missing Lightning fails here, with the install hint
from ._prepare import prepare_trainer as prepare_trainer
from ._report import RayTrainReportCallback as RayTrainReportCallback
from ._strategies import RayDDPStrategy as RayDDPStrategy
from ._strategies import RayDeepSpeedStrategy as RayDeepSpeedStrategy
from ._strategies import RayFSDPStrategy as RayFSDPStrategy
from ._strategies import RayLightningEnvironment as RayLightningEnvironment

__all__ = [
    "RayDDPStrategy",
    "RayDeepSpeedStrategy",
    "RayFSDPStrategy",
    "RayLightningEnvironment",
    "RayTrainReportCallback",
    "prepare_trainer",
]

# Public objects show their public module in tracebacks and reprs.
for _name in __all__:
    _obj = globals()[_name]
    if getattr(_obj, "__module__", "").startswith(f"{__name__}._"):
        _obj.__module__ = __name__
del _name, _obj, _pl
