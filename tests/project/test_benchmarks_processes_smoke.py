"""The worker-process benchmark runs end to end (tiny sizes; targets are `--check`'s business)."""

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_processes_benchmark_runs_and_writes_json(tmp_path: Path) -> None:
    env = os.environ | {"ACTORRT_BENCH_RESULTS": str(tmp_path)}
    out = subprocess.run(
        [sys.executable, "-m", "benchmarks.processes", "--quick"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=50, check=True,
    ).stdout
    assert "process ask, sequential" in out and "Ray 2.60" in out
    data = json.loads((tmp_path / "processes.json").read_text())
    figures = {f["name"]: f for f in data["figures"]}
    assert set(figures) == {
        "process ask, sequential",
        "process ask, sequential, async method",
        "process calls, pipelined 1000",
        "worker -> worker ask, sequential",
        "worker -> worker ask, sequential, through the owner",
        "worker -> worker ask, sequential, direct vs through the owner",
        "start+stop, warm worker",
        "cold worker start",
        "burst of 10 spawns in flight",
        "raw echo, sequential",
        "raw echo, pipelined window 1000",
    }
    assert figures["worker -> worker ask, sequential"]["target_ratio"] == 0.6
    for name in ("process ask, sequential", "process calls, pipelined 1000",
                 "worker -> worker ask, sequential"):
        assert figures[name]["baseline_median"] > 0 and figures[name]["ratio"] > 0
        assert figures[name]["met"] in (True, False)
    assert figures["start+stop, warm worker"]["median"] > 0
    assert figures["start+stop, warm worker"]["target_value"] == 500
    assert figures["cold worker start"]["median"] > 0
    assert figures["cold worker start"]["target_value"] == 30
    assert figures["cold worker start"]["met"] in (True, False)
    burst = figures["burst of 10 spawns in flight"]
    assert burst["median"] > 0 and burst["baseline_median"] > 0 and burst["ratio"] > 0
    assert burst["target_ratio"] == 2.0 and burst["met"] in (True, False)
    assert len(machine_samples := data["machine"]["first_start_ms_samples"]) == 1
    assert machine_samples[0] > 0
    machine = data["machine"]
    assert machine["window"] == 1000 and machine["reps"] == 1
    assert set(machine["actorrt_over_ray"]) == set(machine["ray_2_60"])
    assert all(v > 0 for v in machine["actorrt_over_ray"].values())
    assert machine["same_worker_for_all_cycles"] == [True]
