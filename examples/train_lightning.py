"""A Ray Train V2 PyTorch Lightning script, ported by changing its imports.

    python examples/train_lightning.py

The shape is Ray's "Get started with PyTorch Lightning": a ``LightningModule``, a
``pl.Trainer`` built with ``RayDDPStrategy``, ``RayLightningEnvironment`` and
``RayTrainReportCallback`` and passed through ``prepare_trainer``, run by a
``TorchTrainer`` on 2 workers; afterwards the best checkpoint is loaded with
``load_from_checkpoint``. The Ray script's imports were::

    import ray.train.lightning
    from ray.train import CheckpointConfig, RunConfig, ScalingConfig
    from ray.train.torch import TorchTrainer

To run offline in seconds, the data is scikit-learn's 8x8 digits instead of
FashionMNIST, and the model a small MLP instead of a ResNet.
"""

from __future__ import annotations

import os
import tempfile
from typing import Any

import lightning.pytorch as pl
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

import actorrt.train.lightning
from actorrt.train import CheckpointConfig, RunConfig, ScalingConfig
from actorrt.train.torch import TorchTrainer


def digits() -> tuple[TensorDataset, TensorDataset]:
    from sklearn.datasets import load_digits

    x, y = load_digits(return_X_y=True)
    x = torch.tensor(x / 16.0, dtype=torch.float32)
    y = torch.tensor(y, dtype=torch.long)
    order = torch.randperm(len(x), generator=torch.Generator().manual_seed(0))
    x, y = x[order], y[order]
    return TensorDataset(x[:1500], y[:1500]), TensorDataset(x[1500:], y[1500:])


class DigitsClassifier(pl.LightningModule):
    def __init__(self, lr: float = 0.01) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.model = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.model(x)

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        x, y = batch
        loss = nn.functional.cross_entropy(self(x), y)
        self.log("train_loss", loss, on_step=False, on_epoch=True, sync_dist=True)
        return loss

    def validation_step(self, batch: Any, batch_idx: int) -> None:
        x, y = batch
        accuracy = (self(x).argmax(1) == y).float().mean()
        self.log("val_accuracy", accuracy, sync_dist=True)

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.Adam(self.parameters(), lr=self.hparams["lr"])


def train_func(config: dict[str, Any]) -> None:
    """Runs on each Train worker."""
    train_data, val_data = digits()
    train_loader = DataLoader(train_data, batch_size=32, shuffle=True)
    val_loader = DataLoader(val_data, batch_size=64)
    model = DigitsClassifier(lr=config["lr"])

    trainer = pl.Trainer(
        max_epochs=config["epochs"],
        devices="auto",
        accelerator="auto",
        strategy=actorrt.train.lightning.RayDDPStrategy(),
        plugins=[actorrt.train.lightning.RayLightningEnvironment()],
        callbacks=[actorrt.train.lightning.RayTrainReportCallback()],
        # The callback reports the checkpoints; Lightning's own checkpointing is off.
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        logger=False,
    )
    trainer = actorrt.train.lightning.prepare_trainer(trainer)
    trainer.fit(model, train_dataloaders=train_loader, val_dataloaders=val_loader)


def main() -> None:
    with tempfile.TemporaryDirectory() as storage:
        trainer = TorchTrainer(
            train_func,
            train_loop_config={"lr": 0.01, "epochs": 4},
            scaling_config=ScalingConfig(num_workers=2, use_gpu=False),
            run_config=RunConfig(
                storage_path=storage,
                name="lightning-digits",
                checkpoint_config=CheckpointConfig(
                    num_to_keep=2,
                    checkpoint_score_attribute="val_accuracy",
                    checkpoint_score_order="max",
                ),
            ),
        )
        result = trainer.fit()
        if result.error is not None:
            raise result.error
        for metrics in result.metrics_history:
            print(f"epoch {metrics['epoch']}: step {metrics['step']}, "
                  f"val_accuracy {metrics['val_accuracy']:.3f}")

        # Load the trained model from the last reported checkpoint, as Ray's guide does.
        assert result.checkpoint is not None
        with result.checkpoint.as_directory() as checkpoint_dir:
            print("checkpoint files:", sorted(os.listdir(checkpoint_dir)))
            model = DigitsClassifier.load_from_checkpoint(
                os.path.join(checkpoint_dir,
                             actorrt.train.lightning.RayTrainReportCallback.CHECKPOINT_NAME)
            )
        _, val_data = digits()
        x, y = val_data.tensors
        with torch.no_grad():
            accuracy = (model(x).argmax(1) == y).float().mean().item()
        print(f"reloaded model: val_accuracy {accuracy:.3f} "
              f"(reported {result.metrics['val_accuracy']:.3f})")


if __name__ == "__main__":
    main()
