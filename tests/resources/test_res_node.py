"""Node inventories, per-device GPU accounting and local detection."""

from __future__ import annotations

from pathlib import Path

import pytest

from actorrt.resources import (
    BACKEND_ENV,
    NodeInventory,
    detect_local_node,
    parse_resources,
    write_fake_gpu_spec,
)
from actorrt.resources._probe import cgroup_cpu_quota, cgroup_memory_limit, detect_cpus


def test_inventory_totals_and_logical_gpus() -> None:
    node = NodeInventory("n", {"CPU": 4, "GPU": 2, "memory": 1024, "x": 1})
    assert node.gpu_ids == ("0", "1")
    assert node.total_resources().to_dict() == {"CPU": 4, "GPU": 2, "memory": 1024, "x": 1}
    with pytest.raises(ValueError, match="not whole"):
        NodeInventory("n", {"GPU": 0.5})
    with pytest.raises(ValueError, match="device ids"):
        NodeInventory("n", {"GPU": 2}, gpu_ids=["3"])
    assert NodeInventory("n", {}, gpu_ids=["5", "7"]).gpu_ids == ("5", "7")


def test_eight_gpus_give_eight_distinct_devices() -> None:
    node = NodeInventory("n", {"GPU": 8})
    one = parse_resources({"GPU": 1})
    allocs = [node.allocate(one) for _ in range(8)]
    assert all(a is not None for a in allocs)
    devices = [node.gpu_shares(a)[0][0] for a in allocs if a is not None]
    assert sorted(devices, key=int) == [str(i) for i in range(8)]
    assert node.allocate(one) is None


def test_fractions_pack_before_the_next_device() -> None:
    node = NodeInventory("n", {"GPU": 2})
    quarter = parse_resources({"GPU": 0.25})
    half = parse_resources({"GPU": 0.5})
    a = node.allocate(half)
    b = node.allocate(quarter)
    c = node.allocate(quarter)
    assert a and b and c
    assert [node.gpu_shares(x) for x in (a, b, c)] == [
        (("0", 0.5),),
        (("0", 0.25),),
        (("0", 0.25),),
    ]
    d = node.allocate(quarter)
    assert d is not None and node.gpu_shares(d) == (("1", 0.25),)
    # a whole GPU needs a whole free device: device 1 is partly used, device 0 full
    assert node.allocate(parse_resources({"GPU": 1})) is None
    node.release(a)
    # best fit: the 0.5 hole on device 0 is used before device 1's 0.75
    e = node.allocate(half)
    assert e is not None and node.gpu_shares(e) == (("0", 0.5),)


def test_fraction_never_split() -> None:
    node = NodeInventory("n", {"GPU": 2})
    assert node.allocate(parse_resources({"GPU": 0.6}))
    assert node.allocate(parse_resources({"GPU": 0.6}))
    # 0.8 is free in total, 0.4 on each device: a 0.5 does not fit
    assert node.allocate(parse_resources({"GPU": 0.5})) is None
    assert node.fits(parse_resources({"GPU": 0.4}))


def test_release_gives_back_exactly() -> None:
    node = NodeInventory("n", {"CPU": 1})
    tenth = parse_resources({"CPU": 0.1})
    allocs = [node.allocate(tenth) for _ in range(10)]
    assert node.allocate(tenth) is None
    for a in allocs:
        assert a is not None
        node.release(a)
    assert node.is_idle() and node.free == {"CPU": 10000}


def test_detect_local_overrides(tmp_path: Path) -> None:
    env: dict[str, str] = {BACKEND_ENV: write_fake_gpu_spec(tmp_path / "g.json", 0)}
    node = detect_local_node(num_cpus=4, num_gpus=8, memory=2**30, resources={"x": 2}, env=env)
    assert node.total_resources().to_dict() == {"CPU": 4, "GPU": 8, "memory": 2**30, "x": 2}
    assert node.gpu_ids == tuple(str(i) for i in range(8))
    with pytest.raises(ValueError, match="not allowed in resources="):
        detect_local_node(resources={"CPU": 1}, env=env)
    with pytest.raises(ValueError, match="num_gpus=1.5"):
        detect_local_node(num_gpus=1.5, env=env)


def test_detect_local_with_fake_gpus(tmp_path: Path) -> None:
    env = {BACKEND_ENV: write_fake_gpu_spec(tmp_path / "g.json", 4), "CUDA_VISIBLE_DEVICES": "3,1"}
    node = detect_local_node(env=env)
    assert node.gpu_ids == ("3", "1")
    assert node.total_resources().units("CPU") >= 10000
    assert detect_local_node(num_gpus=1, env=env).gpu_ids == ("3",)
    with pytest.raises(ValueError, match="only 2 GPU"):
        detect_local_node(num_gpus=3, env=env)


def test_detect_local_defaults_are_sane() -> None:
    node = detect_local_node(env={BACKEND_ENV: "nvml", "CUDA_VISIBLE_DEVICES": ""})
    assert node.total_resources().units("CPU") >= 10000
    assert node.total_resources().units("memory") > 0
    assert node.gpu_ids == ()


def _cgroup(tmp_path: Path, files: dict[str, str], proc: str) -> tuple[str, str]:
    root = tmp_path / "cg"
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    proc_file = tmp_path / "cgroup"
    proc_file.write_text(proc)
    return str(root), str(proc_file)


def test_cgroup_v2(tmp_path: Path) -> None:
    root, proc = _cgroup(
        tmp_path,
        {
            "cgroup.controllers": "cpu memory",
            "a/cpu.max": "max 100000",
            "a/b/cpu.max": "150000 100000",
            "a/memory.max": "1073741824",
            "a/b/memory.max": "max",
        },
        "0::/a/b\n",
    )
    assert cgroup_cpu_quota(root, proc) == 1.5
    assert cgroup_memory_limit(root, proc) == 1 << 30
    assert detect_cpus(root, proc) <= 2


def test_cgroup_v1(tmp_path: Path) -> None:
    root, proc = _cgroup(
        tmp_path,
        {
            "cpu,cpuacct/docker/x/cpu.cfs_quota_us": "50000",
            "cpu,cpuacct/docker/x/cpu.cfs_period_us": "100000",
            "memory/docker/x/memory.limit_in_bytes": "536870912",
            "memory/memory.limit_in_bytes": "9223372036854771712",
        },
        "4:memory:/docker/x\n2:cpu,cpuacct:/docker/x\n",
    )
    assert cgroup_cpu_quota(root, proc) == 0.5
    assert cgroup_memory_limit(root, proc) == 1 << 29
    assert detect_cpus(root, proc) == 1  # a quota below one CPU still gives one


def test_cgroup_none(tmp_path: Path) -> None:
    root, proc = _cgroup(tmp_path, {}, "0::/\n")
    assert cgroup_cpu_quota(root, proc) is None
    assert cgroup_memory_limit(root, proc) is None
    assert cgroup_cpu_quota(root, str(tmp_path / "missing")) is None
