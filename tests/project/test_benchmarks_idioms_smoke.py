"""The idioms benchmark runs end to end (tiny sizes; its target is `--check`'s business)."""

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_idioms_benchmark_runs_and_writes_json(tmp_path: Path) -> None:
    env = os.environ | {"ACTORRT_BENCH_RESULTS": str(tmp_path)}
    out = subprocess.run(
        [sys.executable, "-m", "benchmarks.idioms", "--quick"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=True,
    ).stdout
    assert "pool map, 100 CPU-bound items" in out
    data = json.loads((tmp_path / "idioms.json").read_text())
    figures = {f["name"]: f for f in data["figures"]}
    assert set(figures) == {
        "pool map, 100 CPU-bound items",
        "task submit+get, sequential",
        "tasks in flight, 20 at once",
        "put + 4 readers, 10 MB array",
        "stream of 200 items across processes",
    }
    for figure in figures.values():
        assert figure["median"] > 0 and figure["baseline_median"] > 0 and figure["ratio"] > 0
    assert figures["pool map, 100 CPU-bound items"]["target_ratio"] == 1.0
    assert figures["pool map, 100 CPU-bound items"]["met"] in (True, False)
    assert figures["task submit+get, sequential"]["target_ratio"] == 0.3
    assert data["machine"]["workers"] >= 1
