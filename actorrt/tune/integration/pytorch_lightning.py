"""Lightning callbacks that report to Tune (Ray's ``ray.tune.integration.pytorch_lightning``).

``TuneReportCheckpointCallback`` goes into a Lightning ``Trainer`` that a Tune trial (or a
Train worker) runs: at each of the Lightning hooks it is set ``on`` (``"validation_end"`` by
default), it reports the trainer's ``callback_metrics`` (all of them, or those named by
``metrics``) with ``train.report``, which in a Tune trial is ``tune.report``, and, unless
``save_checkpoints=False``, the trainer's checkpoint (``trainer.save_checkpoint`` into a
fresh folder, as ``filename``) with it. The sanity check's validation before training
reports nothing, and neither does a hook that finds none of the metrics. ``TuneReportCallback``
(Ray's older name) reports the metrics only. The Lightning is ``lightning.pytorch`` when the
``lightning`` package is installed, else ``pytorch_lightning`` (build the ``Trainer`` from
the same one). Needs ``pip install 'actorrt[lightning]'``.
"""

from __future__ import annotations

import contextlib
import inspect
import logging
import os
import tempfile
import warnings
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from ...train import Checkpoint, report
from ...train.lightning._pl import pl

__all__ = ["TuneCallback", "TuneReportCallback", "TuneReportCheckpointCallback"]

logger = logging.getLogger("actorrt.tune")
_warned = False  # TuneReportCallback's deprecation, said once

# Every hook of this Lightning's Callback, by name (``on_`` and the event).
HOOKS = frozenset(
    name for name, _ in inspect.getmembers(pl.Callback, inspect.isfunction)
    if name.startswith("on_")
)


def _hook(name: str) -> Any:
    def hook(self: TuneCallback, trainer: Any, *args: Any, **kwargs: Any) -> None:
        if name in self._on:
            self._handle(trainer, args[0] if args else kwargs.get("pl_module"))

    hook.__name__ = name
    return hook


class TuneCallback(pl.Callback):
    """The base of Tune's Lightning callbacks: ``_handle(trainer, pl_module)`` runs at the
    hooks named by ``on`` (a hook's name less its ``on_``, or a list of them)."""

    def __init__(self, on: str | Sequence[str] = "validation_end") -> None:
        events = [on] if isinstance(on, str) else list(on)
        if not events:
            raise ValueError("on must name at least one Lightning hook, got an empty list")
        for event in events:
            if not isinstance(event, str) or f"on_{event}" not in HOOKS:
                allowed = ", ".join(sorted(h[3:] for h in HOOKS))
                raise ValueError(f"on={event!r} is not a hook of this Lightning's Callback; "
                                 f"choose from: {allowed}")
        self._on = frozenset(f"on_{event}" for event in events)

    def _handle(self, trainer: Any, pl_module: Any) -> None:
        raise NotImplementedError(f"{type(self).__name__} must define _handle")


for _name in HOOKS:
    setattr(TuneCallback, _name, _hook(_name))


class TuneReportCheckpointCallback(TuneCallback):
    """Reports the trainer's metrics, with a checkpoint, to Tune at the hooks ``on``.

    Args:
        metrics: what to report: ``None``, every metric in ``trainer.callback_metrics``; a
            name or a list of names, each reported under its own name; a dict, reported
            under its keys from the metrics its values name. A name the trainer does not
            have is left out with a warning.
        filename: the checkpoint's file in the checkpoint folder.
        save_checkpoints: ``False`` reports the metrics only.
        on: the hook(s), less ``on_``, e.g. ``"validation_end"``, ``"train_epoch_end"``.
    """

    def __init__(
        self,
        metrics: str | Sequence[str] | Mapping[str, str] | None = None,
        filename: str = "checkpoint",
        save_checkpoints: bool = True,
        on: str | Sequence[str] = "validation_end",
    ) -> None:
        super().__init__(on)
        if isinstance(metrics, str):
            metrics = [metrics]
        if metrics is not None and not isinstance(metrics, Mapping | Sequence):
            raise TypeError(f"metrics must be None, a name, a list of names or a dict of "
                            f"report name -> metric name, got {metrics!r}")
        if not isinstance(filename, str) or not filename or os.sep in filename:
            raise ValueError(f"filename must be a file name, got {filename!r}")
        self._metrics = metrics
        self._filename = filename
        self._save_checkpoints = bool(save_checkpoints)

    def _report_dict(self, trainer: Any) -> dict[str, Any]:
        found = trainer.callback_metrics
        if not self._metrics:
            return {k: _number(v) for k, v in found.items()}
        pairs = (self._metrics.items() if isinstance(self._metrics, Mapping)
                 else ((name, name) for name in self._metrics))
        values = {}
        for key, metric in pairs:
            if metric in found:
                values[key] = _number(found[metric])
            else:
                logger.warning("tune: the metric %r is not in the trainer's callback_metrics "
                               "(it has %s): not reported", metric, sorted(found))
        return values

    @contextlib.contextmanager
    def _checkpoint(self, trainer: Any) -> Iterator[Checkpoint | None]:
        if not self._save_checkpoints:
            yield None
            return
        with tempfile.TemporaryDirectory(prefix="actorrt-lightning-") as folder:
            trainer.save_checkpoint(os.path.join(folder, self._filename))
            yield Checkpoint.from_directory(folder)

    def _handle(self, trainer: Any, pl_module: Any) -> None:
        if trainer.sanity_checking:
            return  # the validation run before training: not a result
        values = self._report_dict(trainer)
        if not values:
            return
        with self._checkpoint(trainer) as checkpoint:
            report(values, checkpoint=checkpoint)


class TuneReportCallback(TuneReportCheckpointCallback):
    """Reports the trainer's metrics to Tune, without checkpoints (Ray's older name:
    ``TuneReportCheckpointCallback(save_checkpoints=False)``)."""

    def __init__(
        self,
        metrics: str | Sequence[str] | Mapping[str, str] | None = None,
        on: str | Sequence[str] = "validation_end",
    ) -> None:
        global _warned
        if not _warned:  # once per process, as Ray warns
            _warned = True
            warnings.warn(
                "actorrt.tune.integration.pytorch_lightning.TuneReportCallback is deprecated "
                "(as in Ray): use TuneReportCheckpointCallback(metrics, save_checkpoints="
                "False, on=...)", stacklevel=2,
            )
        super().__init__(metrics, save_checkpoints=False, on=on)


def _number(value: Any) -> Any:
    """A metric as a plain number (Lightning keeps them as tensors)."""
    item = getattr(value, "item", None)
    return item() if callable(item) else value
