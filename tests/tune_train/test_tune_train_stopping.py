"""Rank 0's reports as a Tune trial's results, and Tune's decisions reaching the gang.

A trainer's ``fit()`` inside a trial forwards each of rank 0's reports to the trial (so
``training_iteration``, schedulers and stop criteria see them); when Tune says stop, the
whole gang is killed at once and the trial ends as stopped. Real torch (gloo on CPU) in
one test; light loops elsewhere. One runtime serves the module.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from conftest import eventually, no_processes_left_by
from seed_cluster import seed_cluster

import actorrt
from actorrt import train, tune
from actorrt.tune.schedulers import ASHAScheduler

pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest.fixture(scope="module", autouse=True)
def no_leftover_processes() -> Iterator[None]:
    """Replaces the per-test check: the module's runtime keeps its processes between tests."""
    yield from no_processes_left_by("this module")


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def cluster(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[actorrt.Runtime]:
    async with seed_cluster(tmp_path_factory.mktemp("cluster")) as runtime:
        yield runtime


@actorrt.actor(max_concurrency=100)
class Witness:
    """In the test's process, next to the runtime: workers say who they are; a driver
    says when its ``fit()`` was stopped, and the witness looks, at that moment, at which
    of that trial's worker actors still live and at what the broker has lent out."""

    def __init__(self, runtime: actorrt.Runtime) -> None:
        self.runtime = runtime
        self.workers: dict[str, list[tuple[str, int]]] = {}
        self.at_stop: dict[str, dict[str, Any]] = {}
        self.complete: dict[str, asyncio.Event] = {}

    async def worker(self, trial_id: str, actor_id: str, pid: int, world_size: int) -> None:
        """Register a worker; returns once its whole gang has registered."""
        gang = self.workers.setdefault(trial_id, [])
        gang.append((actor_id, pid))
        complete = self.complete.setdefault(trial_id, asyncio.Event())
        if len(gang) == world_size:
            complete.set()
        await complete.wait()

    def stopped(self, trial_id: str) -> None:
        live = {ref.actor_id for ref in self.runtime.live_actors()}
        total = actorrt.cluster_resources()
        free = actorrt.available_resources()
        self.at_stop[trial_id] = {
            "live_workers": [a for a, _ in self.workers.get(trial_id, []) if a in live],
            "in_use": {k: total[k] - free.get(k, 0.0) for k in total if total[k] != free.get(k)},
        }

    def seen(self) -> dict[str, Any]:
        return {"workers": self.workers, "at_stop": self.at_stop}


def _exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def endless_loop(config: dict[str, Any]) -> None:
    """Never ends by itself: every rank reports a synthetic curve until the trial is
    stopped (report is a barrier, as in Ray Train V2: the other ranks wait at their next
    report while Tune decides on rank 0's)."""
    context = train.get_context()
    me = actorrt.get_context().actor_id
    actorrt.get(config["witness"].worker.options(timeout=60)(
        config["trial_id"], me, os.getpid(), context.get_world_size()
    ))
    for step in itertools.count(1):
        loss = 10 * config["lr"] + 1 / step  # the bigger the learning rate, the worse
        train.report({"loss": loss})


def stopped_driver(config: dict[str, Any]) -> None:
    trial_id = tune.get_context().get_trial_id()
    trainer = train.DataParallelTrainer(
        endless_loop,
        train_loop_config={**config, "trial_id": trial_id},
        scaling_config=train.ScalingConfig(num_workers=config["num_workers"], use_gpu=True),
    )
    try:
        trainer.fit()
    except tune.StopTrial:
        actorrt.get(config["witness"].stopped(trial_id))
        raise
    raise AssertionError("fit() returned, but its loop ends only when it is stopped")


def declared(config: dict[str, Any]) -> Any:
    return train.ScalingConfig(num_workers=config["num_workers"], use_gpu=True)


async def test_asha_stops_bad_train_trials_early_and_their_whole_gang_at_once(
    cluster: actorrt.Runtime, tmp_path: Path
) -> None:
    witness = await Witness.spawn(cluster)
    grid = await tune.Tuner(
        tune.with_resources(stopped_driver, declared),
        param_space={
            "witness": witness,
            "num_workers": 2,
            "lr": tune.grid_search([0.001, 0.01, 0.1]),
        },
        tune_config=tune.TuneConfig(
            metric="loss", mode="min",
            scheduler=ASHAScheduler(max_t=6, grace_period=2, reduction_factor=2),
            # One at a time, so the best curve reaches each rung first (ASHA keeps the
            # first arrival at a rung): which trials stop where is then certain.
            max_concurrent_trials=1,
        ),
        run_config=tune.RunConfig(storage_path=str(tmp_path), verbose=0),
    ).fit_async()
    assert actorrt.available_resources() == actorrt.cluster_resources()
    assert not grid.errors, grid.errors
    assert grid.num_terminated == 3  # stopped trials end as stopped, not errored
    # The best curve ran to max_t; the worse ones stopped at the first rung.
    iterations = {r.config["lr"]: r.metrics["training_iteration"] for r in grid}
    assert iterations == {0.001: 6, 0.01: 2, 0.1: 2}
    seen = await witness.seen()
    for result in grid:
        n = result.config["num_workers"]
        assert len(seen["workers"][result.trial_id]) == n
        at_stop = seen["at_stop"][result.trial_id]
        # When fit() raised, no worker actor of the gang lived any more, and nothing was
        # lent out but the trial's own reservation (its workers' GPU bundles; the driver
        # takes nothing, as in Ray Train V2).
        assert at_stop["live_workers"] == []
        assert at_stop["in_use"] == {"GPU": float(n)}
        lines = Path(result.path, "result.json").read_text().splitlines()  # noqa: ASYNC240
        assert len(lines) == result.metrics["training_iteration"]
    # Their processes were killed, not kept for reuse: each is gone once reaped.
    pids = [pid for workers in seen["workers"].values() for _, pid in workers]
    assert await eventually(lambda: not any(_exists(pid) for pid in pids))


async def test_a_stop_criterion_stops_an_undeclared_gang_and_returns_its_reservation(
    cluster: actorrt.Runtime, tmp_path: Path
) -> None:
    witness = await Witness.spawn(cluster)
    grid = await tune.Tuner(
        stopped_driver,  # undeclared: the trainer reserves its gang from the cluster
        param_space={"witness": witness, "num_workers": 3, "lr": 0.01, "batch_size": 32},
        run_config=tune.RunConfig(
            storage_path=str(tmp_path), verbose=0, stop={"training_iteration": 3}
        ),
    ).fit_async()
    assert actorrt.available_resources() == actorrt.cluster_resources()
    [result] = grid
    assert result.error is None and result.metrics["training_iteration"] == 3
    at_stop = (await witness.seen())["at_stop"][result.trial_id]
    # The gang's own group was removed before fit() raised: only the driver's CPU is out.
    assert at_stop == {"live_workers": [], "in_use": {"CPU": 1.0}}


def resumable_loop(config: dict[str, Any]) -> None:
    """Counts epochs in its checkpoint, so a restarted trial goes on where it was."""
    start = 0
    if (checkpoint := train.get_checkpoint()) is not None:
        start = int(Path(checkpoint.path, "epoch").read_text()) + 1
    for epoch in range(start, config["epochs"]):
        if train.get_context().get_world_rank() == 0:
            with tempfile.TemporaryDirectory() as d:
                Path(d, "epoch").write_text(str(epoch))
                train.report({"epoch": epoch}, checkpoint=train.Checkpoint.from_directory(d))
        else:
            train.report({"epoch": epoch})


def failing_once_driver(config: dict[str, Any]) -> None:
    """Runs the trainer, then fails the trial on its first attempt (after the results
    and checkpoints were forwarded); the retry starts from the trial's checkpoint."""
    first_attempt = tune.get_checkpoint() is None
    result = train.DataParallelTrainer(
        resumable_loop,
        train_loop_config={"epochs": 5 if not first_attempt else 2},
        scaling_config=train.ScalingConfig(num_workers=2),
    ).fit()
    if first_attempt:
        raise RuntimeError("the first attempt fails after its training")
    assert result.error is None
    # The retry's run lives in the trial folder too, and holds only its own reports.
    assert [m["epoch"] for m in result.metrics_history] == [2, 3, 4]
    assert Path(result.path).parent == Path(tune.get_context().get_trial_dir())


async def test_a_retried_trial_resumes_its_trainer_from_the_trials_checkpoint(
    cluster: actorrt.Runtime, tmp_path: Path
) -> None:
    grid = await tune.Tuner(
        tune.with_resources(failing_once_driver, train.ScalingConfig(num_workers=2)),
        run_config=tune.RunConfig(
            storage_path=str(tmp_path), verbose=0, failure_config=tune.FailureConfig(1)
        ),
    ).fit_async()
    [result] = grid
    assert result.error is None, result.error
    # Iterations go on across the retry: 2 reports, then 3 more from epoch 2.
    assert result.metrics["training_iteration"] == 5
    assert result.metrics["epoch"] == 4
    assert result.checkpoint is not None
    assert Path(result.checkpoint.path, "epoch").read_text() == "4"  # noqa: ASYNC240
    epochs = [r["epoch"] for r in result.metrics_dataframe.to_dict("records")]
    assert epochs == [0, 1, 2, 3, 4]
    assert actorrt.available_resources() == actorrt.cluster_resources()


def torch_loop(config: dict[str, Any]) -> None:
    """A tiny linear regression with DDP over gloo; rank 0 checkpoints every epoch."""
    import torch
    from torch import nn
    from torch.utils.data import DataLoader, TensorDataset

    from actorrt.train.torch import prepare_data_loader, prepare_model

    torch.manual_seed(0)
    x = torch.randn(256, 4)
    y = x @ torch.tensor([[1.0], [-2.0], [0.5], [3.0]]) + 0.1
    loader = prepare_data_loader(
        DataLoader(TensorDataset(x, y), batch_size=config["batch_size"], shuffle=True)
    )
    model = prepare_model(nn.Linear(4, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=config["lr"])
    for epoch in range(config["epochs"]):
        loader.sampler.set_epoch(epoch)
        for xb, yb in loader:
            optimizer.zero_grad()
            nn.functional.mse_loss(model(xb), yb).backward()
            optimizer.step()
        with torch.no_grad():
            loss = nn.functional.mse_loss(model(x), y).item()
        with tempfile.TemporaryDirectory() as d:
            checkpoint = None
            if train.get_context().get_world_rank() == 0:
                torch.save(model.module.state_dict(), os.path.join(d, "model.pt"))
                checkpoint = train.Checkpoint.from_directory(d)
            train.report({"loss": loss, "epoch": epoch,
                          "world_size": train.get_context().get_world_size()},
                         checkpoint=checkpoint)


def torch_driver(config: dict[str, Any]) -> None:
    from actorrt.train.torch import TorchTrainer

    result = TorchTrainer(
        torch_loop,
        train_loop_config=config,
        scaling_config=train.ScalingConfig(num_workers=2),
    ).fit()
    if result.error is not None:
        raise result.error


async def test_torch_trainer_in_a_trial_reports_its_epochs_to_tune(
    cluster: actorrt.Runtime, tmp_path: Path
) -> None:
    grid = await tune.Tuner(
        tune.with_resources(torch_driver, train.ScalingConfig(num_workers=2)),
        param_space={"lr": 0.1, "batch_size": 32, "epochs": 4},
        tune_config=tune.TuneConfig(metric="loss", mode="min"),
        run_config=tune.RunConfig(storage_path=str(tmp_path), verbose=0),
    ).fit_async()
    [result] = grid
    assert result.error is None, result.error
    assert result.metrics["training_iteration"] == 4
    assert result.metrics["world_size"] == 2
    losses = list(result.metrics_dataframe["loss"])
    assert len(losses) == 4 and losses[-1] < losses[0] / 10  # it learned
    assert grid.get_best_result().trial_id == result.trial_id
    # The last checkpoint, in the trial's folder, is rank 0's model of the last epoch.
    import torch
    from torch import nn

    assert result.checkpoint is not None
    assert os.path.dirname(result.checkpoint.path) == result.path
    model = nn.Linear(4, 1)
    model.load_state_dict(torch.load(os.path.join(result.checkpoint.path, "model.pt")))
    x = torch.randn(256, 4)
    y = x @ torch.tensor([[1.0], [-2.0], [0.5], [3.0]]) + 0.1
    with torch.no_grad():
        assert nn.functional.mse_loss(model(x), y).item() < losses[0]
    assert actorrt.available_resources() == actorrt.cluster_resources()


def scored_loop(config: dict[str, Any]) -> None:
    """Reports lr * step three times; rank 0's reports become the trial's results."""
    for step in range(1, 4):
        train.report({"score": config["lr"] * step, "world": train.get_context().get_world_size()})


async def test_a_tuner_over_a_trainer_sweeps_its_loop_config_as_whole_gangs(
    cluster: actorrt.Runtime, tmp_path: Path
) -> None:
    trainer = train.DataParallelTrainer(
        scored_loop,
        train_loop_config={"lr": 0.0},
        scaling_config=train.ScalingConfig(num_workers=2),
    )
    grid = await tune.Tuner(
        trainer,
        param_space={"train_loop_config": {"lr": tune.grid_search([1.0, 2.0])}},
        tune_config=tune.TuneConfig(metric="score", mode="max"),
        run_config=tune.RunConfig(storage_path=str(tmp_path), verbose=0),
    ).fit_async()
    assert not grid.errors
    assert sorted(r.metrics["score"] for r in grid) == [3.0, 6.0]
    assert all(r.metrics["training_iteration"] == 3 and r.metrics["world"] == 2 for r in grid)
    best = grid.get_best_result()
    assert best.config["train_loop_config"]["lr"] == 2.0
    assert best.path.split(os.sep)[-1].startswith("DataParallelTrainer_")
    assert actorrt.available_resources() == actorrt.cluster_resources()


async def test_a_tuner_over_a_trainer_refuses_other_keys_at_the_trial() -> None:
    trainer = train.DataParallelTrainer(scored_loop, train_loop_config={"lr": 0.0})
    with pytest.raises(ValueError, match=r"'train_loop_config' and 'scaling_config'.*\['lr'\]"):
        trainer.for_trial({"lr": 1.0})
    with pytest.raises(TypeError, match="must be a ScalingConfig, got 4"):
        trainer.for_trial({"scaling_config": 4})
    assert trainer.for_trial({"train_loop_config": {"lr": 3}}).train_loop_config == {"lr": 3}
