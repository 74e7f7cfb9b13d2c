"""The driver that examples/slurm/sweep.sbatch runs: a small Tune x Train sweep on the
cluster the batch script started. Each trial is one gang: its driver on the machine that
offers ``TRAIN_DRIVER_RESOURCE`` (the head's), its two training workers wherever the broker
finds room, on GPUs when the cluster has them. It prints one line per trial and exits 1
unless every trial ended TERMINATED.

Replace it with your own sweep: ``sbatch examples/slurm/sweep.sbatch python my_sweep.py``.
"""

from __future__ import annotations

import os
import sys
from typing import Any

import actorrt
from actorrt import train, tune

# Tune's automatic TensorBoard logger would import torch in this driver (on a thread, but
# holding the interpreter's lock for up to 1.6 s at a time on a loaded machine, near the 2 s
# the heartbeats allow). The trials' results are in JSON and CSV all the same.
os.environ.setdefault("TUNE_DISABLE_AUTO_CALLBACK_LOGGERS", "1")
STEPS = 3


def train_loop(config: dict[str, Any]) -> None:
    for step in range(STEPS):
        train.report({"loss": config["lr"] * 10 / (step + 1), "step": step,
                      "node": os.environ.get("ACTORRT_NODE_IP", "")})


def trial_driver(config: dict[str, Any]) -> None:
    train.DataParallelTrainer(
        train_loop,
        train_loop_config={"lr": config["lr"]},
        scaling_config=scaling(config),
    ).fit()


def scaling(config: dict[str, Any]) -> train.ScalingConfig:
    return train.ScalingConfig(
        num_workers=2, use_gpu=config["use_gpu"],
        trainer_resources={"CPU": 1, "TRAIN_DRIVER_RESOURCE": 1},  # the driver's bundle
    )


def main() -> int:
    actorrt.init(address="auto")  # the head started on this machine
    use_gpu = actorrt.cluster_resources().get("GPU", 0) > 0
    print(f"cluster: {actorrt.cluster_resources()}", flush=True)
    grid = tune.Tuner(
        tune.with_resources(trial_driver, scaling),
        param_space={"lr": tune.grid_search([0.001, 0.01, 0.1]), "use_gpu": use_gpu},
        run_config=tune.RunConfig(
            storage_path=os.environ.get("SWEEP_STORAGE", os.path.abspath("results")),
            name=f"sweep-{os.environ.get('SLURM_JOB_ID', 'local')}", verbose=0,
        ),
    ).fit()
    for result in grid:
        print(f"trial {os.path.basename(result.path)}: {result.status}, "
              f"loss {result.metrics.get('loss')}", flush=True)
        if result.error is not None:  # why, in the job's output
            print(f"  {type(result.error).__name__}: {result.error}", flush=True)
    print(f"{grid.num_terminated} of {len(grid)} trials TERMINATED", flush=True)
    actorrt.shutdown()
    return 0 if grid.num_terminated == len(grid) else 1


if __name__ == "__main__":
    sys.exit(main())
