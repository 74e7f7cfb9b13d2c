"""DeepSpeed in a TorchTrainer loop on CPU: 2 gloo workers call ``deepspeed.initialize``
with ZeRO stage 2 in the process group TorchTrainer started; the ranks train one model
(equal weights at the end, the loss going down) and rank 0's checkpoint loads."""

from __future__ import annotations

import hashlib
import importlib.util
import os
from pathlib import Path
from typing import Any

import pytest

if importlib.util.find_spec("deepspeed") is None:  # the workers import it, not this process
    pytest.skip("DeepSpeed is not installed: actorrt[deepspeed]", allow_module_level=True)

import torch
from conftest import Recorder

import actorrt
from actorrt import train
from actorrt.train.torch import TorchConfig, TorchTrainer

# DeepSpeed picks its CPU accelerator where CUDA is absent; saying so skips the probing.
WORKER_ENV = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "DS_ACCELERATOR": "cpu"}
STEPS = 8


def fit_with_deepspeed(config: dict[str, Any]) -> None:
    """A DeepSpeed loop as DeepSpeed's docs write one, in a Train worker."""
    import deepspeed

    ctx = train.get_context()
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 1)
    engine, _, _, _ = deepspeed.initialize(
        model=model, model_parameters=model.parameters(),
        config={
            "train_micro_batch_size_per_gpu": 8,
            "optimizer": {"type": "Adam", "params": {"lr": 0.1, "torch_adam": True}},
            "zero_optimization": {"stage": 2},
        },
    )
    generator = torch.Generator().manual_seed(ctx.get_world_rank())  # each rank its data
    losses = []
    for _ in range(STEPS):
        x = torch.randn(8, 4, generator=generator)
        y = x @ torch.tensor([1.0, -2.0, 0.5, 3.0])
        loss = torch.nn.functional.mse_loss(engine(x).squeeze(1), y)
        engine.backward(loss)
        engine.step()
        losses.append(loss.item())
    flat = torch.cat([p.detach().flatten() for p in engine.module.parameters()])
    checksum = hashlib.sha256(flat.numpy().tobytes()).hexdigest()
    actorrt.get(config["recorder"].record((ctx.get_world_rank(), checksum)))
    folder = os.path.join(config["out"], f"rank{ctx.get_world_rank()}")
    os.makedirs(folder, exist_ok=True)
    if ctx.get_world_rank() == 0:
        torch.save(engine.module.state_dict(), os.path.join(folder, "model.pt"))
    train.report(
        {"first_loss": losses[0], "last_loss": losses[-1],
         "checksum": checksum,
         "world": ctx.get_world_size(), "zero_stage": engine.zero_optimization_stage()},
        checkpoint=train.Checkpoint.from_directory(folder),
    )


@pytest.mark.timeout(240)  # a fresh machine first builds DeepSpeed's CPU op (make test does)
@pytest.mark.actorrt(num_cpus=2, worker_env=WORKER_ENV)
async def test_two_cpu_workers_train_one_model_with_zero_stage_2(
    actorrt_runtime: actorrt.Runtime, tmp_path: Path
) -> None:
    recorder = await Recorder.spawn()
    result = await TorchTrainer(
        fit_with_deepspeed,
        train_loop_config={"out": str(tmp_path / "out"), "recorder": recorder},
        torch_config=TorchConfig(backend="gloo", timeout_s=60),
        scaling_config=train.ScalingConfig(num_workers=2),
        run_config=train.RunConfig(name="ds", storage_path=str(tmp_path)),
    ).fit_async()
    assert result.error is None, result.failures
    metrics = result.metrics
    assert metrics["world"] == 2 and metrics["zero_stage"] == 2
    assert metrics["last_loss"] < metrics["first_loss"]
    ranks = dict(await recorder.all())
    assert set(ranks) == {0, 1} and ranks[0] == ranks[1] == metrics["checksum"]
    assert result.checkpoint is not None
    state = torch.load(os.path.join(result.checkpoint.path, "model.pt"))
    model = torch.nn.Linear(4, 1)
    model.load_state_dict(state)
    flat = torch.cat([p.detach().flatten() for p in model.parameters()])
    assert hashlib.sha256(flat.numpy().tobytes()).hexdigest() == metrics["checksum"]
