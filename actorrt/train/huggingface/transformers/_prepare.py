"""``prepare_trainer``: a ``transformers.Trainer`` that also takes iterables of batches."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sized
from typing import Any

import torch
from torch.utils.data import DataLoader, Dataset, IterableDataset

from ._hf import transformers


def prepare_trainer(trainer: transformers.Trainer) -> transformers.Trainer:
    """Make ``trainer`` ready for a Train worker and return it (Ray's ``prepare_trainer``).

    Call it in the training function on the ``transformers.Trainer`` you built. DDP
    needs nothing more: ``TorchTrainer`` has started the process group and set ``RANK``,
    ``LOCAL_RANK`` and ``WORLD_SIZE``, from which ``Trainer`` (through ``accelerate``)
    trains data-parallel and shards map-style datasets itself.

    What it changes, as Ray's does for Ray Data iterables: a ``train_dataset`` or
    ``eval_dataset`` that is an iterable of ready-made batches (re-iterable, without
    ``len``, not a torch ``Dataset``: e.g. this worker's shard from
    ``get_dataset_shard(...).iter_torch_batches(...)``) is fed to the model batch by
    batch as it is, not re-batched or re-sharded. Such a dataset has no length, so set
    ``max_steps`` in ``TrainingArguments``, as with any iterable dataset.

    Raises:
        TypeError: ``trainer`` is not a ``transformers.Trainer``.
        RuntimeError: the worker is one of several in a process group, but ``trainer``
            would train alone on it (its ``args.world_size`` is 1): every worker would
            fit the whole data set by itself.
    """
    if not isinstance(trainer, transformers.Trainer):
        raise TypeError(f"prepare_trainer takes a transformers.Trainer, got {trainer!r}")
    _check_data_parallel(trainer)
    base: type[transformers.Trainer] = type(trainer)
    if getattr(base, "_actorrt_prepared", False):
        return trainer

    class PreparedTrainer(base):  # type: ignore[valid-type,misc]
        _actorrt_prepared = True

        def get_train_dataloader(self) -> DataLoader[Any]:
            if _is_batch_iterable(self.train_dataset):
                return _batch_loader(self.train_dataset)
            return super().get_train_dataloader()  # type: ignore[no-any-return]

        def get_eval_dataloader(self, eval_dataset: Any = None) -> DataLoader[Any]:
            dataset = self.eval_dataset if eval_dataset is None else eval_dataset
            if _is_batch_iterable(dataset):
                return _batch_loader(dataset)
            return super().get_eval_dataloader(eval_dataset)  # type: ignore[no-any-return]

    PreparedTrainer.__name__ = PreparedTrainer.__qualname__ = base.__name__
    trainer.__class__ = PreparedTrainer
    return trainer


def _check_data_parallel(trainer: transformers.Trainer) -> None:
    if not (torch.distributed.is_available() and torch.distributed.is_initialized()):
        return
    gang = torch.distributed.get_world_size()
    if gang > 1 and trainer.args.world_size != gang:
        raise RuntimeError(
            f"this transformers.Trainer sees a world size of {trainer.args.world_size}, but "
            f"the TorchTrainer's process group has {gang} workers, so each would train "
            "alone. accelerate decides from the environment when TrainingArguments is "
            "built: do not override ACCELERATE_USE_CPU or ACCELERATE_TORCH_DEVICE in the "
            "training function, and build TrainingArguments inside it"
        )


def _is_batch_iterable(dataset: Any) -> bool:
    return (
        dataset is not None
        and isinstance(dataset, Iterable)
        and not isinstance(dataset, Dataset | Sized)
    )


class _Batches(IterableDataset[Any]):
    """An iterable of batches as a torch dataset (each item one whole batch)."""

    def __init__(self, batches: Iterable[Any]) -> None:
        self.batches = batches

    def __iter__(self) -> Iterator[Any]:
        return iter(self.batches)


def _first(items: list[Any]) -> Any:
    return items[0]


def _batch_loader(batches: Iterable[Any]) -> DataLoader[Any]:
    return DataLoader(_Batches(batches), batch_size=1, collate_fn=_first)
