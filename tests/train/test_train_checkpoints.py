"""Reports and checkpoints through DataParallelTrainer, and fit() from synchronous code."""

import os
import tempfile
from pathlib import Path
from typing import Any

import pytest
from conftest import Recorder

import actorrt
from actorrt import train

WORKER_ENV = {"OMP_NUM_THREADS": "1"}


def content(checkpoint: train.Checkpoint | str | None, name: str) -> str:
    """A small file of a checkpoint (read synchronously: tiny, local)."""
    assert checkpoint is not None
    return Path(checkpoint, name).read_text()



def report_scored(config: dict[str, Any]) -> None:
    ctx = train.get_context()
    for step, acc in enumerate(config["scores"]):
        with tempfile.TemporaryDirectory() as d:
            Path(d, f"rank_{ctx.get_world_rank()}").write_text(str(step))
            Path(d, "step").write_text(str(step))
            train.report(
                {"step": step, "acc": acc, "rank": ctx.get_world_rank()},
                checkpoint=train.Checkpoint.from_directory(d),
            )
    actorrt.get(config["recorder"].record({
        "rank": ctx.get_world_rank(),
        "local_rank": ctx.get_local_rank(),
        "world_size": ctx.get_world_size(),
        "local_world_size": ctx.get_local_world_size(),
        "node_rank": ctx.get_node_rank(),
        "experiment": ctx.get_experiment_name(),
        "env": {k: os.environ.get(k) for k in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "NODE_RANK")},
    }))


@pytest.mark.actorrt(num_cpus=4, worker_env=WORKER_ENV)
async def test_every_ranks_checkpoints_are_merged_and_kept_per_checkpoint_config(
    actorrt_runtime: actorrt.Runtime, tmp_path: Path
) -> None:
    recorder = await Recorder.spawn()
    trainer = train.DataParallelTrainer(
        report_scored,
        train_loop_config={"scores": [0.1, 0.5, 0.3, 0.9, 0.2], "recorder": recorder},
        scaling_config=train.ScalingConfig(num_workers=3),
        run_config=train.RunConfig(
            name="scored",
            storage_path=str(tmp_path),
            checkpoint_config=train.CheckpointConfig(
                num_to_keep=2, checkpoint_score_attribute="acc"
            ),
        ),
    )
    result = await trainer.fit_async()
    assert result.error is None, result.failures
    assert actorrt.available_resources() == actorrt.cluster_resources()

    # Rank 0's metrics; every rank's checkpoint files, merged per report (as Ray Train
    # V2 does); the best two and the latest stay on disk.
    assert [m["rank"] for m in result.metrics_history] == [0] * 5
    assert result.metrics == {"step": 4, "acc": 0.2, "rank": 0}
    assert result.checkpoint is not None
    assert content(result.checkpoint, "step") == "4"
    assert isinstance(result.path, str)
    on_disk = sorted(
        p.name for p in Path(result.path).iterdir() if p.name.startswith("checkpoint_")  # noqa: ASYNC240
    )
    assert on_disk == ["checkpoint_000001", "checkpoint_000003", "checkpoint_000004"]
    best, best_metrics = result.best_checkpoints[0]
    assert best_metrics["acc"] == 0.9 and content(best, "step") == "3"
    for checkpoint, metrics in result.best_checkpoints:
        files = sorted(os.listdir(checkpoint.path))
        assert files == ["rank_0", "rank_1", "rank_2", "step"], files
        assert {content(checkpoint, f"rank_{r}") for r in range(3)} == {str(metrics["step"])}
    assert result.get_best_checkpoint("acc", "max") == best
    assert content(result.get_best_checkpoint("acc", "min"), "step") == "4"  # 0.2 of 1,3,4
    assert list(result.metrics_dataframe["acc"]) == [0.1, 0.5, 0.3, 0.9, 0.2]
    with pytest.raises(ValueError, match="mode must be 'max' or 'min', got 'best'"):
        result.get_best_checkpoint("acc", "best")
    with pytest.raises(RuntimeError, match="numeric 'loss'.*'acc'"):
        result.get_best_checkpoint("loss", "min")

    # The same run read back from its folder.
    again = train.Result.from_path(result.path)
    assert again.path == result.path and again.metrics == result.metrics
    assert again.checkpoint == result.checkpoint
    assert [c for c, _ in again.best_checkpoints] == [  # newest first: no score known
        train.Checkpoint(Path(result.path, n)) for n in reversed(on_disk)
    ]
    assert again.get_best_checkpoint("acc", "max") == best
    assert list(again.metrics_dataframe["step"]) == [0, 1, 2, 3, 4]
    with pytest.raises(RuntimeError, match="no run folder"):
        train.Result.from_path(tmp_path / "nothing")
    with pytest.raises(RuntimeError, match="has no result.json"):
        train.Result.from_path(tmp_path)

    # Context and environment per rank.
    ranks = sorted(await recorder.all(), key=lambda r: r["rank"])
    assert [r["rank"] for r in ranks] == [0, 1, 2]
    for rank, record in enumerate(ranks):
        assert record["local_rank"] == rank and record["node_rank"] == 0
        assert record["world_size"] == record["local_world_size"] == 3
        assert record["experiment"] == "scored"
        assert record["env"] == {
            "RANK": str(rank), "LOCAL_RANK": str(rank), "WORLD_SIZE": "3", "NODE_RANK": "0",
        }


def fail_once_then_resume(config: dict[str, Any]) -> None:
    ctx = train.get_context()
    checkpoint = train.get_checkpoint()
    start = 0
    if checkpoint is not None:
        start = int(Path(checkpoint.path, "step").read_text()) + 1
    actorrt.get(config["recorder"].record((ctx.get_world_rank(), checkpoint and checkpoint.path)))
    for step in range(start, 6):
        if step == 3 and checkpoint is None and ctx.get_world_rank() == 0:
            raise ValueError("boom at step 3")
        with tempfile.TemporaryDirectory() as d:
            Path(d, "step").write_text(str(step))
            train.report({"step": step}, checkpoint=train.Checkpoint.from_directory(d))


@pytest.mark.actorrt(num_cpus=4, worker_env=WORKER_ENV)
async def test_a_failed_attempt_restarts_from_get_checkpoint(
    actorrt_runtime: actorrt.Runtime, tmp_path: Path
) -> None:
    recorder = await Recorder.spawn()
    trainer = train.DataParallelTrainer(
        fail_once_then_resume,
        train_loop_config={"recorder": recorder},
        scaling_config=train.ScalingConfig(num_workers=2),
        run_config=train.RunConfig(
            storage_path=str(tmp_path), failure_config=train.FailureConfig(max_failures=2)
        ),
    )
    result = await trainer.fit_async()
    assert result.error is None
    assert result.num_failures == 1
    assert "worker 0 failed: ValueError: boom at step 3" in result.failures[0]
    assert [m["step"] for m in result.metrics_history] == list(range(6))
    starts = await recorder.all()
    assert sorted(starts[:2]) == [(0, None), (1, None)]
    # Both ranks of the second attempt resume from rank 0's last checkpoint (step 2).
    restored = {path for _, path in starts[2:]}
    assert len(starts) == 4 and len(restored) == 1
    assert content(restored.pop(), "step") == "2"
    assert Path(result.path).name.startswith("DataParallelTrainer_")
    assert actorrt.available_resources() == actorrt.cluster_resources()


def report_without_score() -> None:
    with tempfile.TemporaryDirectory() as d:
        train.report({"loss": 1.0}, checkpoint=train.Checkpoint.from_directory(d))


@pytest.mark.actorrt(num_cpus=2, worker_env=WORKER_ENV)
async def test_a_checkpoint_without_its_score_fails_the_run(
    actorrt_runtime: actorrt.Runtime, tmp_path: Path
) -> None:
    trainer = train.DataParallelTrainer(
        report_without_score,
        run_config=train.RunConfig(
            storage_path=str(tmp_path),
            checkpoint_config=train.CheckpointConfig(checkpoint_score_attribute="acc"),
        ),
    )
    with pytest.raises(train.WorkerGroupError) as raised:
        await trainer.fit_async()
    cause = raised.value.worker_failures[0]
    assert isinstance(cause, ValueError)
    assert "ranks checkpoints by 'acc'" in str(cause) and "['loss']" in str(cause)

    with pytest.raises(RuntimeError, match="use `await trainer.fit_async\\(\\)`"):
        trainer.fit()  # on the event loop's thread


def report_one() -> None:
    train.report({"done": 1, "cuda": os.environ.get("CUDA_VISIBLE_DEVICES")})


def test_fit_from_sync_code_starts_a_runtime(tmp_path: Path) -> None:
    assert not actorrt.is_initialized()
    try:
        result = train.DataParallelTrainer(
            report_one, run_config=train.RunConfig(storage_path=str(tmp_path))
        ).fit()
        assert actorrt.is_initialized()  # started by fit(), left running as ray.init is
        assert result.error is None and result.metrics == {"done": 1, "cuda": ""}
        assert actorrt.available_resources() == actorrt.cluster_resources()
    finally:
        actorrt.shutdown()


def only_rank_1_checkpoints() -> None:
    rank = train.get_context().get_world_rank()
    for step in range(2):
        if rank == 1 and step == 1:
            with tempfile.TemporaryDirectory() as d:
                Path(d, "shard_1").write_text("from rank 1")
                train.report({"step": step}, checkpoint=train.Checkpoint.from_directory(d))
        else:
            train.report({"step": step, "rank": rank})


@pytest.mark.actorrt(num_cpus=2, worker_env=WORKER_ENV)
async def test_a_checkpoint_only_another_rank_reported_is_kept(
    actorrt_runtime: actorrt.Runtime, tmp_path: Path
) -> None:
    result = await train.DataParallelTrainer(
        only_rank_1_checkpoints,
        scaling_config=train.ScalingConfig(num_workers=2),
        run_config=train.RunConfig(name="ranks", storage_path=str(tmp_path)),
    ).fit_async()
    # As in Ray Train V2: a report is a checkpoint when any rank gave one; its metrics
    # are rank 0's of that report.
    assert result.checkpoint is not None
    assert os.listdir(result.checkpoint.path) == ["shard_1"]
    assert result.best_checkpoints == [(result.checkpoint, {"step": 1, "rank": 0})]
    assert train.Result.from_path(result.path).checkpoint == result.checkpoint


def list_reported(config: dict[str, Any]) -> None:
    rank = train.get_context().get_world_rank()
    seen = []
    for step in range(3):
        with tempfile.TemporaryDirectory() as d:
            checkpoint = None
            if rank == 0 and step != 1:  # no checkpoint with the second report
                Path(d, "step").write_text(str(step))
                checkpoint = train.Checkpoint.from_directory(d)
            train.report({"step": step, "rank": rank}, checkpoint=checkpoint)
        seen.append([
            (r.metrics["step"], r.metrics["rank"], content(r.checkpoint, "step"))
            for r in train.get_all_reported_checkpoints()
        ])
    actorrt.get(config["recorder"].record({"rank": rank, "seen": seen}))


@pytest.mark.actorrt(num_cpus=2, worker_env=WORKER_ENV)
async def test_get_all_reported_checkpoints_lists_them_with_the_runs_metrics(
    actorrt_runtime: actorrt.Runtime, tmp_path: Path
) -> None:
    # Ray Train V2: every rank gets the run's reported checkpoints so far, with the
    # metrics reported with each (rank 0's, the run's), oldest first.
    recorder = await Recorder.spawn()
    await train.DataParallelTrainer(
        list_reported,
        train_loop_config={"recorder": recorder},
        scaling_config=train.ScalingConfig(num_workers=2),
        run_config=train.RunConfig(name="listed", storage_path=str(tmp_path)),
    ).fit_async()
    expected = [[(0, 0, "0")], [(0, 0, "0")], [(0, 0, "0"), (2, 0, "2")]]
    records = sorted(await recorder.all(), key=lambda r: r["rank"])
    assert [r["seen"] for r in records] == [expected, expected]
    with pytest.raises(RuntimeError, match="get_all_reported_checkpoints"):
        train.get_all_reported_checkpoints()
