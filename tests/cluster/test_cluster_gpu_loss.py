"""The seed's Tune x Train sweep with a GPU node lost mid-run, on three separate hosts: a CPU
node (the head's) with ``TRAIN_DRIVER_RESOURCE`` for the trial drivers, and two GPU nodes whose
four GPUs each come from fake NVML (discovered, not declared). One GPU node is killed while
gangs train on it: their trials start again, from their last checkpoint, as whole gangs on the
GPU node that is left, and a gang that only both nodes could hold fails saying which node
went. Nothing stays held, and nothing of the lost node runs on."""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import eventually

import actorrt
from actorrt import train, tune
from actorrt.resources import BACKEND_ENV, write_fake_gpu_spec

from ._cluster import Cluster, cluster_on_hosts

pytestmark = [
    pytest.mark.timeout(240),
    pytest.mark.filterwarnings("ignore:ScalingConfig.trainer_resources"),  # as in Ray Train V1
]

STEPS = 8
STEP_S = 0.4  # the work of one step: long enough for the loss to land mid-run


@pytest.fixture
def cluster(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Cluster]:
    # Every member sees four fake GPUs; the head's node declares none (a CPU machine).
    monkeypatch.setenv(BACKEND_ENV, write_fake_gpu_spec(tmp_path / "gpus.json", 4))
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    # Tune's automatic TensorBoard logger imports torch in this driver: seconds of a held
    # GIL on a small machine, for files this test does not read.
    monkeypatch.setenv("TUNE_DISABLE_AUTO_CALLBACK_LOGGERS", "1")
    (tmp_path / "cluster").mkdir()
    with cluster_on_hosts(
        tmp_path / "cluster",
        ["--num-cpus", "4", "--num-gpus", "0", "--resources", '{"TRAIN_DRIVER_RESOURCE": 2}'],
        ["--num-cpus", "8"],
        ["--num-cpus", "8"],
    ) as made:
        yield made


@actorrt.actor(max_concurrency=100)
class Recorder:
    """Where each attempt of each trial's workers ran, and the GPUs live trials hold."""

    def __init__(self) -> None:
        self.attempts: dict[str, list[dict[str, Any]]] = {}
        self.live: dict[tuple[str, str], str] = {}  # (node, gpu) -> trial
        self.shared: list[Any] = []
        self.checkpointed: dict[str, tuple[str, int]] = {}  # trial -> (node, last step)

    def checkpoint(self, trial_id: str, ip: str, step: int) -> None:
        self.checkpointed[trial_id] = (ip, step)

    def worker(self, trial_id: str, info: dict[str, Any]) -> None:
        self.attempts.setdefault(trial_id, []).append(info)
        for gpu in info["visible"].split(","):
            holder = self.live.get((info["ip"], gpu))
            if holder is not None and holder != trial_id:
                self.shared.append((trial_id, holder, info["ip"], gpu))
            self.live[(info["ip"], gpu)] = trial_id

    def released(self, trial_id: str) -> None:
        self.live = {k: v for k, v in self.live.items() if v != trial_id}

    def node_lost(self, ip: str) -> None:
        """The gangs with a worker there end, whole, without reaching their ``finally``."""
        for trial_id in {v for (node, _), v in self.live.items() if node == ip}:
            self.released(trial_id)

    def first_checkpoint(self) -> tuple[str, str] | None:
        """A trial that has a checkpoint, and the node its rank 0 runs on."""
        for trial_id, (ip, step) in self.checkpointed.items():
            if step >= 1:
                return trial_id, ip
        return None

    def state(self) -> dict[str, Any]:
        return {"attempts": self.attempts, "shared": self.shared,
                "checkpointed": dict(self.checkpointed)}


def train_loop(config: dict[str, Any]) -> None:
    context = train.get_context()
    rank = context.get_world_rank()
    start = 0
    checkpoint = train.get_checkpoint()
    if checkpoint is not None:
        with checkpoint.as_directory() as d:
            start = int(Path(d, "step").read_text()) + 1
    actorrt.get(config["recorder"].worker(config["trial_id"], {
        "ip": os.environ["ACTORRT_NODE_IP"], "visible": os.environ["CUDA_VISIBLE_DEVICES"],
        "rank": rank, "start": start,
    }))
    for step in range(start, STEPS):
        time.sleep(STEP_S)
        metrics = {"step": step, "loss": config["lr"] / (step + 1)}
        if rank == 0:
            with tempfile.TemporaryDirectory() as d:
                Path(d, "step").write_text(str(step))
                train.report(metrics, checkpoint=train.Checkpoint.from_directory(d))
            actorrt.get(config["recorder"].checkpoint(
                config["trial_id"], os.environ["ACTORRT_NODE_IP"], step))
        else:
            train.report(metrics)


def driver(config: dict[str, Any]) -> None:
    trial_id = tune.get_context().get_trial_id()
    try:
        train.DataParallelTrainer(
            train_loop,
            train_loop_config={"lr": config["lr"], "recorder": config["recorder"],
                               "trial_id": trial_id},
            scaling_config=pinned(config),
        ).fit()
    finally:
        actorrt.get(config["recorder"].released(trial_id))


def pinned(config: dict[str, Any]) -> train.ScalingConfig:
    return train.ScalingConfig(
        num_workers=config["num_workers"], use_gpu=True,
        trainer_resources={"CPU": 1, "TRAIN_DRIVER_RESOURCE": 1},
    )


async def test_a_gpu_node_lost_mid_sweep_restarts_its_gangs_on_the_other(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    async with cluster.driver(monkeypatch, "GPU", 8.0) as rt:
        recorder = await Recorder.spawn()
        tuner = tune.Tuner(
            tune.with_resources(driver, pinned),
            param_space={
                "recorder": recorder,
                "lr": tune.grid_search([0.01, 0.1]),
                "num_workers": tune.grid_search([4, 2]),
            },
            run_config=tune.RunConfig(
                storage_path=str(tmp_path / "results"), name="gpu-loss", verbose=0,
                failure_config=tune.FailureConfig(max_failures=2),
            ),
        )
        fit = asyncio.ensure_future(tuner.fit_async())
        # Once a gang has trained (and checkpointed) on a GPU node, take that node away.
        first, first_ip = await _first_checkpoint(recorder, cluster, within=90)
        [victim] = [m for m in cluster.nodes if m.ip == first_ip]
        [survivor] = [m for m in cluster.nodes if m is not victim]
        victim.kill()
        await recorder.node_lost(victim.ip)
        grid = await asyncio.wait_for(fit, 180)
        assert not grid.errors, grid.errors
        assert len(grid) == 4 and grid.num_terminated == 4
        rec = await recorder.state()
        assert rec["shared"] == []  # no GPU held by two live trials, before or after
        for result in grid:
            assert result.metrics["step"] == STEPS - 1  # every trial ran to its end
        # The gang that trained on the lost node started again, whole, on the other one,
        # from its checkpoint rather than from the start.
        [again] = [r for r in grid if r.trial_id == first]
        resumed = [a for a in rec["attempts"][first] if a["ip"] == survivor.ip]
        assert len(resumed) >= again.config["num_workers"], rec["attempts"][first]
        assert min(a["start"] for a in resumed) >= 1, rec["attempts"][first]
        # The lost node's GPUs left with it; nothing else is held.
        assert rt.cluster_resources()["GPU"] == 4.0
        assert await eventually(lambda: rt.available_resources() == rt.cluster_resources())
        assert victim.host is not None and victim.host.pids() == []


async def _first_checkpoint(recorder: Any, cluster: Cluster, within: float) -> tuple[str, str]:
    deadline = time.monotonic() + within
    while (found := await recorder.first_checkpoint()) is None:
        if time.monotonic() > deadline:
            status = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "actorrt", "status", "--address", cluster.address,
                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
                env={**os.environ, **cluster.driver_env()},
            )
            shown, _ = await asyncio.wait_for(status.communicate(), 60)
            pytest.fail(f"no gang checkpointed within {within} s; the cluster:\n"
                        f"{shown.decode()}\nthe recorder: {await recorder.state()}")
        await asyncio.sleep(0.05)
    return found
