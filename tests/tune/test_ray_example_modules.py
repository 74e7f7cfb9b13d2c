"""The helper modules Ray's own examples import: ``ray.tune.utils.mock_trainable`` and
``ray.tune.examples.{mnist_pytorch, pbt_function, async_hyperband_example}``, behaving
as Ray documents them, run in real sweeps."""

from __future__ import annotations

import importlib.util
import json
import math
import os
import shutil
from typing import Any

import pytest
import torch

from actorrt import tune
from actorrt.tune.examples import mnist_pytorch  # its test_func would be collected
from actorrt.tune.examples.async_hyperband_example import MyTrainableClass as AshaClass
from actorrt.tune.examples.mnist_pytorch import ConvNet, get_data_loaders, train_func
from actorrt.tune.examples.pbt_function import pbt_function
from actorrt.tune.schedulers import PopulationBasedTraining
from actorrt.tune.utils.mock_trainable import MyTrainableClass


def test_my_trainable_class_follows_a_tanh_curve_and_checkpoints_to_a_file(
    tmp_path: Any,
) -> None:
    assert AshaClass is MyTrainableClass
    trainable = MyTrainableClass({"width": 2, "height": 5})
    rewards = [trainable.train()["episode_reward_mean"] for _ in range(3)]
    assert rewards == pytest.approx([5 * math.tanh(step / 2) for step in (1, 2, 3)])
    saved = trainable.save(str(tmp_path / "first"))
    with open(os.path.join(saved.path, "checkpoint")) as f:
        assert json.load(f) == {"timestep": 3}
    # The returned file path follows the folder when it moves, as in Ray.
    moved = shutil.move(saved.path, str(tmp_path / "moved"))
    again = MyTrainableClass({"width": 2, "height": 5})
    again.restore(moved)
    assert again.train()["episode_reward_mean"] == pytest.approx(5 * math.tanh(4 / 2))


def test_a_sweep_of_my_trainable_class_keeps_and_reloads_its_checkpoints(tmp_path: Any) -> None:
    grid = tune.Tuner(
        MyTrainableClass,
        param_space={"width": tune.grid_search([1, 10]), "height": 2},
        tune_config=tune.TuneConfig(metric="episode_reward_mean", mode="max"),
        run_config=tune.RunConfig(
            storage_path=str(tmp_path), name="mock", verbose=0,
            stop={"training_iteration": 3},
            checkpoint_config=tune.CheckpointConfig(checkpoint_at_end=True),
        ),
    ).fit()
    assert not grid.errors
    best = grid.get_best_result()
    assert best.config["width"] == 1
    assert best.metrics["episode_reward_mean"] == pytest.approx(2 * math.tanh(3))
    assert best.checkpoint is not None
    with open(os.path.join(best.checkpoint.path, "checkpoint")) as f:
        assert json.load(f) == {"timestep": 3}


def test_mnist_pytorch_trains_and_tests_a_conv_net() -> None:
    test_func = mnist_pytorch.test_func
    assert mnist_pytorch.train is train_func and mnist_pytorch.test is test_func  # old names
    generator = torch.Generator().manual_seed(0)
    images = torch.randn(96, 1, 28, 28, generator=generator)
    labels = (images.mean(dim=(1, 2, 3)) > 0).long()  # a learnable rule
    loader = torch.utils.data.DataLoader(
        torch.utils.data.TensorDataset(images, labels), batch_size=32
    )
    model = ConvNet()
    assert model(images[:4]).shape == (4, 10)
    before = [p.detach().clone() for p in model.parameters()]
    train_func(model, torch.optim.SGD(model.parameters(), lr=0.1), loader)
    assert any(not torch.equal(a, b) for a, b in zip(before, model.parameters(), strict=True))
    accuracy = test_func(model, loader)
    assert 0.0 <= accuracy <= 1.0
    with pytest.raises(ValueError, match="empty data loader"):
        test_func(model, [])


@pytest.mark.skipif(
    importlib.util.find_spec("torchvision") is not None,
    reason="torchvision is installed here: the loaders would download MNIST",
)
def test_mnist_loaders_without_torchvision_say_what_to_install() -> None:
    with pytest.raises(ImportError, match="pip install torchvision"):
        get_data_loaders()


def test_pbt_function_runs_under_pbt_and_resumes_from_its_checkpoints(tmp_path: Any) -> None:
    pbt = PopulationBasedTraining(
        time_attr="training_iteration", perturbation_interval=2,
        hyperparam_mutations={"lr": tune.uniform(0.0001, 0.02)},
    )
    grid = tune.Tuner(
        pbt_function,
        param_space={"lr": tune.choice([0.0001, 0.01]), "checkpoint_interval": 2},
        tune_config=tune.TuneConfig(
            scheduler=pbt, metric="mean_accuracy", mode="max", num_samples=3
        ),
        run_config=tune.RunConfig(
            storage_path=str(tmp_path), name="pbt", verbose=0,
            stop={"training_iteration": 6},
        ),
    ).fit()
    assert len(grid) == 3 and not grid.errors
    for result in grid:
        iterations = list(result.metrics_dataframe["training_iteration"])
        assert iterations[-1] == 6 and max(iterations) == 6
        assert {"mean_accuracy", "cur_lr", "optimal_lr", "q_err", "done"} <= set(result.metrics)
        assert result.metrics["cur_lr"] == result.config["lr"]
