"""Seed points 4 and 10: GPUs per trial, decided per sampled config by a callable.

    python examples/tune_gpus.py

``actorrt.init(num_gpus=2)`` declares two GPUs; on a machine without any they are logical
devices ``0`` and ``1``, enough to see the scheduling (on a real GPU machine, leave
``num_gpus`` out and the devices are found through NVML). Each trial's process gets
``CUDA_VISIBLE_DEVICES`` set to its own grant, and to ``""`` when it asked for no GPU, so a
CPU trial cannot touch a GPU by accident.

The second part is the seed's "the scarcer resource decides": ``{"cpu": 2, "gpu": 1}`` on
4 CPUs and 1 GPU runs one trial at a time, though the CPUs would allow two.
"""

from __future__ import annotations

import os
import tempfile
import time
from typing import Any

from _meter import Meter  # counts trials running at once (examples/_meter.py)

import actorrt
from actorrt import tune


def trainable(config: dict[str, Any]) -> None:
    if "meter" in config:
        actorrt.get(config["meter"].enter())
        time.sleep(0.1)
        actorrt.get(config["meter"].leave())
    tune.report({
        "CUDA_VISIBLE_DEVICES": os.environ.get("CUDA_VISIBLE_DEVICES"),
        "gpu_ids": actorrt.get_gpu_ids(),
    })


def main() -> None:
    with tempfile.TemporaryDirectory() as storage:
        actorrt.init(num_cpus=4, num_gpus=2)
        # A callable gets each sampled config and returns that trial's resources.
        per_config = tune.with_resources(
            trainable,
            resources=lambda config: {"gpu": 1} if config["use_gpu"] else {"gpu": 0},
        )
        results = tune.Tuner(
            per_config,
            param_space={"use_gpu": tune.grid_search([True, False, True, False])},
            run_config=tune.RunConfig(storage_path=storage, verbose=0),
        ).fit()
        for result in results:
            print(f"use_gpu={result.config['use_gpu']!s:<5} -> "
                  f"CUDA_VISIBLE_DEVICES={result.metrics['CUDA_VISIBLE_DEVICES']!r:<4} "
                  f"get_gpu_ids()={result.metrics['gpu_ids']}")
        actorrt.shutdown()

        actorrt.init(num_cpus=4, num_gpus=1)
        meter = actorrt.get(Meter.spawn(hold=1, total=3))
        tune.Tuner(
            tune.with_resources(trainable, {"cpu": 2, "gpu": 1}),
            param_space={"meter": meter},
            tune_config=tune.TuneConfig(num_samples=3),
            run_config=tune.RunConfig(storage_path=storage, verbose=0),
        ).fit()
        peak, waiting = actorrt.get(meter.report())
        print(f"{{'cpu': 2, 'gpu': 1}} on 4 CPUs and 1 GPU: {peak} at once "
              f"({waiting} waiting for resources then)")
        actorrt.shutdown()


if __name__ == "__main__":
    main()
