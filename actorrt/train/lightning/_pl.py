"""Which PyTorch Lightning this package builds on, and the error when there is none.

``lightning.pytorch`` (the ``lightning`` package) when it is installed, else the older
standalone ``pytorch_lightning``, as Ray Train does. The two are separate class trees: a
script must build its ``Trainer`` and ``LightningModule`` from the one used here.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import TYPE_CHECKING

EXTRA_HINT = (
    "actorrt.train.lightning needs PyTorch Lightning, which is not installed: "
    "pip install 'actorrt[lightning]' (or pip install 'lightning>=2.4')"
)


def _import_lightning() -> ModuleType:
    try:
        return importlib.import_module("lightning.pytorch")
    except ModuleNotFoundError as exc:
        if exc.name not in ("lightning", "lightning.pytorch"):
            raise  # Lightning is there but one of its own dependencies is not
    try:
        return importlib.import_module("pytorch_lightning")
    except ModuleNotFoundError as exc:
        if exc.name != "pytorch_lightning":
            raise
        raise ModuleNotFoundError(EXTRA_HINT, name="lightning") from None


if TYPE_CHECKING:
    import lightning.pytorch as pl
    from lightning.fabric.plugins.environments.lightning import LightningEnvironment
else:
    pl = _import_lightning()
    LightningEnvironment = importlib.import_module(
        f"{pl.__name__}.plugins.environments"
    ).LightningEnvironment

__all__ = ["EXTRA_HINT", "LightningEnvironment", "pl"]
