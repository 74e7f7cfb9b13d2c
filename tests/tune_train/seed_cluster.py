"""The seed's cluster for the Tune x Train tests, shared by a module's tests.

128 CPUs, 8 GPUs through fake NVML, and 2 units of ``TRAIN_DRIVER_RESOURCE`` (the custom
resource that marks where trial drivers may run). A module keeps one runtime for all its
tests, so its worker processes are reused from test to test as in a long-lived cluster;
the per-test check for leftover processes then moves to the end of the module.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

import actorrt
from actorrt.resources import BACKEND_ENV, write_fake_gpu_spec

CPUS = 128
GPUS = 8
DRIVER_PLACES = 2


@contextlib.asynccontextmanager
async def seed_cluster(folder: Path) -> AsyncIterator[actorrt.Runtime]:
    spec = write_fake_gpu_spec(folder / "gpus.json", GPUS)
    with pytest.MonkeyPatch.context() as env:
        env.setenv(BACKEND_ENV, spec)
        env.delenv("CUDA_VISIBLE_DEVICES", raising=False)
        async with actorrt.Runtime(
            num_cpus=CPUS,
            resources={"TRAIN_DRIVER_RESOURCE": DRIVER_PLACES},
            worker_env={"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"},
        ) as runtime:
            assert actorrt.cluster_resources()["GPU"] == GPUS  # discovered, not declared
            yield runtime


