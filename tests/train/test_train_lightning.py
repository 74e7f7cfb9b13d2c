"""PyTorch Lightning through TorchTrainer: 2 gloo workers fit a one-layer LightningModule
with RayDDPStrategy, RayLightningEnvironment and RayTrainReportCallback."""

import hashlib
import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("lightning", reason="PyTorch Lightning is not installed: actorrt[lightning]")

import lightning.pytorch as pl
import torch
from conftest import Recorder

import actorrt
from actorrt import train
from actorrt.train.lightning import (
    RayDDPStrategy,
    RayDeepSpeedStrategy,
    RayFSDPStrategy,
    RayLightningEnvironment,
    RayTrainReportCallback,
    prepare_trainer,
)
from actorrt.train.torch import TorchConfig, TorchTrainer

WORKER_ENV = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
SAMPLES = 64
BATCH = 8



class Linear(pl.LightningModule):
    """One linear layer fitted to a fixed linear target."""

    def __init__(self, seed: int) -> None:
        super().__init__()
        torch.manual_seed(seed)  # ranks start apart: DDP must bring them together
        self.layer = torch.nn.Linear(4, 1)
        self.seen: list[int] = []

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        x, y, index = batch
        if self.current_epoch == 0:
            self.seen.extend(index.tolist())
        loss = torch.nn.functional.mse_loss(self.layer(x).squeeze(1), y)
        self.log("train_loss", loss)
        return loss

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=0.05)


def data() -> torch.utils.data.DataLoader[Any]:
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(SAMPLES, 4, generator=generator)
    y = x @ torch.tensor([1.0, -2.0, 0.5, 3.0]) + 0.25
    dataset = torch.utils.data.TensorDataset(x, y, torch.arange(SAMPLES))
    return torch.utils.data.DataLoader(dataset, batch_size=BATCH, shuffle=True)


def checksum(module: torch.nn.Module) -> str:
    flat = torch.cat([p.detach().cpu().flatten() for p in module.parameters()])
    return hashlib.sha256(flat.numpy().tobytes()).hexdigest()


def fit_linear(config: dict[str, Any]) -> None:
    """A Ray Train Lightning loop, as its docs write one, with actorrt's imports."""
    ctx = train.get_context()
    model = Linear(seed=100 + ctx.get_world_rank())
    strategy = (RayFSDPStrategy() if config.get("fsdp") else
                RayDeepSpeedStrategy(stage=2) if config.get("deepspeed") else RayDDPStrategy())
    trainer = pl.Trainer(
        max_epochs=config["epochs"],
        accelerator="auto",
        devices="auto",
        strategy=strategy,
        plugins=[RayLightningEnvironment()],
        callbacks=[RayTrainReportCallback()],
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        logger=False,
    )
    trainer = prepare_trainer(trainer)
    resume = train.get_checkpoint()
    crash = config.get("crash_marker")

    class CrashOnce(pl.Callback):
        """Fails the first attempt after its first checkpoint, on rank 1 only."""

        def on_train_epoch_start(self, trainer: pl.Trainer, module: pl.LightningModule) -> None:
            first_try = crash and not os.path.exists(crash)
            if first_try and trainer.current_epoch == 1 and ctx.get_world_rank() == 1:
                Path(crash).touch()
                raise RuntimeError("rank 1 fails once")

    trainer.callbacks.append(CrashOnce())
    ckpt_path = None
    if resume is not None:
        ckpt_path = os.path.join(resume.path, RayTrainReportCallback.CHECKPOINT_NAME)
    trainer.fit(model, train_dataloaders=data(), ckpt_path=ckpt_path)
    actorrt.get(config["recorder"].record({
        "rank": ctx.get_world_rank(),
        "lightning": (trainer.world_size, trainer.global_rank, trainer.local_rank),
        "checksum": checksum(model.layer),
        "seen": sorted(model.seen),
        "resumed_from": ckpt_path,
        "steps": trainer.global_step,
    }))


def lightning_trainer(config: dict[str, Any], tmp_path: Path, **run: Any) -> TorchTrainer:
    return TorchTrainer(
        fit_linear,
        train_loop_config=config,
        torch_config=TorchConfig(backend="gloo", timeout_s=60),
        scaling_config=train.ScalingConfig(num_workers=2),
        run_config=train.RunConfig(name="lightning", storage_path=str(tmp_path), **run),
    )


@pytest.mark.timeout(180)
@pytest.mark.actorrt(num_cpus=2, worker_env=WORKER_ENV)
async def test_ddp_reports_each_epoch_and_ranks_end_equal(
    actorrt_runtime: actorrt.Runtime, tmp_path: Path
) -> None:
    recorder = await Recorder.spawn()
    result = await lightning_trainer({"epochs": 2, "recorder": recorder}, tmp_path).fit_async()
    assert result.error is None, result.failures

    ranks = sorted(await recorder.all(), key=lambda r: r["rank"])
    # Lightning saw the gang: world size 2, its rank from train.get_context().
    assert [r["lightning"] for r in ranks] == [(2, 0, 0), (2, 1, 1)]
    # DDP: the ranks started from different seeds and ended with identical weights.
    assert ranks[0]["checksum"] == ranks[1]["checksum"]
    # RayDDPStrategy's sampler: in an epoch, each rank saw its own half of the data.
    seen0, seen1 = set(ranks[0]["seen"]), set(ranks[1]["seen"])
    assert not seen0 & seen1 and seen0 | seen1 == set(range(SAMPLES))
    assert ranks[0]["steps"] == 2 * SAMPLES // (2 * BATCH)

    # One report per epoch, with what the module logged and Ray's epoch/step keys.
    assert [m["epoch"] for m in result.metrics_history] == [0, 1]
    assert [m["step"] for m in result.metrics_history] == [4, 8]
    assert isinstance(result.metrics["train_loss"], float)

    # The checkpoint is Lightning's file, named as Ray names it, and loads.
    assert result.checkpoint is not None
    assert os.listdir(result.checkpoint.path) == ["checkpoint.ckpt"]
    ckpt = os.path.join(result.checkpoint.path, "checkpoint.ckpt")
    state = torch.load(ckpt, weights_only=False)
    assert state["epoch"] == 1 and state["global_step"] == 8
    loaded = Linear(seed=0)
    loaded.load_state_dict(state["state_dict"])
    assert checksum(loaded.layer) == ranks[0]["checksum"]


@pytest.mark.timeout(240)
@pytest.mark.actorrt(num_cpus=2, worker_env=WORKER_ENV)
async def test_a_failed_rank_resumes_from_the_reported_lightning_checkpoint(
    actorrt_runtime: actorrt.Runtime, tmp_path: Path
) -> None:
    recorder = await Recorder.spawn()
    marker = tmp_path / "crashed"
    trainer = lightning_trainer(
        {"epochs": 3, "recorder": recorder, "crash_marker": str(marker)},
        tmp_path,
        failure_config=train.FailureConfig(max_failures=1),
    )
    result = await trainer.fit_async()
    assert result.error is None, result.failures
    assert marker.exists() and result.num_failures == 1

    # The second attempt resumed from epoch 0's checkpoint and trained epochs 1 and 2.
    ranks = sorted(await recorder.all(), key=lambda r: r["rank"])
    assert [r["rank"] for r in ranks] == [0, 1]
    assert {Path(r["resumed_from"]).name for r in ranks} == {"checkpoint.ckpt"}
    assert ranks[0]["checksum"] == ranks[1]["checksum"]
    assert [m["epoch"] for m in result.metrics_history] == [0, 1, 2]
    assert ranks[0]["steps"] == 12


@pytest.mark.timeout(180)
@pytest.mark.actorrt(num_cpus=2, worker_env=WORKER_ENV)
async def test_fsdp_builds_on_a_cpu_machine_and_raises_when_a_cpu_worker_uses_it(
    actorrt_runtime: actorrt.Runtime, tmp_path: Path
) -> None:
    # As in Ray, building it anywhere is fine (the driver, a CPU machine) ...
    assert isinstance(RayFSDPStrategy(), pl.strategies.FSDPStrategy)
    # ... and a CPU worker's Trainer.fit raises, saying why (torch's FSDP needs a GPU).
    recorder = await Recorder.spawn()
    with pytest.raises(train.WorkerGroupError, match=r"RayFSDPStrategy needs a GPU.*use_gpu=True"):
        await lightning_trainer(
            {"epochs": 1, "recorder": recorder, "fsdp": True}, tmp_path
        ).fit_async()


@pytest.mark.timeout(180)
@pytest.mark.actorrt(num_cpus=2, worker_env=WORKER_ENV)
async def test_deepspeed_builds_on_a_cpu_machine_and_raises_when_a_cpu_worker_uses_it(
    actorrt_runtime: actorrt.Runtime, tmp_path: Path
) -> None:
    if importlib.util.find_spec("deepspeed") is None:
        pytest.skip("DeepSpeed is not installed: actorrt[deepspeed]")
    assert isinstance(RayDeepSpeedStrategy(stage=3), pl.strategies.DeepSpeedStrategy)
    recorder = await Recorder.spawn()
    with pytest.raises(train.WorkerGroupError, match=r"RayDeepSpeedStrategy needs a CUDA GPU"):
        await lightning_trainer(
            {"epochs": 1, "recorder": recorder, "deepspeed": True}, tmp_path
        ).fit_async()


@pytest.mark.skipif(not torch.cuda.is_available(), reason="FSDP needs a CUDA GPU")
@pytest.mark.timeout(180)
@pytest.mark.actorrt(worker_env=WORKER_ENV)
async def test_fsdp_on_a_gpu_worker_trains_and_checkpoints(
    actorrt_runtime: actorrt.Runtime, tmp_path: Path
) -> None:
    recorder = await Recorder.spawn()
    trainer = TorchTrainer(
        fit_linear,
        train_loop_config={"epochs": 1, "recorder": recorder, "fsdp": True},
        scaling_config=train.ScalingConfig(num_workers=1, use_gpu=True),
        run_config=train.RunConfig(name="fsdp", storage_path=str(tmp_path)),
    )
    result = await trainer.fit_async()
    assert result.error is None, result.failures
    assert [m["epoch"] for m in result.metrics_history] == [0]
    assert result.checkpoint is not None
    state = torch.load(
        os.path.join(result.checkpoint.path, "checkpoint.ckpt"), weights_only=False
    )
    assert {"layer.weight", "layer.bias"} <= set(state["state_dict"])


def test_exports_are_ray_train_lightning_names() -> None:
    import actorrt.train.lightning as module

    assert set(module.__all__) == {
        "RayDDPStrategy", "RayDeepSpeedStrategy", "RayFSDPStrategy",
        "RayLightningEnvironment", "RayTrainReportCallback", "prepare_trainer",
    }
    for name in module.__all__:
        assert getattr(module, name).__module__ == "actorrt.train.lightning", name
    assert RayTrainReportCallback.CHECKPOINT_NAME == "checkpoint.ckpt"


def test_prepare_trainer_rejects_a_trainer_that_would_not_use_the_gang() -> None:
    with pytest.raises(TypeError, match="prepare_trainer takes a lightning.pytorch.Trainer"):
        prepare_trainer("trainer")  # type: ignore[arg-type]
    plain = pl.Trainer(accelerator="cpu", devices=1, logger=False, enable_progress_bar=False)
    with pytest.raises(RuntimeError, match=r"strategy is SingleDeviceStrategy.*RayDDPStrategy"):
        prepare_trainer(plain)


def test_ignored_process_group_arguments_warn() -> None:
    with pytest.warns(UserWarning, match=r"process_group_backend='nccl'.*TorchConfig"):
        RayDDPStrategy(process_group_backend="nccl")


def test_environment_outside_a_training_function_says_where_it_works() -> None:
    with pytest.raises(RuntimeError, match="inside a training function"):
        RayLightningEnvironment().world_size()


def test_without_the_lightning_package_it_builds_on_pytorch_lightning() -> None:
    pytest.importorskip("pytorch_lightning", reason="the standalone pytorch_lightning is absent")
    code = (
        "import sys\n"
        "sys.modules['lightning'] = None\n"
        "import pytorch_lightning as pl\n"
        "from actorrt.train.lightning import RayDDPStrategy, RayLightningEnvironment\n"
        "from actorrt.train.lightning import RayTrainReportCallback\n"
        "print(issubclass(RayDDPStrategy, pl.strategies.DDPStrategy),\n"
        "      issubclass(RayTrainReportCallback, pl.callbacks.Callback),\n"
        "      RayLightningEnvironment.__mro__[1].__module__.split('.')[0])\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    ).stdout
    assert out.split() == ["True", "True", "lightning_fabric"]


def test_without_lightning_the_import_names_the_extra() -> None:
    code = (
        "import sys\n"
        "sys.modules['lightning'] = sys.modules['pytorch_lightning'] = None\n"
        "try:\n"
        "    import actorrt.train.lightning\n"
        "except ModuleNotFoundError as exc:\n"
        "    print(exc)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    ).stdout
    assert "pip install 'actorrt[lightning]'" in out
