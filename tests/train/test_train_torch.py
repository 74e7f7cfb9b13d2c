"""TorchTrainer for real: 2 gloo workers train an MLP on scikit-learn's digits with DDP."""

import hashlib
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import Recorder

import actorrt
from actorrt import train
from actorrt.train.torch import (
    TorchConfig,
    TorchTrainer,
    get_device,
    prepare_data_loader,
    prepare_model,
)

WORKER_ENV = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}



def digits_split() -> dict[str, np.ndarray]:
    from sklearn.datasets import load_digits

    x, y = load_digits(return_X_y=True)
    rng = np.random.default_rng(0)
    order = rng.permutation(len(x))
    x = (x[order] / 16.0).astype(np.float32)
    y = y[order].astype(np.int64)
    # 1,500 training samples: an even split, so the two shards are disjoint and complete.
    return {"x_train": x[:1500], "y_train": y[:1500], "x_test": x[1500:], "y_test": y[1500:]}


def train_digits(config: dict[str, Any]) -> None:
    import torch
    import torch.distributed as dist
    from torch import nn
    from torch.utils.data import DataLoader, TensorDataset

    torch.manual_seed(1234 + train.get_context().get_world_rank())  # differ: DDP must align
    ctx = train.get_context()
    dataset = TensorDataset(
        torch.from_numpy(config["x_train"]),
        torch.from_numpy(config["y_train"]),
        torch.arange(len(config["x_train"])),
    )
    loader = prepare_data_loader(DataLoader(dataset, batch_size=32, shuffle=True))
    model = prepare_model(nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10)))
    optimizer = torch.optim.Adam(model.parameters(), lr=config["lr"])
    seen: list[int] = []
    for epoch in range(config["epochs"]):
        loader.sampler.set_epoch(epoch)
        for xb, yb, idx in loader:
            if epoch == 0:
                seen.extend(idx.tolist())
            optimizer.zero_grad()
            loss = nn.functional.cross_entropy(model(xb), yb)
            loss.backward()
            optimizer.step()
        with torch.no_grad():
            logits = model(torch.from_numpy(config["x_test"]))
            accuracy = (logits.argmax(1).numpy() == config["y_test"]).mean()
        train.report({"epoch": epoch, "loss": loss.item(), "accuracy": float(accuracy)})
    params = torch.cat([p.detach().flatten() for p in model.parameters()]).numpy()
    actorrt.get(config["recorder"].record({
        "rank": ctx.get_world_rank(),
        "checksum": hashlib.sha256(params.tobytes()).hexdigest(),
        "seen": seen,
        "device": str(get_device()),
        "dist": (dist.get_rank(), dist.get_world_size(), dist.get_backend()),
        "ddp": type(model).__name__,
        "env": {k: os.environ.get(k) for k in (
            "RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "NODE_RANK",
            "MASTER_ADDR", "MASTER_PORT", "OMP_NUM_THREADS",
        )},
    }))


@pytest.mark.timeout(120)
@pytest.mark.actorrt(num_cpus=2, worker_env=WORKER_ENV)
async def test_ddp_on_digits_two_workers_agree_and_learn(
    actorrt_runtime: actorrt.Runtime, tmp_path: Any
) -> None:
    recorder = await Recorder.spawn()
    data = digits_split()
    trainer = TorchTrainer(
        train_digits,
        train_loop_config={"lr": 0.01, "epochs": 6, "recorder": recorder, **data},
        torch_config=TorchConfig(backend="gloo", timeout_s=60),
        scaling_config=train.ScalingConfig(num_workers=2),
        run_config=train.RunConfig(name="digits", storage_path=str(tmp_path)),
    )
    result = await trainer.fit_async()
    assert result.error is None, result.failures
    assert actorrt.available_resources() == actorrt.cluster_resources()

    ranks = sorted(await recorder.all(), key=lambda r: r["rank"])
    assert [r["rank"] for r in ranks] == [0, 1]
    # DDP kept the replicas identical although each rank started from its own seed.
    assert ranks[0]["checksum"] == ranks[1]["checksum"]
    # Each rank saw its own shard: disjoint halves that together are the whole set.
    shard0, shard1 = set(ranks[0]["seen"]), set(ranks[1]["seen"])
    assert len(shard0) == len(shard1) == 750 and not shard0 & shard1
    assert shard0 | shard1 == set(range(1500))
    assert ranks[0]["dist"] == (0, 2, "gloo") and ranks[1]["dist"] == (1, 2, "gloo")
    assert {r["ddp"] for r in ranks} == {"DistributedDataParallel"}
    assert {r["device"] for r in ranks} == {"cpu"}

    # Env vars of §7, per rank; one master for all.
    for rank, record in enumerate(ranks):
        env = record["env"]
        assert env["RANK"] == env["LOCAL_RANK"] == str(rank)
        assert env["WORLD_SIZE"] == env["LOCAL_WORLD_SIZE"] == "2"
        assert env["NODE_RANK"] == "0" and env["MASTER_ADDR"] == "127.0.0.1"
        assert env["OMP_NUM_THREADS"] == "1"
    assert ranks[0]["env"]["MASTER_PORT"] == ranks[1]["env"]["MASTER_PORT"]
    assert int(ranks[0]["env"]["MASTER_PORT"]) > 0

    # Rank 0's reports, as they came, and accuracy far above chance (0.1).
    assert [m["epoch"] for m in result.metrics_history] == list(range(6))
    assert result.metrics["accuracy"] > 0.8
    assert result.metrics_dataframe["accuracy"].iloc[-1] == result.metrics["accuracy"]
    assert result.path == str(tmp_path / "digits")
    assert len(Path(result.path, "result.json").read_text().splitlines()) == 6  # noqa: ASYNC240


def linear_loop(config: dict[str, Any]) -> None:
    from actorrt.train.examples.pytorch.torch_linear_example import train_func

    results = train_func(config)
    assert len(results) == config["epochs"]
    assert results[-1]["loss"] < results[0]["loss"]


@pytest.mark.timeout(120)
@pytest.mark.actorrt(num_cpus=2, worker_env=WORKER_ENV)
async def test_rays_torch_linear_example_trains_on_two_workers(
    actorrt_runtime: actorrt.Runtime, tmp_path: Any
) -> None:
    # Ray's ray.train.examples.pytorch.torch_linear_example: train_func reports
    # {"loss": ...} with a checkpoint holding model.pt each epoch and returns every
    # epoch's result; Ray's own tests call it inside their loop and check the loss falls.
    import torch

    trainer = TorchTrainer(
        linear_loop,
        train_loop_config={"lr": 1e-2, "hidden_size": 1, "batch_size": 4, "epochs": 3},
        scaling_config=train.ScalingConfig(num_workers=2),
        run_config=train.RunConfig(name="linear", storage_path=str(tmp_path)),
    )
    result = await trainer.fit_async()
    assert result.error is None, result.failures
    assert len(result.metrics_history) == 3
    assert result.checkpoint is not None
    weights = torch.load(Path(result.checkpoint.path, "model.pt"))
    # The prepared (DDP-wrapped) model's weights, as Ray's example saves them.
    assert set(weights) == {"module.weight", "module.bias"}
