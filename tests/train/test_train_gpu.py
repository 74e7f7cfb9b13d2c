"""``use_gpu=True`` on fake GPUs: everything but CUDA itself.

Four fake NVML devices, no CUDA. The default backend with GPUs is NCCL (as in Ray), so on
this machine the workers fail at once with an error that says so and names the worker's
devices. With ``TorchConfig(backend="gloo")`` the gang runs: each worker sees the gang's
devices on its node, and, with CUDA availability mocked inside the training function,
``get_device()``/``get_devices()`` point at its own devices and ``prepare_model`` moves
the model there. ``tests/gpu/check_cuda.py`` checks the same with real CUDA and NCCL.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

import actorrt
from actorrt import train
from actorrt.resources import BACKEND_ENV, write_fake_gpu_spec
from actorrt.train.torch import TorchConfig, TorchTrainer

WORKER_ENV = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


@pytest_asyncio.fixture
async def four_fake_gpus(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[actorrt.Runtime]:
    monkeypatch.setenv(BACKEND_ENV, write_fake_gpu_spec(tmp_path / "gpus.json", 4))
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    async with actorrt.Runtime(num_cpus=2, worker_env=WORKER_ENV) as runtime:
        assert actorrt.cluster_resources()["GPU"] == 4
        yield runtime


def devices_loop() -> None:
    import torch
    import torch.distributed as dist

    from actorrt.train.torch import get_device, get_devices, prepare_model

    seen: dict[str, Any] = {
        "rank": train.get_context().get_world_rank(),
        "visible": os.environ["CUDA_VISIBLE_DEVICES"],
        "local_rank": os.environ["LOCAL_RANK"],
        "backend": dist.get_backend(),
        "unmocked": str(get_device()),  # no CUDA here: the CPU
    }
    torch.cuda.is_available = lambda: True  # what a CUDA build would say on a GPU node

    class Recording(torch.nn.Linear):
        moved_to: Any = None

        def to(self, *args: Any, **kwargs: Any) -> Any:  # type: ignore[override]
            Recording.moved_to = args[0]
            return self

    prepare_model(Recording(2, 2), parallel_strategy=None)
    seen.update(
        device=str(get_device()),
        devices=[str(d) for d in get_devices()],
        model_moved_to=str(Recording.moved_to),
    )
    train.report(seen)


async def run_gang(tmp_path: Path, config: TorchConfig | None) -> Any:
    return await TorchTrainer(
        devices_loop,
        torch_config=config,
        scaling_config=train.ScalingConfig(
            num_workers=2, use_gpu=True, resources_per_worker={"GPU": 2}
        ),
        run_config=train.RunConfig(storage_path=str(tmp_path)),
    ).fit_async()


@pytest.mark.timeout(90)
async def test_use_gpu_means_nccl_and_each_rank_gets_its_own_devices(
    four_fake_gpus: actorrt.Runtime, tmp_path: Path
) -> None:
    # Default: NCCL, which needs CUDA; a clear error from every rank, not a hang.
    with pytest.raises(train.WorkerGroupError) as raised:
        await run_gang(tmp_path, None)
    failures = raised.value.worker_failures
    # Both ranks fail alike; whichever fails first ends the gang, so the other may not report.
    assert failures and set(failures) <= {0, 1}
    for rank, failure in failures.items():
        assert "backend is NCCL" in str(failure)
        assert f"CUDA_VISIBLE_DEVICES='0,1,2,3', LOCAL_RANK={rank}" in str(failure)
        assert "TorchConfig(backend='gloo')" in str(failure)
    assert actorrt.available_resources() == actorrt.cluster_resources()

    # gloo: the gang runs; rank 0 reports what it saw.
    result = await run_gang(tmp_path, TorchConfig(backend="gloo"))
    seen = result.metrics
    assert seen["rank"] == 0 and seen["local_rank"] == "0"
    assert seen["visible"] == "0,1,2,3"  # the gang's devices on this node
    assert seen["backend"] == "gloo" and seen["unmocked"] == "cpu"
    assert seen["device"] == "cuda:0" and seen["devices"] == ["cuda:0", "cuda:1"]
    assert seen["model_moved_to"] == "cuda:0"
    assert actorrt.available_resources() == actorrt.cluster_resources()
