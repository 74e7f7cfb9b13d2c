"""``tune.utils.wait_for_gpu`` on the fake NVML backend."""

from __future__ import annotations

import time
from typing import Any

import pytest

import actorrt
from actorrt import tune
from actorrt.resources import BACKEND_ENV, FakeGpu, write_fake_gpu_spec
from actorrt.tune.utils import wait_for_gpu

GIB = 1 << 30


def fake(tmp_path: Any, monkeypatch: pytest.MonkeyPatch, gpus: list[FakeGpu]) -> None:
    monkeypatch.setenv(BACKEND_ENV, write_fake_gpu_spec(tmp_path / "gpus.json", gpus))


def gpu(i: int, **kw: Any) -> FakeGpu:
    return FakeGpu(uuid=f"GPU-0000000{i}-aaaa", pci_bus_id=f"00000000:0{i}:00.0", **kw)


def test_waits_until_the_assigned_gpu_frees(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    now = time.time()
    # GPU 1 holds 8 GiB that free at 80 GiB/s from now: free within ~0.1 s.
    fake(tmp_path, monkeypatch, [
        gpu(0, memory_used=16 * GIB),
        gpu(1, memory_used=8 * GIB, free_rate=80 * GIB, free_start=now),
    ])
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    assert wait_for_gpu(retry=100, delay_s=0.01) is True
    assert wait_for_gpu("GPU-00000001", retry=1) is True


def test_errors_say_what_is_wrong(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    fake(tmp_path, monkeypatch, [gpu(0, memory_used=8 * GIB), gpu(1)])
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    with pytest.raises(RuntimeError, match="no GPU is assigned"):
        wait_for_gpu()
    with pytest.raises(ValueError, match="no GPU has id or UUID 7; the GPUs are: 0 "):
        wait_for_gpu(7)
    with pytest.raises(RuntimeError, match="GPU memory was not freed"):
        wait_for_gpu(0, retry=2, delay_s=0)
    with pytest.raises(ValueError, match="target_util"):
        wait_for_gpu(0, target_util=2)
    monkeypatch.setenv(BACKEND_ENV, f"fake:{tmp_path}/missing.json")
    with pytest.raises(RuntimeError, match="NVML is unavailable"):
        wait_for_gpu(0)


def waits(config: dict[str, Any]) -> None:
    try:
        tune.utils.wait_for_gpu(retry=1, delay_s=0)
        tune.report({"outcome": "free"})
    except RuntimeError as exc:
        tune.report({"outcome": str(exc)})


@pytest.mark.actorrt(num_cpus=2, num_gpus=2)
async def test_in_a_trial_and_on_a_shared_device(
    actorrt_runtime: actorrt.Runtime, tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Both devices stay busy (another program's memory, as far as trials can tell).
    fake(tmp_path, monkeypatch, [gpu(0, memory_used=8 * GIB), gpu(1, memory_used=8 * GIB)])
    grid = await tune.Tuner(
        tune.with_resources(waits, lambda c: {"gpu": c["gpu"]}),
        param_space={"gpu": tune.grid_search([1, 0.5])},
        tune_config=tune.TuneConfig(max_concurrent_trials=1),
        run_config=tune.RunConfig(storage_path=str(tmp_path), verbose=0),
    ).fit_async()
    whole, half = (r.metrics["outcome"] for r in grid)
    assert whole.startswith("GPU memory was not freed: GPU ")
    assert "holds only 0.5 of it: other trials share the device" in half
