"""The benchmarks run end to end (tiny sizes; their targets are checked by `make bench-check`)."""

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def run_benchmark(tmp_path: Path, name: str, *args: str) -> tuple[str, dict[str, Any]]:
    """Run ``benchmarks.<name>``; its output and the JSON it wrote."""
    env = os.environ | {"ACTORRT_BENCH_RESULTS": str(tmp_path)}
    out = subprocess.run(
        [sys.executable, "-m", f"benchmarks.{name}", *args],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=True,
    ).stdout
    return out, json.loads((tmp_path / f"{name}.json").read_text())


def test_core_benchmark_runs_and_writes_json(tmp_path: Path) -> None:
    out, data = run_benchmark(
        tmp_path, "core", "--n", "2000", "--reps", "1", "--scale", "3000", "--scale-reps", "1"
    )
    assert "inline tell" in out and "inline ask" in out
    names = {f["name"] for f in data["figures"]}
    assert names == {
        "inline tell",
        "inline ask",
        "spawn, 3,000 inline actors (vs 1,000)",
        "ask all, 3,000 inline actors (vs 1,000)",
    }
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
    out, data = run_benchmark(tmp_path, "arrays", "--mb", "4", "--reps", "1")
    assert "driver -> actor, read-only" in out and "actor -> driver" in out
    assert "actor -> actor (direct)" in out
    assert len(data["figures"]) == 4
    assert all(f["baseline_median"] > 0 and f["ratio"] > 0 for f in data["figures"])
    assert data["machine"]["actor_to_actor_relayed_calls"] == 0


def test_dashboard_benchmark_runs_and_writes_json(tmp_path: Path) -> None:
    out, data = run_benchmark(
        tmp_path, "dashboard", "--trials", "4", "--reports", "2", "--sweeps", "1", "--reps", "1"
    )
    assert "dashboard polled 1/s" in out
    timed, paired = data["figures"]
    assert timed["median"] > 0 and timed["baseline_median"] > 0
    assert paired["target_value"] == 0.95 and paired["median"] > 0
