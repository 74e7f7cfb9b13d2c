"""Seed point 11: ``tune.utils.wait_for_gpu`` at the start of a GPU trainable.

    python examples/tune_wait_for_gpu.py               # real GPUs, found through NVML
    python examples/tune_wait_for_gpu.py --fake-gpus   # two fake GPUs, no driver needed

A trial that starts on a device whose previous user is still releasing its memory can run
out of memory at once. ``wait_for_gpu()`` polls the device assigned to the trial (through
NVML) until its used memory is at most ``target_util`` of the total, and raises a
``RuntimeError`` if that never happens within ``retry`` checks.

With ``--fake-gpus`` this script writes a description of two fake devices and points
``ACTORRT_NVML_BACKEND`` at it before starting the runtime, so discovery, the trials'
processes and ``wait_for_gpu`` all see them: GPU 0 still holds 12 GiB of a finished trial,
which is freed from one to two seconds after the script starts; GPU 1 is free.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from typing import Any

import actorrt
from actorrt import tune
from actorrt.resources import BACKEND_ENV, FakeGpu, write_fake_gpu_spec

GIB = 1 << 30


def gpu_trainable(config: dict[str, Any]) -> None:
    start = time.monotonic()
    tune.utils.wait_for_gpu(target_util=0.01, retry=40, delay_s=0.1)
    waited = time.monotonic() - start
    # ... build the model on the GPU, train, report ...
    tune.report({"gpu": os.environ["CUDA_VISIBLE_DEVICES"], "waited_s": waited})


def cpu_trainable(config: dict[str, Any]) -> None:
    try:
        tune.utils.wait_for_gpu()
        tune.report({"outcome": "no error"})
    except RuntimeError as exc:
        tune.report({"outcome": f"RuntimeError: {exc}"})


def use_fake_gpus(folder: str) -> None:
    now = time.time()
    gpus = [
        FakeGpu(uuid="GPU-fa4e0000-0000", pci_bus_id="00000000:01:00.0",
                memory_used=12 * GIB, free_rate=12 * GIB, free_start=now + 1.0),
        FakeGpu(uuid="GPU-fa4e0001-0000", pci_bus_id="00000000:02:00.0"),
    ]
    os.environ[BACKEND_ENV] = write_fake_gpu_spec(os.path.join(folder, "gpus.json"), gpus)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fake-gpus", action="store_true", help="use two fake GPUs")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        if args.fake_gpus:
            use_fake_gpus(folder)  # before init(), so the runtime and its workers see them
        actorrt.init(num_cpus=2)
        gpus = actorrt.cluster_resources().get("GPU", 0)
        if not gpus:
            print("no GPU found through NVML; run with --fake-gpus to use fake ones")
            actorrt.shutdown()
            return
        print(f"{gpus:g} GPUs found")
        run_config = tune.RunConfig(storage_path=folder, verbose=0)
        results = tune.Tuner(
            tune.with_resources(gpu_trainable, {"cpu": 1, "gpu": 1}),
            param_space={"i": tune.grid_search([0, 1])},
            run_config=run_config,
        ).fit()
        for result in results:
            print(f"trial on GPU {result.metrics['gpu']}: waited "
                  f"{result.metrics['waited_s']:.1f} s for the device's memory to be freed")
        [result] = tune.Tuner(cpu_trainable, run_config=run_config).fit()
        print("a trial without a GPU:", result.metrics["outcome"])
        actorrt.shutdown()


if __name__ == "__main__":
    main()
