"""GPU discovery: fake backend, CUDA_VISIBLE_DEVICES restriction, no driver."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from actorrt.resources import (
    BACKEND_ENV,
    FakeGpu,
    find_device,
    list_devices,
    memory_used_fraction,
    write_fake_gpu_spec,
)


def _env(tmp_path: Path, gpus: int | list[FakeGpu], visible: str | None = None) -> dict[str, str]:
    env = {BACKEND_ENV: write_fake_gpu_spec(tmp_path / "gpus.json", gpus)}
    if visible is not None:
        env["CUDA_VISIBLE_DEVICES"] = visible
    return env


def test_fake_devices_in_pci_order(tmp_path: Path) -> None:
    gpus = [
        FakeGpu(uuid="GPU-bbbb", pci_bus_id="00000000:3B:00.0", memory_total=100),
        FakeGpu(uuid="GPU-aaaa", pci_bus_id="00000000:1A:00.0", memory_total=200),
    ]
    devices = list_devices(_env(tmp_path, gpus))
    assert [(d.index, d.uuid, d.memory_total) for d in devices] == [
        (0, "GPU-aaaa", 200),
        (1, "GPU-bbbb", 100),
    ]
    assert devices[1].id == "1"


def test_count_spec(tmp_path: Path) -> None:
    devices = list_devices(_env(tmp_path, 8))
    assert [d.id for d in devices] == [str(i) for i in range(8)]
    assert len({d.uuid for d in devices}) == 8


def test_visible_devices_by_index_and_uuid(tmp_path: Path) -> None:
    env = _env(tmp_path, 4, visible="2,0")
    assert [d.index for d in list_devices(env)] == [2, 0]
    uuid3 = list_devices(_env(tmp_path, 4))[3].uuid
    env = _env(tmp_path, 4, visible=f"{uuid3},1")
    assert [d.index for d in list_devices(env)] == [3, 1]
    # a unique prefix, without the GPU- prefix, as CUDA accepts
    assert [d.index for d in list_devices(_env(tmp_path, 4, visible=uuid3[4:]))] == [3]


def test_visible_devices_edge_cases(tmp_path: Path) -> None:
    assert list_devices(_env(tmp_path, 4, visible="")) == []
    assert list_devices(_env(tmp_path, 4, visible="-1")) == []
    # like CUDA: the list ends at the first entry that names no device
    assert [d.index for d in list_devices(_env(tmp_path, 4, visible="1,7,2"))] == [1]
    assert [d.index for d in list_devices(_env(tmp_path, 4, visible="1,1,2"))] == [1, 2]


def test_memory_frees_over_time(tmp_path: Path) -> None:
    gpu = FakeGpu(
        uuid="GPU-1", pci_bus_id="00000000:01:00.0", memory_total=1000, memory_used=800,
        free_rate=100.0, free_start=50.0, memory_used_min=10,
    )  # fmt: skip
    env = _env(tmp_path, [gpu])
    (device,) = list_devices(env, now=40.0)
    assert device.memory_used == 800
    assert memory_used_fraction(device, env, now=50.0) == 0.8
    assert memory_used_fraction(device, env, now=53.0) == 0.5
    assert memory_used_fraction(device, env, now=100.0) == 0.01


def test_find_device(tmp_path: Path) -> None:
    env = _env(tmp_path, 2)
    d1 = find_device(1, env)
    assert d1.index == 1
    assert find_device(d1.uuid, env) == d1
    with pytest.raises(ValueError, match=r"no GPU with id or UUID '7'.*visible devices: 0"):
        find_device("7", env)


def test_no_driver_means_no_gpus() -> None:
    # This machine has no NVIDIA driver (nvmlInit fails): zero GPUs, no error.
    try:
        import pynvml

        pynvml.nvmlInit()
        pynvml.nvmlShutdown()
        pytest.skip("an NVIDIA driver is present")
    except pynvml.NVMLError:
        pass
    assert list_devices({}) == []
    assert list_devices({BACKEND_ENV: "nvml", "CUDA_VISIBLE_DEVICES": "0"}) == []


def test_bad_backend_and_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=BACKEND_ENV):
        list_devices({BACKEND_ENV: "cuda"})
    with pytest.raises(RuntimeError, match="cannot read the fake GPU spec"):
        list_devices({BACKEND_ENV: f"fake:{tmp_path / 'missing.json'}"})


def test_backend_from_os_environ(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(BACKEND_ENV, write_fake_gpu_spec(tmp_path / "g.json", 3))
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert len(list_devices()) == 3
    assert os.path.isabs(os.environ[BACKEND_ENV][len("fake:") :])
