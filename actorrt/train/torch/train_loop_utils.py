"""Making single-process PyTorch code data-parallel: the device, the model, the data."""

from __future__ import annotations

import os
import random
from collections.abc import Iterator, Mapping
from typing import Any

from .._extras import require
from ..context import get_context
from . import config as _config

require("torch", "train", "actorrt.train.torch's training-function helpers")
import torch  # noqa: E402
from torch.nn.parallel import DistributedDataParallel  # noqa: E402
from torch.utils.data import (  # noqa: E402
    DataLoader,
    DistributedSampler,
    IterableDataset,
    RandomSampler,
)


def enable_reproducibility(seed: int = 0) -> None:
    """Make this worker's training repeatable, as Ray's ``enable_reproducibility``.

    Seeds Python's ``random``, numpy (when installed) and torch with ``seed``, asks torch
    for deterministic algorithms (an op without one then raises), turns off cuDNN's
    benchmark mode, and sets ``CUBLAS_WORKSPACE_CONFIG`` for deterministic cuBLAS. Call
    it at the start of the training function; runs are repeatable only with the same
    number of workers and the same data order. Slower: use it to debug, not to train.

    Args:
        seed: the seed for every generator.
    """
    random.seed(seed)
    try:
        import numpy
    except ImportError:
        pass
    else:
        numpy.random.seed(seed)
    torch.manual_seed(seed)
    torch.use_deterministic_algorithms(True)
    torch.backends.cudnn.benchmark = False
    # cuBLAS is deterministic only with this workspace setting (torch's docs).
    os.environ["CUBLAS_WORKSPACE_CONFIG"] = ":4096:8"


def get_device() -> torch.device:
    """This worker's device: ``cuda:<i>`` for its (first) GPU, where ``i`` is its
    position among the devices its process sees (``CUDA_VISIBLE_DEVICES``: the gang's
    GPUs on this node), or ``cpu`` when it has none or CUDA is unavailable."""
    return get_devices()[0]


def get_devices() -> list[torch.device]:
    """Every device of this worker: ``cuda:<i>`` for each GPU of its own grant (a worker
    given ``resources_per_worker={"GPU": 2}`` has two), or ``[cpu]`` as ``get_device``."""
    indices = _config.current_device_indices
    if indices and torch.cuda.is_available():
        return [torch.device("cuda", i) for i in indices]
    return [torch.device("cpu")]


def prepare_model(
    model: torch.nn.Module,
    move_to_device: bool = True,
    parallel_strategy: str | None = "ddp",
    parallel_strategy_kwargs: Mapping[str, Any] | None = None,
) -> torch.nn.Module:
    """Put ``model`` on this worker's device and wrap it for data parallelism.

    With more than one worker and ``parallel_strategy="ddp"`` the model is wrapped in
    ``DistributedDataParallel`` (which broadcasts rank 0's parameters, so every rank
    starts equal, and averages gradients in ``backward``). With one worker, or
    ``parallel_strategy=None``, it is returned unwrapped.

    Args:
        model: the module to train.
        move_to_device: move it to ``get_device()`` first.
        parallel_strategy: ``"ddp"`` or ``None``.
        parallel_strategy_kwargs: extra arguments for ``DistributedDataParallel``.

    Raises:
        RuntimeError: called outside a training function.
        ValueError: an unknown ``parallel_strategy``.
    """
    if parallel_strategy not in ("ddp", None):
        raise ValueError(f"parallel_strategy must be 'ddp' or None, got {parallel_strategy!r}")
    context = get_context()
    device = get_device()
    if move_to_device:
        model = model.to(device)
    if parallel_strategy is None or context.get_world_size() < 2:
        return model
    kwargs = dict(parallel_strategy_kwargs or {})
    if device.type == "cuda":
        kwargs.setdefault("device_ids", [device])
        kwargs.setdefault("output_device", device)
    return DistributedDataParallel(model, **kwargs)


def prepare_data_loader(
    data_loader: DataLoader[Any],
    add_dist_sampler: bool = True,
    move_to_device: bool = True,
) -> Any:
    """Give each worker its own shard of ``data_loader``'s data, on its device.

    With more than one worker, the loader is rebuilt with a ``DistributedSampler`` (so
    rank ``r`` of ``n`` sees every ``n``-th sample), shuffling if the original shuffled.
    As with Ray, call ``loader.sampler.set_epoch(epoch)`` at the start of each epoch for
    a new order per epoch. With a GPU and ``move_to_device``, batches are moved to it.

    Args:
        data_loader: a map-style loader with a ``batch_size`` (not a custom
            ``batch_sampler``); an ``IterableDataset`` is left as it is.
        add_dist_sampler: shard with a ``DistributedSampler``.
        move_to_device: move each batch's tensors to ``get_device()``.

    Raises:
        RuntimeError: called outside a training function.
        ValueError: a loader with a custom batch sampler (shard it yourself and pass
            ``add_dist_sampler=False``).
    """
    context = get_context()
    world = context.get_world_size()
    loader = data_loader
    if (
        add_dist_sampler
        and world > 1
        and not isinstance(loader.dataset, IterableDataset)
        and not isinstance(loader.sampler, DistributedSampler)
    ):
        if loader.batch_size is None:
            raise ValueError(
                "prepare_data_loader shards loaders built with batch_size; this one has a "
                "custom batch_sampler. Shard the data yourself and pass "
                "add_dist_sampler=False"
            )
        sampler: DistributedSampler[Any] = DistributedSampler(
            loader.dataset,
            num_replicas=world,
            rank=context.get_world_rank(),
            shuffle=isinstance(loader.sampler, RandomSampler),
        )
        loader = _rebuild(loader, sampler)
    device = get_device()
    if move_to_device and device.type != "cpu":
        return _DeviceLoader(loader, device)
    return loader


def _rebuild(loader: DataLoader[Any], sampler: DistributedSampler[Any]) -> DataLoader[Any]:
    extra: dict[str, Any] = {}
    if loader.num_workers > 0:
        extra["prefetch_factor"] = loader.prefetch_factor
        extra["persistent_workers"] = loader.persistent_workers
    return DataLoader(
        loader.dataset,
        batch_size=loader.batch_size,
        sampler=sampler,
        num_workers=loader.num_workers,
        collate_fn=loader.collate_fn,
        pin_memory=loader.pin_memory,
        drop_last=loader.drop_last,
        timeout=loader.timeout,
        worker_init_fn=loader.worker_init_fn,
        generator=loader.generator,
        **extra,
    )


class _DeviceLoader:
    """A loader whose batches arrive on ``device``; other attributes are the loader's."""

    def __init__(self, loader: DataLoader[Any], device: torch.device) -> None:
        self._loader = loader
        self._device = device

    def __iter__(self) -> Iterator[Any]:
        for batch in self._loader:
            yield _to(batch, self._device)

    def __len__(self) -> int:
        return len(self._loader)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self._loader, name)


def _to(batch: Any, device: torch.device) -> Any:
    if isinstance(batch, torch.Tensor):
        return batch.to(device, non_blocking=True)
    if isinstance(batch, tuple | list):
        return type(batch)(_to(b, device) for b in batch)
    if isinstance(batch, Mapping):
        return {k: _to(v, device) for k, v in batch.items()}
    return batch
