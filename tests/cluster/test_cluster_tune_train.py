"""The seed's Tune x Train sweep on a cluster of three separate hosts: a CPU node (the head's)
that offers ``TRAIN_DRIVER_RESOURCE``, and two GPU nodes with four (logical) GPUs each. Trial
drivers run only where that resource is; their training workers run on the GPU nodes; a
gang that spans both GPU nodes meets at rank 0's node address, and real torch (gloo) runs
across the hosts."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import eventually

import actorrt
from actorrt import train, tune

from ._cluster import Cluster, cluster_on_hosts

pytestmark = pytest.mark.timeout(180)

STEPS = 3


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with cluster_on_hosts(
        tmp_path_factory.mktemp("cluster"),
        ["--num-cpus", "4", "--num-gpus", "0", "--resources", '{"TRAIN_DRIVER_RESOURCE": 2}'],
        ["--num-cpus", "8", "--num-gpus", "4"],
        ["--num-cpus", "8", "--num-gpus", "4"],
    ) as made:
        yield made


@pytest.fixture
async def rt(cluster: Cluster, monkeypatch: pytest.MonkeyPatch) -> Any:
    async with cluster.driver(monkeypatch, "GPU", 8.0) as runtime:
        yield runtime


def _where() -> dict[str, str]:
    return {
        "ip": os.environ.get("ACTORRT_NODE_IP", ""),
        "node": os.environ.get("ACTORRT_NODE_ID", ""),
        "visible": os.environ.get("CUDA_VISIBLE_DEVICES", ""),
    }


@actorrt.actor(max_concurrency=100)
class Recorder:
    def __init__(self) -> None:
        self.drivers: dict[str, dict[str, Any]] = {}
        self.workers: dict[str, list[dict[str, Any]]] = {}
        self.live: dict[str, set[tuple[str, str]]] = {}
        self.shared: list[Any] = []

    def driver(self, trial_id: str, info: dict[str, Any]) -> None:
        self.drivers[trial_id] = info

    def worker(self, trial_id: str, info: dict[str, Any]) -> None:
        self.workers.setdefault(trial_id, []).append(info)
        mine = {(info["node"], g) for g in info["visible"].split(",") if g}
        for other, theirs in self.live.items():
            if other != trial_id and mine & theirs:
                self.shared.append((trial_id, other, mine & theirs))
        self.live.setdefault(trial_id, set()).update(mine)

    def ended(self, trial_id: str) -> None:
        self.live.pop(trial_id, None)

    def state(self) -> dict[str, Any]:
        return {"drivers": self.drivers, "workers": self.workers, "shared": self.shared}


def light_loop(config: dict[str, Any]) -> None:
    rank = train.get_context().get_world_rank()
    actorrt.get(config["recorder"].worker(config["trial_id"], {
        **_where(), "rank": rank, "master": os.environ["MASTER_ADDR"],
        "node_rank": int(os.environ["NODE_RANK"]), "local_rank": int(os.environ["LOCAL_RANK"]),
    }))
    for step in range(STEPS):
        loss = config["lr"] * 10 / (step + 1) + 1 / config["batch_size"]
        if rank == 0 and step == STEPS - 1:
            with tempfile.TemporaryDirectory() as d:
                Path(d, "state.txt").write_text(f"step {step}")
                train.report({"loss": loss, "step": step},
                             checkpoint=train.Checkpoint.from_directory(d))
        else:
            train.report({"loss": loss, "step": step})


def driver(config: dict[str, Any]) -> None:
    recorder = config["recorder"]
    trial_id = tune.get_context().get_trial_id()
    actorrt.get(recorder.driver(trial_id, _where()))
    try:
        train.DataParallelTrainer(
            light_loop,
            train_loop_config={"lr": config["lr"], "batch_size": config["batch_size"],
                               "recorder": recorder, "trial_id": trial_id},
            scaling_config=train.ScalingConfig(num_workers=config["num_workers"], use_gpu=True),
        ).fit()
    finally:
        actorrt.get(recorder.ended(trial_id))


def pinned_driver(config: dict[str, Any]) -> train.ScalingConfig:
    return train.ScalingConfig(
        num_workers=config["num_workers"], use_gpu=True,
        trainer_resources={"CPU": 1, "TRAIN_DRIVER_RESOURCE": 1},
    )


@pytest.mark.filterwarnings("ignore:ScalingConfig.trainer_resources")  # as in Ray Train V1
async def test_the_seed_sweep_runs_drivers_on_the_cpu_node_and_gangs_on_gpu_nodes(
    rt: Any, cluster: Cluster, tmp_path: Path
) -> None:
    assert cluster.head is not None
    recorder = await Recorder.spawn()
    grid = await tune.Tuner(
        tune.with_resources(driver, pinned_driver),
        param_space={
            "recorder": recorder,
            "num_workers": tune.choice([2, 4]),
            "lr": tune.grid_search([0.001, 0.01]),
            "batch_size": tune.grid_search([32, 64]),
        },
        tune_config=tune.TuneConfig(seed=3),
        run_config=tune.RunConfig(storage_path=str(tmp_path), verbose=0),
    ).fit_async()
    assert len(grid) == 4 and not grid.errors, grid.errors
    rec = await recorder.state()
    gpu_nodes = {m.ip for m in cluster.nodes}
    for result in grid:
        assert result.metrics["step"] == STEPS - 1 and result.checkpoint is not None
        assert rec["drivers"][result.trial_id]["ip"] == cluster.head.ip  # pinned
        workers = sorted(rec["workers"][result.trial_id], key=lambda w: w["rank"])
        assert len(workers) == result.config["num_workers"]
        assert {w["ip"] for w in workers} <= gpu_nodes
        assert all(w["master"] == workers[0]["ip"] for w in workers)  # rank 0's node
    assert rec["shared"] == []  # no GPU of a node held by two live trials
    assert await eventually(lambda: rt.available_resources() == rt.cluster_resources())


def gloo_loop(config: dict[str, Any]) -> None:
    import torch
    import torch.distributed as dist

    rank = train.get_context().get_world_rank()
    total = torch.tensor([float(rank + 1)])
    dist.all_reduce(total)
    train.report({"sum": float(total.item()), "ip": os.environ["ACTORRT_NODE_IP"],
                  "master": os.environ["MASTER_ADDR"], "node_rank": os.environ["NODE_RANK"]})


async def test_torch_trains_across_nodes_meeting_at_rank_0s_node(
    rt: Any, cluster: Cluster, tmp_path: Path
) -> None:
    trainer = train.torch.TorchTrainer(
        gloo_loop,
        scaling_config=train.ScalingConfig(
            num_workers=2, resources_per_worker={"CPU": 1}, placement_strategy="STRICT_SPREAD"
        ),
        run_config=train.RunConfig(storage_path=str(tmp_path), name="gloo"),
    )
    result = await trainer.fit_async()
    assert result.error is None, result.error
    assert result.metrics["sum"] == 3.0  # 1 + 2, summed over the network
    assert result.metrics["master"] == result.metrics["ip"]  # rank 0 reports: its own node
    assert await eventually(lambda: rt.available_resources() == rt.cluster_resources())
