"""Lightning in Tune trials: ``TuneReportCheckpointCallback`` reports each validation's
metrics with the trainer's checkpoint (not the sanity check's), the best checkpoint loads
back into the module, ``TuneReportCallback`` reports without checkpoints, and a hook that
Lightning does not have is refused at construction."""

from __future__ import annotations

import os
import warnings
from typing import Any

import pytest

pytest.importorskip("lightning")
import torch

from actorrt import tune
from actorrt.train.lightning._pl import pl
from actorrt.tune.integration.pytorch_lightning import (
    TuneReportCallback,
    TuneReportCheckpointCallback,
)

EPOCHS = 3


class Line(pl.LightningModule):  # type: ignore[misc,name-defined]
    """y = 3x fitted by one weight."""

    def __init__(self, lr: float) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.layer = torch.nn.Linear(1, 1)

    def training_step(self, batch: Any, _: int) -> Any:
        x, y = batch
        return torch.nn.functional.mse_loss(self.layer(x), y)

    def validation_step(self, batch: Any, _: int) -> None:
        x, y = batch
        self.log("val_loss", torch.nn.functional.mse_loss(self.layer(x), y))

    def configure_optimizers(self) -> Any:
        return torch.optim.SGD(self.parameters(), lr=self.hparams.lr)


def loader() -> Any:
    generator = torch.Generator().manual_seed(0)
    x = torch.rand(64, 1, generator=generator)
    return torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, 3 * x), batch_size=16)


def fit(config: dict[str, Any]) -> None:
    torch.manual_seed(0)
    if config["checkpoints"]:
        callback = TuneReportCheckpointCallback({"loss": "val_loss"}, filename="line.ckpt")
    else:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            callback = TuneReportCallback(["val_loss", "missing_metric"])
    trainer = pl.Trainer(
        max_epochs=EPOCHS, accelerator="cpu", devices=1, callbacks=[callback], logger=False,
        enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
        num_sanity_val_steps=1,  # a sanity check runs first: it must report nothing
    )
    trainer.fit(Line(config["lr"]), loader(), loader())


@pytest.mark.timeout(240)
def test_a_lightning_sweep_reports_each_validation_with_its_checkpoint(tmp_path: Any) -> None:
    grid = tune.Tuner(
        tune.with_resources(fit, {"cpu": 1}),
        param_space={"lr": tune.grid_search([0.01, 0.5]), "checkpoints": True},
        tune_config=tune.TuneConfig(metric="loss", mode="min"),
        run_config=tune.RunConfig(storage_path=str(tmp_path), verbose=0),
    ).fit()
    assert not grid.errors
    for result in grid:
        history = result.metrics_dataframe
        assert list(history["training_iteration"]) == list(range(1, EPOCHS + 1))
        assert history["loss"].notna().all()
        assert os.path.isfile(os.path.join(result.checkpoint.path, "line.ckpt"))
    best = grid.get_best_result()
    assert best.config["lr"] == 0.5  # the larger step fits y = 3x far better in 3 epochs
    with best.checkpoint.as_directory() as folder:
        model = Line.load_from_checkpoint(os.path.join(folder, "line.ckpt"))
    assert model.hparams.lr == 0.5
    x = torch.tensor([[1.0]])
    error = abs(model.layer(x).item() - 3.0)
    worse = grid[0] if grid[0].config["lr"] == 0.01 else grid[1]
    assert error < 3.0 and best.metrics["loss"] < worse.metrics["loss"]


@pytest.mark.timeout(240)
def test_the_older_report_callback_reports_metrics_only(tmp_path: Any) -> None:
    grid = tune.Tuner(
        tune.with_resources(fit, {"cpu": 1}),
        param_space={"lr": 0.1, "checkpoints": False},
        run_config=tune.RunConfig(storage_path=str(tmp_path), verbose=0),
    ).fit()
    assert not grid.errors
    [result] = list(grid)
    assert result.checkpoint is None
    assert result.metrics["training_iteration"] == EPOCHS
    assert "val_loss" in result.metrics and "missing_metric" not in result.metrics


def test_a_hook_lightning_does_not_have_is_refused_naming_the_allowed_ones() -> None:
    with pytest.raises(ValueError, match=r"on='validation_finish'.*validation_end"):
        TuneReportCheckpointCallback(on="validation_finish")
    with pytest.raises(ValueError, match="filename"):
        TuneReportCheckpointCallback(filename="a/b")
    with pytest.warns(UserWarning, match="TuneReportCheckpointCallback"):
        import actorrt.tune.integration.pytorch_lightning as module

        module._warned = False
        TuneReportCallback()
    # More than one hook, as Ray takes them.
    callback = TuneReportCheckpointCallback(on=["train_epoch_end", "validation_end"])
    assert callback._on == {"on_train_epoch_end", "on_validation_end"}
