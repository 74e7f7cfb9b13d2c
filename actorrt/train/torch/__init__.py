"""actorrt.train.torch: PyTorch DDP on a gang of training workers (Ray Train's names).

``TorchTrainer`` starts a ``torch.distributed`` process group in every worker (gloo on
CPU, NCCL with GPUs) before the training function runs and destroys it afterwards;
``prepare_model`` and ``prepare_data_loader`` make single-process code data-parallel.

``TorchTrainer`` and ``TorchConfig`` do not import torch: the process that calls
``fit()`` (a script, or each trial driver of a Tune sweep) only coordinates, so it does not
pay for that import. ``get_device``, ``prepare_model`` and ``prepare_data_loader``, used in
the workers, import it on first use (PEP 562).
"""

import importlib as _importlib
import typing as _typing

from .config import TorchConfig as TorchConfig
from .torch_trainer import TorchTrainer as TorchTrainer

if _typing.TYPE_CHECKING:
    from .train_loop_utils import enable_reproducibility as enable_reproducibility
    from .train_loop_utils import get_device as get_device
    from .train_loop_utils import get_devices as get_devices
    from .train_loop_utils import prepare_data_loader as prepare_data_loader
    from .train_loop_utils import prepare_model as prepare_model

__all__ = [
    "TorchConfig",
    "TorchTrainer",
    "enable_reproducibility",
    "get_device",
    "get_devices",
    "prepare_data_loader",
    "prepare_model",
]

_NEED_TORCH = frozenset({
    "enable_reproducibility", "get_device", "get_devices", "prepare_data_loader", "prepare_model",
})


def _show_public(obj: _typing.Any) -> _typing.Any:
    """Public objects show their public module in tracebacks and reprs."""
    if getattr(obj, "__module__", "").startswith(f"{__name__}."):
        try:
            obj.__module__ = __name__
        except (AttributeError, TypeError):
            pass
    return obj


def __getattr__(name: str) -> _typing.Any:
    if name not in _NEED_TORCH:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = _show_public(getattr(_importlib.import_module(".train_loop_utils", __name__), name))
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


_show_public(TorchConfig)
_show_public(TorchTrainer)
