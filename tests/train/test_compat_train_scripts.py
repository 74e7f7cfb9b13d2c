"""Ray Train V2 scripts from Ray's guides, ported by changing only their imports.

Each test is one small program written after a page of Ray's Train documentation (getting
started with PyTorch, checkpoints, fault tolerance, results, monitoring and logging, data
loading without Ray Data) or a public-API test of Ray Train V2: tiny models, synthetic
data, two gloo workers on CPU. The body of each program is what a Ray user runs; only the
``import`` lines name actorrt. The asserts check the behaviour Ray documents.
"""

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import actorrt as ray

# The imports a Ray script has, each changed to actorrt's name.
import actorrt.train.torch
from actorrt import train
from actorrt.train import (
    Checkpoint,
    CheckpointConfig,
    DataParallelTrainer,
    FailureConfig,
    RunConfig,
    ScalingConfig,
)
from actorrt.train.torch import TorchTrainer

WORKER_ENV = {"OMP_NUM_THREADS": "1"}


@pytest.fixture
def cluster() -> Iterator[None]:
    """``ray.init`` as a script does (one thread per worker: two cores are shared)."""
    ray.init(num_cpus=2, worker_env=WORKER_ENV)
    try:
        yield
    finally:
        ray.shutdown()


# -- getting-started-pytorch: DDP model, sharded DataLoader, a checkpoint per epoch --------


def getting_started_train_func(config: dict[str, Any]) -> None:
    import torch
    from torch import nn
    from torch.utils.data import DataLoader, TensorDataset

    torch.manual_seed(0)
    x = torch.randn(64, 1, 8, 8)
    y = (x.mean(dim=(1, 2, 3)) > 0).long()
    loader = DataLoader(TensorDataset(x, y), batch_size=config["batch_size"], shuffle=True)
    # [1] shard the data and move batches to the worker's device
    loader = ray.train.torch.prepare_data_loader(loader)
    model = nn.Sequential(nn.Flatten(), nn.Linear(64, 16), nn.ReLU(), nn.Linear(16, 2))
    # [2] wrap the model in DDP and move it to the device
    model = ray.train.torch.prepare_model(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=config["lr"])
    criterion = nn.CrossEntropyLoss()
    for epoch in range(config["epochs"]):
        if ray.train.get_context().get_world_size() > 1:
            loader.sampler.set_epoch(epoch)
        seen = 0
        for images, labels in loader:
            loss = criterion(model(images), labels)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            seen += len(labels)
        # [3] report metrics and a checkpoint (rank 0 saves the weights)
        metrics = {"loss": loss.item(), "epoch": epoch, "seen": seen}
        with tempfile.TemporaryDirectory() as temp_checkpoint_dir:
            checkpoint = None
            if ray.train.get_context().get_world_rank() == 0:
                torch.save(model.module.state_dict(),
                           os.path.join(temp_checkpoint_dir, "model.pt"))
                checkpoint = ray.train.Checkpoint.from_directory(temp_checkpoint_dir)
            ray.train.report(metrics, checkpoint=checkpoint)
        if ray.train.get_context().get_world_rank() == 0:
            print(metrics)


@pytest.mark.timeout(120)
def test_getting_started_pytorch(cluster: None, tmp_path: Path) -> None:
    import torch

    scaling_config = ray.train.ScalingConfig(num_workers=2, use_gpu=False)
    trainer = ray.train.torch.TorchTrainer(
        getting_started_train_func,
        train_loop_config={"lr": 0.05, "batch_size": 8, "epochs": 2},
        scaling_config=scaling_config,
        run_config=ray.train.RunConfig(storage_path=str(tmp_path), name="fashion"),
    )
    result = trainer.fit()
    assert result.error is None
    assert result.metrics["epoch"] == 1
    assert result.metrics["seen"] == 32  # each of 2 workers saw half of the 64 rows
    assert result.path == str(tmp_path / "fashion")
    with result.checkpoint.as_directory() as checkpoint_dir:
        state = torch.load(os.path.join(checkpoint_dir, "model.pt"))
    assert set(state) == {"1.weight", "1.bias", "3.weight", "3.bias"}


# -- checkpoints.rst: top-k checkpoints by a score, resuming from get_checkpoint ----------


def checkpointing_train_func(config: dict[str, Any]) -> None:
    import torch

    model = torch.nn.Linear(4, 1)
    start = 0
    checkpoint = train.get_checkpoint()
    if checkpoint:
        with checkpoint.as_directory() as d:
            state = torch.load(os.path.join(d, "state.pt"))
        model.load_state_dict(state["model"])
        start = state["epoch"] + 1
    model = actorrt.train.torch.prepare_model(model)
    for epoch in range(start, config["num_epochs"]):
        with tempfile.TemporaryDirectory() as d:
            if train.get_context().get_world_rank() == 0:
                torch.save({"model": model.module.state_dict(), "epoch": epoch},
                           os.path.join(d, "state.pt"))
            # a score that peaks at epoch 1, so "best" differs from "latest"
            accuracy = [0.5, 0.9, 0.7, 0.6][epoch]
            train.report({"epoch": epoch, "accuracy": accuracy},
                         checkpoint=Checkpoint.from_directory(d))


@pytest.mark.timeout(120)
def test_checkpoint_config_keeps_the_best_and_the_latest(cluster: None, tmp_path: Path) -> None:
    trainer = TorchTrainer(
        checkpointing_train_func,
        train_loop_config={"num_epochs": 4},
        scaling_config=ScalingConfig(num_workers=2),
        run_config=RunConfig(
            storage_path=str(tmp_path),
            name="topk",
            checkpoint_config=CheckpointConfig(
                num_to_keep=2,
                checkpoint_score_attribute="accuracy",
                checkpoint_score_order="max",
            ),
        ),
    )
    result = trainer.fit()
    # Ray V2 keeps the top 2 by score and never deletes the latest (epoch 3, a restart
    # resumes from it); best_checkpoints lists the kept ones, result.checkpoint the latest.
    kept = [metrics["epoch"] for _, metrics in result.best_checkpoints]
    assert sorted(kept) == [1, 2, 3]
    assert result.get_best_checkpoint("accuracy", "max") == result.best_checkpoints[0][0]
    assert result.best_checkpoints[0][1]["epoch"] == 1
    assert result.checkpoint is not None
    assert Path(result.checkpoint.path, "state.pt").exists()
    assert result.metrics["epoch"] == 3
    folders = sorted(p.name for p in (tmp_path / "topk").iterdir() if p.is_dir())
    assert len(folders) == 3  # epoch 0's was deleted


# -- fault-tolerance.rst: worker fault tolerance, then job driver fault tolerance ---------


def fault_tolerant_train_func(config: dict[str, Any]) -> None:
    start = 0
    checkpoint = ray.train.get_checkpoint()
    if checkpoint:
        with checkpoint.as_directory() as d:
            start = int(Path(d, "epoch").read_text()) + 1
    for epoch in range(start, config["num_epochs"]):
        rank = ray.train.get_context().get_world_rank()
        if epoch == config.get("fail_at") and rank == 1 and not Path(config["marker"]).exists():
            # Rank 1 fails once before this report; report is a barrier, so rank 0 waits
            # at it and reports nothing past epoch 0 either.
            Path(config["marker"]).touch()
            raise RuntimeError("simulated preemption")
        with tempfile.TemporaryDirectory() as d:
            Path(d, "epoch").write_text(str(epoch))
            ray.train.report({"epoch": epoch, "start": start},
                             checkpoint=ray.train.Checkpoint.from_directory(d))


@pytest.mark.timeout(120)
def test_worker_failure_restarts_from_the_latest_checkpoint(
    cluster: None, tmp_path: Path
) -> None:
    trainer = TorchTrainer(
        fault_tolerant_train_func,
        train_loop_config={"num_epochs": 3, "fail_at": 1, "marker": str(tmp_path / "failed")},
        scaling_config=ScalingConfig(num_workers=2),
        run_config=RunConfig(storage_path=str(tmp_path), name="ft",
                             failure_config=FailureConfig(max_failures=1)),
    )
    result = trainer.fit()
    assert (tmp_path / "failed").exists()
    assert result.metrics == {"epoch": 2, "start": 1}  # the retry resumed after epoch 0


@pytest.mark.timeout(120)
def test_job_driver_restart_with_the_same_run_resumes(cluster: None, tmp_path: Path) -> None:
    def make_trainer(num_epochs: int) -> TorchTrainer:
        # The job submitter passes the same (storage_path, name) to each attempt.
        return TorchTrainer(
            fault_tolerant_train_func,
            train_loop_config={"num_epochs": num_epochs},
            scaling_config=ScalingConfig(num_workers=2),
            run_config=RunConfig(storage_path=str(tmp_path), name="job",
                                 failure_config=FailureConfig(max_failures=3)),
        )

    first = make_trainer(2).fit()  # the driver "crashes" after two epochs
    assert first.metrics == {"epoch": 1, "start": 0}
    second = make_trainer(4).fit()  # the resubmitted job picks up where it left off
    assert second.metrics == {"epoch": 3, "start": 2}
    assert second.path == first.path
    with second.checkpoint.as_directory() as d:
        assert Path(d, "epoch").read_text() == "3"
    # A run folder whose snapshot names a deleted checkpoint: V2 refuses it at fit().
    shutil.rmtree(second.checkpoint.path)
    with pytest.raises(train.ControllerError, match="no longer exists"):
        make_trainer(5).fit()


# -- fit() raising TrainingFailedError (V2), failures carried per rank ----------------------


def failing_train_func() -> None:
    if train.get_context().get_world_rank() == 0:
        raise ValueError("bad batch")
    train.report({"ok": 1})


@pytest.mark.timeout(120)
def test_a_failed_run_raises_training_failed_error(cluster: None, tmp_path: Path) -> None:
    trainer = TorchTrainer(
        failing_train_func,
        scaling_config=ScalingConfig(num_workers=2),
        run_config=RunConfig(storage_path=str(tmp_path)),
    )
    with pytest.raises(train.TrainingFailedError) as info:
        trainer.fit()
    error = info.value
    assert isinstance(error, train.WorkerGroupError)
    assert isinstance(error.worker_failures[0], ValueError)
    assert "bad batch" in str(error.worker_failures[0])


# -- results.rst: the Result, reading a run back, its metrics over time ----------------------


def results_train_func(config: dict[str, Any]) -> None:
    for step in range(config["steps"]):
        with tempfile.TemporaryDirectory() as d:
            Path(d, "step.txt").write_text(str(step))
            checkpoint = Checkpoint.from_directory(d)
            checkpoint.set_metadata({"step": step})
            checkpoint.update_metadata({"framework": "torch"})
            train.report({"step": step, "loss": 1.0 / (step + 1)}, checkpoint=checkpoint)


@pytest.mark.timeout(120)
def test_results_and_result_from_path(cluster: None, tmp_path: Path) -> None:
    result = TorchTrainer(
        results_train_func,
        train_loop_config={"steps": 3},
        scaling_config=ScalingConfig(num_workers=2),
        run_config=RunConfig(storage_path=str(tmp_path), name="results_run"),
    ).fit()
    assert result.metrics["loss"] == pytest.approx(1 / 3)
    df = result.metrics_dataframe
    assert list(df["step"]) == [0, 1, 2]
    best, best_metrics = result.best_checkpoints[0]
    assert isinstance(best, Checkpoint) and "loss" in best_metrics
    lowest = result.get_best_checkpoint(metric="loss", mode="min")
    assert Path(lowest.path, "step.txt").read_text() == "2"
    assert lowest.get_metadata() == {"step": 2, "framework": "torch"}
    best_checkpoint = min(result.best_checkpoints, key=lambda bc: bc[1]["loss"])[0]
    assert best_checkpoint == lowest
    assert result.error is None
    # Ray gives a pyarrow file system with the path (pyarrow is optional here).
    try:
        import pyarrow.fs
    except ModuleNotFoundError:
        with pytest.raises(ModuleNotFoundError, match="pip install pyarrow"):
            result.filesystem  # noqa: B018
    else:
        assert isinstance(result.filesystem, pyarrow.fs.LocalFileSystem)
    # Reading the run back from its folder, as a later process would.
    restored = ray.train.Result.from_path(result.path)
    assert restored.metrics["step"] == 2
    assert restored.checkpoint == result.checkpoint
    assert restored.path == result.path


# -- monitoring-logging.rst: reporting from rank 0, aggregating across workers -------------


def monitoring_train_func() -> None:
    import torch
    import torch.distributed as dist

    actorrt.train.torch.enable_reproducibility(seed=42)
    draw = torch.rand(1)
    same = [torch.zeros(1) for _ in range(2)]
    dist.all_gather(same, draw)  # both ranks drew the same number from the same seed
    context = train.get_context()
    local_loss = torch.tensor(float(context.get_world_rank() + 1))
    # Aggregate a metric across workers, then report it from every rank.
    dist.all_reduce(local_loss, op=dist.ReduceOp.SUM)
    train.report({
        "mean_loss": local_loss.item() / context.get_world_size(),
        "rank": context.get_world_rank(),
        "world_size": context.get_world_size(),
        "local_rank": context.get_local_rank(),
        "experiment": context.get_experiment_name(),
        "device": str(actorrt.train.torch.get_device()),
        "same_draw": bool(same[0].item() == same[1].item()),
    })


@pytest.mark.timeout(120)
def test_metrics_are_rank_zeros_and_aggregates_agree(cluster: None, tmp_path: Path) -> None:
    result = TorchTrainer(
        monitoring_train_func,
        scaling_config=ScalingConfig(num_workers=2),
        run_config=RunConfig(storage_path=str(tmp_path), name="monitored"),
    ).fit()
    assert result.metrics == {
        "mean_loss": 1.5, "rank": 0, "world_size": 2, "local_rank": 0,
        "experiment": "monitored", "device": "cpu", "same_draw": True,
    }


# -- what a Ray script may pass that actorrt does not take: a clear error at the call ------


def test_ray_arguments_that_are_not_supported_fail_at_the_call(tmp_path: Path) -> None:
    # Cloud storage: refused, not written to a local folder named "s3:".
    with pytest.raises(ValueError, match=r"s3://.*local folder only.*docs/porting.md"):
        RunConfig(storage_path="s3://bucket/runs", name="run")
    assert not Path("s3:").exists()
    # A local file:// URI is a local folder, as in Ray.
    local = RunConfig(storage_path=f"file://{tmp_path}", name="run")
    assert local.run_dir("unused") == tmp_path / "run"
    # Ray Train V2 itself raises DeprecationWarning for these, and so does actorrt.
    with pytest.raises(DeprecationWarning, match="same RunConfig"):
        TorchTrainer.restore(str(tmp_path))
    with pytest.raises(DeprecationWarning, match="same RunConfig"):
        TorchTrainer.can_restore(str(tmp_path))
    with pytest.raises(DeprecationWarning, match="resume_from_checkpoint"):
        TorchTrainer(failing_train_func,
                     resume_from_checkpoint=Checkpoint.from_directory(tmp_path))
    with pytest.raises(DeprecationWarning, match="metadata"):
        TorchTrainer(failing_train_func, metadata={"vocab": 3})
    # Ray-only options: a TypeError naming the option and docs/porting.md.
    with pytest.raises(TypeError, match=r"dataset_config=.*docs/porting.md"):
        TorchTrainer(failing_train_func, dataset_config=object())
    with pytest.raises(TypeError, match=r"storage_filesystem=.*docs/porting.md"):
        RunConfig(storage_filesystem=object())
    with pytest.raises(TypeError, match=r"worker_runtime_env=.*docs/porting.md"):
        RunConfig(worker_runtime_env={"env_vars": {"A": "1"}})
    with pytest.raises(TypeError, match=r"accelerator_type=.*docs/porting.md"):
        ScalingConfig(num_workers=2, accelerator_type="A100")
    with pytest.raises(TypeError, match=r"checkpoint_dir_name=.*docs/porting.md"):
        train.report({"loss": 0.1}, checkpoint_dir_name="epoch_1")
    with pytest.raises(TypeError, match="unexpected keyword argument 'not_an_option'"):
        train.report({"loss": 0.1}, not_an_option=1)


# -- ray.train.collective (V2): rank 0 prepares, the others wait and receive ---------------


def collective_train_func(config: dict[str, Any]) -> None:
    from actorrt.train.collective import barrier, broadcast_from_rank_zero

    rank = ray.train.get_context().get_world_rank()
    shared = Path(config["shared"])
    if rank == 0:
        (shared / "vocab.txt").write_text("a b c")  # e.g. download once per run
    barrier()
    words = (shared / "vocab.txt").read_text().split()  # every rank sees the file
    run_id = broadcast_from_rank_zero({"id": f"run-{rank}"} if rank == 0 else None)
    train.report({"words": len(words), "run_id": run_id["id"], "rank": rank})
    if rank == 1 and config.get("rank_1_skips_a_barrier"):
        return
    barrier()


@pytest.mark.timeout(120)
def test_collective_barrier_and_broadcast(cluster: None, tmp_path: Path) -> None:
    result = DataParallelTrainer(
        collective_train_func,
        train_loop_config={"shared": str(tmp_path)},
        scaling_config=ScalingConfig(num_workers=2),
        run_config=RunConfig(storage_path=str(tmp_path), name="collective"),
    ).fit()
    assert result.metrics == {"words": 3, "run_id": "run-0", "rank": 0}
    # A rank that returns without the call every other rank waits at: an error naming
    # it, where Ray would wait for ever.
    with pytest.raises(train.WorkerGroupError) as info:
        DataParallelTrainer(
            collective_train_func,
            train_loop_config={"shared": str(tmp_path), "rank_1_skips_a_barrier": True},
            scaling_config=ScalingConfig(num_workers=2),
            run_config=RunConfig(storage_path=str(tmp_path), name="collective_2"),
        ).fit()
    # The report counts as a collective call, as in Ray (it is a barrier too).
    assert "barrier() (collective call 4" in str(info.value.worker_failures[0])
    assert "rank(s) [1] returned" in str(info.value.worker_failures[0])


# -- Ray Train V2's public-API trainer tests: config in, rank 0's metrics out ---------------


def config_to_metrics(config: dict[str, Any]) -> None:
    rank = train.get_context().get_world_rank()
    checkpoint = None
    with tempfile.TemporaryDirectory() as d:
        if rank == 0:  # a checkpoint from rank 0 only; every rank reports
            Path(d, "weights").write_text("w")
            checkpoint = Checkpoint.from_directory(d)
        train.report({**config, "rank": rank}, checkpoint=checkpoint)


@pytest.mark.timeout(120)
def test_trainer_passes_config_and_keeps_rank_zeros_report(
    cluster: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    result = DataParallelTrainer(
        config_to_metrics,
        train_loop_config={"x": 1},
        scaling_config=ScalingConfig(num_workers=2),
        run_config=RunConfig(name="test", storage_path=str(tmp_path)),
    ).fit()
    assert isinstance(result, train.Result)
    assert result.path == str(tmp_path / "test")
    assert result.metrics == {"x": 1, "rank": 0}
    assert result.checkpoint is not None
    assert Path(result.checkpoint.to_directory(tmp_path / "copy"), "weights").exists()
    # A function without arguments, and no optional trainer arguments at all: the run
    # goes to the default storage folder (under the home folder, here a temporary one).
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    bare = DataParallelTrainer(lambda: None).fit()
    assert bare.metrics == {}
    assert bare.path.startswith(str(tmp_path / "home"))
