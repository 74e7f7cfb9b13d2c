"""Ray's ``ray.train.examples.pytorch.torch_linear_example``: fit ``y = a * x + b`` with a
small ``nn.Linear`` stack under ``TorchTrainer``.

Programs import ``train_func`` (the per-worker loop: one result ``{"loss": ...}`` per epoch,
reported with a checkpoint holding ``model.pt``, and returned as a list) and
``train_linear``; ``LinearDataset``, ``train_epoch`` and ``validate_epoch`` are its parts.
Run it as a script (``--smoke-test`` for one short run) to train it on this machine.
"""

from __future__ import annotations

import argparse
import copy
import os
import tempfile
from typing import Any

import torch
import torch.nn as nn

from ... import Checkpoint, RunConfig, ScalingConfig, get_context, report
from ...torch import TorchTrainer, prepare_data_loader, prepare_model

__all__ = ["LinearDataset", "train_epoch", "train_func", "train_linear", "validate_epoch"]


class LinearDataset(torch.utils.data.Dataset):  # type: ignore[type-arg]
    """``size`` points ``x`` evenly spread over [0, 10), with ``y = a * x + b``."""

    def __init__(self, a: float, b: float, size: int = 1000) -> None:
        x = torch.arange(0, 10, 10 / size, dtype=torch.float32)[:size]
        self.x = x.unsqueeze(1)
        self.y = (a * x + b).unsqueeze(1)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        return self.x[index], self.y[index]

    def __len__(self) -> int:
        return len(self.x)


def train_epoch(
    epoch: int, dataloader: Any, model: nn.Module, loss_fn: Any, optimizer: Any
) -> None:
    """One pass over ``dataloader`` (each worker's shard, reshuffled per epoch when
    distributed)."""
    if get_context().get_world_size() > 1 and hasattr(dataloader.sampler, "set_epoch"):
        dataloader.sampler.set_epoch(epoch)
    model.train()
    for x, y in dataloader:
        optimizer.zero_grad()
        loss_fn(model(x), y).backward()
        optimizer.step()


def validate_epoch(
    dataloader: Any, model: nn.Module, loss_fn: Any
) -> tuple[dict[str, Any], float]:
    """The model's weights (a CPU copy) and its mean loss over ``dataloader``."""
    model.eval()
    total = 0.0
    with torch.no_grad():
        for x, y in dataloader:
            total += float(loss_fn(model(x), y).item())
    return copy.deepcopy(model).cpu().state_dict(), total / max(len(dataloader), 1)


def train_func(config: dict[str, Any]) -> list[dict[str, float]]:
    """The per-worker loop. ``config`` keys (Ray's, with its defaults): ``data_size``
    1000, ``val_size`` 400, ``batch_size`` 32, ``hidden_size`` 1, ``lr`` 1e-2, ``epochs``
    3. Returns every epoch's result ``{"loss": validation loss}``."""
    data_size = config.get("data_size", 1000)
    val_size = config.get("val_size", 400)
    batch_size = config.get("batch_size", 32)
    hidden_size = config.get("hidden_size", 1)
    lr = config.get("lr", 1e-2)
    epochs = config.get("epochs", 3)

    train_loader = prepare_data_loader(torch.utils.data.DataLoader(
        LinearDataset(2, 5, size=data_size), batch_size=batch_size))
    validation_loader = prepare_data_loader(torch.utils.data.DataLoader(
        LinearDataset(2, 5, size=val_size), batch_size=batch_size))
    model = prepare_model(nn.Linear(1, hidden_size))
    loss_fn = nn.MSELoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)

    results = []
    for epoch in range(epochs):
        train_epoch(epoch, train_loader, model, loss_fn, optimizer)
        state_dict, loss = validate_epoch(validation_loader, model, loss_fn)
        result = {"loss": loss}
        results.append(result)
        with tempfile.TemporaryDirectory() as folder:
            torch.save(state_dict, os.path.join(folder, "model.pt"))
            report(result, checkpoint=Checkpoint.from_directory(folder))
    return results


def train_linear(
    num_workers: int = 2, use_gpu: bool = False, epochs: int = 3,
    storage_path: str | None = None,
) -> dict[str, Any]:
    """Train it with ``TorchTrainer`` on ``num_workers`` workers; the last metrics."""
    trainer = TorchTrainer(
        train_loop_per_worker=train_func,
        train_loop_config={"lr": 1e-2, "hidden_size": 1, "batch_size": 4, "epochs": epochs},
        scaling_config=ScalingConfig(num_workers=num_workers, use_gpu=use_gpu),
        run_config=RunConfig(storage_path=storage_path),
    )
    metrics: dict[str, Any] = trainer.fit().metrics
    print(metrics)
    return metrics


if __name__ == "__main__":
    import actorrt

    parser = argparse.ArgumentParser()
    parser.add_argument("--address", type=str, help="an actorrt cluster's head to join")
    parser.add_argument("--num-workers", "-n", type=int, default=2, help="training workers")
    parser.add_argument("--use-gpu", action="store_true", help="give each worker a GPU")
    parser.add_argument("--epochs", type=int, default=3, help="epochs to train")
    parser.add_argument("--smoke-test", action="store_true", help="one short local run")
    args = parser.parse_args()
    if args.smoke_test:
        actorrt.init(num_cpus=2)
        train_linear(num_workers=2, use_gpu=False, epochs=args.epochs)
    else:
        actorrt.init(address=args.address)
        train_linear(num_workers=args.num_workers, use_gpu=args.use_gpu, epochs=args.epochs)
