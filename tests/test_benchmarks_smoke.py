"""The benchmarks run end to end (tiny sizes; their targets are checked by `make bench-check`)."""

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_core_benchmark_runs_and_writes_json(tmp_path: Path) -> None:
    env = os.environ | {"ACTORRT_BENCH_RESULTS": str(tmp_path)}
    out = subprocess.run(
        [sys.executable, "-m", "benchmarks.core", "--n", "2000", "--reps", "1"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=True,
    ).stdout
    assert "inline tell" in out and "inline ask" in out
    data = json.loads((tmp_path / "core.json").read_text())
    names = {f["name"] for f in data["figures"]}
    assert names == {"inline tell", "inline ask"}
    assert all(f["baseline_median"] > 0 and f["ratio"] > 0 for f in data["figures"])


def test_broker_benchmark_runs_and_writes_json(tmp_path: Path) -> None:
    env = os.environ | {"ACTORRT_BENCH_RESULTS": str(tmp_path)}
    out = subprocess.run(
        [sys.executable, "-m", "benchmarks.broker", "--quick", "--reps", "1"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=True,
    ).stdout
    assert "placement group reserve+release" in out
    data = json.loads((tmp_path / "broker.json").read_text())
    assert all(f["median"] > 0 for f in data["figures"])


def test_arrays_benchmark_runs_and_writes_json(tmp_path: Path) -> None:
    env = os.environ | {"ACTORRT_BENCH_RESULTS": str(tmp_path)}
    out = subprocess.run(
        [sys.executable, "-m", "benchmarks.arrays", "--mb", "4", "--reps", "1"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=True,
    ).stdout
    assert "driver -> actor, read-only" in out and "actor -> driver" in out
    data = json.loads((tmp_path / "arrays.json").read_text())
    assert len(data["figures"]) == 3
    assert all(f["baseline_median"] > 0 and f["ratio"] > 0 for f in data["figures"])
