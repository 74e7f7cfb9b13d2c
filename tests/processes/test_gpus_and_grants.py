"""GPUs through the runtime (fake NVML where this machine has none), and grants that end
with their holders however they end."""

import os
import signal
from pathlib import Path

import pytest
from conftest import eventually

import actorrt
from actorrt.resources import BACKEND_ENV, list_devices, write_fake_gpu_spec


@actorrt.actor
class Probe:
    def env(self, *names: str) -> dict[str, str | None]:
        return {name: os.environ.get(name) for name in names}

    def devices(self) -> list[str]:
        return [d.uuid for d in list_devices()]

    def gpu_ids(self) -> list[int | str]:
        return actorrt.get_gpu_ids()

    def pid(self) -> int:
        return os.getpid()

    def crash(self) -> None:
        raise RuntimeError("gone")


@pytest.mark.actorrt(num_cpus=4, num_gpus=2)
async def test_fractions_pack_onto_one_device_before_the_next(
    actorrt_runtime: actorrt.Runtime,
) -> None:
    quarters = [await Probe.options(num_gpus=0.5, num_cpus=0.1).spawn() for _ in range(4)]
    seen = [(await q.env("CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER")) for q in quarters]
    assert [s["CUDA_VISIBLE_DEVICES"] for s in seen] == ["0", "0", "1", "1"]
    assert {s["CUDA_DEVICE_ORDER"] for s in seen} == {"PCI_BUS_ID"}
    assert await quarters[2].gpu_ids() == [1]
    assert actorrt.available_resources().get("GPU", 0) == 0
    with pytest.raises(actorrt.InfeasibleResourceError):
        await Probe.options(num_gpus=3).spawn()


async def test_fake_nvml_reaches_worker_processes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(BACKEND_ENV, write_fake_gpu_spec(tmp_path / "gpus.json", 4))
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    async with actorrt.Runtime(num_cpus=2):
        assert actorrt.cluster_resources()["GPU"] == 4  # discovered, not declared
        ref = await Probe.options(num_gpus=1, num_cpus=0).spawn()
        uuids = await ref.devices()
        assert len(uuids) == 1 and uuids[0].startswith("GPU-fa4e")  # only its own device
        assert await ref.gpu_ids() == [0]


async def test_noset_leaves_cuda_visible_devices_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ACTORRT_NOSET_CUDA_VISIBLE_DEVICES", "1")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "5,6")
    async with actorrt.Runtime(num_cpus=2, num_gpus=1):
        ref = await Probe.options(num_gpus=1).spawn()
        assert (await ref.env("CUDA_VISIBLE_DEVICES"))["CUDA_VISIBLE_DEVICES"] == "5,6"


@pytest.mark.actorrt(num_cpus=4)
async def test_thread_variables_follow_whole_cpus_unless_set(
    actorrt_runtime: actorrt.Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    two = await Probe.options(num_cpus=2).spawn()
    assert (await two.env("OMP_NUM_THREADS"))["OMP_NUM_THREADS"] == "2"
    half = await Probe.options(num_cpus=0.5).spawn()
    assert (await half.env("MKL_NUM_THREADS"))["MKL_NUM_THREADS"] == "1"
    chosen = await Probe.options(num_cpus=1, worker_env={"OMP_NUM_THREADS": "3"}).spawn()
    assert (await chosen.env("OMP_NUM_THREADS"))["OMP_NUM_THREADS"] == "3"


@pytest.mark.actorrt(num_cpus=4)
async def test_grants_end_with_their_holders(actorrt_runtime: actorrt.Runtime) -> None:
    total = actorrt.cluster_resources()["CPU"]
    killed = await Probe.options(num_cpus=2).spawn()
    pid = await killed.pid()
    assert actorrt.available_resources()["CPU"] == total - 2
    os.kill(pid, signal.SIGKILL)
    died = await killed.wait_stopped()
    assert died.signal == signal.SIGKILL
    assert actorrt.available_resources()["CPU"] == total  # released once reaped, no shutdown
    crashed = await Probe.options(num_cpus=1).spawn()
    crashed.crash.tell()
    assert (await crashed.wait_stopped()).reason == "crashed"
    assert actorrt.available_resources()["CPU"] == total
    stopped = await Probe.options(num_cpus=1).spawn()
    await stopped.stop()
    killed_too = await Probe.options(num_cpus=1, max_restarts=3).spawn()
    await killed_too.kill()
    assert await eventually(lambda: actorrt.available_resources()["CPU"] == total)
    assert actorrt.available_resources() == actorrt.cluster_resources()


@pytest.mark.actorrt(num_cpus=2)
async def test_a_restart_keeps_the_grant(actorrt_runtime: actorrt.Runtime) -> None:
    ref = await Probe.options(num_cpus=2, max_restarts=1).spawn()
    first = await ref.pid()
    os.kill(first, signal.SIGKILL)
    while True:  # asks during the restart wait for it; the one in flight failed
        try:
            second = await ref.pid()
            break
        except actorrt.ActorDiedError:
            continue
    assert second != first
    assert actorrt.available_resources().get("CPU", 0) == 0  # still held across the restart
