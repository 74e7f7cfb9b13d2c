"""actorrt.train.huggingface.transformers: ``transformers.Trainer`` on a gang of Train
workers (Ray's ``ray.train.huggingface.transformers``).

In a ``TorchTrainer``'s training function, build the ``transformers.Trainer`` as usual,
add ``RayTrainReportCallback()`` to its callbacks, pass it through ``prepare_trainer``
and call ``train()``: it trains data-parallel across the gang's workers in the process
group ``TorchTrainer`` started, and each checkpoint it saves reaches ``train.report``
with the logged metrics.

Importing this module without ``transformers`` raises ``ModuleNotFoundError`` saying to
``pip install 'actorrt[transformers]'``.
"""

from ._hf import transformers as _transformers  # first: the install hint when missing
from ._prepare import prepare_trainer as prepare_trainer
from ._report import RayTrainReportCallback as RayTrainReportCallback

__all__ = ["RayTrainReportCallback", "prepare_trainer"]

# Public objects show their public module in tracebacks and reprs.
for _name in __all__:
    _obj = globals()[_name]
    if getattr(_obj, "__module__", "").startswith(f"{__name__}._"):
        _obj.__module__ = __name__
del _name, _obj, _transformers
